"""Reading a credit file of schema 2 or 3: its index (from the footer alone), the index as a frame, and the long
frame of the samples and rewards asked for (from their row groups)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from core.run.credit_index import BadIndex, check_index, unpack_index
from core.run.credit_write import _slices
from core.run.schema import (
    INDEX_KEY,
    SAMPLE_FIELDS,
    SCHEMA,
    TOKEN_FIELDS,
)


def _at(tab: pa.Table, name: str, rows: np.ndarray) -> np.ndarray:
    """tab[name][rows] as numpy (rows where the column is not null: its integers stay integers)."""
    return tab[name].combine_chunks().take(pa.array(rows, type=pa.int64())).to_numpy(zero_copy_only=False)


def _empty(pf: pq.ParquetFile) -> pa.Table:
    """No rows, with the file's columns."""
    return pa.schema([SCHEMA.field(name) for name in pf.schema_arrow.names]).empty_table()


def read_index(pf: pq.ParquetFile) -> dict:
    """The step's index from a schema-2 or -3 file's metadata, checked (`check_index`); BadIndex when it is absent,
    not decodable or not to be trusted."""
    value = (pf.metadata.metadata or {}).get(INDEX_KEY)  # the file's key-value metadata
    if value is None:
        raise BadIndex("the file has no index")
    return check_index(unpack_index(value), pf.metadata.num_rows, pf.metadata.num_row_groups)


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


def read_long(pf: pq.ParquetFile, step: int, samples=None, rewards=None, index: dict | None = None) -> pd.DataFrame:
    """The long frame (`CreditStep.frame`'s columns) for the samples and rewards asked (all when None), reading only the row groups
    that hold those samples. `index`: the file's `read_index`, when the caller has read it."""
    index = read_index(pf) if index is None else index
    names = list(index["rewards"])
    all_samples = np.asarray(index["sample"], dtype=np.int64)
    row_group = np.asarray(index["row_group"], dtype=np.int64)
    if samples is None:
        wanted = np.ones(len(all_samples), dtype=bool)
    else:
        wanted = np.isin(all_samples, np.asarray(list(samples), dtype=np.int64))
    groups = sorted(set(row_group[wanted].tolist()))
    tab = pf.read_row_groups(groups) if groups else _empty(pf)
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
    texts = {}
    for name in SAMPLE_FIELDS:  # categoricals over the samples' texts: each text is held once
        values = tab[name].combine_chunks().take(pa.array(scarrier)).to_numpy(zero_copy_only=False)
        texts[name] = values
        uniq, inverse = np.unique(values.astype(object), return_inverse=True) if len(values) else ([], [])
        out[name] = pd.Categorical.from_codes(np.asarray(inverse, dtype=np.int64)[sample_rank], categories=list(uniq))
    out["reward"] = pd.Categorical.from_codes(k_np[rows], categories=names)
    for name in ("score", "group_adv"):
        out[name] = tab[name].to_numpy()[rows]
    out["t"] = t_np[rows].astype(np.int32)
    tok_rows = np.flatnonzero(k_np == 0)  # the carrier rows, one per (sample, position) read, in (sample, t) order
    if "start" not in tab.column_names:  # schema 3 with contiguous ranges: a token starts where the one before ended
        ends = _at(tab, "end", tok_rows)
        starts = np.zeros(len(tok_rows), dtype=np.int32)
        starts[1:] = ends[:-1]
        starts[t_np[tok_rows] == 0] = 0
        full = np.zeros(len(k_np), dtype=np.int32)
        full[tok_rows] = starts
        tab = tab.append_column("start", pa.array(full))
    for name in TOKEN_FIELDS:
        if name == "token":
            continue
        out[name] = tab[name].combine_chunks().take(pa.array(pos[rows])).to_numpy(zero_copy_only=False)
    if "token" in tab.column_names:
        enc = tab["token"].combine_chunks().take(pa.array(pos[rows])).dictionary_encode()
        out["token"] = pd.Categorical.from_codes(enc.indices.to_numpy(zero_copy_only=False).astype(np.int64),
                                                 categories=enc.dictionary.to_pylist())
    else:  # schema 3 without `token`: each token's text is its response[start:end], sliced once per token
        owner = np.searchsorted(scarrier, spos[tok_rows])
        sliced = _slices(list(texts["response"]), owner, _at(tab, "start", tok_rows), _at(tab, "end", tok_rows))
        codes, uniq = pd.factorize(pd.Series(sliced, dtype=object)) if sliced else (np.zeros(0, np.int64), [])
        at = np.searchsorted(tok_rows, pos[rows])
        out["token"] = pd.Categorical.from_codes(np.asarray(codes, dtype=np.int64)[at], categories=list(uniq))
    for name in ("distance", "distance_skipped", "weight", "in_span"):
        out[name] = tab[name].to_numpy(zero_copy_only=False)[rows]
    if "credit" in tab.column_names:
        out["credit"] = tab["credit"].to_numpy(zero_copy_only=False)[rows]
    else:  # schema 3 without `credit`: credit = weight x the pair's scale, in float32 as the trainer computed it
        out["credit"] = (out["weight"].astype(np.float32) * tab["credit_scale"].to_numpy(zero_copy_only=False)[rows]
                         .astype(np.float32))
    order = ["step", "sample", "group", "prompt_key", "prompt", "response", "reward", "score", "group_adv", "t",
             "token_id", "token", "start", "end", "distance", "distance_skipped", "weight", "credit", "in_span",
             "token_adv"]
    return pd.DataFrame({c: out[c] for c in order})
