"""Study v4 (docs/results/study-v4.md): its arms, the run plan, the scale factors and the tables from the raw CSV.

    python -m core.tools.study_v4 run --dry-run [--arms ...] [--seeds ...]  # the plan: done / to run / refused
    nice -n 19 python -m core.tools.study_v4 run [--arms ...] [--seeds ...] [--jobs 2]
    python -m core.tools.study_v4 scales --from-csv docs/results/study-v4.csv.gz
    python -m core.tools.study_v4 report --from-csv docs/results/study-v4.csv.gz

An arm whose TrainConfig field or routing this checkout lacks (issue 42's routing controls: `routing_shuffle`,
`routing=entropy`, `reward_scales`) is listed and refused with the reason (`arm_error`). Never imports torch:
each run is a `mrtpo train` subprocess (one thread), then a `core.tools.study_v4_score` subprocess scores its
checkpoints; the run's rows are then appended to the CSV with a `run/complete` row and its checkpoints deleted.
Resumable at every level: a run whose rows are in the CSV is skipped, a stopped training resumes from its last
checkpoint, a scoring keeps the steps it scored (one part file a step). Ctrl-C / SIGTERM stops the children cleanly.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

from core.choices import ROUTINGS
from core.config import TrainConfig, resume_argv, train_argv
from core.paths import PROMPTS_DIR, REPO_ROOT
from core.run.store import RunStore
from core.tools import study_v4_report as rep
from core.tools.efficiency import CHILDREN, child_env

CSV = REPO_ROOT / "docs" / "results" / "study-v4.csv.gz"
SCALES = REPO_ROOT / "docs" / "results" / "study-v4-scales.json"
JS = {"method": "mrtpo", "routing": "replay", "relevance": "js", "routing_clip": "clip"}
# Arm label -> the TrainConfig fields that make it (study-v4.md, "Arms"); gdpo-scaled's reward_scales come from SCALES.
ARMS: dict[str, dict[str, Any]] = {
    "gdpo": {"method": "gdpo"},
    "mrtpo-js": JS,
    "mrtpo-js-shuffle": {**JS, "routing_shuffle": "on"},
    "gdpo-scaled": {"method": "gdpo", "reward_scales": None},
    "mrtpo-entropy": {"method": "mrtpo", "routing": "entropy", "routing_clip": "clip"},
    "mrtpo-span": {"method": "mrtpo", "routing": "span", "routing_clip": "clip"},
    "pilot-js": JS,  # seeds 100, 101: the scale factors, no endpoint
}
STUDY_V4 = {"model": "tiny-multi", "prompt_set": str(PROMPTS_DIR / "multi.jsonl"), "steps": 150,
            "max_new_tokens": 96, "checkpoint_every": 10, "keep_checkpoints": 0, "device": "cpu",
            "group_size": 8, "prompts_per_step": 4, "lr": 5e-5}
EVAL_PROMPTS = 128
OUT = REPO_ROOT / "runs" / "study-v4"
SEEDS = list(range(10))
PILOT_SEEDS = [100, 101]
# v3's measured costs on one core (study-v3.md, "What a run costs"): an estimate, not a v4 measurement.
STEP_S, EVAL_S, EVALS, SETS_SCORED = 2.0, 25.0, 15, 2


def arm_error(arm: str, scales: Path | None = None) -> str:
    """Why this checkout cannot train `arm` ("" when it can); `scales`: the factors file (default SCALES)."""
    scales = scales or SCALES
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    missing = [k for k in ARMS[arm] if k not in fields]
    if missing:
        return (f"arm {arm} needs the TrainConfig field(s) {', '.join(missing)}, which this checkout does not have "
                "(issue 42's routing controls); leave it out until they are merged")
    routing = ARMS[arm].get("routing")
    if routing is not None and routing not in ROUTINGS:
        return (f"arm {arm} needs routing={routing!r}, which this checkout does not have (its routings: "
                f"{', '.join(ROUTINGS)}); leave it out until issue 42's routing controls are merged")
    if "reward_scales" in ARMS[arm] and not scales.exists():
        return f"arm {arm} needs the pilot's scale factors in {scales.name}: run the pilot, then `scales`"
    return ""


def plan(arms: list[str], seeds: list[int], done: set[tuple[str, int]]) -> list[dict[str, Any]]:
    """One row per (arm, seed): its state (done / to run / refused, with the reason), seed by seed."""
    rows = []
    for seed in seeds:
        for arm in arms:
            error = arm_error(arm)
            state = "done" if (arm, seed) in done else ("refused" if error else "to run")
            rows.append({"arm": arm, "seed": seed, "state": state, "reason": error})
    return rows


def done_runs(csv: Path) -> set[tuple[str, int]]:
    if not csv.exists():
        return set()
    df = pd.read_csv(csv, keep_default_na=False)
    return {(a, int(s)) for a, s in df[df["metric"] == rep.DONE][["arm", "seed"]].itertuples(index=False)}


def run_fields(arm: str, seed: int, out: Path, steps: int, scales: Path | None = None) -> dict[str, Any]:
    """The TrainConfig fields of one study run (study-v4.md, "Setting" and "Arms")."""
    scales = scales or SCALES
    fields = {**STUDY_V4, **ARMS[arm], "steps": steps, "seed": seed, "runs_dir": str(out / "runs"),
              "run_name": f"{arm}-s{seed}", "eval_prompt_set": None}
    if "reward_scales" in ARMS[arm]:
        fields["reward_scales"] = json.loads(scales.read_text(encoding="utf-8"))
    TrainConfig(**fields)  # every value checked before anything starts
    return fields


def train_rows(path: Path, arm: str, seed: int) -> pd.DataFrame:
    """The training metrics the report reads (set `train`, prompt ""): per step, `span/<k>/retained`,
    `reward/...`, `adv/...`, `loss/...`, `time/step`."""
    m = RunStore(path).metrics()
    keep = [c for c in m.columns if c != "step" and (c.startswith(("reward/", "adv/", "loss/")) or c == "time/step"
                                                     or (c.startswith("span/") and c.endswith("/retained")))]
    long = m.melt(id_vars="step", value_vars=keep, var_name="metric", value_name="value").dropna()
    long = long.assign(arm=arm, seed=seed, set="train", prompt="")
    return long[rep.CSV_COLUMNS]


class Csv:
    """The study's CSV, appended to run by run (a whole run or nothing: the file is rewritten to a temp file and
    renamed), one writer at a time."""

    def __init__(self, path: Path):
        self.path, self.lock = path, threading.Lock()

    def append(self, rows: pd.DataFrame) -> None:
        with self.lock:
            old = pd.read_csv(self.path, keep_default_na=False) if self.path.exists() else None
            new = rows if old is None else pd.concat([old, rows], ignore_index=True)
            tmp = self.path.with_name(self.path.name + ".tmp")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            new.to_csv(tmp, index=False, compression="gzip", float_format="%.6g")
            os.replace(tmp, self.path)


def _child(cmd: list[str], log: Path) -> int:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(f"$ {' '.join(cmd)}\n")
        fh.flush()
        return CHILDREN.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=child_env(), cwd=str(REPO_ROOT))


def score_command(path: Path, parts: Path, arm: str, seed: int, eval_prompts: int, initial: bool = False) -> list[str]:
    return [sys.executable, "-m", "core.tools.study_v4_score", str(path), str(parts), "--arm", arm, "--seed",
            str(seed), "--eval-prompts", str(eval_prompts), *(["--initial"] if initial else [])]


def run_one(arm: str, seed: int, out: Path, csv: Csv, steps: int, eval_prompts: int) -> str:
    """Train, score and append one (arm, seed); returns its outcome line."""
    fields = run_fields(arm, seed, out, steps)
    name, path = fields["run_name"], out / "runs" / fields["run_name"]
    log, parts = out / "logs" / f"{name}.log", out / "scored" / name
    t0 = time.monotonic()
    state = RunStore(path).status().get("state") if (path / "config.json").exists() else None
    if state != "completed":
        if state is not None and RunStore(path).latest_checkpoint() is not None:
            cmd = resume_argv(path, steps=steps)
        else:
            shutil.rmtree(path, ignore_errors=True)  # nothing to resume from: start again with the same seed
            cmd = train_argv(TrainConfig(**fields))
        rc = _child(cmd, log)
        state = RunStore(path).status().get("state") if path.exists() else "missing"
        if state != "completed":
            return f"{name}: training {state} (exit {rc}); see {log}"
    if not arm.startswith("pilot"):  # the pilot gives the scale factors (training metrics), no endpoint
        rc = _child(score_command(path, parts, arm, seed, eval_prompts), log)
        if rc != 0:
            return f"{name}: scoring failed (exit {rc}); see {log}"
    evaluations = append_scored(csv, parts, arm, seed, steps, train_rows(path, arm, seed))
    shutil.rmtree(path / "checkpoints", ignore_errors=True)
    return f"{name}: in the CSV ({evaluations} evaluations) after {time.monotonic() - t0:.0f} s"


def append_scored(csv: Csv, parts: Path, arm: str, seed: int, step: int, extra: pd.DataFrame | None = None) -> int:
    """Append a run's scored steps (its part files), `extra` rows and its `run/complete` row to the CSV in one write,
    then delete the part files; returns how many steps were scored."""
    frames = [pd.read_csv(f, keep_default_na=False) for f in sorted(parts.glob("step-*.csv"))]
    done = pd.DataFrame([[arm, seed, step, "run", "", rep.DONE, 1.0]], columns=rep.CSV_COLUMNS)
    csv.append(pd.concat([*frames, *([] if extra is None else [extra]), done], ignore_index=True))
    shutil.rmtree(parts, ignore_errors=True)
    return len(frames)


def initial_one(seed: int, out: Path, csv: Csv, eval_prompts: int) -> str:
    """The untrained model on both sets at step 0 for a seed's evaluation random numbers (arm `initial`)."""
    fields = {**run_fields("gdpo", seed, out, 1), "run_name": f"{rep.INITIAL}-s{seed}"}
    path = out / "runs" / fields["run_name"]
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(fields, indent=2) + "\n", encoding="utf-8")
    parts = out / "scored" / fields["run_name"]
    rc = _child(score_command(path, parts, rep.INITIAL, seed, eval_prompts, initial=True),
                out / "logs" / f"{fields['run_name']}.log")
    if rc != 0:
        return f"initial-s{seed}: scoring failed (exit {rc})"
    append_scored(csv, parts, rep.INITIAL, seed, 0)
    return f"initial-s{seed}: in the CSV"


def run_study(args: argparse.Namespace) -> int:
    csv_path = Path(args.csv)
    smoke = args.steps != STUDY_V4["steps"] or args.eval_prompts != EVAL_PROMPTS
    if smoke and csv_path.resolve() == CSV.resolve():
        print(f"--steps / --eval-prompts differ from the study's ({STUDY_V4['steps']}, {EVAL_PROMPTS}): give another "
              "--csv (a smoke run never writes into the study's CSV)", file=sys.stderr)
        return 2
    rows = plan(args.arms, args.seeds, done_runs(csv_path))
    for r in rows:
        print(f"{r['arm']}-s{r['seed']}: {r['state']}" + (f" ({r['reason']})" if r["reason"] else ""))
    todo = [(r["arm"], r["seed"]) for r in rows if r["state"] == "to run"]
    run_s = args.steps * STEP_S + (args.steps // 10) * SETS_SCORED * EVAL_S * args.eval_prompts / EVAL_PROMPTS
    print(f"{len(rows)} runs: {sum(r['state'] == 'done' for r in rows)} done, {len(todo)} to run, "
          f"{sum(r['state'] == 'refused' for r in rows)} refused; estimate {run_s / 60:.1f} min a run on one core, "
          f"{len(todo) * run_s / 3600 / max(args.jobs, 1):.1f} h with {args.jobs} jobs (from v3's costs)", flush=True)
    if args.dry_run or not todo:
        return 0
    out, csv = Path(args.out).resolve(), Csv(csv_path)
    signal.signal(signal.SIGTERM, lambda *_: CHILDREN.stop_all())
    initial = sorted({s for a, s in todo if not a.startswith("pilot")}
                     - {s for a, s in done_runs(csv_path) if a == rep.INITIAL})
    failed = 0
    t0 = time.monotonic()
    try:
        with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
            futures = []
            for a, s in todo:  # seed by seed, a seed's step-0 scoring just before its first run
                if s in initial:
                    initial.remove(s)
                    futures.append(pool.submit(initial_one, s, out, csv, args.eval_prompts))
                futures.append(pool.submit(run_one, a, s, out, csv, args.steps, args.eval_prompts))
            for i, fut in enumerate(futures, 1):
                line = fut.result()
                failed += "in the CSV" not in line
                print(f"[{i}/{len(futures)}, {time.monotonic() - t0:.0f} s] {line}", flush=True)
    except KeyboardInterrupt:
        CHILDREN.stop_all()
        print("stopped: rerun the same command to resume", file=sys.stderr)
        return 130
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m core.tools.study_v4", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="train and score the runs not yet in the CSV (resumable), or --dry-run the plan")
    r.add_argument("--arms", nargs="+", choices=list(ARMS), default=[a for a in ARMS if a != "pilot-js"])
    r.add_argument("--seeds", nargs="+", type=int, default=SEEDS)
    r.add_argument("--jobs", type=int, default=1, help="runs at once, one thread each (default 1)")
    r.add_argument("--dry-run", action="store_true", help="print the plan and an estimate, train nothing")
    r.add_argument("--out", default=str(OUT), help="runs, logs and part files (default runs/study-v4)")
    r.add_argument("--csv", default=str(CSV), help="the raw CSV the runs are appended to")
    r.add_argument("--steps", type=int, default=STUDY_V4["steps"], help="smoke tests only (needs another --csv)")
    r.add_argument("--eval-prompts", type=int, default=EVAL_PROMPTS, help="smoke tests only (needs another --csv)")
    for name in ("scales", "report"):
        s = sub.add_parser(name)
        s.add_argument("--from-csv", default=str(CSV))
    s.add_argument("--out", help="also write the report to this Markdown file")
    sc = sub.choices["scales"]
    sc.add_argument("--write", action="store_true", help=f"write the factors to {SCALES.name}")
    args = p.parse_args(argv)
    if args.command == "run":
        return run_study(args)
    df = pd.read_csv(args.from_csv, keep_default_na=False)
    if args.command == "scales":
        factors = rep.scale_factors(df)
        if not factors:
            print("no pilot-js rows with span/<k>/retained in the CSV: run the pilot first", file=sys.stderr)
            return 1
        text = json.dumps(factors, indent=2) + "\n"
        if args.write:
            SCALES.write_text(text, encoding="utf-8")
        sys.stdout.write(text)
        return 0
    text = rep.report(df)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
