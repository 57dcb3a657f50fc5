"""Where the app looks for runs: `$MRTPO_RUNS_DIR` (default `./runs`) and the shipped sample runs."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLE_RUNS_DIR = REPO_ROOT / "sample_data" / "runs"


def runs_dir() -> Path:
    """The runs directory new runs go to: `$MRTPO_RUNS_DIR`, else `./runs`."""
    return Path(os.environ.get("MRTPO_RUNS_DIR") or "runs").resolve()


def run_sources() -> list[tuple[str, Path]]:
    """(label, directory) pairs the app lists runs from."""
    return [("runs", runs_dir()), ("sample", SAMPLE_RUNS_DIR)]
