"""Reading a run: `RunStore` (a read-only view of one run folder that never raises on a corrupt one; problems
land in `warnings`) and `list_runs` (the app's run list)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from core.run import credit_format
from core.run.liveness import pid_is_writer
from core.run.names import is_run_name
from core.run.schema import (
    ACTIVE_STATES,
    COLUMNAR_VERSIONS,
    CREDIT_SCHEMA,
    READABLE_VERSIONS,
    SCHEMA_KEY,
)
from core.run.store_checks import (
    _read_jsonl,
    check_config,
    check_credit,
    check_status,
    step_of,
    valid_positions,
    valid_step,
)
from core.run.store_files import (
    RunStoreError,
    credit_path,
)
from core.run.train_log import crash_message, read_tail

_TAIL_LINES, _TAIL_BYTES = 8, 65536  # how much of metrics.jsonl `RunStore.last_step` reads


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
                      if (s := step_of(f)) is not None and s <= last and not f.is_symlink())

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
        return sorted((p for p in folder.iterdir() if p.is_dir() and step_of(p) is not None), key=step_of)

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
            if step is None or step != step_of(ckpt):
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
