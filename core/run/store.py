"""The run store: the one contract between the trainer (writer) and the app (reader).

One folder per run (docs/CONTRACTS.md, "Run store"): `config.json`, an atomically replaced
`status.json`, append-only `metrics.jsonl`, one Parquet credit map per step under `credit/`, and
`save_pretrained` checkpoints under `checkpoints/`. Every write is crash-safe: a file is either
the old version or the new one (tmp file + fsync + os.replace), and a metrics line is appended
only after the step's credit file is in place, so a `kill -9` leaves every completed step readable.

This module is the store's one import path; the code lives by role: `core.run.schema` (the schema version and
columns), `store_files` (atomic writes, a full disk, paths, notes), `store_checks` (what the readers accept),
`store_read` (RunStore, list_runs), `store_lock` (one writer per run) and `store_write` (RunWriter).

Never imports torch, streamlit or plotly: the app reads runs through this module.
"""

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
from core.run.store_checks import (
    CONFIG_FIELDS,
    STATUS_FIELDS,
    check_config,
    check_credit,
    check_metrics_row,
    check_status,
    step_of,  # noqa: F401  (core/tools/upgrade_run.py)
    valid_positions,
    valid_step,
)
from core.run.store_files import (
    FILE_MODE,
    NOTES_FILE,
    DiskFull,
    RunStoreError,
    atomic_write_bytes,
    atomic_write_json,
    credit_path,
    disk_full,
    free_bytes,
    is_disk_full,
    json_line,
    now_iso,
    read_notes,
    run_dir,
    write_notes,
)
from core.run.store_lock import acquire_writer_lock, release_writer_lock, writer_lock_held
from core.run.store_read import RunInfo, RunStore, list_runs
from core.run.store_write import LAUNCH_ID_ENV, RunWriter

__all__ = [
    "ACTIVE_STATES", "ADDED_COLUMNS", "COLUMNAR_VERSIONS", "CONFIG_FIELDS", "CREDIT_COLUMNS", "CREDIT_SCHEMA",
    "FILE_MODE", "FINAL_STATES", "LAUNCH_ID_ENV", "NOTES_FILE", "READABLE_VERSIONS", "SCHEMA_KEY", "SCHEMA_VERSION",
    "STATUS_FIELDS", "STEP_MAX", "V1_NAMES", "WRITER_LOCK", "DiskFull", "RunInfo", "RunStore", "RunStoreError",
    "RunWriter", "acquire_writer_lock", "atomic_write_bytes", "atomic_write_json", "check_config", "check_credit",
    "check_metrics_row", "check_status", "credit_path", "disk_full", "free_bytes", "is_disk_full", "json_line",
    "list_runs", "now_iso", "read_notes", "release_writer_lock", "run_dir", "valid_positions", "valid_step",
    "write_notes", "writer_lock_held",
]  # fmt: skip
