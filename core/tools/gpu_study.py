"""The real-model study's pieces for `examples/gpu_study.sh` (issue 43): the held-out prompts, the step estimate,
both evaluations of one policy, and summary.md.

    python -m core.tools.gpu_study heldout --train sample_data/prompts/ifeval-style.jsonl --out STUDY/heldout.jsonl
    python -m core.tools.gpu_study plan --study STUDY --budget-s 600 --elapsed-s 80 --eval-reserve-s 180 --jobs 6
    python -m core.tools.gpu_study evaluate --model RUN/checkpoints/step_N --out STUDY/eval/RUN [--ifeval FILE] ...
    python -m core.tools.gpu_study summary --study STUDY

The step estimate (`estimate_steps`) uses the timing phase, in which the first `jobs` runs trained one step at
once, at the study's concurrency: t = the slowest run's `time/step` (the first step, so warm-up is included) and
s = the longest start-up (process wall time minus `time/step`: imports, model load, checkpoint save). With
W = ceil(runs / jobs) waves and L = budget - elapsed - eval reserve seconds left for training,
steps = max(1, floor((L - W s) / (W t))). It assumes a wave of `jobs` runs steps no faster than the timing
phase did, and that runs of different waves do not overlap. Never imports torch: the evaluation imports
`core.evaluate.ifeval`, which loads torch only to generate.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

ARMS = ("gdpo", "mrtpo")
METRICS = ("prompt_level_strict", "prompt_level_loose", "instruction_level_strict", "instruction_level_loose")
HEADERS = ("IFEval prompt strict", "IFEval prompt loose", "IFEval instruction strict", "IFEval instruction loose")


def run_name(arm: str, seed: int) -> str:
    """The run folder of one (arm, seed): `gdpo-s0`, `mrtpo-s2`."""
    return f"{arm}-s{seed}"


def estimate_steps(step_s: float, startup_s: float, left_s: float, n_runs: int, jobs: int) -> int:
    """Steps every run can train in `left_s` seconds (module docstring):
    max(1, floor((left_s - W startup_s) / (W step_s))), W = ceil(n_runs / jobs).

    >>> estimate_steps(step_s=10.0, startup_s=20.0, left_s=340.0, n_runs=6, jobs=6)
    32
    >>> estimate_steps(step_s=10.0, startup_s=20.0, left_s=340.0, n_runs=6, jobs=3)
    15
    >>> estimate_steps(step_s=10.0, startup_s=20.0, left_s=5.0, n_runs=6, jobs=6)
    1
    """
    if step_s <= 0 or n_runs < 1 or jobs < 1:
        raise ValueError(f"needs step_s > 0, n_runs >= 1, jobs >= 1 (got {step_s}, {n_runs}, {jobs})")
    waves = math.ceil(n_runs / jobs)
    return max(1, math.floor((left_s - waves * startup_s) / (waves * step_s)))


def _first_metrics(run: Path) -> dict[str, Any]:
    with open(run / "metrics.jsonl", encoding="utf-8") as f:
        return json.loads(f.readline())


def _walls(study: Path) -> dict[str, dict[str, float]]:
    """times.tsv (written by the script, one line a training process: run, phase, seconds) -> run -> phase -> s."""
    out: dict[str, dict[str, float]] = {}
    path = study / "times.tsv"
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            run, phase, seconds = line.split("\t")
            out.setdefault(run, {})[phase] = out.get(run, {}).get(phase, 0.0) + float(seconds)
    return out


def plan(study: Path, budget_s: float, elapsed_s: float, eval_reserve_s: float, jobs: int, n_runs: int,
         steps: int | None = None) -> dict[str, Any]:
    """The timing phase's measurements and the steps to train (`estimate_steps`; `steps` given: that number,
    the estimate still recorded). Written to STUDY/plan.json."""
    walls = _walls(study)
    timed = sorted(r for r, phases in walls.items() if "timing" in phases and (study / "runs" / r / "metrics.jsonl").exists())
    if not timed:
        raise SystemExit(f"gpu_study plan: no timing run finished a step under {study}/runs (see {study}/logs)")
    per_run = {}
    for r in timed:
        m = _first_metrics(study / "runs" / r)
        cfg = json.loads((study / "runs" / r / "config.json").read_text(encoding="utf-8"))
        tokens = cfg["prompts_per_step"] * cfg["group_size"] * m["response/length"]
        per_run[r] = {"step_s": m["time/step"], "startup_s": max(0.0, walls[r]["timing"] - m["time/step"]),
                      "response_tokens": tokens, "tokens_per_s": tokens / m["time/step"]}
    step_s = max(v["step_s"] for v in per_run.values())
    startup_s = max(v["startup_s"] for v in per_run.values())
    left_s = budget_s - elapsed_s - eval_reserve_s
    estimate = estimate_steps(step_s, startup_s, left_s, n_runs, jobs)
    out = {"timing_runs": per_run, "step_s": step_s, "startup_s": startup_s, "jobs": jobs, "runs": n_runs,
           "budget_s": budget_s, "elapsed_s": elapsed_s, "eval_reserve_s": eval_reserve_s,
           "train_left_s": left_s, "estimated_steps": estimate, "steps": steps if steps else estimate,
           "steps_from": "STEPS" if steps else "estimate"}
    (study / "plan.json").write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return out


def heldout(train: Path, out: Path, n: int = 125, seed: int = 1) -> int:
    """IFEval-style prompts (`core.tools.ifeval_prompts.generate(n, seed)`) whose text is not a training prompt;
    returns how many were written."""
    from core.tools.ifeval_prompts import generate

    seen = {json.loads(line)["prompt"] for line in train.read_text(encoding="utf-8").splitlines() if line.strip()}
    records = [r for r in generate(n, seed) if r["prompt"] not in seen]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return len(records)


def evaluate(model: str, out: Path, heldout_set: Path, ifeval: Path | None, *, max_new_tokens: int,
             batch_size: int, device: str, limit: int | None) -> int:
    """`mrtpo eval` of one policy, twice in one interpreter: IFEval's prompts (reference scoring, IFEval's own
    verdicts) when given, and the held-out set (project scoring, as training scores it). Returns the worse exit."""
    from core.evaluate import ifeval as ifeval_cli

    out.mkdir(parents=True, exist_ok=True)
    common = ["--model", model, "--max-new-tokens", str(max_new_tokens), "--batch-size", str(batch_size),
              "--device", device, *(["--limit", str(limit)] if limit else [])]
    sets = [("heldout", heldout_set, "project")] + ([("ifeval", ifeval, "reference")] if ifeval else [])
    rc = 0
    for name, path, scoring in sets:
        print(f"== {name}: {path} ({scoring} scoring)", flush=True)
        rc = max(rc, ifeval_cli.main(["--prompt-set", str(path), "--scoring", scoring, *common,
                                      "--out-json", str(out / f"{name}.json"), "--out-md", str(out / f"{name}.md"),
                                      "--out-responses", str(out / f"{name}-responses.jsonl")]))
    return rc


def _scores(path: Path) -> dict[str, float] | None:
    if not path.exists():
        return None
    body = json.loads(path.read_text(encoding="utf-8"))
    return {k: body[k] for k in METRICS} | {"n_prompts": body["n_prompts"]}


def _fmt(x: float | None) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def _signed(x: float | None) -> str:
    return "n/a" if x is None or math.isnan(x) else f"{x:+.3f}"


def summary(study: Path, seeds: list[int], ifeval_note: str = "") -> str:
    """summary.md: one row per (arm, seed) and the paired MRTPO - GDPO differences by seed (and their mean)."""
    walls = _walls(study)
    plan_file = study / "plan.json"
    plan_body = json.loads(plan_file.read_text(encoding="utf-8")) if plan_file.exists() else {}
    rows, values = [], {}
    for seed in seeds:
        for arm in ARMS:
            r = run_name(arm, seed)
            status_file = study / "runs" / r / "status.json"
            status = json.loads(status_file.read_text(encoding="utf-8")) if status_file.exists() else {}
            ife = _scores(study / "eval" / r / "ifeval.json")
            held = _scores(study / "eval" / r / "heldout.json")
            v = {k: (ife or {}).get(k) for k in METRICS} | {"heldout": (held or {}).get("prompt_level_strict")}
            values[(arm, seed)] = v
            train_s = sum(walls.get(r, {}).values())
            rows.append(f"| {arm} | {seed} | {status.get('step', 0)} ({status.get('state', 'not run')}) | "
                        f"{train_s:.0f} | " + " | ".join(_fmt(v[k]) for k in METRICS) + f" | {_fmt(v['heldout'])} |")
    keys = (*METRICS, "heldout")
    diffs = []
    for seed in seeds:
        g, m = values[("gdpo", seed)], values[("mrtpo", seed)]
        diffs.append({k: (m[k] - g[k]) if m[k] is not None and g[k] is not None else None for k in keys})
    lines = ["# GPU study: GDPO against MRTPO on a real model", "",
             "Produced by `bash examples/gpu_study.sh`; settings in settings.txt, the step estimate in plan.json.", ""]
    if plan_body:
        lines += [f"Steps: {plan_body['steps']} ({plan_body['steps_from']}; the estimate from the timing phase was "
                  f"{plan_body['estimated_steps']}: slowest step {plan_body['step_s']:.1f} s, start-up "
                  f"{plan_body['startup_s']:.1f} s, {plan_body['train_left_s']:.0f} s left for training, "
                  f"{plan_body['jobs']} runs at once).", ""]
    if ifeval_note:
        lines += [ifeval_note, ""]
    lines += ["| arm | seed | steps | training s | " + " | ".join(HEADERS) + " | held-out all-satisfied |",
              "|---|---|---|---|" + "---|" * (len(HEADERS) + 1), *rows, "",
              "IFEval: `mrtpo eval` (reference scoring: IFEval's own verdicts), greedy. Held-out all-satisfied: "
              "`mrtpo eval --scoring project` prompt-level strict (every instruction satisfied, as training scores "
              "it), greedy, on IFEval-style prompts that are not training prompts (heldout.jsonl). Training s: wall "
              "time of the run's training processes (timing phase and the rest).", "",
              "## Paired differences (MRTPO - GDPO, same seed)", "",
              "| seed | " + " | ".join(HEADERS) + " | held-out all-satisfied |",
              "|---|" + "---|" * (len(HEADERS) + 1)]
    lines += [f"| {seed} | " + " | ".join(_signed(d[k]) for k in keys) + " |" for seed, d in zip(seeds, diffs,
                                                                                                 strict=True)]
    mean = {k: (sum(d[k] for d in diffs) / len(diffs)) if diffs and all(d[k] is not None for d in diffs) else None
            for k in keys}
    lines += ["| mean | " + " | ".join(_signed(mean[k]) for k in keys) + " |", ""]
    text = "\n".join(lines)
    (study / "summary.md").write_text(text, encoding="utf-8")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.tools.gpu_study", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("heldout", help="write the held-out IFEval-style prompts")
    p.add_argument("--train", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--n", type=int, default=125)
    p.add_argument("--seed", type=int, default=1)
    p = sub.add_parser("plan", help="the steps to train, from the timing phase (prints the number)")
    p.add_argument("--study", type=Path, required=True)
    p.add_argument("--budget-s", type=float, required=True)
    p.add_argument("--elapsed-s", type=float, required=True)
    p.add_argument("--eval-reserve-s", type=float, required=True)
    p.add_argument("--jobs", type=int, required=True)
    p.add_argument("--runs", type=int, required=True)
    p.add_argument("--steps", type=int, default=0, help="use this many steps (0: the estimate)")
    p = sub.add_parser("evaluate", help="mrtpo eval of one policy on the held-out set and IFEval's prompts")
    p.add_argument("--model", required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--heldout", type=Path, required=True)
    p.add_argument("--ifeval", type=Path, default=None)
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--device", default="auto")
    p.add_argument("--limit", type=int, default=0)
    p = sub.add_parser("summary", help="write summary.md")
    p.add_argument("--study", type=Path, required=True)
    p.add_argument("--seeds", type=int, nargs="+", required=True)
    p.add_argument("--ifeval-note", default="")
    args = parser.parse_args(argv)
    if args.cmd == "heldout":
        print(f"wrote {heldout(args.train, args.out, args.n, args.seed)} held-out prompts to {args.out}")
    elif args.cmd == "plan":
        body = plan(args.study, args.budget_s, args.elapsed_s, args.eval_reserve_s, args.jobs, args.runs,
                    args.steps or None)
        print(body["steps"])
    elif args.cmd == "evaluate":
        return evaluate(args.model, args.out, args.heldout, args.ifeval, max_new_tokens=args.max_new_tokens,
                        batch_size=args.batch_size, device=args.device, limit=args.limit or None)
    else:
        print(summary(args.study, args.seeds, args.ifeval_note))
    return 0


if __name__ == "__main__":
    sys.exit(main())
