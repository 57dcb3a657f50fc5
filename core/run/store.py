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

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from core.run.names import RUN_NAME_RULE, is_run_name

SCHEMA_VERSION = 1
SCHEMA_KEY = b"mrtpo_schema_version"
ACTIVE_STATES = ("starting", "running")
FINAL_STATES = ("completed", "failed", "stopped")

# Credit map columns and their Arrow types, in file order (see docs/CONTRACTS.md).
CREDIT_SCHEMA = pa.schema(
    [
        ("step", pa.int32()),
        ("sample", pa.int32()),
        ("group", pa.int32()),
        ("prompt_key", pa.string()),
        ("prompt", pa.string()),
        ("response", pa.string()),
        ("reward", pa.string()),
        ("score", pa.float32()),
        ("group_adv", pa.float32()),
        ("t", pa.int32()),
        ("token_id", pa.int32()),
        ("token", pa.string()),
        ("start", pa.int32()),
        ("end", pa.int32()),
        ("js", pa.float32()),
        ("js_skipped", pa.bool_()),
        ("weight", pa.float32()),
        ("credit", pa.float32()),
        ("in_span", pa.bool_()),
        ("token_adv", pa.float32()),
    ],
    metadata={SCHEMA_KEY: str(SCHEMA_VERSION).encode()},
)
CREDIT_COLUMNS = tuple(CREDIT_SCHEMA.names)
# Columns added after schema_version 1 was first written, with the value they take in files (or frames
# handed to the writer) that lack them: an older run store opens as if it had written them.
ADDED_COLUMNS: dict[str, Any] = {"js_skipped": False}


class RunStoreError(ValueError):
    """A run name, folder or file that the store refuses (the message says why)."""


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


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see either the old or the new file, never a torn one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
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


def atomic_write_json(path: Path, obj: Any) -> None:
    text = json.dumps(_clean_json(obj), indent=2, sort_keys=False, default=_json_default)
    atomic_write_bytes(path, (text + "\n").encode())


def credit_path(path: Path, step: int) -> Path:
    return Path(path) / "credit" / f"step_{int(step):06d}.parquet"


def read_tail(path: str | os.PathLike, lines: int = 30, max_bytes: int = 16384) -> str:
    """The last `lines` lines of a text file as a terminal shows them, reading at most its last `max_bytes`
    ("" when unreadable): a progress bar that redraws its line with carriage returns counts once, as drawn last."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - max_bytes))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    shown = [line.rstrip("\r").rsplit("\r", 1)[-1] for line in text.split("\n")]
    while shown and not shown[-1]:
        shown.pop()
    return "\n".join(shown[-lines:])


TRACEBACK_HEAD = "Traceback (most recent call last):"
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt)\b")  # "RuntimeError: ...", "KeyboardInterrupt"


def error_from_log(text: str) -> str:
    """What a trainer's log says went wrong: its last Python traceback (from its head line to the exception
    line), else its last line that names an error (`mrtpo train: error: ...`, `RuntimeError: ...`); "" when it
    says neither (a process killed by a signal, e.g. the out-of-memory killer, leaves no such line).

    >>> error_from_log("step 1/5\\nTraceback (most recent call last):\\n  File x\\nRuntimeError: boom\\nbye")
    'Traceback (most recent call last):\\n  File x\\nRuntimeError: boom'
    """
    lines = text.split("\n")
    heads = [i for i, line in enumerate(lines) if line.startswith(TRACEBACK_HEAD)]
    if heads:
        block = lines[heads[-1]:]
        end = next((j for j in range(1, len(block)) if block[j] and not block[j][0].isspace()), len(block) - 1)
        return "\n".join(block[: end + 1]).rstrip()
    named = [line for line in lines if re.search(r"\berror\b", line, re.IGNORECASE) or _EXCEPTION_LINE.match(line)]
    return named[-1].strip() if named else ""


# The trainer prints "phase: <what it is doing>" lines while it starts (importing torch, loading the model), so
# that a viewer of its log can say what the ~20 s before the first step are spent on.
PHASE_PREFIX = "phase: "


def phase_line(text: str) -> str:
    """The log line that announces a startup phase."""
    return PHASE_PREFIX + text


def last_phase(log: str) -> str:
    """The startup phase a trainer's log announced last ("" when none)."""
    for line in reversed(log.split("\n")):
        if line.startswith(PHASE_PREFIX):
            return line[len(PHASE_PREFIX):].strip()
    return ""


def crash_message(log: str, pid: Any = None) -> str:
    """The error to show for a trainer that died without a final status: the error in its log, else what is
    known (no traceback: it was killed)."""
    found = error_from_log(log)
    if found:
        return found
    who = f"the trainer (pid {pid})" if pid else "the trainer"
    return (f"{who} ended without a final status and without an error in its log: it was killed "
            "(kill -9, or the out-of-memory killer)")


def pid_alive(pid: Any) -> bool:
    """True when a process with this pid exists (a zombie counts as dead)."""
    try:
        pid = int(pid)
    except (TypeError, ValueError):
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped) is not a running trainer
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _with_added_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with every column of `ADDED_COLUMNS` it lacks, at its default value, in schema order."""
    missing = [c for c in ADDED_COLUMNS if c not in frame.columns]
    if not missing:
        return frame
    frame = frame.assign(**{c: ADDED_COLUMNS[c] for c in missing})
    return frame[[c for c in CREDIT_COLUMNS if c in frame.columns] + [c for c in frame.columns
                                                                    if c not in CREDIT_COLUMNS]]


# --------------------------------------------------------------------------------------------- writer


class RunWriter:
    """Writes one run folder. Only the trainer process uses it."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._status: dict[str, Any] = {}
        status_file = self.path / "status.json"
        if status_file.exists():
            try:
                self._status = json.loads(status_file.read_text())
            except (OSError, ValueError):
                self._status = {}

    @classmethod
    def create(cls, runs_dir: str | os.PathLike, name: str, config: dict[str, Any], *, exist_ok: bool = False) -> RunWriter:
        """Create `<runs_dir>/<name>/` with its config and a `starting` status."""
        path = run_dir(runs_dir, name)
        if path.exists() and not exist_ok:
            raise RunStoreError(f"run {name!r} already exists in {path.parent}; pick another run name")
        path.mkdir(parents=True, exist_ok=True)
        (path / "credit").mkdir(exist_ok=True)
        (path / "checkpoints").mkdir(exist_ok=True)
        writer = cls(path)
        atomic_write_json(path / "config.json", {**config, "schema_version": SCHEMA_VERSION})
        writer.set_status(
            state="starting", pid=os.getpid(), step=0, total_steps=config.get("steps"), error=None, started_at=now_iso()
        )
        return writer

    @classmethod
    def reopen(cls, path: str | os.PathLike, config: dict[str, Any], step: int) -> RunWriter:
        """Continue the run in `path` after `step` (its newest checkpoint): record `config` (resuming may
        change a few fields), drop the metrics and credit maps of later steps and half-written checkpoints."""
        writer = cls(path)
        atomic_write_json(writer.path / "config.json", {**config, "schema_version": SCHEMA_VERSION})
        writer.truncate_after(step)
        for leftover in (writer.path / "checkpoints").glob(".*.tmp"):
            shutil.rmtree(leftover, ignore_errors=True)
        return writer

    def set_status(self, **fields: Any) -> dict[str, Any]:
        """Merge `fields` into status.json and replace it atomically."""
        self._status.update(fields)
        self._status["updated_at"] = now_iso()
        atomic_write_json(self.path / "status.json", self._status)
        return dict(self._status)

    def write_credit(self, step: int, frame: pd.DataFrame) -> Path:
        """Write the step's credit map (columns per CREDIT_SCHEMA) atomically; returns its path."""
        missing = [c for c in CREDIT_COLUMNS if c not in frame.columns and c not in ADDED_COLUMNS]
        if missing:
            raise RunStoreError(f"credit map for step {step} lacks columns {missing}")
        frame = _with_added_columns(frame)
        table = pa.Table.from_pandas(frame.loc[:, list(CREDIT_COLUMNS)], schema=CREDIT_SCHEMA, preserve_index=False)
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd")
        out = credit_path(self.path, step)
        atomic_write_bytes(out, sink.getvalue().to_pybytes())
        return out

    def append_metrics(self, row: dict[str, Any]) -> None:
        """Append one step's metrics as a JSON line (flushed and fsynced: the step is then complete)."""
        if "step" not in row:
            raise RunStoreError("a metrics row needs its 'step'")
        line = json.dumps(_clean_json(row), default=_json_default)
        with open(self.path / "metrics.jsonl", "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def truncate_after(self, step: int) -> None:
        """Drop metrics lines and credit files of steps after `step` (used when resuming from a checkpoint)."""
        metrics = self.path / "metrics.jsonl"
        if metrics.exists():
            kept = [row for row in _read_jsonl(metrics)[0] if int(row.get("step", 0)) <= step]
            atomic_write_bytes(metrics, "".join(json.dumps(r) + "\n" for r in kept).encode())
        for f in (self.path / "credit").glob("step_*.parquet"):
            if _step_of(f) is not None and _step_of(f) > step:
                f.unlink(missing_ok=True)

    def checkpoint_dir(self, step: int) -> Path:
        return self.path / "checkpoints" / f"step_{int(step):06d}"

    def remove(self) -> None:
        """Delete the whole run folder (only for a run that never started a step)."""
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


def _read_jsonl(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        lines = fh.read().split("\n")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            # The last line may be torn by a kill mid-write; anything else is corruption worth reporting.
            if n < len(lines) - 1 or line != lines[-1]:
                problems.append(f"metrics.jsonl line {n} is not JSON; skipped")
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows, problems


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

    def _json(self, filename: str) -> dict[str, Any]:
        file = self.path / filename
        if not file.exists():
            self._warn(f"{filename} is missing")
            return {}
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
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
        cfg = self._json("config.json")
        version = cfg.get("schema_version")
        if cfg and version not in (None, SCHEMA_VERSION):
            self._warn(f"schema_version {version} differs from this reader's {SCHEMA_VERSION}")
        return cfg

    def reward_names(self) -> list[str]:
        names = self.config().get("reward_names")
        return [str(n) for n in names] if isinstance(names, list) else []

    def status(self) -> dict[str, Any]:
        """status.json, with state 'crashed' when it says starting/running but its process is gone."""
        st = self._json("status.json")
        if not st:
            return {"state": "unknown", "step": self._last_metric_step(), "total_steps": None, "error": None}
        if st.get("state") in ACTIVE_STATES and not pid_alive(st.get("pid")):
            st = {**st, "state": "crashed", "recorded_state": st.get("state")}
            if not st.get("error"):
                st["error"] = crash_message(self.log_tail(400, max_bytes=65536), st.get("pid"))
        return st

    def is_active(self) -> bool:
        return self.status().get("state") in ACTIVE_STATES

    def log_tail(self, lines: int = 30, max_bytes: int = 16384) -> str:
        """The last `lines` lines of the run's train.log ("" when there is none)."""
        return read_tail(self.path / "train.log", lines, max_bytes)

    def _last_metric_step(self) -> int:
        return self.last_step()

    def last_step(self) -> int:
        """The last completed step (0 when none): the largest `step` among the complete lines at the end of
        metrics.jsonl (read from its tail, so a long run costs no more than a short one)."""
        file = self.path / "metrics.jsonl"
        steps = []
        for line in read_tail(file, lines=_TAIL_LINES, max_bytes=_TAIL_BYTES).splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue  # a torn last line, or the part of a line the byte limit cut (never a JSON object)
            if isinstance(row, dict) and isinstance(row.get("step"), (int, float)):
                steps.append(int(row["step"]))
        if steps or not file.exists() or file.stat().st_size <= _TAIL_BYTES:
            return max(steps, default=0)
        df = self.metrics()  # lines longer than the tail: read them all
        return int(df["step"].max()) if len(df) else 0

    def metrics(self) -> pd.DataFrame:
        """One row per completed step, sorted by step (later duplicates of a step win)."""
        file = self.path / "metrics.jsonl"
        if not file.exists():
            return pd.DataFrame({"step": pd.Series(dtype="int64")})
        try:
            rows, problems = _read_jsonl(file)
        except OSError as exc:
            self._warn(f"metrics.jsonl is unreadable ({exc})")
            return pd.DataFrame({"step": pd.Series(dtype="int64")})
        for p in problems:
            self._warn(p)
        rows = [r for r in rows if isinstance(r.get("step"), (int, float))]
        if not rows:
            return pd.DataFrame({"step": pd.Series(dtype="int64")})
        df = pd.DataFrame(rows)
        df["step"] = df["step"].astype("int64")
        return df.drop_duplicates("step", keep="last").sort_values("step").reset_index(drop=True)

    def credit_steps(self) -> list[int]:
        folder = self.path / "credit"
        if not folder.is_dir():
            return []
        return sorted(s for f in folder.glob("step_*.parquet") if (s := _step_of(f)) is not None)

    def credit(self, step: int) -> pd.DataFrame:
        """The credit map of `step` (empty frame with the schema's columns when missing or unreadable)."""
        file = credit_path(self.path, step)
        try:
            table = pq.read_table(file)
        except (OSError, pa.ArrowException) as exc:
            self._warn(f"credit map of step {step} is unreadable ({exc.__class__.__name__})")
            return CREDIT_SCHEMA.empty_table().to_pandas()
        meta = table.schema.metadata or {}
        version = meta.get(SCHEMA_KEY, b"?").decode()
        if version != str(SCHEMA_VERSION):
            self._warn(f"credit map of step {step} has schema version {version}, expected {SCHEMA_VERSION}")
        return _with_added_columns(table.to_pandas())

    def checkpoints(self) -> list[Path]:
        folder = self.path / "checkpoints"
        if not folder.is_dir():
            return []
        return sorted((p for p in folder.iterdir() if p.is_dir() and _step_of(p) is not None), key=_step_of)


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


def list_runs(*dirs: str | os.PathLike, labels: Iterable[str] | None = None) -> list[RunInfo]:
    """Every run folder in the given runs directories (missing directories are skipped), newest first."""
    labels = list(labels) if labels is not None else [str(d) for d in dirs]
    out: list[RunInfo] = []
    for label, d in zip(labels, dirs, strict=False):
        root = Path(d)
        if not root.is_dir():
            continue
        for child in sorted(root.iterdir()):
            if not child.is_dir() or not is_run_name(child.name):
                continue
            store = RunStore(child)
            st = store.status()
            cfg = store.config()
            if not (child / "config.json").exists() and not (child / "status.json").exists():
                continue  # not a run folder at all
            step = store.last_step() or int(st.get("step") or 0)
            out.append(
                RunInfo(
                    name=child.name,
                    path=child,
                    source=label,
                    state=str(st.get("state", "unknown")),
                    step=step,
                    total_steps=st.get("total_steps") or cfg.get("steps"),
                    method=cfg.get("method"),
                    model=cfg.get("model"),
                    updated_at=st.get("updated_at"),
                    warnings=list(store.warnings),
                )
            )
    out.sort(key=lambda r: r.updated_at or "", reverse=True)
    return out
