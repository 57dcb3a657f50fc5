"""`CreditStep`: one step's credit map as columns (numpy, text once per sample), what the record builds
(`core.run.record.credit_step`) and the writer writes; `from_frame` / `frame()` convert from and to the long frame
(one row per (sample, reward, token): schema 1's layout)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.run.schema import (
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
