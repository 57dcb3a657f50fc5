"""The credit map's file format, `mrtpo_schema_version` 3 (docs/CONTRACTS.md, "Credit map, schema 3"); schema 2's
files are read by the same code.

One Parquet file per step. Its rows are (sample, reward, position), sorted in that order, and hold the
numbers of that cell (distance, weight, in_span, and the pair's score, group advantage, credit scale and
distance_skipped, which Parquet's run-length encoding stores once per run). What belongs to a (sample,
position) is stored once, on the row of the step's first reward (token id, offsets, total advantage: null on
the other rewards' rows), and what belongs to a sample once, on its first row (prompt key, prompt, response).
Two columns of schema 2 are left out when they can be given back exactly: `credit`, when every (sample, reward)
has a scale c with credit = weight x c on all its tokens in float32 (`credit_scales`; the trainers compute it so),
and `token` and `start`, when every token's text is response[start:end] and starts where the one before it ended
(`tokens_are_slices`); a file that needs them has them, and the readers fill them in either way. Row groups hold whole samples (about `ROW_GROUP_ROWS` rows each), and the file's metadata holds the
step's index (per sample: group, prompt key, length, row group; per (sample, reward): score, group advantage,
distance skipped), so a reader gets the index from the footer alone and one sample's rows from its row group.

`CreditStep` is a step's credit map as columns (numpy, text once per sample): what the record builds
(`core.run.record.credit_step`) and what the writer writes. `CreditStep.from_frame` / `.frame()` convert from and
to the long frame (one row per (sample, reward, token), every column on every row: schema 1's layout, with its
`js` / `js_skipped` named `distance` / `distance_skipped` as in schema 2), which the readers return for what they
read. Never imports torch, streamlit or plotly.

This module is the format's one import path; the code lives by topic: `core.run.schema` (version, columns,
encodings), `credit_step` (CreditStep), `credit_write` (scales, slices, summary, table, bytes), `credit_index` (the
footer's index: pack, unpack, check) and `credit_read` (index, index frame, long frame).
"""

from core.run.credit_index import MAX_INDEX_BYTES, ZSTD_INDEX, BadIndex, check_index, pack_index, unpack_index
from core.run.credit_read import INDEX_COLUMNS, index_frame, read_index, read_long
from core.run.credit_step import CreditStep
from core.run.credit_write import (
    credit_scales,
    distance_summary,
    summary_frame,
    table,
    tokens_are_slices,
    write_bytes,
)
from core.run.schema import (
    COLUMNAR_VERSIONS,
    DELTA_INTS,
    INDEX_KEY,
    ROW_GROUP_ROWS,
    SAMPLE_FIELDS,
    SCHEMA,
    SPLIT_COLUMNS,
    SUMMARY_STATS,
    TOKEN_FIELDS,
    V1_NAMES,
)

__all__ = [
    "COLUMNAR_VERSIONS", "DELTA_INTS", "INDEX_COLUMNS", "INDEX_KEY", "MAX_INDEX_BYTES", "ROW_GROUP_ROWS",
    "SAMPLE_FIELDS", "SCHEMA", "SPLIT_COLUMNS", "SUMMARY_STATS", "TOKEN_FIELDS", "V1_NAMES", "ZSTD_INDEX", "BadIndex",
    "CreditStep", "check_index", "credit_scales", "distance_summary", "index_frame", "pack_index", "read_index",
    "read_long", "summary_frame", "table", "tokens_are_slices", "unpack_index", "write_bytes",
]  # fmt: skip
