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
"""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from core.run.schema import (
    DELTA_INTS,
    INDEX_KEY,
    ROW_GROUP_ROWS,
    SAMPLE_FIELDS,
    SCHEMA,
    SCHEMA_VERSION,
    SPLIT_COLUMNS,
    TOKEN_FIELDS,
    V1_NAMES,
)


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


# --------------------------------------------------------------------------------------------- reading


ZSTD_INDEX = b"zstd:"  # schema 3's index: b"zstd:<JSON bytes>:<base64 of the zstd-compressed JSON>"


def pack_index(index: dict) -> bytes:
    """The index as the metadata value of schema 3: its JSON compressed with zstd, in base64 behind b"zstd:" and
    the JSON's length (a real step's JSON of 21 KB takes 5.5 KB; the metadata stays text)."""
    raw = json.dumps(index, separators=(",", ":")).encode()
    return ZSTD_INDEX + str(len(raw)).encode() + b":" + base64.b64encode(pa.compress(raw, codec="zstd", asbytes=True))


MAX_INDEX_BYTES = 64 * 2**20  # the most JSON a footer's index may declare (a real step's: 21 KB; 64 MiB is ~1M pairs)


class BadIndex(ValueError):
    """A step's footer index that cannot be trusted: not decodable, not of the index's shape, or a value out of
    range (the readers skip the step with one warning naming the file; docs/CONTRACTS.md, "Credit map, schema 3")."""


def unpack_index(value: bytes) -> dict:
    """`pack_index` undone; plain JSON (schema 2's index) read as it is. BadIndex when it is neither, when the
    declared JSON length is not a whole number of at most MAX_INDEX_BYTES (nothing larger is allocated), or when the
    JSON nests too deep to parse."""
    if value.startswith(ZSTD_INDEX):
        size, _, data = value[len(ZSTD_INDEX):].partition(b":")
        if not size.isdigit() or int(size) > MAX_INDEX_BYTES:
            raise BadIndex(f"the index declares {size[:20].decode(errors='replace')!r} bytes of JSON; "
                           f"at most {MAX_INDEX_BYTES} are read")
        try:
            value = pa.decompress(base64.b64decode(data, validate=True), decompressed_size=int(size), codec="zstd",
                                  asbytes=True)
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise BadIndex(f"the index does not decompress ({exc})") from None
    try:
        index = json.loads(value)
    except RecursionError:
        raise BadIndex("the index nests too deep to be an index") from None
    except ValueError as exc:  # not JSON, not UTF-8, or an integer of more than 4300 digits
        raise BadIndex(f"the index is not JSON ({exc})") from None
    return index


def _ints_in(values: list, lo: int, hi: int) -> bool:
    """Every value a whole number (not a bool) in [lo, hi)."""
    return not values or ({type(v) for v in values} == {int} and lo <= min(values) and max(values) < hi)


def _numbers(values: list) -> bool:
    """Every value null or a finite number (an int within float's range; a bool is not a number)."""
    types = {type(v) for v in values}
    if not types <= {int, float, type(None)}:
        return False
    ints = [v for v in values if type(v) is int] if int in types else []
    floats = [v for v in values if type(v) is float] if float in types else []
    return (not ints or -2**1000 < min(ints) and max(ints) < 2**1000) and all(map(math.isfinite, floats))


def _int_list(index: dict, name: str, n: int | None, lo: int, hi: int) -> list:
    values = index.get(name)
    if not isinstance(values, list) or (n is not None and len(values) != n):
        raise BadIndex(f"index field {name!r} is not a list of {n if n is not None else 'some'} values")
    if not _ints_in(values, lo, hi):
        raise BadIndex(f"index field {name!r} holds a value that is not a whole number in [{lo}, {hi})")
    return values


def _matrix(index: dict, name: str, S: int, K: int, kind: str) -> None:
    """index[name] is S rows of K values: "number" (finite int/float, or null), "int" (whole, 0 <= v < 2**31) or
    "bool"."""
    rows = index.get(name)
    if not isinstance(rows, list) or len(rows) != S or not all(type(r) is list and len(r) == K for r in rows):
        raise BadIndex(f"index field {name!r} is not {S} rows of {K} values")
    flat = [v for r in rows for v in r]
    if kind == "bool":
        ok = not flat or {type(v) for v in flat} == {bool}
    elif kind == "int":
        ok = _ints_in(flat, 0, 2**31)
    else:
        ok = _numbers(flat)
    if not ok:
        raise BadIndex(f"index field {name!r} holds a value that is not a {kind} in range")


def check_index(index, num_rows: int, num_row_groups: int) -> dict:
    """The index when it is of `_index`'s shape with values in range, else BadIndex naming the first field that is
    not: `rewards` K distinct strings; `sample`, `group`, `prompt_key`, `length`, `row_group`, `abs_token_adv_max`
    S values each (sample and group whole numbers in [0, 2**31) and [-2**31, 2**31), a length at most the file's
    `num_rows`, a row group below `num_row_groups`); the per-pair fields S rows of K; `distance_summary` reward ->
    "in" / "out" -> SUMMARY_STATS numbers (or null). So nothing a reader builds from it is larger than the file."""
    if not isinstance(index, dict):
        raise BadIndex("the index is not a JSON object")
    names = index.get("rewards")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
        raise BadIndex("index field 'rewards' is not a list of distinct names")
    S = len(_int_list(index, "sample", None, 0, 2**31))
    K = len(names)
    _int_list(index, "group", S, -2**31, 2**31)
    _int_list(index, "length", S, 0, num_rows + 1)
    _int_list(index, "row_group", S, 0, max(num_row_groups, 1))
    keys = index.get("prompt_key")
    if not isinstance(keys, list) or len(keys) != S or not all(isinstance(k, str) for k in keys):
        raise BadIndex(f"index field 'prompt_key' is not a list of {S} strings")
    adv = index.get("abs_token_adv_max")
    if not isinstance(adv, list) or len(adv) != S or not _numbers(adv):
        raise BadIndex(f"index field 'abs_token_adv_max' is not a list of {S} numbers")
    for name in ("score", "group_adv", "abs_credit_max", "weight_sum", "weight_in_span"):
        _matrix(index, name, S, K, "number")
    _matrix(index, "span_tokens", S, K, "int")
    _matrix(index, "distance_skipped", S, K, "bool")
    _matrix(index, "distance_computed", S, K, "bool")
    summary = index.get("distance_summary")
    if not isinstance(summary, dict) or not all(
            isinstance(parts, dict) and all(w in ("in", "out") and isinstance(st, dict) and set(st) <= set(SUMMARY_STATS)
                                            and _numbers(list(st.values())) for w, st in parts.items())
            for parts in summary.values()):
        raise BadIndex("index field 'distance_summary' is not reward -> in / out -> statistics")
    return index


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
