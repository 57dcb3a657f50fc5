"""The credit map's file format, `mrtpo_schema_version` 2 (docs/CONTRACTS.md, "Credit map, schema 2").

One Parquet file per step. Its rows are (sample, reward, position), sorted in that order, and hold the
numbers of that cell (distance, weight, credit, in_span, and the pair's score, group advantage and
distance_skipped, which Parquet's run-length encoding stores once per run). What belongs to a (sample,
position) is stored once, on the row of the step's first reward (token id, text, offsets, total advantage:
null on the other rewards' rows), and what belongs to a sample once, on its first row (prompt key, prompt,
response). Row groups hold whole samples (about `ROW_GROUP_ROWS` rows each), and the file's metadata holds the
step's index (per sample: group, prompt key, length, row group; per (sample, reward): score, group advantage,
distance skipped), so a reader gets the index from the footer alone and one sample's rows from its row group.

`CreditStep` is a step's credit map as columns (numpy, text once per sample): what the record builds
(`core.run.record.credit_step`) and what the writer writes. `CreditStep.from_frame` / `.frame()` convert from and
to the long frame (one row per (sample, reward, token), every column on every row: schema 1's layout, with its
`js` / `js_skipped` named `distance` / `distance_skipped` as in schema 2), which the readers return for what they
read. Never imports torch, streamlit or plotly.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

VERSION = 2
INDEX_KEY = b"mrtpo_credit_index"
ROW_GROUP_ROWS = 65536  # rows per row group (whole samples; a sample longer than this is one row group)

# schema 2 columns and their Arrow types, in file order
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
SPLIT_FLOATS = ("distance", "weight", "credit", "token_adv")  # BYTE_STREAM_SPLIT: noisy floats compress better
# schema 1's names of the columns schema 2 renamed (a schema-1 file, or a long frame written before the rename,
# has these; the readers' frames use the new names)
V1_NAMES = {"js": "distance", "js_skipped": "distance_skipped"}


@dataclass
class CreditStep:
    """One step's credit map as columns: S stored samples, K rewards, T the longest stored response.

    Per sample (S,): its batch index `sample`, `group`, `prompt_key`, `prompt`, `response`, `length` (tokens).
    Per (sample, reward) (S, K): `score` (NaN: does not apply), `group_adv`, `distance_skipped`.
    Per (sample, position), concatenated over samples in order (sum of lengths,): `token_id`, `token`,
    `start`, `end`, `token_adv`. Per (sample, reward, position) (S, K, T), valid where t < length:
    `distance`, `weight`, `credit`, `in_span`.
    """

    step: int
    reward_names: list[str]
    sample: np.ndarray
    group: np.ndarray
    prompt_key: list[str]
    prompt: list[str]
    response: list[str]
    length: np.ndarray
    score: np.ndarray
    group_adv: np.ndarray
    distance_skipped: np.ndarray
    token_id: np.ndarray
    token: list[str]
    start: np.ndarray
    end: np.ndarray
    token_adv: np.ndarray
    distance: np.ndarray
    weight: np.ndarray
    credit: np.ndarray
    in_span: np.ndarray

    @property
    def n_cells(self) -> int:
        """(sample, reward, token) cells: the rows of the long frame."""
        return int(self.length.sum()) * len(self.reward_names)

    def _cells(self) -> np.ndarray:
        """(S, K, T) bool: the cells that hold a token (t < length)."""
        T = self.distance.shape[2] if self.distance.ndim == 3 else 0
        valid = np.arange(T)[None, :] < self.length[:, None]  # (S, T)
        return np.broadcast_to(valid[:, None, :], (len(self.length), len(self.reward_names), T))

    def frame(self) -> pd.DataFrame:
        """The long frame (one row per (sample, reward, token), text as categoricals; `store.CREDIT_SCHEMA`'s
        columns: schema 1's, with `js` / `js_skipped` named `distance` / `distance_skipped`)."""
        S, K = len(self.length), len(self.reward_names)
        cells = self._cells()
        shape = cells.shape
        si = np.broadcast_to(np.arange(S)[:, None, None], shape)[cells]  # (N,) position in this step's samples
        kk = np.broadcast_to(np.arange(K)[None, :, None], shape)[cells]
        tt = np.broadcast_to(np.arange(shape[2])[None, None, :], shape)[cells]
        first = np.concatenate([[0], np.cumsum(self.length)[:-1]]).astype(np.int64) if S else np.zeros(0, np.int64)
        tok = first[si] + tt  # (N,) index into the per-token arrays

        def cat(values: list[str], codes: np.ndarray) -> pd.Categorical:
            uniq, inverse = np.unique(np.asarray(values, dtype=object), return_inverse=True) if values else ([], [])
            return pd.Categorical.from_codes(np.asarray(inverse, dtype=np.int64)[codes], categories=list(uniq))

        tokens = pd.Categorical(np.asarray(self.token, dtype=object)) if self.token else pd.Categorical([])
        return pd.DataFrame({
            "step": np.full(len(si), self.step, dtype=np.int32),
            "sample": self.sample[si].astype(np.int32),
            "group": self.group[si].astype(np.int32),
            "prompt_key": cat(self.prompt_key, si),
            "prompt": cat(self.prompt, si),
            "response": cat(self.response, si),
            "reward": pd.Categorical.from_codes(kk, categories=list(self.reward_names)),
            "score": self.score[si, kk].astype(np.float32),
            "group_adv": self.group_adv[si, kk].astype(np.float32),
            "t": tt.astype(np.int32),
            "token_id": self.token_id[tok].astype(np.int32),
            "token": pd.Categorical.from_codes(tokens.codes[tok], categories=tokens.categories),
            "start": self.start[tok].astype(np.int32),
            "end": self.end[tok].astype(np.int32),
            "distance": self.distance[cells].astype(np.float32),
            "distance_skipped": self.distance_skipped[si, kk].astype(bool),
            "weight": self.weight[cells].astype(np.float32),
            "credit": self.credit[cells].astype(np.float32),
            "in_span": self.in_span[cells].astype(bool),
            "token_adv": self.token_adv[tok].astype(np.float32),
        })

    @classmethod
    def from_frame(cls, step: int, frame: pd.DataFrame, reward_names: list[str] | None = None) -> CreditStep:
        """A long frame (one row per (sample, reward, token); a sample has rows for every reward of the step, each
        with the same tokens; schema 1's `js` / `js_skipped` accepted for `distance` / `distance_skipped`) as
        columns."""
        f = frame.reset_index(drop=True).rename(columns=V1_NAMES)
        reward = f["reward"] if isinstance(f["reward"].dtype, pd.CategoricalDtype) else f["reward"].astype("category")
        present = [str(r) for r in reward.cat.categories[np.unique(reward.cat.codes.to_numpy())]]
        names = [str(r) for r in (reward_names or []) if str(r) in present]
        names += [r for r in present if r not in names]
        k_of = {r: k for k, r in enumerate(names)}
        code_to_k = np.array([k_of.get(str(c), -1) for c in reward.cat.categories], dtype=np.int64)
        samples = np.unique(f["sample"].to_numpy().astype(np.int64))
        s_of = np.searchsorted(samples, f["sample"].to_numpy().astype(np.int64))  # (N,)
        kk = code_to_k[reward.cat.codes.to_numpy()]
        tt = f["t"].to_numpy().astype(np.int64)
        S, K = len(samples), len(names)
        length = np.zeros(S, dtype=np.int64)
        np.maximum.at(length, s_of, tt + 1)
        T = int(length.max()) if S else 0
        firsts = np.unique(s_of, return_index=True)[1]  # first row of each sample
        pair = s_of * K + kk
        pair_first = np.unique(pair, return_index=True)
        score = np.full((S, K), np.nan, dtype=np.float32)
        group_adv = np.zeros((S, K), dtype=np.float32)
        skipped = np.zeros((S, K), dtype=bool)
        ps, pk = pair_first[0] // K, pair_first[0] % K
        score[ps, pk] = f["score"].to_numpy(np.float32)[pair_first[1]]
        group_adv[ps, pk] = f["group_adv"].to_numpy(np.float32)[pair_first[1]]
        if "distance_skipped" in f.columns:
            skipped[ps, pk] = f["distance_skipped"].to_numpy(bool)[pair_first[1]]
        cube = {name: np.full((S, K, T), fill, dtype=dtype) for name, fill, dtype in
                (("distance", np.nan, np.float32), ("weight", 1.0, np.float32), ("credit", 0.0, np.float32),
                 ("in_span", False, bool))}
        for name in cube:
            cube[name][s_of, kk, tt] = f[name].to_numpy(cube[name].dtype)
        # the per-token columns from one row per (sample, position)
        tok_rows = np.unique(s_of * max(T, 1) + tt, return_index=True)[1]  # sorted by (sample, t)
        complete = len(tok_rows) == int(length.sum())
        if not complete:
            raise ValueError("a sample's rewards hold different positions (a position is missing for some reward)")
        return cls(
            step=int(step), reward_names=names, sample=samples.astype(np.int32),
            group=f["group"].to_numpy(np.int32)[firsts], prompt_key=_texts(f["prompt_key"], firsts),
            prompt=_texts(f["prompt"], firsts), response=_texts(f["response"], firsts), length=length,
            score=score, group_adv=group_adv, distance_skipped=skipped,
            token_id=f["token_id"].to_numpy(np.int32)[tok_rows], token=_texts(f["token"], tok_rows), start=f["start"].to_numpy(np.int32)[tok_rows], end=f["end"].to_numpy(np.int32)[tok_rows],
            token_adv=f["token_adv"].to_numpy(np.float32)[tok_rows], **cube,
        )


def _texts(column: pd.Series, rows: np.ndarray) -> list[str]:
    """column[rows] as Python strings (only those rows converted)."""
    return [str(x) for x in column.iloc[rows].tolist()]


# --------------------------------------------------------------------------------------------- writing


def _null_take(values: pa.Array, index: np.ndarray, present: np.ndarray) -> pa.Array:
    """values[index] where `present`, null elsewhere."""
    return values.take(pa.array(index, type=pa.int64(), mask=~present))


def _index(cs: CreditStep, row_groups: np.ndarray) -> dict:
    def nums(a: np.ndarray) -> list:  # float32 values: 9 significant digits give them back exactly
        return [[float(f"{x:.9g}") if math.isfinite(x) else None for x in row] for row in a.tolist()]

    cells = cs._cells()
    with np.errstate(invalid="ignore"):
        credit_max = np.where(cells, np.abs(cs.credit), 0.0).max(axis=2, initial=0.0)  # (S, K)
    first = np.concatenate([[0], np.cumsum(cs.length)[:-1]]).astype(np.int64) if len(cs.length) else []
    adv = np.abs(np.nan_to_num(cs.token_adv.astype(np.float64)))
    adv_max = np.maximum.reduceat(adv, first) if len(adv) else np.zeros(len(cs.length))
    adv_max = np.where(cs.length > 0, adv_max, 0.0) if len(cs.length) else adv_max
    kk = np.broadcast_to(np.arange(len(cs.reward_names))[None, :, None], cells.shape)[cells]
    in_span = cells & cs.in_span.astype(bool)
    weight = np.where(cells, np.nan_to_num(cs.weight.astype(np.float64)), 0.0)
    return {"step": cs.step, "rewards": cs.reward_names, "sample": cs.sample.tolist(), "group": cs.group.tolist(),
            "weight_sum": nums(weight.sum(2)), "weight_in_span": nums(np.where(in_span, weight, 0.0).sum(2)),
            "span_tokens": in_span.sum(2).tolist(),
            "distance_computed": (cells & np.isfinite(cs.distance)).any(2).tolist(),
            "distance_summary": distance_summary(cs.reward_names, cs.distance[cells], kk, cs.in_span[cells]),
            "prompt_key": list(cs.prompt_key), "length": cs.length.tolist(), "row_group": row_groups.tolist(),
            "score": nums(cs.score.astype(float)), "group_adv": nums(cs.group_adv.astype(float)),
            "distance_skipped": cs.distance_skipped.astype(bool).tolist(),
            "abs_credit_max": nums(np.nan_to_num(credit_max.astype(float))), "abs_token_adv_max": nums(adv_max[None, :].astype(float))[0]}


SUMMARY_STATS = ("tokens", "n", "mean", "min", "q1", "median", "q3", "max", "lowerfence", "upperfence")


def distance_summary(names: list[str], distance: np.ndarray, reward: np.ndarray, in_span: np.ndarray) -> dict:
    """Per reward, per "in" / "out" of the verifier's spans (where it has tokens): `tokens` (all of them), and
    over their finite distances: n, mean, min, quartiles (numpy's linear interpolation), max and box-plot
    fences (the furthest values within 1.5 IQR of the quartiles); null (NaN) when n is 0. distance, reward
    (index into names), in_span: one value per (sample, reward, token) cell."""
    out: dict = {}
    ok = np.isfinite(distance)
    for k, name in enumerate(names):
        out[name] = {}
        for where, flag in (("in", True), ("out", False)):
            cells = (reward == k) & (in_span.astype(bool) == flag)
            if not cells.any():
                continue
            d = distance[cells & ok].astype(np.float64)
            stats = dict.fromkeys(SUMMARY_STATS[2:], None)
            if len(d):
                q1, med, q3 = (float(x) for x in np.percentile(d, [25, 50, 75]))
                iqr = q3 - q1
                stats = {"mean": float(d.mean()), "min": float(d.min()), "q1": q1, "median": med, "q3": q3,
                         "max": float(d.max()), "lowerfence": float(d[d >= q1 - 1.5 * iqr].min()),
                         "upperfence": float(d[d <= q3 + 1.5 * iqr].max())}
            stats = {k: None if v is None else float(f"{v:.9g}") for k, v in stats.items()}
            out[name][where] = {"tokens": int(cells.sum()), "n": int(len(d)), **stats}
    return out


def summary_frame(summary: dict) -> pd.DataFrame:
    """`distance_summary` as one row per (reward, where) with SUMMARY_STATS."""
    rows = [{"reward": r, "where": w, **stats} for r, parts in summary.items() for w, stats in parts.items()]
    frame = pd.DataFrame(rows, columns=["reward", "where", *SUMMARY_STATS])
    return frame.astype({c: "float64" for c in SUMMARY_STATS[2:]})


def table(cs: CreditStep) -> tuple[pa.Table, np.ndarray, dict]:
    """The step's schema-2 table, the first row of each row group, and the index for the file's metadata."""
    S, K = len(cs.length), len(cs.reward_names)
    cells = cs._cells()
    shape = cells.shape
    si = np.broadcast_to(np.arange(S, dtype=np.int64)[:, None, None], shape)[cells]
    kk = np.broadcast_to(np.arange(K, dtype=np.int32)[None, :, None], shape)[cells]
    tt = np.broadcast_to(np.arange(shape[2], dtype=np.int32)[None, None, :], shape)[cells]
    first = np.concatenate([[0], np.cumsum(cs.length)[:-1]]).astype(np.int64) if S else np.zeros(0, np.int64)
    tok = first[si] + tt
    on_token = kk == 0  # the first reward's rows carry the per-token columns
    on_sample = on_token & (tt == 0)
    # row groups: whole samples, about ROW_GROUP_ROWS rows each
    sample_rows = cs.length * K
    starts = np.concatenate([[0], np.cumsum(sample_rows)[:-1]]).astype(np.int64) if S else np.zeros(0, np.int64)
    group_of = starts // ROW_GROUP_ROWS  # (S,) samples starting in the same window share a row group
    _, first_sample = np.unique(group_of, return_index=True)
    row_group = np.searchsorted(first_sample, np.arange(S), side="right") - 1
    cols = {
        "sample": pa.array(cs.sample.astype(np.int32)[si]),
        "group": pa.array(cs.group.astype(np.int32)[si]),
        "reward": pa.DictionaryArray.from_arrays(pa.array(kk, pa.int32()), pa.array(cs.reward_names, pa.string())),
        "t": pa.array(tt),
        "distance": pa.array(cs.distance[cells].astype(np.float32)),
        "weight": pa.array(cs.weight[cells].astype(np.float32)),
        "credit": pa.array(cs.credit[cells].astype(np.float32)),
        "in_span": pa.array(cs.in_span[cells].astype(bool)),
        "score": pa.array(cs.score.astype(np.float32)[si, kk]),
        "group_adv": pa.array(cs.group_adv.astype(np.float32)[si, kk]),
        "distance_skipped": pa.array(cs.distance_skipped.astype(bool)[si, kk]),
    }
    for name, values in (("token_id", pa.array(cs.token_id.astype(np.int32))),
                         ("token", pa.array(list(cs.token), pa.string())),
                         ("start", pa.array(cs.start.astype(np.int32))), ("end", pa.array(cs.end.astype(np.int32))),
                         ("token_adv", pa.array(cs.token_adv.astype(np.float32)))):
        cols[name] = _null_take(values, tok, on_token)
    for name in SAMPLE_FIELDS:
        cols[name] = _null_take(pa.array(list(getattr(cs, name)), pa.string()), si, on_sample)
    index = _index(cs, row_group)
    tab = pa.table(cols, schema=SCHEMA)
    return tab, starts[first_sample] if S else np.zeros(0, np.int64), index


def write_bytes(cs: CreditStep, schema_key: bytes) -> bytes:
    """The step's schema-2 Parquet file (zstd; row groups of whole samples; the index in the metadata)."""
    tab, group_starts, index = table(cs)
    meta = {schema_key: str(VERSION).encode(), INDEX_KEY: json.dumps(index, separators=(",", ":")).encode()}
    sink = pa.BufferOutputStream()
    dictionary = [c for c in SCHEMA.names if c not in SPLIT_FLOATS and c != "t"]
    # The index goes into the file's key-value metadata only (store_schema=False: no Arrow schema, which would
    # carry it a second time, base64-encoded); `reward` reads back as plain strings.
    with pq.ParquetWriter(sink, tab.schema, compression="zstd", use_dictionary=dictionary, store_schema=False,
                          column_encoding={"t": "DELTA_BINARY_PACKED",
                                           **dict.fromkeys(SPLIT_FLOATS, "BYTE_STREAM_SPLIT")}) as out:
        bounds = [*group_starts.tolist(), tab.num_rows]
        if tab.num_rows == 0:
            out.write_table(tab)
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            out.write_table(tab.slice(a, b - a), row_group_size=max(b - a, 1))
        out.add_key_value_metadata(meta)
    return sink.getvalue().to_pybytes()


# --------------------------------------------------------------------------------------------- reading


def read_index(pf: pq.ParquetFile) -> dict:
    """The step's index from a schema-2 file's metadata (KeyError / ValueError when absent or not JSON)."""
    return json.loads((pf.metadata.metadata or {})[INDEX_KEY])  # the file's key-value metadata


INDEX_COLUMNS = ["sample", "group", "prompt_key", "length", "reward", "score", "group_adv", "applicable",
                 "distance_skipped", "abs_credit_max", "abs_token_adv_max", "weight_sum", "weight_in_span",
                 "span_tokens", "distance_computed"]


def index_frame(index: dict) -> pd.DataFrame:
    """The index as one row per (sample, reward): INDEX_COLUMNS (`abs_credit_max`: the largest |credit| of the
    pair's tokens; `abs_token_adv_max`: the sample's largest |total advantage|, for a step-wide colour scale;
    `weight_sum`, `weight_in_span`: the pair's routing weight in all and on its span tokens; `span_tokens`: tokens
    in the verifier's spans; `distance_computed`: some token has a finite distance)."""
    names = list(index["rewards"])
    S, K = len(index["sample"]), len(names)
    rep = np.repeat(np.arange(S), K)
    score = np.array(index["score"], dtype=np.float64).reshape(S, K) if S else np.zeros((0, K))
    adv = np.array(index["group_adv"], dtype=np.float64).reshape(S, K) if S else np.zeros((0, K))
    return pd.DataFrame({
        "sample": np.asarray(index["sample"], dtype=np.int32)[rep] if S else np.zeros(0, np.int32),
        "group": np.asarray(index["group"], dtype=np.int32)[rep] if S else np.zeros(0, np.int32),
        "prompt_key": np.asarray(index["prompt_key"], dtype=object)[rep] if S else np.zeros(0, object),
        "length": np.asarray(index["length"], dtype=np.int32)[rep] if S else np.zeros(0, np.int32),
        "reward": np.tile(np.asarray(names, dtype=object), S),
        "score": score.reshape(-1).astype(np.float32),
        "group_adv": np.nan_to_num(adv.reshape(-1)).astype(np.float32),
        "applicable": ~np.isnan(score.reshape(-1)),
        "distance_skipped": np.asarray(index["distance_skipped"], dtype=bool).reshape(-1) if S else np.zeros(0, bool),
        "abs_credit_max": np.array(index["abs_credit_max"], dtype=np.float64).reshape(-1) if S else np.zeros(0),
        "abs_token_adv_max": np.asarray(index["abs_token_adv_max"], dtype=np.float64)[rep] if S else np.zeros(0),
        "weight_sum": np.array(index["weight_sum"], dtype=np.float64).reshape(-1) if S else np.zeros(0),
        "weight_in_span": np.array(index["weight_in_span"], dtype=np.float64).reshape(-1) if S else np.zeros(0),
        "span_tokens": np.array(index["span_tokens"], dtype=np.int64).reshape(-1) if S else np.zeros(0, np.int64),
        "distance_computed": np.array(index["distance_computed"], dtype=bool).reshape(-1) if S else np.zeros(0, bool),
    })


def read_long(pf: pq.ParquetFile, step: int, samples=None, rewards=None) -> pd.DataFrame:
    """The long frame (`CreditStep.frame`'s columns) for the samples and rewards asked (all when None), reading only the row groups
    that hold those samples."""
    index = read_index(pf)
    names = list(index["rewards"])
    all_samples = np.asarray(index["sample"], dtype=np.int64)
    row_group = np.asarray(index["row_group"], dtype=np.int64)
    if samples is None:
        wanted = np.ones(len(all_samples), dtype=bool)
    else:
        wanted = np.isin(all_samples, np.asarray(list(samples), dtype=np.int64))
    groups = sorted(set(row_group[wanted].tolist()))
    tab = pf.read_row_groups(groups) if groups else SCHEMA.empty_table()
    if samples is not None:
        tab = tab.filter(pc.is_in(tab["sample"], pa.array(all_samples[wanted].astype(np.int32))))
    # per-token and per-sample columns from the first reward's rows, for every asked row
    sample_np = tab["sample"].to_numpy()
    t_np = tab["t"].to_numpy()
    reward_col = tab["reward"].cast(pa.string())  # the file's plain strings (no Arrow schema stored)
    k_np = pc.index_in(reward_col, value_set=pa.array(names, pa.string())).to_numpy(zero_copy_only=False)
    if len(k_np) and np.isnan(k_np.astype(np.float64)).any():
        raise ValueError("a row's reward is not in the index")
    k_np = k_np.astype(np.int64)
    carrier = np.flatnonzero(k_np == 0)
    width = int(max(index["length"], default=0)) + 1
    key = sample_np.astype(np.int64) * width + t_np
    pos = carrier[np.searchsorted(key[carrier], key)] if len(carrier) else np.zeros(0, np.int64)
    scarrier = carrier[t_np[carrier] == 0]
    spos = scarrier[np.searchsorted(sample_np[scarrier], sample_np)] if len(scarrier) else np.zeros(0, np.int64)
    keep = np.ones(len(k_np), dtype=bool)
    if rewards is not None:
        keep = np.isin(np.asarray(names, dtype=object)[k_np], list(rewards)) if len(k_np) else keep
    rows = np.flatnonzero(keep)
    out = {"step": np.full(len(rows), step, dtype=np.int32), "sample": sample_np[rows].astype(np.int32),
           "group": tab["group"].to_numpy()[rows].astype(np.int32)}
    sample_rank = np.searchsorted(scarrier, spos[rows])  # (rows,) which sample row carries the text
    for name in SAMPLE_FIELDS:  # categoricals over the samples' texts: each text is held once
        values = tab[name].combine_chunks().take(pa.array(scarrier)).to_numpy(zero_copy_only=False)
        uniq, inverse = np.unique(values.astype(object), return_inverse=True) if len(values) else ([], [])
        out[name] = pd.Categorical.from_codes(np.asarray(inverse, dtype=np.int64)[sample_rank], categories=list(uniq))
    out["reward"] = pd.Categorical.from_codes(k_np[rows], categories=names)
    for name in ("score", "group_adv"):
        out[name] = tab[name].to_numpy()[rows]
    out["t"] = t_np[rows].astype(np.int32)
    for name in TOKEN_FIELDS:
        col = tab[name].combine_chunks().take(pa.array(pos[rows]))
        if name == "token":
            enc = col.dictionary_encode()
            out[name] = pd.Categorical.from_codes(enc.indices.to_numpy(zero_copy_only=False).astype(np.int64),
                                                  categories=enc.dictionary.to_pylist())
        else:
            out[name] = col.to_numpy(zero_copy_only=False)
    for name in ("distance", "distance_skipped", "weight", "credit", "in_span"):
        out[name] = tab[name].to_numpy(zero_copy_only=False)[rows]
    order = ["step", "sample", "group", "prompt_key", "prompt", "response", "reward", "score", "group_adv", "t",
             "token_id", "token", "start", "end", "distance", "distance_skipped", "weight", "credit", "in_span",
             "token_adv"]
    return pd.DataFrame({c: out[c] for c in order})
