#!/usr/bin/env bash
# Study v3 (docs/results/study-v3.md, endpoint fixed before it ran): GDPO, MRTPO js, MRTPO js with mass-keeping
# routing, MRTPO auto on tiny-multi; 150 steps, 128 held-out prompts x 4 samples every 10 steps.
#
#   SEEDS="0 1 2 3" JOBS=16 BUDGET_S=480 bash examples/study_v3.sh
#
# Runs `mrtpo bench efficiency --study v3` with JOBS training processes at once (one thread each), stops it
# gracefully after BUDGET_S seconds (the runs save and mark themselves stopped), then packs the study folder
# into PACK (default STUDY_DIR.tar.gz; $OUT/study-v3.tar.gz when $OUT is set, as on a lent machine): endpoints.md/.csv,
# efficiency.md, logs and every finished run's config, status and metrics; never checkpoints, credit maps, nor
# efficiency.csv/.html (rebuilt from the runs with `--collect-only`); about 0.15 MB per 150-step run. Unfinished runs are left out of the pack: they cannot resume without their checkpoint, so the next
# session trains them again from the start. RESUME_FROM=<an earlier pack> unpacks it first: its finished runs are
# reused (the study skips them), so a study can run across sessions and machines.
#
# Environment: PY (python, default .venv/bin/python, else python3), SEEDS, JOBS (16), DEVICE (cpu; cuda works
# too: every job then shares the GPU), BUDGET_S (0: no limit), STUDY_DIR (runs/study-v3), PACK, RESUME_FROM.
# Extra arguments go to `mrtpo bench efficiency` (e.g. --steps 20 --eval-prompts 16 for a smoke test).
# Exit status: the study's (0 all runs finished, 1 a run failed, 2 bad settings), 124 when BUDGET_S stopped it
# (the pack then holds the runs that finished; their seeds' reports are in endpoints.md and efficiency.md).
# Runs start seed by seed (all four arms of seed 0 first), so a stopped study leaves whole seeds.
set -uo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${PY:-}" ]]; then
    if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; else PY=python3; fi
fi
STUDY_DIR=${STUDY_DIR:-runs/study-v3}
SEEDS=${SEEDS:-"0 1 2 3 4 5 6 7 8 9 10 11"}
JOBS=${JOBS:-16}
DEVICE=${DEVICE:-cpu}
BUDGET_S=${BUDGET_S:-0}
if [[ -n "${OUT:-}" ]]; then PACK=${PACK:-$OUT/study-v3.tar.gz}; else PACK=${PACK:-$STUDY_DIR.tar.gz}; fi
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

mkdir -p "$(dirname "$STUDY_DIR")"
if [[ -n "${RESUME_FROM:-}" ]]; then
    tar -xzf "$RESUME_FROM" -C "$(dirname "$STUDY_DIR")"
    echo "unpacked $RESUME_FROM into $(dirname "$STUDY_DIR")"
fi

# shellcheck disable=SC2086  # SEEDS is a list of words
cmd=("$PY" -m core.cli bench efficiency --study v3 --out "$STUDY_DIR" --device "$DEVICE" --jobs "$JOBS"
     --seeds $SEEDS "$@")
start=$(date +%s)
if [[ "$BUDGET_S" -gt 0 ]]; then
    # SIGTERM after the budget: the study stops its runs cleanly and exits; 60 s later a SIGKILL if it has not.
    timeout -s TERM -k 60 "$BUDGET_S" "${cmd[@]}"
else
    "${cmd[@]}"
fi
status=$?
echo "study command exit $status after $(( $(date +%s) - start )) s"
# The report of the runs finished so far (the study writes it itself when it was not stopped).
if [[ $status -ne 0 ]]; then
    "${cmd[@]}" --collect-only || true
fi

# Pack: leave out checkpoints, credit maps, locks and every run that did not complete.
"$PY" - "$STUDY_DIR" "$PACK" <<'EOF'
import json, sys, tarfile
from pathlib import Path
study, pack = Path(sys.argv[1]), Path(sys.argv[2])
pack.parent.mkdir(parents=True, exist_ok=True)
skipped = []
def keep(info):
    parts = Path(info.name).parts
    # left out: checkpoints and credit maps (the report reads metrics only), the CSV and HTML report (rebuilt from
    # the runs by `mrtpo bench efficiency --study v3 --collect-only`), locks
    if any(p in ("checkpoints", "credit") for p in parts) or info.name.endswith(".lock") or (
            len(parts) == 2 and parts[1] in ("efficiency.csv", "efficiency.html")):
        return None
    if len(parts) >= 3 and parts[1] == "runs":
        status = study / "runs" / parts[2] / "status.json"
        try:
            done = json.loads(status.read_text()).get("state") == "completed"
        except (OSError, ValueError):
            done = False
        if not done:
            if parts[2] not in skipped:
                skipped.append(parts[2])
            return None
    return info
with tarfile.open(pack, "w:gz") as tar:
    tar.add(study, arcname=study.name, filter=keep)
print(f"packed {study} -> {pack} ({pack.stat().st_size / 1e6:.1f} MB); unfinished runs left out: "
      f"{', '.join(skipped) or 'none'}")
EOF
exit $status
