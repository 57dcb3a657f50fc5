"""Writing a credit map in schema 3 (`core.run.credit_format`): credit scales and token slices (what can be left
out and given back exactly), the step's distance summary, the Arrow table and the file's bytes."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from core.run.credit_index import pack_index
from core.run.credit_step import CreditStep
from core.run.schema import (
    DELTA_INTS,
    INDEX_KEY,
    ROW_GROUP_ROWS,
    SAMPLE_FIELDS,
    SCHEMA,
    SCHEMA_VERSION,
    SPLIT_COLUMNS,
    SUMMARY_STATS,
)


def credit_scales(weight: np.ndarray, credit: np.ndarray, cells: np.ndarray) -> np.ndarray | None:
    """Per (sample, reward) the scale c[i, k] with credit[i, k, t] == float32(weight[i, k, t] * c[i, k]) on every
    token t of the pair (NaN equal to NaN), or None when some pair has none (then `credit` is stored as it is).

    The trainers compute credit[i, k, t] = w[k, i, t] * c[i, k] with c[i, k] = w_k a[k, i] / (sigma + eps)
    (docs/METHOD.md, "Token advantages"; GRPO's and GDPO's weight is 1, so c is the credit itself). The scale is
    found from the data: c0 = credit / weight at the pair's largest |weight| (c itself or a float32 neighbour of
    it, since credit = weight x c rounded once), then c0 and its two neighbours are tried on all the pair's tokens.
    A pair whose weights are all 0 takes c = 0 when its credit is all 0. weight, credit: (S, K, T) float32;
    cells: (S, K, T) bool, the tokens (t < length)."""
    S, K = weight.shape[:2]
    if weight.size == 0:
        return np.zeros((S, K), dtype=np.float32)
    w = weight.astype(np.float32, copy=False)
    c = credit.astype(np.float32, copy=False)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        mag = np.where(cells & np.isfinite(w), np.abs(w), -1.0)
        at = mag.argmax(axis=2)[:, :, None]  # (S, K, 1) the largest |weight| of each pair
        w_at = np.take_along_axis(w, at, 2)[:, :, 0]
        c_at = np.take_along_axis(c, at, 2)[:, :, 0]
        c0 = np.where(w_at != 0, c_at / np.where(w_at != 0, w_at, 1), np.float32(0)).astype(np.float32)
        scale = np.full((S, K), np.nan, dtype=np.float32)
        found = np.zeros((S, K), dtype=bool)
        for cand in (c0, np.nextafter(c0, np.float32(np.inf)), np.nextafter(c0, np.float32(-np.inf))):
            prod = w * cand[:, :, None]
            same = (prod == c) | (np.isnan(prod) & np.isnan(c)) | ~cells
            ok = same.all(axis=2) & ~found
            scale[ok] = cand[ok]
            found |= ok
    return scale if found.all() else None


def tokens_are_slices(cs: CreditStep) -> bool:
    """True when every token's text is its sample's response[start:end]: the ranges of each sample run from 0 to
    len(response) without gaps or overlaps (start[0] = 0, start[t] = end[t-1], end[-1] = len(response)), each
    token is end - start characters long and the tokens joined are the response. Then the text is not stored
    (`core.run.batch.decode_responses` makes tokens so)."""
    S = len(cs.length)
    n = int(cs.length.sum())
    if n == 0:
        return True
    starts = cs.start.astype(np.int64)
    ends = cs.end.astype(np.int64)
    first = np.concatenate([[0], np.cumsum(cs.length)[:-1]]).astype(np.int64)
    nonempty = cs.length > 0
    lens = np.fromiter(map(len, cs.token), dtype=np.int64, count=n)
    if not np.array_equal(lens, ends - starts):
        return False
    follows = np.ones(n, dtype=bool)
    follows[1:] = starts[1:] == ends[:-1]
    follows[first[nonempty]] = starts[first[nonempty]] == 0
    if not follows.all():
        return False
    last = first + cs.length - 1
    resp_len = np.fromiter(map(len, cs.response), dtype=np.int64, count=S)
    if not np.array_equal(ends[last[nonempty]], resp_len[nonempty]) or (resp_len[~nonempty] != 0).any():
        return False
    return all("".join(cs.token[a:b]) == r for a, b, r in zip(first, first + cs.length, cs.response, strict=True))


def _slices(response: list[str], sample_of: np.ndarray, start: np.ndarray, end: np.ndarray) -> list[str]:
    """response[sample_of[j]][start[j]:end[j]] for every j: the token texts a file without `token` gives back."""
    return [response[s][a:b] for s, a, b in zip(sample_of.tolist(), start.tolist(), end.tolist(), strict=True)]



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


def _sparse(values: np.ndarray, present: np.ndarray, dtype) -> pa.Array:
    """An array of len(present) rows holding `values` in order on the rows where `present`, null elsewhere."""
    full = np.zeros(len(present), dtype=dtype)
    full[present] = values
    return pa.array(full, mask=~present)


def _sparse_text(values: list[str], present: np.ndarray) -> pa.Array:
    """`_sparse` for text: a string array built from its buffers (offsets advance on the present rows only)."""
    data = [v.encode() for v in values]
    sizes = np.zeros(len(present), dtype=np.int64)
    sizes[present] = [len(d) for d in data]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    if offsets[-1] >= 2**31:
        raise ValueError(f"{offsets[-1]} bytes of text in one step's column; at most 2 GiB")
    bitmap = np.packbits(present, bitorder="little")
    return pa.Array.from_buffers(pa.string(), len(present), [pa.py_buffer(bitmap.tobytes()),
                                 pa.py_buffer(offsets.astype(np.int32).tobytes()), pa.py_buffer(b"".join(data))],
                                 null_count=int(len(present) - present.sum()))


def table(cs: CreditStep) -> tuple[pa.Table, np.ndarray, dict]:
    """The step's schema-3 table (without `credit`, `token`, `start` where they can be given back exactly), the
    first row of each row group, and the index for the file's metadata. Rows in (sample, reward, t) order: the
    (S, K, T) arrays' cells t < length in C order, so every column is a reshape or a boolean take of its array,
    a pair's numbers are repeated over its `length` rows, and a token's numbers go to the first reward's rows."""
    S, K = len(cs.length), len(cs.reward_names)
    cells = cs._cells()
    L = cs.length.astype(np.int64)
    full = S == 0 or bool((L == cells.shape[2]).all())

    def flat(cube: np.ndarray, dtype) -> np.ndarray:  # the cells t < length, in (sample, reward, t) order
        cube = cube.astype(dtype, copy=False)
        return cube.reshape(-1) if full else cube[cells]

    pair_rows = np.repeat(L, K)  # (S * K,) rows of each pair
    n = int(pair_rows.sum())

    def per_pair(a: np.ndarray, dtype) -> np.ndarray:
        return np.repeat(a.astype(dtype, copy=False).reshape(-1), pair_rows)

    pair_first = np.concatenate([[0], np.cumsum(pair_rows)[:-1]]).astype(np.int64) if S else np.zeros(0, np.int64)
    tt = (np.arange(n, dtype=np.int64) - np.repeat(pair_first, pair_rows)).astype(np.int32)
    kk = per_pair(np.broadcast_to(np.arange(K, dtype=np.int32)[None, :], (S, K)), np.int32)
    on_token = kk == 0  # the first reward's rows carry the per-token columns, in token order
    starts = pair_first[::K] if K else np.zeros(S, np.int64)  # (S,) each sample's first row
    on_sample = np.zeros(n, dtype=bool)
    on_sample[starts[L > 0]] = True
    # row groups: whole samples, about ROW_GROUP_ROWS rows each
    group_of = starts // ROW_GROUP_ROWS  # (S,) samples starting in the same window share a row group
    _, first_sample = np.unique(group_of, return_index=True)
    row_group = np.searchsorted(first_sample, np.arange(S), side="right") - 1
    cols = {
        "sample": pa.array(np.repeat(cs.sample.astype(np.int32), L * K)),
        "group": pa.array(np.repeat(cs.group.astype(np.int32), L * K)),
        "reward": pa.DictionaryArray.from_arrays(pa.array(kk, pa.int32()), pa.array(cs.reward_names, pa.string())),
        "t": pa.array(tt),
        "distance": pa.array(flat(cs.distance, np.float32)),
        "weight": pa.array(flat(cs.weight, np.float32)),
        "credit": None,
        "in_span": pa.array(flat(cs.in_span, bool)),
        "score": pa.array(per_pair(cs.score, np.float32)),
        "group_adv": pa.array(per_pair(cs.group_adv, np.float32)),
        "credit_scale": None,
        "distance_skipped": pa.array(per_pair(cs.distance_skipped, bool)),
    }
    scale = credit_scales(cs.weight, cs.credit, cells)
    if scale is None:
        cols["credit"] = pa.array(flat(cs.credit, np.float32))
        del cols["credit_scale"]
    else:
        cols["credit_scale"] = pa.array(per_pair(scale, np.float32))
        del cols["credit"]
    cols["token_id"] = _sparse(cs.token_id, on_token, np.int32)
    if not tokens_are_slices(cs):  # else each token is response[start:end] with start the previous token's end
        cols["token"] = _sparse_text(list(cs.token), on_token)
        cols["start"] = _sparse(cs.start, on_token, np.int32)
    cols["end"] = _sparse(cs.end, on_token, np.int32)
    cols["token_adv"] = _sparse(cs.token_adv, on_token, np.float32)
    kept = L > 0
    for name in SAMPLE_FIELDS:
        cols[name] = _sparse_text([v for v, k in zip(getattr(cs, name), kept, strict=True) if k], on_sample)
    index = _index(cs, row_group)
    tab = pa.table(cols, schema=pa.schema([SCHEMA.field(name) for name in cols]))
    return tab, starts[first_sample] if S else np.zeros(0, np.int64), index


def write_bytes(cs: CreditStep, schema_key: bytes) -> bytes:
    """The step's schema-3 Parquet file (zstd; row groups of whole samples; the index in the metadata)."""
    tab, group_starts, index = table(cs)
    meta = {schema_key: str(SCHEMA_VERSION).encode(), INDEX_KEY: pack_index(index)}
    sink = pa.BufferOutputStream()
    dictionary = [c for c in tab.column_names if c not in SPLIT_COLUMNS + DELTA_INTS]
    encoding = {**{c: "DELTA_BINARY_PACKED" for c in DELTA_INTS if c in tab.column_names},
                **{c: "BYTE_STREAM_SPLIT" for c in SPLIT_COLUMNS if c in tab.column_names}}
    # The index goes into the file's key-value metadata only (store_schema=False: no Arrow schema, which would
    # carry it a second time, base64-encoded); `reward` reads back as plain strings.
    with pq.ParquetWriter(sink, tab.schema, compression="zstd", use_dictionary=dictionary, store_schema=False,
                          column_encoding=encoding) as out:
        bounds = [*group_starts.tolist(), tab.num_rows]
        if tab.num_rows == 0:
            out.write_table(tab)
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            out.write_table(tab.slice(a, b - a), row_group_size=max(b - a, 1))
        out.add_key_value_metadata(meta)
    return sink.getvalue().to_pybytes()
