"""Which reward a sample view opens on, and why a reward's credit on a sample is zero (Token credit, JS divergence).

A view that opens on a reward whose credit on the shown sample is 0 draws a blank heatmap, so the views open on a
reward that acted on the sample: one the sample failed first (the credit pushes its tokens down), then one it
satisfied, then the rest. A reward's credit is `credit[i,k,t] = w[k,i,t] c[i,k]` with `c[i,k] = w_k a[k,i] /
(sigma + eps)` (docs/METHOD.md, "MRTPO"), so it is 0 on every token when the group advantage a[k,i] is 0 (the
whole group scored the same on reward k) or the routing weights w[k,i,:] are 0.

Pure pandas on a step's credit index (one row per (sample, reward), `loaders.credit_index`). No Streamlit; never
imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd


def _rows(index: pd.DataFrame, sample: int) -> dict[str, dict]:
    """reward -> its (sample, reward) row of `index` for one sample."""
    per = index[index["sample"] == sample].drop_duplicates("reward")
    return {str(r["reward"]): r for r in per.to_dict("records")}


def stated(row: dict) -> bool:
    """The sample's prompt states the reward: its score is a number (NaN where the prompt does not state it)."""
    return math.isfinite(float(row.get("score", math.nan)))


def acted(row: dict) -> bool:
    """The reward's credit moved some token of the sample: a stated reward with a nonzero largest |credit|."""
    top = float(row.get("abs_credit_max", 0.0) or 0.0)
    return stated(row) and math.isfinite(top) and top > 0


def opening_order(index: pd.DataFrame, sample: int, rewards: Sequence[str]) -> list[str]:
    """The rewards the sample's prompt states, in the order a view opens on them: those that acted on the sample
    and that it failed (score < 1), then those that acted and it satisfied, then those whose credit is zero;
    `rewards` order within each group.

    >>> idx = pd.DataFrame({"sample": [0, 0, 0, 0], "reward": ["a", "b", "c", "d"],
    ...                     "score": [1.0, 1.0, 0.0, float("nan")], "abs_credit_max": [0.0, 0.5, 0.3, 0.0]})
    >>> opening_order(idx, 0, ["a", "b", "c", "d"])
    ['c', 'b', 'a']
    """
    rows = _rows(index, sample)
    own = [r for r in rewards if r in rows and stated(rows[r])]

    def rank(r: str) -> int:
        row = rows[r]
        if not acted(row):
            return 2
        return 0 if float(row["score"]) < 1 else 1

    return sorted(own, key=rank)  # sorted() is stable: `rewards` order within a rank


def zero_credit_reason(index: pd.DataFrame, sample: int, reward: str, show=str) -> str | None:
    """Why `reward`'s credit is 0 on every token of `sample` (a sentence, with the reward's name written by
    `show`: the pages pass `ui.plain`), or None when it is not zero."""
    return _zero_reason(_rows(index, sample).get(reward), show(reward))


def _zero_reason(row: dict | None, name: str) -> str | None:
    """`zero_credit_reason` of one (sample, reward) row of the credit index (None: the step has no such row)."""
    if row is None:
        return f"this step has no credit rows for {name}"
    if not stated(row):
        return f"this sample's prompt does not state {name}, so it has no credit"
    if acted(row):
        return None
    score, adv = float(row["score"]), float(row.get("group_adv", math.nan))
    if adv == 0:
        verdict = "satisfied" if score >= 1 else "violated"
        return (f"its group advantage is 0: every response of this sample's group scored the same on {name} "
                f"(this one: {verdict}), so no token gets credit (credit = w × a / σ)")
    if float(row.get("weight_sum", math.nan) or 0.0) == 0:
        return f"its routing weights are 0 on every token (group advantage {adv:+.3f}; credit = w × a / σ)"
    return f"its credit is 0 on every token (group advantage {adv:+.3f})"


def zero_credit_notes(index: pd.DataFrame, sample: int, rewards: Sequence[str], show=str) -> dict[str, str]:
    """reward -> why its credit is zero, for the stated rewards of `sample` whose credit is zero."""
    rows = _rows(index, sample)
    why = {r: _zero_reason(rows[r], show(r)) for r in rewards if r in rows and stated(rows[r])}
    return {r: w for r, w in why.items() if w}
