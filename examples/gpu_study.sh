#!/usr/bin/env bash
# The real-model study (issue 43), on one GPU within BUDGET_S (600) seconds of wall time: GDPO against MRTPO
# (relevance RELEVANCE, default auto: per family the best real-English variant, core/evidence/smollm2-135m.json)
# on SmolLM2-135M-Instruct with sample_data/prompts/ifeval-style.jsonl, 3 seeds; then `mrtpo eval` of every final
# policy on IFEval's own 541 prompts and on held-out IFEval-style prompts; everything into one folder.
#
#   bash examples/gpu_study.sh [--ifeval path/to/input_data.jsonl] [--results DIR] [--dry-run]
#   IFEVAL_INPUT=path/to/input_data.jsonl bash examples/gpu_study.sh      # the same as --ifeval
#
# 1. held-out prompts: `core.tools.gpu_study heldout` (ifeval-style prompts of seed 1 that are not training prompts);
# 2. timing phase (unless STEPS is set): the first JOBS runs (seed by seed, gdpo before mrtpo) train 1 step at once;
#    steps = max(1, floor((L - W s) / (W t))) with t the slowest run's measured step time (its tokens/s is in
#    plan.json), s the longest process start-up, W = ceil(6 / JOBS) waves and L = BUDGET_S - elapsed - EVAL_RESERVE_S
#    (core/tools/gpu_study.py, estimate_steps);
# 3. training: every run to that many steps, JOBS at once (a timed run resumes from its step 1: each step is seeded
#    from (seed, step), so it draws what an uninterrupted run would); a run still going when the training share of
#    the budget is spent gets SIGTERM, saves and stops, and its last checkpoint is evaluated;
# 4. evaluation: per policy one `core.tools.gpu_study evaluate` (`mrtpo eval` twice: the held-out set with the
#    project's scoring, IFEval's prompts with the reference scoring; greedy), JOBS at once; no IFEval file given:
#    skipped, with a line saying so in summary.md;
# 5. summary.md: arm, seed, steps, training time, IFEval's four accuracies, held-out all-satisfied, and the paired
#    MRTPO - GDPO differences by seed. The folder (default gpu-study/<UTC time>/; $OUT/gpu-study when $OUT is set,
#    as on a lent machine) also holds settings.txt, plan.json, times.tsv, logs/, runs/ (checkpoints deleted
#    after evaluation unless KEEP_CHECKPOINTS=1) and eval/<run>/ (reports and responses).
# Exit status: 0 when every run trained and was evaluated, 1 when one failed, 2 with one line on stderr when
# something it needs is missing (a CUDA device; the environment: bash examples/gpu_check.sh makes .venv-gpu).
#
# --dry-run: the same pipeline on the CPU with the embedded tiny-instruct model, 2 steps of 2 prompts x 2 samples,
# EVAL_LIMIT 3 prompts of 16 tokens (tests/test_gpu_study.py runs it with IFEval-format records of its own).
# It starts 18 Python processes (6 timed steps, 6 trainings, 6 evaluations): 399 s on the 2-core build machine at
# load 5-14, mostly their start-up.
# Environment: PY (.venv-gpu/bin/python, else .venv/bin/python, else python3), RELEVANCE (js), SEEDS ("0 1 2"),
# STEPS (0: estimate), JOBS (6: every run at once), BUDGET_S (600; 3600 with --dry-run), EVAL_RESERVE_S (180),
# PROMPTS (8 a step), GROUP (8), NEW_TOKENS (256), LR (2e-5), EVAL_NEW_TOKENS (256), EVAL_BATCH (64), EVAL_LIMIT
# (0: all), IFEVAL_INPUT, KEEP_CHECKPOINTS (0).
set -uo pipefail
cd "$(dirname "$0")/.."

die() { echo "gpu_study: $*" >&2; exit 2; }

DRY=0
RESULTS=""
IFEVAL=${IFEVAL_INPUT:-}
while [[ $# -gt 0 ]]; do
    case "$1" in
        --dry-run) DRY=1 ;;
        --results) [[ $# -ge 2 ]] || die "--results needs a folder"; RESULTS=$2; shift ;;
        --ifeval) [[ $# -ge 2 ]] || die "--ifeval needs IFEval's input_data.jsonl"; IFEVAL=$2; shift ;;
        -h|--help) sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument $1 (try --help)" ;;
    esac
    shift
done
if [[ -z $RESULTS ]]; then
    if [[ -n ${OUT:-} ]]; then RESULTS=$OUT/gpu-study; else RESULTS=gpu-study/$(date -u +%Y%m%d-%H%M%S); fi
fi
[[ -z $IFEVAL || -f $IFEVAL ]] || die "no IFEval input file at $IFEVAL"
if [[ -z "${PY:-}" ]]; then
    if [[ -x .venv-gpu/bin/python ]]; then PY=.venv-gpu/bin/python
    elif [[ -x .venv/bin/python ]]; then PY=.venv/bin/python
    else PY=python3; fi
fi
"$PY" -c 'import torch, transformers' 2>/dev/null \
    || die "$PY cannot import torch and transformers (set PY, or make .venv-gpu: bash examples/gpu_check.sh)"
RELEVANCE=${RELEVANCE:-auto}
SEEDS=${SEEDS:-"0 1 2"}
STEPS=${STEPS:-0}
JOBS=${JOBS:-6}
if [[ $DRY == 1 ]]; then BUDGET_S=${BUDGET_S:-3600}; else BUDGET_S=${BUDGET_S:-600}; fi  # a dry run is not timed
EVAL_RESERVE_S=${EVAL_RESERVE_S:-180}
LR=${LR:-2e-5}
if [[ $DRY == 1 ]]; then
    DEVICE=cpu MODEL=tiny-instruct STEPS=2
    PROMPTS=${PROMPTS:-2} GROUP=${GROUP:-2} NEW_TOKENS=${NEW_TOKENS:-16}
    EVAL_NEW_TOKENS=${EVAL_NEW_TOKENS:-16} EVAL_BATCH=${EVAL_BATCH:-4} EVAL_LIMIT=${EVAL_LIMIT:-3}
    TIMING=1  # the dry run times one step too, so the whole pipeline runs; its estimate is recorded, 2 steps used
else
    command -v nvidia-smi >/dev/null 2>&1 || die "no NVIDIA driver here (nvidia-smi not found); --dry-run runs on the CPU"
    "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' || die "torch in $PY sees no CUDA device"
    DEVICE=cuda MODEL=smollm2-135m
    PROMPTS=${PROMPTS:-8} GROUP=${GROUP:-8} NEW_TOKENS=${NEW_TOKENS:-256}
    EVAL_NEW_TOKENS=${EVAL_NEW_TOKENS:-256} EVAL_BATCH=${EVAL_BATCH:-64} EVAL_LIMIT=${EVAL_LIMIT:-0}
    if [[ $STEPS -gt 0 ]]; then TIMING=0; else TIMING=1; fi
fi
mkdir -p "$RESULTS"/logs "$RESULTS"/runs "$RESULTS"/eval || die "cannot create the results folder $RESULTS"
RESULTS=$(cd "$RESULTS" && pwd)
[[ -z $IFEVAL ]] || IFEVAL=$(cd "$(dirname "$IFEVAL")" && pwd)/$(basename "$IFEVAL")
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=${MKL_NUM_THREADS:-1} TOKENIZERS_PARALLELISM=false
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
deadline=$((SECONDS + BUDGET_S))
TRAIN_SET=sample_data/prompts/ifeval-style.jsonl

RUNS=()
for seed in $SEEDS; do RUNS+=("gdpo-s$seed" "mrtpo-s$seed"); done
{
    echo "model $MODEL, device $DEVICE, prompt set $TRAIN_SET, relevance $RELEVANCE, seeds $SEEDS"
    echo "prompts/step $PROMPTS, group $GROUP, max new tokens $NEW_TOKENS, lr $LR, jobs $JOBS, budget ${BUDGET_S} s"
    echo "eval: greedy, $EVAL_NEW_TOKENS new tokens, batch $EVAL_BATCH, limit ${EVAL_LIMIT} (0: all), IFEval file ${IFEVAL:-none}"
    echo "python $PY, git $(git rev-parse --short HEAD 2>/dev/null || echo unknown), started $(date -u +%FT%TZ)"
} >"$RESULTS/settings.txt"
cat "$RESULTS/settings.txt"

"$PY" -m core.tools.gpu_study heldout --train "$TRAIN_SET" --out "$RESULTS/heldout.jsonl" || die "cannot write the held-out prompts"

# train RUN PHASE STEPS TIME_LIMIT: one `mrtpo train` (a new run, or the timed run resumed), its wall time to times.tsv.
train() {
    local run=$1 phase=$2 steps=$3 limit=$4 arm=${1%-s*} seed=${1##*-s} t0=$SECONDS args
    if [[ -f $RESULTS/runs/$run/config.json ]]; then
        args=(--resume "$RESULTS/runs/$run" --steps "$steps")
    else
        args=(--model "$MODEL" --prompt-set "$TRAIN_SET" --method "$arm" --seed "$seed" --steps "$steps"
              --prompts-per-step "$PROMPTS" --group-size "$GROUP" --max-new-tokens "$NEW_TOKENS" --lr "$LR"
              --device "$DEVICE" --runs-dir "$RESULTS/runs" --run-name "$run" --checkpoint-every 0
              --keep-checkpoints 1 --credit-every 10)
        [[ $arm == mrtpo ]] && args+=(--relevance "$RELEVANCE")
    fi
    timeout -s TERM -k 60 "$limit" "$PY" -m core.cli train "${args[@]}" >>"$RESULTS/logs/$run.train.log" 2>&1
    local rc=$?
    printf '%s\t%s\t%s\n' "$run" "$phase" "$((SECONDS - t0))" >>"$RESULTS/times.tsv"
    if (( rc == 124 )); then  # the time limit's SIGTERM: the run saved its last step and stopped; it is evaluated
        echo "$run: stopped by the time limit after $((SECONDS - t0)) s" | tee -a "$RESULTS/logs/$run.train.log" >&2
        return 0
    fi
    return $rc
}

# pool CMD RUN...: CMD RUN for every run, JOBS at once; prints the runs that failed.
pool() {
    local cmd=$1; shift
    local -A pids=()
    local run
    for run in "$@"; do
        while (( $(jobs -rp | wc -l) >= JOBS )); do wait -n; done
        $cmd "$run" & pids[$run]=$!
    done
    for run in "${!pids[@]}"; do wait "${pids[$run]}" || echo "$run"; done
}

timing() { train "$1" timing 1 "$((deadline - SECONDS))"; }
train_all() { train "$1" train "$STEPS_USED" "$((train_deadline - SECONDS > 30 ? train_deadline - SECONDS : 30))"; }

failed=()
if [[ $TIMING == 1 ]]; then
    echo "== timing: ${RUNS[*]:0:$JOBS} train 1 step at once"
    mapfile -t bad < <(pool timing "${RUNS[@]:0:$JOBS}")
    (( ${#bad[@]} )) && echo "timing failed for: ${bad[*]} (see $RESULTS/logs)"
    estimated=$("$PY" -m core.tools.gpu_study plan --study "$RESULTS" --budget-s "$BUDGET_S" \
        --elapsed-s "$((SECONDS - (deadline - BUDGET_S)))" --eval-reserve-s "$EVAL_RESERVE_S" --jobs "$JOBS" \
        --runs "${#RUNS[@]}" --steps "$STEPS") || die "no step could be timed (see $RESULTS/logs)"
    STEPS_USED=$estimated
    echo "steps: $STEPS_USED (plan.json)"
else
    STEPS_USED=$STEPS
    echo "steps: $STEPS_USED (STEPS)"
fi
train_deadline=$((deadline - EVAL_RESERVE_S))
echo "== training: ${#RUNS[@]} runs to $STEPS_USED steps, $JOBS at once"
mapfile -t bad < <(pool train_all "${RUNS[@]}")
for run in "${bad[@]}"; do [[ -n $run ]] && failed+=("train $run"); done

policy() { ls -d "$RESULTS/runs/$1"/checkpoints/step_* 2>/dev/null | sort | tail -1; }
evaluate() {
    local run=$1 model left=$((deadline - SECONDS > 60 ? deadline - SECONDS : 60))
    model=$(policy "$run")
    [[ -n $model ]] || { echo "$run: no checkpoint to evaluate" >>"$RESULTS/logs/$run.eval.log"; return 1; }
    timeout -s TERM -k 10 "$left" "$PY" -m core.tools.gpu_study evaluate --model "$model" --out "$RESULTS/eval/$run" \
        --heldout "$RESULTS/heldout.jsonl" ${IFEVAL:+--ifeval "$IFEVAL"} --max-new-tokens "$EVAL_NEW_TOKENS" \
        --batch-size "$EVAL_BATCH" --device "$DEVICE" --limit "$EVAL_LIMIT" >"$RESULTS/logs/$run.eval.log" 2>&1
}
echo "== evaluation: ${#RUNS[@]} policies, $JOBS at once${IFEVAL:+, IFEval prompts from $IFEVAL}"
mapfile -t bad < <(pool evaluate "${RUNS[@]}")
for run in "${bad[@]}"; do [[ -n $run ]] && failed+=("eval $run"); done
if [[ -z $IFEVAL ]]; then
    note="IFEval's 541 prompts: skipped, no IFEval input file given (--ifeval path/to/input_data.jsonl or IFEVAL_INPUT)."
else
    note="IFEval's prompts: $IFEVAL ($(wc -l <"$IFEVAL") records"
    if [[ $EVAL_LIMIT == 0 ]]; then note+=")."; else note+=", the first $EVAL_LIMIT evaluated)."; fi
fi
[[ $DRY == 1 ]] && note="Dry run (CPU, tiny-instruct, not a result). $note"
"$PY" -m core.tools.gpu_study summary --study "$RESULTS" --seeds $SEEDS --ifeval-note "$note" >/dev/null \
    || failed+=("summary")
[[ ${KEEP_CHECKPOINTS:-0} == 1 ]] || rm -rf "$RESULTS"/runs/*/checkpoints
echo "wall time $((SECONDS - (deadline - BUDGET_S))) s; results in $RESULTS/ (summary.md)"
if (( ${#failed[@]} )); then
    echo "gpu_study: ${#failed[@]} failed: ${failed[*]} (see $RESULTS/logs)" >&2
    exit 1
fi
exit 0
