"""`python -m core.tools.ship_run SRC DST [--credit-every N]`: a finished run store made small enough to ship.

    python -m core.tools.ship_run runs/efficiency-multi/runs/mrtpo-swap-s0 sample_data/runs/multi-mrtpo-swap-s0 --credit-every 5

The copy keeps what every app page reads: `config.json`, `status.json`, `metrics.jsonl` (every step, so the
curves are whole) and the notes file as they are, except that the config names its new place (`run_name`,
`runs_dir`) and a path into a checkout's `sample_data/` becomes relative to the repository (`portable_path`), and
the credit maps (the per-step Parquet) of every N-th step and the last one, in schema 3 (a map of an older schema
is rewritten in the copy: `core.tools.upgrade_run`). Checkpoints, the log and the writer's lock file stay behind.
The Token credit and JS pages list only the steps whose credit map exists, so a shipped run offers steps N, 2N, ...
and the last. A run that is still being written (its writer lock is held, or its status is active) is refused, and
so is an existing destination.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path, PurePosixPath

from core.paths import REPO_ROOT
from core.run.store import ACTIVE_STATES, NOTES_FILE, RunStore, atomic_write_json, credit_path, writer_lock_held
from core.tools.upgrade_run import upgrade_run

# Files copied as they are when present (the run store's own files; docs/CONTRACTS.md "Run store"); config.json
# is written anew (`shipped_config`).
KEPT_FILES = ("status.json", "metrics.jsonl", NOTES_FILE)


def shipped_steps(steps: list[int], every: int) -> list[int]:
    """The credit steps a shipped copy keeps: {s in steps : s mod every = 0} plus max(steps)."""
    if every < 1:
        raise ValueError(f"--credit-every must be at least 1, got {every}")
    if not steps:
        return []
    return sorted({s for s in steps if s % every == 0} | {max(steps)})


def portable_path(value: object) -> object:
    """'/any/checkout/sample_data/prompts/x.jsonl' -> 'sample_data/prompts/x.jsonl'; anything else unchanged."""
    if not isinstance(value, str) or not value.startswith("/"):
        return value
    parts = PurePosixPath(value).parts
    if "sample_data" not in parts:
        return value
    return str(PurePosixPath(*parts[len(parts) - 1 - parts[::-1].index("sample_data"):]))


def shipped_config(config: dict, dst: Path) -> dict:
    """The config of the copy at `dst`: its run_name and runs_dir (relative to the repository when inside it),
    and every path into sample_data/ relative (`portable_path`)."""
    out = {k: portable_path(v) for k, v in config.items()}
    parent = dst.resolve().parent
    out["run_name"] = dst.name
    out["runs_dir"] = str(parent.relative_to(REPO_ROOT)) if parent.is_relative_to(REPO_ROOT) else str(parent)
    return out


def ship_run(src: str | Path, dst: str | Path, every: int = 5) -> list[int]:
    """Copy run `src` to the new folder `dst` (see the module docstring); returns the credit steps kept."""
    src, dst = Path(src), Path(dst)
    if not (src / "config.json").is_file():
        raise ValueError(f"{src} is not a run folder (no config.json)")
    if dst.exists():
        raise ValueError(f"{dst} exists already; choose a new folder")
    store = RunStore(src)
    state = store.status().get("state")
    if state in ACTIVE_STATES or writer_lock_held(src):
        raise ValueError(f"{src} is still being written (state {state!r}); ship a finished run")
    steps = shipped_steps(store.credit_steps(), every)
    dst.mkdir(parents=True)
    for name in KEPT_FILES:
        if (src / name).is_file():
            shutil.copy2(src / name, dst / name)
    config = json.loads((src / "config.json").read_text(encoding="utf-8"))
    atomic_write_json(dst / "config.json", shipped_config(config, dst))
    for step in steps:
        target = credit_path(dst, step)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(credit_path(src, step), target)
    done = upgrade_run(dst)  # an older run's maps in schema 3: the pages read their index from the footer
    if done.failed:
        raise ValueError(f"{dst}: credit maps of steps {sorted(done.failed)} could not be rewritten in schema 3: "
                         + "; ".join(done.failed.values()))
    return steps


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m core.tools.ship_run", description=__doc__.split("\n\n")[0])
    p.add_argument("src", help="a finished run folder")
    p.add_argument("dst", help="the new folder (must not exist)")
    p.add_argument("--credit-every", type=int, default=5, metavar="N",
                   help="keep the credit maps of every N-th step and the last (default 5)")
    args = p.parse_args(argv)
    try:
        steps = ship_run(args.src, args.dst, args.credit_every)
    except ValueError as e:
        print(f"ship_run: {e}", file=sys.stderr)
        return 2
    size = sum(f.stat().st_size for f in Path(args.dst).rglob("*") if f.is_file())
    print(f"{args.dst}: {len(steps)} credit maps (steps {steps[0] if steps else '-'}..{steps[-1] if steps else '-'}), "
          f"{size / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
