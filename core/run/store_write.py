"""Writing a run: `RunWriter` (the trainer's side of the run store: config, status, credit maps, metrics lines,
checkpoints; every write crash-safe, under the run's writer lock)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from core.run import credit_format
from core.run.credit_format import CreditStep
from core.run.liveness import pid_start_time
from core.run.schema import (
    ADDED_COLUMNS,
    CREDIT_COLUMNS,
    FINAL_STATES,
    SCHEMA_KEY,
    SCHEMA_VERSION,
    V1_NAMES,
)
from core.run.store_checks import (
    _read_jsonl,
    step_of,
)
from core.run.store_files import (
    RunStoreError,
    atomic_write_bytes,
    atomic_write_json,
    credit_path,
    disk_full,
    is_disk_full,
    json_line,
    now_iso,
    run_dir,
)
from core.run.store_lock import acquire_writer_lock, release_writer_lock
from core.run.store_read import RunStore

# Set by the app for a trainer it starts (mrtpo_viz/launcher): the run folder's creator records it in status.json,
# so the app links its staging log only into the run its own trainer created (docs/CONTRACTS.md, status.json).
LAUNCH_ID_ENV = "MRTPO_LAUNCH_ID"


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
            if step_of(f) is not None and step_of(f) > step:
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
