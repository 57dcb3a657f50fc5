"""The run store: the one contract between the trainer (writer) and the app (reader).

One folder per run (docs/CONTRACTS.md, "Run store"): `config.json`, an atomically replaced
`status.json`, append-only `metrics.jsonl`, one Parquet credit map per step under `credit/`, and
`save_pretrained` checkpoints under `checkpoints/`. Every write is crash-safe: a file is either
the old version or the new one (tmp file + fsync + os.replace), and a metrics line is appended
only after the step's credit file is in place, so a `kill -9` leaves every completed step readable.

Never imports torch, streamlit or plotly: the app reads runs through this module.
"""

from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from core.run import credit_format
from core.run.credit_format import CreditStep
from core.run.liveness import pid_is_writer, pid_start_time
from core.run.metrics_file import MetricsReader
from core.run.names import RUN_NAME_RULE, is_run_name
from core.run.schema import (
    ACTIVE_STATES,
    ADDED_COLUMNS,
    COLUMNAR_VERSIONS,
    CREDIT_COLUMNS,
    CREDIT_SCHEMA,
    FINAL_STATES,
    READABLE_VERSIONS,
    SCHEMA_KEY,
    SCHEMA_VERSION,
    STEP_MAX,
    V1_NAMES,
    WRITER_LOCK,
)
from core.run.train_log import crash_message, read_tail

# Set by the app for a trainer it starts (mrtpo_viz/launcher): the run folder's creator records it in status.json,
# so the app links its staging log only into the run its own trainer created (docs/CONTRACTS.md, status.json).
LAUNCH_ID_ENV = "MRTPO_LAUNCH_ID"



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


# --------------------------------------------------------------------------------------------- writer


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


class RunWriter:
    """Writes one run folder. Only the trainer process uses it; `create`, `reopen` and `open` take the run's
    writer lock, so a run folder has one writer at a time (docs/CONTRACTS.md, "One writer per run")."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._status: dict[str, Any] = {}
        status_file = self.path / "status.json"
        if status_file.exists():
            try:
                loaded = json.loads(status_file.read_text())
                self._status = loaded if isinstance(loaded, dict) else {}
            except (OSError, ValueError):
                self._status = {}

    @classmethod
    def open(cls, path: str | os.PathLike) -> RunWriter:
        """The writer of an existing run folder, with its writer lock (RunStoreError when another process has it)."""
        acquire_writer_lock(path)
        return cls(path)

    def close(self) -> None:
        """Release the writer lock (the process ending releases it too)."""
        release_writer_lock(self.path)

    @classmethod
    def create(cls, runs_dir: str | os.PathLike, name: str, config: dict[str, Any], *, exist_ok: bool = False) -> RunWriter:
        """Create `<runs_dir>/<name>/` with its config and a `starting` status, holding its writer lock. The
        folder is made with one `mkdir`, so of two processes creating the same run, one gets RunStoreError."""
        path = run_dir(runs_dir, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir(exist_ok=exist_ok)
        except FileExistsError:
            raise RunStoreError(f"run {name!r} already exists in {path.parent}; pick another run name") from None
        writer = cls.open(path)
        (path / "credit").mkdir(exist_ok=True)
        (path / "checkpoints").mkdir(exist_ok=True)
        atomic_write_json(path / "config.json", {**config, "schema_version": SCHEMA_VERSION})
        launch = {"launch_id": os.environ[LAUNCH_ID_ENV]} if os.environ.get(LAUNCH_ID_ENV) else {}
        writer.set_status(
            state="starting", pid=os.getpid(), step=0, total_steps=config.get("steps"), error=None, started_at=now_iso(),
            **launch,
        )
        return writer

    @classmethod
    def reopen(cls, path: str | os.PathLike, config: dict[str, Any], step: int) -> RunWriter:
        """Continue the run in `path` after `step` (its newest checkpoint): record `config` (resuming may
        change a few fields), drop the metrics and credit maps of later steps and half-written checkpoints."""
        writer = cls.open(path)
        writer.remove_leftovers()  # first: a half-written checkpoint may be what filled the disk
        atomic_write_json(writer.path / "config.json", {**config, "schema_version": SCHEMA_VERSION})
        writer.truncate_after(step)
        return writer

    def set_status(self, **fields: Any) -> dict[str, Any]:
        """Merge `fields` into status.json and replace it atomically. A `pid` is recorded with its process's
        start time (`pid_started`), so a reader can tell the writer from a process that got its pid later.
        A final state (completed, failed, stopped) is the writer's last word: it releases the writer lock, so the
        run can be resumed, archived or deleted at once, not only when the trainer process has exited."""
        if "pid" in fields:
            fields["pid_started"] = pid_start_time(fields["pid"])
        self._status.update(fields)
        self._status["updated_at"] = now_iso()
        atomic_write_json(self.path / "status.json", self._status)
        if self._status.get("state") in FINAL_STATES:
            self.close()
        return dict(self._status)

    def prune_checkpoints(self, keep: int) -> list[Path]:
        """Delete all but the newest `keep` checkpoints (0 keeps all); returns the deleted folders. Called after
        each save, so the run's last checkpoint (the newest) is always kept."""
        ckpts = RunStore(self.path).checkpoints()
        doomed = ckpts[:-keep] if keep > 0 else []
        for ckpt in doomed:
            shutil.rmtree(ckpt, ignore_errors=True)
        return doomed

    def write_credit(self, step: int, credit: CreditStep | pd.DataFrame) -> Path:
        """Write the step's credit map atomically in schema 3 (`core.run.credit_format`); returns its path.
        `credit`: a `CreditStep` (what the trainers build) or a long frame of CREDIT_SCHEMA's columns (schema 1's
        `js` / `js_skipped` accepted for `distance` / `distance_skipped`)."""
        if isinstance(credit, pd.DataFrame):
            credit = credit.rename(columns=V1_NAMES)
            missing = [c for c in CREDIT_COLUMNS if c not in credit.columns and c not in ADDED_COLUMNS]
            if missing:
                raise RunStoreError(f"credit map for step {step} lacks columns {missing}")
            try:
                credit = CreditStep.from_frame(step, credit, self._reward_names())
            except ValueError as exc:
                raise RunStoreError(f"credit map for step {step}: {exc}") from None
        out = credit_path(self.path, step)
        atomic_write_bytes(out, credit_format.write_bytes(credit, SCHEMA_KEY))
        return out

    def _reward_names(self) -> list[str]:
        try:
            names = json.loads((self.path / "config.json").read_text()).get("reward_names")
        except (OSError, ValueError, AttributeError):
            return []
        return [str(n) for n in names] if isinstance(names, list) else []

    def append_metrics(self, row: dict[str, Any]) -> None:
        """Append one step's metrics as a JSON line (flushed and fsynced: the step is then complete)."""
        if "step" not in row:
            raise RunStoreError("a metrics row needs its 'step'")
        line = json_line(row)
        file = self.path / "metrics.jsonl"
        size = file.stat().st_size if file.exists() else 0
        try:
            with open(file, "a", encoding="utf-8") as fh:  # created with FILE_MODE
                fh.write(line + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            if not is_disk_full(exc):
                raise
            with open(file, "r+b") as fh:  # no torn line left for the next one to join
                fh.truncate(size)
            raise disk_full("metrics.jsonl", len(line) + 1, self.path) from None

    def truncate_after(self, step: int) -> None:
        """Drop metrics lines and credit files of steps after `step` (used when resuming from a checkpoint)."""
        metrics = self.path / "metrics.jsonl"
        if metrics.exists():
            kept = [row for row in _read_jsonl(metrics)[0] if int(row.get("step", 0)) <= step]
            atomic_write_bytes(metrics, "".join(json_line(r) + "\n" for r in kept).encode())
        for f in (self.path / "credit").glob("step_*.parquet"):
            if _step_of(f) is not None and _step_of(f) > step:
                f.unlink(missing_ok=True)

    def checkpoint_dir(self, step: int) -> Path:
        return self.path / "checkpoints" / f"step_{int(step):06d}"

    # A checkpoint is written into a hidden folder beside its final place, then renamed: readers never list a
    # half-written one. Both trainers save through these two calls (the TRL one saves from every process between
    # them: DeepSpeed gathers the weights).

    def begin_checkpoint(self, step: int) -> Path:
        """The empty hidden folder to save the checkpoint of `step` into (a leftover of an earlier try removed)."""
        final = self.checkpoint_dir(step)
        tmp = final.parent / f".{final.name}.tmp"
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        return tmp

    def commit_checkpoint(self, step: int, keep: int) -> Path:
        """Rename the saved hidden folder of `step` to its final place (replacing an older save of that step),
        then keep only the newest `keep` checkpoints (`prune_checkpoints`). Returns the final folder."""
        final = self.checkpoint_dir(step)
        if final.exists():
            shutil.rmtree(final, ignore_errors=True)
        os.replace(final.parent / f".{final.name}.tmp", final)
        self.prune_checkpoints(keep)
        return final

    def remove_leftovers(self) -> list[Path]:
        """Delete what an interrupted write left: hidden temp files and folders (`.*.tmp`, from `atomic_write_bytes`
        and `begin_checkpoint`) in the run folder, credit/ and checkpoints/. Only for a run with no live writer
        (resume, or after a kill). Returns what it deleted."""
        found = [*self.path.glob(".*.tmp"), *(self.path / "credit").glob(".*.tmp"),
                 *(self.path / "checkpoints").glob(".*.tmp")]
        for leftover in found:
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)
        return found

    def remove(self) -> None:
        """Delete the whole run folder (only for a run that never started a step)."""
        self.close()
        shutil.rmtree(self.path, ignore_errors=True)


# --------------------------------------------------------------------------------------------- notes

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


# --------------------------------------------------------------------------------------------- reader

_TAIL_LINES, _TAIL_BYTES = 8, 65536  # how much of metrics.jsonl `RunStore.last_step` reads


def _step_of(path: Path) -> int | None:
    m = re.match(r"^step_(\d+)$", path.stem)
    return int(m.group(1)) if m else None


def valid_step(value: Any) -> int | None:
    """A metrics line's `step` as an int when it is one (1 <= step < 2**31, whole; a bool is not a step), else None.

    >>> valid_step(3), valid_step(3.0), valid_step(float("nan")), valid_step(True), valid_step("3"), valid_step(0)
    (3, 3, None, None, None, None)
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return None
    return int(value) if 1 <= value <= STEP_MAX else None


def _metric_value(value: Any) -> float | None:
    """A metric's value as a float (null, NaN and +-inf become NaN); None when it is no number at all."""
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:  # an int beyond float's range
        return math.nan
    return value if math.isfinite(value) else math.nan


def check_metrics_row(row: Any, where: str) -> tuple[dict[str, Any] | None, list[str]]:
    """One parsed metrics line checked against the schema: (the row with step an int and every value a float,
    or None to skip the line; problems naming `where`). A line must be a JSON object with a valid `step`;
    a value that is not a number (or null) is dropped."""
    if not isinstance(row, dict):
        return None, [f"{where} is not a JSON object ({type(row).__name__}); skipped"]
    step = valid_step(row.get("step"))
    if step is None:
        return None, [f"{where} has no valid step ({str(row.get('step'))[:40]!r}: a whole number >= 1); skipped"]
    out: dict[str, Any] = {"step": step}
    bad = []
    for key, value in row.items():
        if key == "step":
            continue
        v = _metric_value(value)
        if v is None:
            bad.append(str(key))
        else:
            out[str(key)] = v
    problems = [f"{where}: {', '.join(bad[:5])} {'is' if len(bad) == 1 else 'are'} not numbers; dropped"] if bad else []
    return out, problems


_METRICS_READER = MetricsReader()  # keeps each metrics.jsonl's parsed rows: a rerun parses only what was appended


def _read_jsonl(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The checked rows of a metrics.jsonl and the problems found (core/run/metrics_file.py: read in chunks, only
    the bytes appended since the last read, NUL runs and overlong lines skipped with a warning)."""
    return _METRICS_READER.read(path, check_metrics_row)


# status.json fields: name -> (check of a value, what it must be). A field that fails is dropped with a warning.
def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_count(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, int) and 0 <= v <= STEP_MAX


STATUS_FIELDS: dict[str, tuple[Any, str]] = {
    "state": (lambda v: v in (*ACTIVE_STATES, *FINAL_STATES), "one of " + ", ".join((*ACTIVE_STATES, *FINAL_STATES))),
    "pid": (lambda v: _is_count(v) and v > 0, "a process id"),
    "pid_started": (_is_str, "a string"),
    "step": (_is_count, "a whole number >= 0"),
    "total_steps": (lambda v: _is_count(v) and v > 0, "a whole number >= 1"),
    "error": (_is_str, "a string"),
    "started_at": (_is_str, "an ISO time string"),
    "updated_at": (_is_str, "an ISO time string"),
    "launch_id": (_is_str, "a string"),
}


def check_status(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """status.json checked against the schema: (its known fields that hold what they must, null ones kept as
    None; problems). Unknown fields pass unchanged."""
    out: dict[str, Any] = {}
    problems = []
    for key, value in data.items():
        rule = STATUS_FIELDS.get(key)
        if rule is None or value is None or rule[0](value):
            out[key] = value
        else:
            problems.append(f"status.json field {key!r} is {str(value)[:40]!r}, not {rule[1]}; ignored")
    return out, problems


# config.json fields the readers use: name -> (check, what it must be).
def _is_str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_number(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)


def _is_whole(v: Any) -> bool:
    return _is_number(v) and float(v).is_integer()


CONFIG_FIELDS: dict[str, tuple[Any, str]] = {
    **{k: (_is_str, "a string") for k in ("model", "method", "routing", "relevance", "prompt_set", "backend",
                                          "device", "run_name", "replay_pairs")},
    "reward_names": (_is_str_list, "a list of strings"),
    "reward_routes": (lambda v: isinstance(v, dict) and all(isinstance(r, dict) for r in v.values()),
                      "a mapping of reward name to its route"),
    "reward_weights": (lambda v: isinstance(v, dict) and all(_is_number(x) for x in v.values()),
                       "a mapping of reward name to number"),
    **{k: (_is_whole, "a whole number") for k in ("steps", "group_size", "prompts_per_step", "seed", "inner_epochs",
                                                  "max_new_tokens", "checkpoint_every", "eval_samples",
                                                  "eval_prompts", "nproc", "replay_chunk")},
    **{k: (_is_number, "a number") for k in ("lr", "lam", "w_max", "sharpen", "kl_beta", "clip_range",
                                             "temperature", "eps", "max_grad_norm")},
    "schema_version": (lambda v: v in READABLE_VERSIONS, " or ".join(map(str, READABLE_VERSIONS))
                       + " (the schema versions this reader reads)"),
}


def check_config(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """config.json checked against the fields the readers use: (the config without fields of the wrong type,
    whole numbers as int; problems)."""
    out: dict[str, Any] = {}
    problems = []
    for key, value in data.items():
        rule = CONFIG_FIELDS.get(key)
        if rule is None or value is None or rule[0](value):
            out[key] = int(value) if rule is not None and rule[1] == "a whole number" and value is not None else value
        elif key == "schema_version":
            out[key] = value
            problems.append(f"config.json schema_version {str(value)[:40]!r} is not one this reader reads "
                            f"({', '.join(map(str, READABLE_VERSIONS))})")
        else:
            problems.append(f"config.json field {key!r} is {str(value)[:40]!r}, not {rule[1]}; ignored")
    return out, problems


def check_credit(table: pa.Table, step: int) -> tuple[pd.DataFrame | None, list[str]]:
    """A schema-1 credit map checked against CREDIT_SCHEMA (its `js` / `js_skipped` read as `distance` /
    `distance_skipped`): (the frame with every column at its schema type, or None when a column is missing or
    cannot be read as its type; problems)."""
    where = f"credit map of step {step} (credit/step_{int(step):06d}.parquet)"
    table = table.rename_columns([V1_NAMES.get(c, c) for c in table.column_names])
    names = set(table.column_names)
    missing = [c for c in CREDIT_COLUMNS if c not in names and c not in ADDED_COLUMNS]
    if missing:
        return None, [f"{where} lacks columns {', '.join(missing)}; skipped"]
    columns = {}
    for f in CREDIT_SCHEMA:
        if f.name not in names:
            continue
        col = table.column(f.name)
        if col.type != f.type:
            try:
                col = col.cast(f.type)
            except (pa.ArrowException, ValueError):
                return None, [f"{where} column {f.name} holds {col.type}, not {f.type}; skipped"]
        columns[f.name] = col
    frame = pa.table(columns).to_pandas()
    return _with_added_columns(frame), []


def valid_positions(frame: pd.DataFrame, where: str) -> tuple[pd.DataFrame, list[str]]:
    """The credit rows whose token position t is one a response can have: 0 <= t < n, n the number of rows of its
    (sample, reward), each t once. Other rows are dropped with a problem naming the file: a page sizes its arrays
    by t, so a negative t failed it and t = 2**31 - 1 asked for 16 GiB."""
    if frame.empty:
        return frame, []
    t = frame["t"].to_numpy().astype("int64")
    keys = [frame["sample"], frame["reward"]]
    n = frame.groupby(keys, sort=False, observed=True)["t"].transform("size").to_numpy()
    ok = (t >= 0) & (t < n) & ~frame.duplicated(["sample", "reward", "t"]).to_numpy()
    if ok.all():
        return frame, []
    return frame[ok], [f"{where}: {int((~ok).sum())} rows with a token position outside their response "
                       f"(negative, repeated, or past its {int(n.max())} tokens) skipped"]


@dataclass
class RunStore:
    """Read-only view of one run folder. Never raises on a corrupt folder: problems land in `warnings`."""

    path: Path
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.path = Path(self.path)

    @property
    def name(self) -> str:
        return self.path.name

    def _own(self, relative: str | os.PathLike) -> Path | None:
        """The run's file `relative` when reading it stays inside the run folder; None, with a warning, when it
        (or a folder on the way) is a symbolic link. The readers follow nothing out of a run: a train.log that
        links to /etc/passwd is not shown (docs/CONTRACTS.md, "What the readers follow")."""
        file = self.path / relative
        try:
            inside = os.path.realpath(file) == os.path.join(os.path.realpath(self.path), os.path.normpath(relative))
        except (OSError, ValueError):
            inside = False
        if not inside:
            self._warn(f"{Path(relative).as_posix()} is a symbolic link: not read (a run's files stay in its folder)")
            return None
        return file

    def _json(self, filename: str) -> dict[str, Any]:
        file = self._own(filename)
        if file is None:
            return {}
        if not file.exists():
            self._warn(f"{filename} is missing")
            return {}
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:
            self._warn(f"{filename} is unreadable ({exc.__class__.__name__})")
            return {}
        if not isinstance(data, dict):
            self._warn(f"{filename} is not a JSON object")
            return {}
        return data

    def _warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    def config(self) -> dict[str, Any]:
        """config.json, checked against the schema (`check_config`): a field of the wrong type is left out with
        a warning naming it."""
        cfg, problems = check_config(self._json("config.json"))
        for p in problems:
            self._warn(p)
        return cfg

    def reward_names(self) -> list[str]:
        return list(self.config().get("reward_names") or [])

    def status(self) -> dict[str, Any]:
        """status.json checked against the schema (`check_status`), with state 'crashed' when it says
        starting/running but the process that wrote it is gone (`pid_is_writer`: a recycled pid is gone too)."""
        st, problems = check_status(self._json("status.json"))
        for p in problems:
            self._warn(p)
        if not st:
            return {"state": "unknown", "step": self._last_metric_step(), "total_steps": None, "error": None}
        st.setdefault("state", "unknown")
        if st.get("state") in ACTIVE_STATES and not pid_is_writer(st):
            st = {**st, "state": "crashed", "recorded_state": st.get("state")}
            if not st.get("error"):
                st["error"] = crash_message(self.log_tail(400, max_bytes=65536), st.get("pid"))
        return st

    def is_active(self) -> bool:
        return self.status().get("state") in ACTIVE_STATES

    def log_tail(self, lines: int = 30, max_bytes: int = 16384) -> str:
        """The last `lines` lines of the run's train.log ("" when there is none, or it is a symbolic link)."""
        file = self._own("train.log")
        return read_tail(file, lines, max_bytes) if file is not None else ""

    def _last_metric_step(self) -> int:
        return self.last_step()

    def last_step(self) -> int:
        """The last completed step (0 when none): the largest valid `step` among the complete lines at the end of
        metrics.jsonl (read from its tail, so a long run costs no more than a short one)."""
        file = self._own("metrics.jsonl")
        if file is None:
            return 0
        steps = []
        for line in read_tail(file, lines=_TAIL_LINES, max_bytes=_TAIL_BYTES).splitlines():
            try:
                row = json.loads(line)
            except (ValueError, RecursionError):
                continue  # a torn last line, or the part of a line the byte limit cut (never a JSON object)
            step = valid_step(row.get("step")) if isinstance(row, dict) else None
            if step is not None:
                steps.append(step)
        try:
            small = not file.is_file() or file.stat().st_size <= _TAIL_BYTES
        except OSError:
            small = True
        if steps or small:
            return max(steps, default=0)
        df = self.metrics()  # lines longer than the tail: read them all
        return int(df["step"].max()) if len(df) else 0

    def metrics(self) -> pd.DataFrame:
        """One row per completed step, sorted by step (later duplicates of a step win); every line checked
        against the schema (`check_metrics_row`): a bad line is skipped, a bad value dropped, with a warning."""
        file = self._own("metrics.jsonl")
        empty = pd.DataFrame({"step": pd.Series(dtype="int64")})
        if file is None or not file.exists():
            return empty
        try:
            rows, problems = _read_jsonl(file)
        except OSError as exc:
            self._warn(f"metrics.jsonl is unreadable ({exc.__class__.__name__})")
            return empty
        for p in problems[:20]:
            self._warn(p)
        if len(problems) > 20:
            self._warn(f"metrics.jsonl: {len(problems) - 20} more bad lines")
        if not rows:
            return empty
        df = pd.DataFrame(rows)
        df["step"] = df["step"].astype("int64")
        return df.drop_duplicates("step", keep="last").sort_values("step").reset_index(drop=True)

    def credit_steps(self) -> list[int]:
        """Steps with a credit map whose metrics line is written: a step is complete only once its metrics line
        is (a kill between the two leaves a credit file of a step that does not exist yet)."""
        folder = self._own("credit")
        if folder is None:
            return []
        if not folder.is_dir():
            if folder.exists():
                self._warn("credit is not a folder")
            return []
        last = self.last_step()
        return sorted(s for f in folder.glob("step_*.parquet")
                      if (s := _step_of(f)) is not None and s <= last and not f.is_symlink())

    def credit_version(self, step: int) -> str:
        """The `mrtpo_schema_version` the step's credit file was written in ("" when it is missing or unreadable,
        with a warning)."""
        return self._credit_file(step)[1]

    def _credit_file(self, step: int) -> tuple[pq.ParquetFile | None, str]:
        """The step's open credit file and its schema version (None and "" when unreadable, with a warning)."""
        file = credit_path(self.path, step)
        if self._own(file.relative_to(self.path)) is None:
            return None, ""
        try:
            pf = pq.ParquetFile(file)
            meta = pf.metadata.metadata or {}  # the file's key-value metadata (both versions write it)
        except (OSError, pa.ArrowException, ValueError) as exc:
            self._warn(f"credit map of step {step} is unreadable ({exc.__class__.__name__})")
            return None, ""
        version = meta.get(SCHEMA_KEY, b"?").decode(errors="replace")
        if version not in {str(v) for v in READABLE_VERSIONS}:
            self._warn(f"credit map of step {step} has schema version {version}, expected one of "
                       f"{', '.join(map(str, READABLE_VERSIONS))}")
        return pf, version

    def _credit_v1(self, pf: pq.ParquetFile, step: int) -> pd.DataFrame | None:
        try:
            table = pf.read()
        except (OSError, pa.ArrowException, ValueError) as exc:
            self._warn(f"credit map of step {step} is unreadable ({exc.__class__.__name__})")
            return None
        frame, problems = check_credit(table, step)
        if frame is not None:
            frame, more = valid_positions(frame, f"credit map of step {step}")
            problems = [*problems, *more]
        for p in problems:
            self._warn(p)
        return frame

    def credit_tokens(self, step: int, samples: Iterable[int] | None = None,
                      rewards: Iterable[str] | None = None) -> pd.DataFrame:
        """The long credit map (CREDIT_SCHEMA's columns) of the samples and rewards asked (None: all) of `step`.
        A schema-2 or -3 file is read only in the row groups that hold those samples; a schema-1 file is read whole
        and filtered. An empty frame with the schema's columns when missing or unreadable (with a warning)."""
        empty = CREDIT_SCHEMA.empty_table().to_pandas()
        pf, version = self._credit_file(step)
        if pf is None:
            return empty
        samples = None if samples is None else [int(s) for s in samples]
        rewards = None if rewards is None else [str(r) for r in rewards]
        if version not in COLUMNAR_VERSIONS:
            frame = self._credit_v1(pf, step)
            if frame is None:
                return empty
            if samples is not None:
                frame = frame[frame["sample"].isin(samples)]
            if rewards is not None:
                frame = frame[frame["reward"].isin(rewards)]
            return frame.reset_index(drop=True)
        index = self._credit_index_of(pf, step)
        if index is None:
            return empty
        try:
            frame, problems = valid_positions(credit_format.read_long(pf, step, samples, rewards, index),
                                              f"credit map of step {step}")
            for p in problems:
                self._warn(p)
            return frame
        except (OSError, pa.ArrowException, ValueError, KeyError, TypeError, IndexError) as exc:
            self._warn(f"credit map of step {step} (credit/step_{int(step):06d}.parquet) is not of schema "
                       f"{version} ({exc.__class__.__name__}); skipped")
            return empty

    def _credit_index_of(self, pf: pq.ParquetFile, step: int) -> dict | None:
        """The footer index of a schema-2 or -3 file, checked (`credit_format.read_index`); None, with one warning
        naming the file, when it cannot be trusted (the step is then skipped by every reader)."""
        try:
            return credit_format.read_index(pf)
        except credit_format.BadIndex as exc:
            self._warn(f"credit map of step {step} (credit/step_{int(step):06d}.parquet) has an index that cannot be "
                       f"trusted ({str(exc)[:160]}); skipped")
            return None

    def credit(self, step: int) -> pd.DataFrame:
        """The whole credit map of `step` (`credit_tokens` of every sample and reward); an empty frame with the
        schema's columns when missing, unreadable or not of the schema (with a warning naming the file). Views
        that show one sample read `credit_index` and `credit_tokens` instead."""
        return self.credit_tokens(step)

    def credit_index(self, step: int) -> pd.DataFrame:
        """The step's index, one row per (sample, reward): sample, group, prompt_key, length (tokens), reward,
        score (NaN: does not apply), group_adv, applicable, distance_skipped, abs_credit_max, abs_token_adv_max
        (`credit_format.INDEX_COLUMNS`). Schemas 2 and 3: from the file's footer alone; schema 1: from the whole file."""
        columns = credit_format.INDEX_COLUMNS
        empty = pd.DataFrame({c: [] for c in columns})
        pf, version = self._credit_file(step)
        if pf is None:
            return empty
        if version in COLUMNAR_VERSIONS:
            index = self._credit_index_of(pf, step)
            return empty if index is None else credit_format.index_frame(index)
        frame = self._credit_v1(pf, step)
        if frame is None or frame.empty:
            return empty
        weight = frame["weight"].astype("float64").fillna(0.0)
        frame = frame.assign(abs_credit=frame["credit"].abs(), abs_adv=frame["token_adv"].abs(), w=weight,
                             w_in=weight * frame["in_span"].astype(bool), span=frame["in_span"].astype(int),
                             computed=frame["distance"].notna())
        g = frame.groupby(["sample", "reward"], sort=False, observed=True)
        out = g.agg(group=("group", "first"), prompt_key=("prompt_key", "first"), length=("t", "size"),
                    score=("score", "first"), group_adv=("group_adv", "first"),
                    distance_skipped=("distance_skipped", "first"), abs_credit_max=("abs_credit", "max"),
                    weight_sum=("w", "sum"), weight_in_span=("w_in", "sum"), span_tokens=("span", "sum"),
                    distance_computed=("computed", "any")).reset_index()
        out["applicable"] = out["score"].notna()
        out["abs_token_adv_max"] = out["sample"].map(frame.groupby("sample")["abs_adv"].max())
        out["reward"] = out["reward"].astype(str)
        return out.loc[:, columns]

    def credit_summary(self, step: int) -> pd.DataFrame:
        """The step's distances in and out of the verifiers' spans, per reward: one row per (reward, where) with
        n, mean, min, quartiles, max and box-plot fences (`credit_format.distance_summary`). Schemas 2 and 3: from the
        footer; schema 1: from the whole file."""
        pf, version = self._credit_file(step)
        if pf is None:
            return credit_format.summary_frame({})
        if version in COLUMNAR_VERSIONS:
            index = self._credit_index_of(pf, step)
            return credit_format.summary_frame({} if index is None else index["distance_summary"])
        frame = self._credit_v1(pf, step)
        if frame is None or frame.empty:
            return credit_format.summary_frame({})
        names = list(dict.fromkeys(frame["reward"].astype(str)))
        k = frame["reward"].astype(str).map({r: i for i, r in enumerate(names)}).to_numpy()
        return credit_format.summary_frame(credit_format.distance_summary(
            names, frame["distance"].to_numpy(np.float64), k, frame["in_span"].to_numpy(bool)))

    def checkpoints(self) -> list[Path]:
        folder = self.path / "checkpoints"
        if not folder.is_dir():
            return []
        return sorted((p for p in folder.iterdir() if p.is_dir() and _step_of(p) is not None), key=_step_of)

    def latest_checkpoint(self) -> tuple[int, Path] | None:
        """The newest complete checkpoint (one with trainer_state.json) as (step, folder), or None. Raises
        RunStoreError naming the file when a checkpoint's trainer_state.json is unreadable or has no valid step
        (resuming from it would fail; the message says how to resume from an older one)."""
        best = None
        for ckpt in self.checkpoints():
            state_file = ckpt / "trainer_state.json"
            if not state_file.exists():
                continue
            try:
                data = json.loads(state_file.read_text(encoding="utf-8"))
            except (OSError, ValueError, RecursionError) as exc:
                raise RunStoreError(f"{state_file} is unreadable ({exc.__class__.__name__}); delete the folder "
                                    f"{ckpt.name} to resume from an older checkpoint") from None
            step = valid_step(data.get("step")) if isinstance(data, dict) else None
            if step is None or step != _step_of(ckpt):
                raise RunStoreError(f"{state_file} has no valid step for {ckpt.name}; delete that folder to "
                                    "resume from an older checkpoint")
            if best is None or step > best[0]:
                best = (step, ckpt)
        return best


@dataclass
class RunInfo:
    """One line of the run list."""

    name: str
    path: Path
    source: str  # which runs directory it came from
    state: str
    step: int
    total_steps: int | None
    method: str | None
    model: str | None
    updated_at: str | None
    warnings: list[str]


def _run_info(child: Path, label: str) -> RunInfo:
    store = RunStore(child)
    st = store.status()
    cfg = store.config()
    return RunInfo(
        name=child.name,
        path=child,
        source=label,
        state=str(st.get("state") or "unknown"),
        step=store.last_step() or int(st.get("step") or 0),  # check_status made it an int or dropped it
        total_steps=st.get("total_steps") or cfg.get("steps"),
        method=cfg.get("method"),
        model=cfg.get("model"),
        updated_at=st.get("updated_at"),
        warnings=list(store.warnings),
    )


def list_runs(*dirs: str | os.PathLike, labels: Iterable[str] | None = None) -> list[RunInfo]:
    """Every run folder in the given runs directories (missing directories are skipped), newest first."""
    labels = list(labels) if labels is not None else [str(d) for d in dirs]
    out: list[RunInfo] = []
    for label, d in zip(labels, dirs, strict=False):
        root = Path(d)
        if not root.is_dir():
            continue
        try:
            children = sorted(root.iterdir())
        except OSError:
            continue
        for child in children:
            if child.is_symlink() or not child.is_dir() or not is_run_name(child.name):
                continue  # a run folder that links elsewhere is not listed (nothing is read out of the runs folder)
            if not (child / "config.json").exists() and not (child / "status.json").exists():
                continue  # not a run folder at all
            try:
                out.append(_run_info(child, label))
            except Exception as exc:  # noqa: BLE001 -- the contract: one bad folder never breaks the list
                out.append(RunInfo(child.name, child, label, "unknown", 0, None, None, None, None,
                                   [f"unreadable ({exc.__class__.__name__}: {str(exc)[:80]})"]))
    out.sort(key=lambda r: r.updated_at or "", reverse=True)
    return out
