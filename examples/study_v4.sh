#!/usr/bin/env bash
# Study v4 (docs/results/study-v4.md, pre-registered before its first run) on a machine with more cores:
#
#   JOBS=16 BUDGET_S=540 bash examples/study_v4.sh            # as many runs as fit in 9 minutes, 16 at once
#   bash examples/study_v4.sh --dry-run                        # the plan: done / to run / refused, an estimate
#
# Runs `python -m core.tools.study_v4 run --jobs JOBS` (one thread a run): each run not yet in
# docs/results/study-v4.csv.gz is trained, its checkpoints scored on the held-out and ood sets, and its rows
# appended to that CSV whole. After BUDGET_S seconds the study is sent SIGTERM: the runs save and stop, and the
# next call resumes them (from their checkpoints under STUDY_DIR when it is still there, else from the start).
# On a lent machine ($OUT set) the CSV is copied to $OUT/study-v4.csv.gz: copy it back over docs/results/ and commit.
#
# Environment: PY (default .venv/bin/python, else python3), JOBS (16), BUDGET_S (0: no limit), STUDY_DIR
# (runs/study-v4). Extra arguments go to the study command (e.g. --arms gdpo mrtpo-js --seeds 0 1).
set -uo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${PY:-}" ]]; then
    if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; else PY=python3; fi
fi
JOBS=${JOBS:-16}
BUDGET_S=${BUDGET_S:-0}
STUDY_DIR=${STUDY_DIR:-runs/study-v4}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
cmd=("$PY" -m core.tools.study_v4 run --jobs "$JOBS" --out "$STUDY_DIR" "$@")
start=$(date +%s)
if [[ "$BUDGET_S" -gt 0 ]]; then
    timeout -s TERM -k 60 "$BUDGET_S" "${cmd[@]}"
else
    "${cmd[@]}"
fi
status=$?
echo "study command exit $status after $(( $(date +%s) - start )) s"
if [[ -n "${OUT:-}" && -f docs/results/study-v4.csv.gz ]]; then
    cp docs/results/study-v4.csv.gz "$OUT/study-v4.csv.gz" && echo "copied the CSV to $OUT/study-v4.csv.gz"
fi
exit $status
