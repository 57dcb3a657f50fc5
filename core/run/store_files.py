"""The run store's files, written crash-safe: atomic writes (tmp file + fsync + os.replace), strict JSON,
a full disk named (DiskFull), run folder and credit file paths, and the user's notes on a run (notes.json)."""

from __future__ import annotations

import datetime as _dt
import errno
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from core.run.names import RUN_NAME_RULE, is_run_name
from core.run.schema import (
    ADDED_COLUMNS,
    CREDIT_COLUMNS,
)


class RunStoreError(ValueError):
    """A run name, folder or file that the store refuses (the message says why)."""


def _file_mode() -> int:
    """One mode for every file of a run store: what `open()` would give (0o666 less the umask)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


FILE_MODE = _file_mode()  # read once at import (os.umask is process-wide and not thread-safe)


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def run_dir(runs_dir: str | os.PathLike, name: str) -> Path:
    """The folder of run `name` inside `runs_dir`; refuses names that could escape it.

    >>> run_dir("/tmp/runs", "mrtpo-seed0").name
    'mrtpo-seed0'
    """
    if not is_run_name(name):
        raise RunStoreError(f"invalid run name {name!r}: use {RUN_NAME_RULE}")
    root = Path(runs_dir).resolve()
    path = (root / name).resolve()
    if path.parent != root:
        raise RunStoreError(f"run name {name!r} escapes the runs directory {root}")
    return path


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class DiskFull(RunStoreError):
    """A write that did not fit on its disk (ENOSPC, or EDQUOT: over quota). The message names what did not fit,
    about how many bytes it needed and how many were free; what it had half-written is removed
    (docs/CONTRACTS.md, "A full disk")."""


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc`, or an exception it was raised from or during, is "no space left on device" / "disk quota
    exceeded" (torch.save and safetensors wrap it in a RuntimeError that keeps only its text)."""
    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, DiskFull) or (isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)):
            return True
        if any(t in str(exc) for t in ("No space left on device", "Disk quota exceeded", "StorageFull")):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def free_bytes(path: str | os.PathLike) -> int | None:
    """Bytes free to this process on the filesystem of `path` (or of the nearest folder above it), None if unknown."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free
    except OSError:
        return None


def disk_full(what: str, needed: int | None, where: str | os.PathLike) -> DiskFull:
    """The DiskFull for `what` (e.g. "credit/step_000003.parquet") that needed about `needed` bytes in `where`."""
    from core.resources import gib

    free = free_bytes(where)
    need = f"about {gib(needed)} needed" if needed is not None else "its size unknown"
    have = f", {gib(free)} free" if free is not None else ""
    return DiskFull(f"no space left on device: {what} did not fit ({need}{have} in {where})")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see either the old or the new file, never a torn one. On a full disk
    the temporary file is removed, the old file (if any) kept, and DiskFull names the file and the bytes it needed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.fchmod(fd, FILE_MODE)  # mkstemp's 0600 would differ from the appended files' mode
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and is_disk_full(exc):
            raise disk_full(f"{path.parent.name}/{path.name}", len(data), path.parent) from None
        raise
    _fsync_dir(path.parent)


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):  # numpy / torch scalars
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _clean_json(obj: Any) -> Any:
    """NaN/inf are not JSON: store them as null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean_json(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        return _clean_json(obj.item())
    return obj


def json_line(row: dict[str, Any]) -> str:
    """One metrics line: strict JSON (NaN and inf as null), the only way a metrics line is written, by a step
    (`RunWriter.append_metrics`) or by a resume that keeps the earlier lines (`RunWriter.truncate_after`)."""
    return json.dumps(_clean_json(row), default=_json_default, allow_nan=False)


def atomic_write_json(path: Path, obj: Any) -> None:
    text = json.dumps(_clean_json(obj), indent=2, sort_keys=False, default=_json_default)
    atomic_write_bytes(path, (text + "\n").encode())


def credit_path(path: Path, step: int) -> Path:
    return Path(path) / "credit" / f"step_{int(step):06d}.parquet"


def _with_added_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with every column of `ADDED_COLUMNS` it lacks, at its default value, in schema order."""
    missing = [c for c in ADDED_COLUMNS if c not in frame.columns]
    if not missing:
        return frame
    frame = frame.assign(**{c: ADDED_COLUMNS[c] for c in missing})
    return frame[[c for c in CREDIT_COLUMNS if c in frame.columns] + [c for c in frame.columns
                                                                    if c not in CREDIT_COLUMNS]]


NOTES_FILE = "notes.json"  # the user's tags and notes on a run (written by the app; the trainer never touches it)


def read_notes(path: str | os.PathLike) -> dict[str, Any]:
    """{"tags": [str, ...], "notes": str} of a run ({"tags": [], "notes": ""} when none or unreadable)."""
    try:
        data = json.loads((Path(path) / NOTES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    data = data if isinstance(data, dict) else {}
    tags = data.get("tags")
    tags = [str(t) for t in tags if str(t).strip()] if isinstance(tags, list) else []
    return {"tags": tags, "notes": str(data.get("notes") or "")}


def write_notes(path: str | os.PathLike, tags: Iterable[str], notes: str) -> None:
    """Replace a run's tags (stripped, duplicates dropped, order kept) and notes, atomically."""
    clean = list(dict.fromkeys(t.strip() for t in tags if t and t.strip()))
    atomic_write_json(Path(path) / NOTES_FILE, {"tags": clean, "notes": str(notes)})
