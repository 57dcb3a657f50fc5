"""Where the app looks for runs: `$MRTPO_RUNS_DIR` (default `./runs`) and the shipped sample runs."""

from __future__ import annotations

from pathlib import Path

from core.paths import SAMPLE_RUNS_DIR, runs_dir


def run_sources() -> list[tuple[str, Path]]:
    """(label, directory) pairs the app lists runs from."""
    return [("runs", runs_dir()), ("sample", SAMPLE_RUNS_DIR)]
