"""The run store's schema, stated once: the schema version (config.json's `schema_version`, the credit files'
`mrtpo_schema_version`), the versions the readers read, the long credit map's columns (what every reader returns)
and the credit file's columns and encodings (`core.run.credit_format`). docs/CONTRACTS.md, "Run store".
Imports nothing of the project.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

# The run store's schema version, the one number: config.json's schema_version, and the mrtpo_schema_version
# (SCHEMA_KEY) the credit files are written with. A new version of the credit file format changes it here.
SCHEMA_VERSION = 3
# 1: the long credit map (CREDIT_SCHEMA), read as it is; 2 and 3: `core.run.credit_format` (3 leaves out `credit` and
# `token` where they can be given back exactly)
READABLE_VERSIONS = (1, 2, 3)
SCHEMA_KEY = b"mrtpo_schema_version"
ACTIVE_STATES = ("starting", "running")
FINAL_STATES = ("completed", "failed", "stopped")

# The long credit map the readers return for every version (schema 1's file layout, its `js` / `js_skipped` named
# `distance` / `distance_skipped` as in schema 2: `V1_NAMES`): columns and their Arrow types, in order
# (see docs/CONTRACTS.md).
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
        ("distance", pa.float32()),
        ("distance_skipped", pa.bool_()),
        ("weight", pa.float32()),
        ("credit", pa.float32()),
        ("in_span", pa.bool_()),
        ("token_adv", pa.float32()),
    ],
    metadata={SCHEMA_KEY: b"1"},
)
CREDIT_COLUMNS = tuple(CREDIT_SCHEMA.names)
# Columns added after schema_version 1 was first written, with the value they take in files (or frames
# handed to the writer) that lack them: an older run store opens as if it had written them.
ADDED_COLUMNS: dict[str, Any] = {"distance_skipped": False}


WRITER_LOCK = ".writer.lock"  # the run's writer holds an exclusive flock on this file for the run's life
STEP_MAX = 2**31 - 1  # steps are int32 in the credit maps

# ----------------------------------------------------------------------------------- the credit file (schema 3)

COLUMNAR_VERSIONS = ("2", "3")  # the versions this module reads (schema 2: `credit` and `token` always stored)
INDEX_KEY = b"mrtpo_credit_index"
ROW_GROUP_ROWS = 65536  # rows per row group (whole samples; a sample longer than this is one row group)

# schema 3's columns and their Arrow types, in file order (`credit`, `token`, `start`: only in a file that needs them;
# `credit_scale`: only in a file without `credit`; schema 2 has `credit` and `token`, no `credit_scale`)
SCHEMA = pa.schema([
    ("sample", pa.int32()),
    ("group", pa.int32()),
    ("reward", pa.dictionary(pa.int32(), pa.string())),
    ("t", pa.int32()),
    ("distance", pa.float32()),  # relevance distance d (JS or log-prob), NaN where not computed
    ("weight", pa.float32()),
    ("credit", pa.float32()),
    ("in_span", pa.bool_()),
    ("score", pa.float32()),
    ("group_adv", pa.float32()),
    ("credit_scale", pa.float32()),  # c[i, k]: credit = weight x c (float32), where `credit` is not stored
    ("distance_skipped", pa.bool_()),
    ("token_id", pa.int32()),  # this and the next four: on the first reward's rows only
    ("token", pa.string()),
    ("start", pa.int32()),
    ("end", pa.int32()),
    ("token_adv", pa.float32()),
    ("prompt_key", pa.string()),  # this and the next two: on the sample's first row only
    ("prompt", pa.string()),
    ("response", pa.string()),
])
TOKEN_FIELDS = ("token_id", "token", "start", "end", "token_adv")
SAMPLE_FIELDS = ("prompt_key", "prompt", "response")
# BYTE_STREAM_SPLIT: noisy floats compress better, and so do token ids (2.0 B an id of 50k uniform, 2.5 plain)
SPLIT_COLUMNS = ("distance", "weight", "credit", "token_adv", "token_id")
DELTA_INTS = ("t", "start", "end")  # DELTA_BINARY_PACKED: positions that climb by small steps
# schema 1's names of the columns schema 2 renamed (a schema-1 file, or a long frame written before the rename,
# has these; the readers' frames use the new names)
V1_NAMES = {"js": "distance", "js_skipped": "distance_skipped"}
# the statistics of a step's distance summary (the index's `distance_summary`: reward -> in / out -> these)
SUMMARY_STATS = ("tokens", "n", "mean", "min", "q1", "median", "q3", "max", "lowerfence", "upperfence")
