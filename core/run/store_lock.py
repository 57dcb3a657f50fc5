"""The run's writer lock: one writer per run (an exclusive flock on `<run>/.writer.lock`, held for the writer
process's life, released by the OS when it ends); whether a trainer writes a run now."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any

from core.run.schema import (
    WRITER_LOCK,
)
from core.run.store_files import (
    FILE_MODE,
    RunStoreError,
)
from core.run.store_read import RunStore

_HELD: dict[str, Any] = {}  # run folder -> the open lock file this process holds (one per run)


def acquire_writer_lock(path: str | os.PathLike) -> None:
    """Take the run's writer lock (an exclusive `flock` on `<run>/.writer.lock`) for this process's life, or
    raise RunStoreError when another process holds it. The OS releases it when the process ends, kill -9 too.
    Taking it again in the same process is a no-op."""
    path = Path(path).resolve()
    if str(path) in _HELD:
        return
    try:
        fh = open(path / WRITER_LOCK, "a")  # noqa: SIM115 -- held open for the run's life
    except OSError as exc:
        raise RunStoreError(f"cannot open the writer lock of run {path.name!r}: {exc.strerror or exc}") from exc
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        holder = RunStore(path).status().get("pid")
        who = f" (pid {holder})" if holder else ""
        raise RunStoreError(f"run {path.name!r} is being written by another process{who}; "
                            "stop it first or pick another run") from None
    os.chmod(path / WRITER_LOCK, FILE_MODE)
    _HELD[str(path)] = fh


def release_writer_lock(path: str | os.PathLike) -> None:
    fh = _HELD.pop(str(Path(path).resolve()), None)
    if fh is not None:
        fh.close()


def writer_lock_held(path: str | os.PathLike) -> bool:
    """True when some process holds the run's writer lock (a trainer writes it now)."""
    path = Path(path)
    if str(path.resolve()) in _HELD:
        return True
    try:
        with open(path / WRITER_LOCK) as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                return True
            fcntl.flock(fh, fcntl.LOCK_UN)
    except OSError:
        return False
    return False
