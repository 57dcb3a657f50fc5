"""What the readers accept of a run's files: metrics lines, status.json and config.json fields, schema-1 credit
maps and token positions checked, each problem a warning (docs/CONTRACTS.md, "Run store")."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from core.run.metrics_file import MetricsReader
from core.run.schema import (
    ACTIVE_STATES,
    ADDED_COLUMNS,
    CREDIT_COLUMNS,
    CREDIT_SCHEMA,
    FINAL_STATES,
    READABLE_VERSIONS,
    STEP_MAX,
    V1_NAMES,
)
from core.run.store_files import (
    _with_added_columns,
)


def step_of(path: Path) -> int | None:
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
