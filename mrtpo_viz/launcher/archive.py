"""Archive, restore and delete finished runs from the app (never a run that a trainer still writes).

Never imports torch: `core.config`, `core.run.store` and `core.tasks` are torch-free.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from core.run.store import ACTIVE_STATES, RunStoreError, writer_lock_held
from mrtpo_viz.launcher.children import WRITTEN_NOW, run_state

ARCHIVE_DIR = ".archive"  # archived runs: <runs_dir>/.archive/<name> (dot folders are not listed as runs)


def _idle(path: Path) -> str:
    """"" when nothing writes the run any more, else why it cannot be moved or deleted."""
    state = run_state(path).get("state")
    if state in ACTIVE_STATES:
        return f"the run is {state}; stop it first"
    if writer_lock_held(path):
        return WRITTEN_NOW
    return ""


def archive_run(path: str | os.PathLike) -> Path:
    """Move a finished run into the runs directory's hidden archive folder (out of every list); returns where."""
    path = Path(path)
    why = _idle(path)
    if why:
        raise RunStoreError(why)
    target = path.parent / ARCHIVE_DIR / path.name
    if target.exists():
        raise RunStoreError(f"the archive already holds a run named {path.name!r}")
    target.parent.mkdir(exist_ok=True)
    os.replace(path, target)
    return target


def archived_runs(root: str | os.PathLike) -> list[Path]:
    folder = Path(root) / ARCHIVE_DIR
    return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def restore_run(path: str | os.PathLike) -> Path:
    """Move an archived run back into its runs directory."""
    path = Path(path)
    target = path.parent.parent / path.name
    if target.exists():
        raise RunStoreError(f"a run named {path.name!r} already exists; rename or delete it first")
    os.replace(path, target)
    return target


def delete_run(path: str | os.PathLike) -> None:
    """Delete a finished run's folder (config, metrics, credit maps, checkpoints, log) for good."""
    path = Path(path)
    why = _idle(path)
    if why:
        raise RunStoreError(why)
    if not (path / "config.json").exists() and not (path / "status.json").exists():
        raise RunStoreError(f"{str(path)!r} is not a run folder")
    shutil.rmtree(path)
