"""`mrtpo upgrade RUN [RUN ...]`: a finished run's credit maps rewritten in the newest schema, in place.

    mrtpo upgrade runs/my-old-run
    mrtpo upgrade sample_data/runs/*

A run written before schema 3 (docs/CONTRACTS.md, "Credit map, schema 3") opens as it is, but a schema-1 credit map
is read whole for anything the app shows from it: the index of a step (one row per (sample, reward)) is computed from
every token, where a schema-3 file has it in its footer. The upgrade reads each older map with the run store's
reader, writes it with the run store's writer (`RunWriter.write_credit`, atomic per file), reads the new file back
and keeps it only when it gives back the same long frame, value for value (floats compared as float32 bits, NaN
equal to NaN); otherwise the old bytes are put back and the run is reported as not upgraded. config.json's
`schema_version` becomes the newest once every map is of it. Nothing else in the folder changes (metrics, status,
notes, checkpoints).

Every map in credit/ is upgraded, also one past the last metrics step (a step killed before its metrics line), and a
map already of the newest schema is read whole: one that does not read is reported (exit 2), not "already of it".
Refused before any map is rewritten: a folder without config.json or whose config.json is not a JSON object (empty,
say), a run that is being written (its writer lock is held or its status is active). A crash in the middle leaves
every map either old or new (each is replaced by one rename), and both open; running the command again finishes the
job. A run that had no `.writer.lock` has none afterwards, also when an upgrade of it was killed and run again (the
lock file it makes holds `LOCK_MARK`). Exit status 2 when a run was refused or a map could not be upgraded.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from tqdm import tqdm

from core.run.store import (
    ACTIVE_STATES,
    SCHEMA_VERSION,
    WRITER_LOCK,
    DiskFull,
    RunStore,
    RunWriter,
    atomic_write_bytes,
    atomic_write_json,
    credit_path,
    step_of,
    writer_lock_held,
)

LOCK_MARK = b"mrtpo upgrade\n"  # the content of a lock file this command made (a trainer's is empty)


@dataclass
class Upgraded:
    """What `upgrade_run` did to one run: maps rewritten, already new, failed (step: why); bytes before and after
    of the maps it rewrote."""

    rewritten: list[int]
    current: list[int]
    failed: dict[int, str]
    bytes_before: int = 0
    bytes_after: int = 0


def _distinct(column: pd.Series) -> tuple[pa.Array, np.ndarray]:
    """(the column's distinct values as Arrow strings, each row's index among them; -1 for a missing value), found
    without a per-row copy of the text: a long credit map repeats each sample's prompt and response on every one of
    its rows (a 96 x 1,024-token step of 5 rewards: 3 GB of response text as Python strings)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        values = pa.array(column.cat.categories.astype(str))
        return values.cast(pa.large_string()), column.cat.codes.to_numpy(np.int64)
    text = pa.array(column, from_pandas=True)  # Arrow-backed text: no copy (chunked when large)
    values = pc.drop_null(pc.unique(text))
    rows = pc.fill_null(pc.index_in(text, value_set=values), -1)
    return values.cast(pa.large_string()), rows.to_numpy().astype(np.int64)


def _same_text(x: pd.Series, y: pd.Series) -> bool:
    """Whether two text (or categorical) columns hold the same string on every row, missing where the other is."""
    values_x, rows_x = _distinct(x)
    values_y, rows_y = _distinct(y)
    in_y = pc.fill_null(pc.index_in(values_x, value_set=values_y), -2).to_numpy().astype(np.int64)
    in_y = np.append(in_y, -1)  # row index -1 (missing) reads the last entry: missing
    return bool((in_y[rows_x] == rows_y).all())


def frame_difference(a: pd.DataFrame, b: pd.DataFrame) -> str:
    """The first column in which two long credit maps differ ("" when equal): same columns in the same order, same
    rows; floats equal as float32 with NaN equal to NaN; categorical and text columns equal as strings (compared
    through their distinct values, `_same_text`)."""
    if list(a.columns) != list(b.columns):
        return f"columns {list(a.columns)} != {list(b.columns)}"
    if len(a) != len(b):
        return f"{len(a)} rows != {len(b)}"
    for col in a.columns:
        x, y = a[col], b[col]
        if x.dtype.kind == "f" or y.dtype.kind == "f":
            same = np.array_equal(x.to_numpy(np.float32), y.to_numpy(np.float32), equal_nan=True)
        elif x.dtype.kind in "biu" and y.dtype.kind in "biu":
            same = np.array_equal(x.to_numpy(), y.to_numpy())
        else:
            same = _same_text(x, y)
        if not same:
            return col
    return ""


def _config(path: Path) -> tuple[dict | None, str]:
    """(config.json as a JSON object, "") or (None, why it is not one)."""
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        why = "empty" if isinstance(exc, ValueError) and not (path / "config.json").read_bytes().strip() else (
            f"{exc.__class__.__name__}: {str(exc)[:80]}")
        return None, why
    return (config, "") if isinstance(config, dict) else (None, "not a JSON object")


def refusal(path: Path) -> str:
    """Why `path` cannot be upgraded now ("" when it can): no run folder, a config.json that is not a JSON object
    (its `schema_version` could not be recorded: said before any map is rewritten), or a run being written."""
    if not (path / "config.json").is_file():
        return f"{path} is not a run folder (no config.json)"
    if (why := _config(path)[1]):
        return f"{path / 'config.json'} is unreadable ({why}); nothing was rewritten"
    state = RunStore(path).status().get("state")
    if state in ACTIVE_STATES or writer_lock_held(path):
        return f"{path} is being written (state {state!r}); upgrade it once it has finished or been stopped"
    return ""


def upgrade_run(path: str | Path, progress: bool = False) -> Upgraded:
    """Rewrite every credit map of run `path` that is not of schema `SCHEMA_VERSION` (module docstring).
    ValueError when the run is refused (`refusal`)."""
    path = Path(path)
    why = refusal(path)
    if why:
        raise ValueError(why)
    store = RunStore(path)
    # every map in credit/, also one past the last metrics step (a step killed before its metrics line): the
    # config's schema_version says what every file is
    steps = sorted(s for f in (path / "credit").glob("step_*.parquet")
                   if (s := step_of(f)) is not None and not f.is_symlink()) if (path / "credit").is_dir() else []
    out = Upgraded(rewritten=[], current=[], failed={})
    lock_file = path / WRITER_LOCK
    # A run without a lock file (a shipped run) gets one marked as this command's, removed at the end; one a killed
    # upgrade left behind still holds the mark, so the next upgrade removes it too.
    ours = not lock_file.exists() or lock_file.read_bytes() == LOCK_MARK
    if not lock_file.exists():
        atomic_write_bytes(lock_file, LOCK_MARK)
    writer = RunWriter.open(path)  # the writer lock: no trainer can resume the run while its files change
    try:
        for step in tqdm(steps, desc=path.name, unit="map", disable=not progress, file=sys.stderr):
            file = credit_path(path, step)
            store.warnings.clear()
            version = store.credit_version(step)
            if not version:
                out.failed[step] = f"unreadable ({'; '.join(store.warnings)}); left as it is"
                continue
            if version == str(SCHEMA_VERSION):
                store.credit(step)  # read whole: a map of the newest schema that does not read is no upgraded map
                if store.warnings:
                    out.failed[step] = f"unreadable ({'; '.join(store.warnings)}); left as it is"
                else:
                    out.current.append(step)
                continue
            old_bytes = file.read_bytes()
            store.warnings.clear()
            frame = store.credit(step)
            if store.warnings:
                out.failed[step] = "; ".join(store.warnings)
                continue
            try:
                writer.write_credit(step, frame)
            except DiskFull as exc:  # the old file is untouched (atomic write); the next maps would not fit either
                out.failed[step] = f"{exc}; the old file is kept, the maps after it not tried"
                break
            back = RunStore(path)
            difference = frame_difference(frame, back.credit(step)) or "; ".join(back.warnings)
            if difference:
                atomic_write_bytes(file, old_bytes)
                out.failed[step] = f"the new file reads back differently ({difference}); the old one is kept"
                continue
            out.rewritten.append(step)
            out.bytes_before += len(old_bytes)
            out.bytes_after += file.stat().st_size
        if not out.failed:
            config, why = _config(path)
            if config is None:
                raise ValueError(f"{path / 'config.json'} became unreadable ({why}) during the upgrade")
            if config.get("schema_version") != SCHEMA_VERSION:
                atomic_write_json(path / "config.json", {**config, "schema_version": SCHEMA_VERSION})
    finally:
        writer.close()
        if ours:  # the folder as it was: a shipped run has no lock file
            lock_file.unlink(missing_ok=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="mrtpo upgrade", description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="finished run folders")
    args = p.parse_args(argv)
    status = 0
    for run in args.runs:
        try:
            done = upgrade_run(run, progress=sys.stderr.isatty())
        except ValueError as e:
            print(f"mrtpo upgrade: {e}", file=sys.stderr)
            status = 2
            continue
        line = f"{run}: {len(done.rewritten)} credit maps rewritten in schema {SCHEMA_VERSION}"
        if done.rewritten:
            line += f" ({done.bytes_before / 2**20:.1f} -> {done.bytes_after / 2**20:.1f} MiB)"
        if done.current:
            line += f", {len(done.current)} already of it"
        print(line)
        for step, why in done.failed.items():
            print(f"mrtpo upgrade: {run}: step {step}: {why}", file=sys.stderr)
            status = 2
    return status


if __name__ == "__main__":
    raise SystemExit(main())
