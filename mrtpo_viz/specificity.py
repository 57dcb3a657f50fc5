"""One sample's reward specificity and a relevance variant recomputed from a step's stored JS, for the
Token credit and JS pages.

Torch-free twins (NumPy, same shapes and NaN rules) of the trainer's formulas, tested equal to them on random
inputs (tests/test_specificity_app.py); the formulas are in docs/METHOD.md ("Relevance variants", "Routing
weights", "Specificity"):

- `routing_weights`, `specific_relevance`: twins of `core.algos.routing`;
- `token_shares`, `pairwise_overlap`, `mass_control`, `roc_auc`: twins of `core.algos.span_metrics`;
- `sample_overlap`, `sample_metrics`: those metrics for one response of a credit Parquet (rows of one sample);
- `computable_variants`, `recompute_variant`: which relevance variants a step's stored d allows, and the
  step's weights / credit / total advantage under one of them.

Shapes as in the trainer: B samples, K rewards, T tokens. Never imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from core.choices import DEFAULT_RELEVANCE, routes_by_replay

TINY32 = float(np.finfo(np.float32).tiny)

# relevance variant -> (contrast, distance, specific): mirrors core.algos.routing.RELEVANCE (a test checks it).
VARIANTS: dict[str, tuple[str, str, bool]] = {
    "js": ("remove", "js", False),
    "js_specific": ("remove", "js", True),
    "swap": ("swap", "js", False),
    "swap_specific": ("swap", "js", True),
    "logp": ("remove", "logp", False),
    "logp_specific": ("remove", "logp", True),
    "auto": ("auto", "js", False),
    "neutral": ("neutral", "js", False),
    "opposite": ("opposite", "js", False),
    "key": ("key", "js", False),
    # merged variants: d is already their passes merged (contrasts joined by "+"), recomputable only as themselves
    "placebo": ("remove+placebo", "js", False),
    "average": ("remove+swap+neutral+opposite+key", "js", False),
    "gradxinput": ("remove", "gradxinput", False),
}
CONTRAST_TEXT = {"remove": "the prompt without the constraint", "swap": "the prompt with the constraint's argument swapped",
                 "auto": "the prompt each family's evidence names (swap, removal, ...)",
                 "neutral": "the prompt with the constraint replaced by a neutral text of its length",
                 "opposite": "the prompt with the opposite constraint",
                 "key": "the prompt without the constraint's key words",
                 "remove+placebo": "the prompts without the constraint and with a neutral sentence added (placebo)",
                 "remove+swap+neutral+opposite+key": "five contrastive prompts (average)"}
DISTANCE_TEXT = {"js": "the JS distance of the full next-token distributions",
                 "logp": "the sampled token's log-prob change",
                 "gradxinput": "the gradient x input of the constraint's tokens"}

# Rewards whose span definition makes a metric meaningless for one outcome (docs/METHOD.md, "Specificity").
WHOLE_TEXT_SPAN = ("change_case:english_lowercase", "change_case:english_capital")
EOS_DECISION = ("startend:end_checker",)


# ----------------------------------------------------------------------------- twins of the trainer's formulas


def routing_weights(d: np.ndarray, mask: np.ndarray, lam: float = 1.0, w_max: float = 5.0,
                    sharpen: float = 1.0, clip: str = "clip") -> np.ndarray:
    """Twin of `core.algos.routing.routing_weights`: u = T_i d'/sum_t d' (d' = d ** sharpen, NaN -> 0, clamped at
    0), uniform 1 where sum_t d' = 0; v = (1 - lam) + lam u; w = clip(v, 0, w_max) * mask (`clip="clip"`) or
    `mass_keeping_clip`(v) (`clip="mass"`). d (B, K, T), mask (B, T)."""
    m = np.asarray(mask, dtype=np.float32)[:, None, :]
    d = np.clip(np.nan_to_num(np.asarray(d, dtype=np.float32), nan=0.0), 0.0, None) * m
    if sharpen != 1.0:
        d = d ** np.float32(sharpen)
    n_tokens = m.sum(-1, keepdims=True)
    total = d.sum(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        u = np.where(total > 0, n_tokens * d / np.maximum(total, TINY32), np.float32(1.0))
    v = (1.0 - lam) + lam * u
    if clip == "mass":
        return mass_keeping_clip((v * m).astype(np.float32), mask, w_max)
    w = np.clip(v, 0.0, w_max)
    return (w * m).astype(np.float32)


def mass_keeping_clip(v: np.ndarray, mask: np.ndarray, w_max: float = 5.0) -> np.ndarray:
    """Twin of `core.algos.routing.mass_keeping_clip`: w = min(w_max, c v) with c >= 1 chosen so sum_t w = T_i
    (clip, hand the excess to the unclipped tokens in proportion, repeat); when the tokens with v > 0 cannot hold
    T_i at w_max, the rest is spread evenly over the tokens with v = 0. v (B, K, T) with mean 1, mask (B, T)."""
    m = np.broadcast_to(np.asarray(mask, dtype=np.float32)[:, None, :], v.shape)
    v = np.asarray(v, dtype=np.float32) * m
    n = m.sum(-1, keepdims=True)
    clipped = np.zeros(v.shape, dtype=bool)
    scale = np.ones_like(n)
    for _ in range(v.shape[-1] + 1):
        free = np.where(clipped, 0.0, v).sum(-1, keepdims=True)
        room = n - w_max * clipped.sum(-1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            scale = np.where(free > 0, room / np.maximum(free, TINY32), scale).astype(np.float32)
        now = (scale * v >= w_max) & (m > 0) & (v > 0)
        if np.array_equal(now, clipped):
            break
        clipped = now
    w = np.where(clipped, np.float32(w_max), np.minimum(scale * v, w_max))
    zero = (v <= 0) & (m > 0)
    n_zero = zero.sum(-1, keepdims=True).astype(np.float32)
    rest = np.maximum(n - w.sum(-1, keepdims=True), 0.0)
    short = (np.where(clipped, 0.0, v).sum(-1, keepdims=True) <= 0) & (n_zero > 0)
    fill = np.where(short, rest / np.maximum(n_zero, 1.0), 0.0)
    w = np.where(zero, np.broadcast_to(fill, w.shape), w)
    return (w * m).astype(np.float32)


def specific_relevance(d: np.ndarray, applicable: np.ndarray | None = None) -> np.ndarray:
    """Twin of `core.algos.routing.specific_relevance`: d_spec[k,i,t] = max(d[k,i,t] - mean_{j != k applicable}
    d[j,i,t], 0) (d itself with no other applicable reward); NaN where reward k does not apply."""
    d = np.asarray(d, dtype=np.float32)
    if applicable is None:
        applicable = ~np.isnan(d).all(-1)
    app = np.asarray(applicable, dtype=np.float32)[:, :, None]
    d0 = np.nan_to_num(d, nan=0.0) * app
    others_sum = d0.sum(1, keepdims=True) - d0
    others_n = app.sum(1, keepdims=True) - app
    others_mean = np.where(others_n > 0, others_sum / np.maximum(others_n, 1.0), 0.0)
    spec = np.clip(d0 - others_mean, 0.0, None)
    return np.where(np.broadcast_to(app > 0, spec.shape), spec, np.nan).astype(np.float32)


def token_shares(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Twin of `core.algos.span_metrics.token_shares`: p[i,k,t] = x m / sum_t x m (x clamped at 0); NaN for a
    row with no mass or all NaN."""
    m = np.asarray(mask, dtype=np.float32)[:, None, :]
    x = np.asarray(x, dtype=np.float32)
    dead = np.isnan(x).all(-1, keepdims=True)
    x = np.clip(np.nan_to_num(x, nan=0.0), 0.0, None) * m
    total = x.sum(-1, keepdims=True)
    p = x / np.maximum(total, TINY32)
    return np.where((total > 0) & ~dead, p, np.nan).astype(np.float32)


def pairwise_overlap(p: np.ndarray) -> np.ndarray:
    """Twin of `core.algos.span_metrics.pairwise_overlap`: O[i,k,j] = sum_t min(p_k(t), p_j(t)), (B, K, K); NaN
    where either row is NaN and on the diagonal."""
    o = np.minimum(p[:, :, None, :], p[:, None, :, :]).sum(-1)
    eye = np.eye(p.shape[1], dtype=bool)[None]
    return np.where(eye, np.nan, o).astype(np.float32)


def mass_control(p: np.ndarray, span_mask: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Twin of `core.algos.span_metrics.mass_control`: (lift (B, K), ctl (B, K, K)) with share_k = |S_k| / T_i,
    lift[i,k] = sum_{t in S_k} p_k(t) / share_k, ctl[i,k,j] = sum_{t in S_k} p_j(t) / share_k; NaN where S_k is
    empty, where row k or j is NaN, and on ctl's diagonal."""
    mk = np.asarray(mask, dtype=np.float32)
    s = np.asarray(span_mask, dtype=np.float32) * mk[:, None, :]
    share = s.sum(-1) / np.maximum(mk.sum(-1, keepdims=True), 1.0)
    on_span = np.einsum("bkt,bjt->bkj", s, np.nan_to_num(p, nan=0.0))
    dead = np.isnan(p).all(-1)
    ratio = on_span / np.maximum(share[:, :, None], TINY32)
    ok = (share[:, :, None] > 0) & ~dead[:, None, :] & ~dead[:, :, None]
    ratio = np.where(ok, ratio, np.nan)
    lift = np.diagonal(ratio, axis1=1, axis2=2).copy()
    eye = np.eye(p.shape[1], dtype=bool)[None]
    return lift.astype(np.float32), np.where(eye, np.nan, ratio).astype(np.float32)


def roc_auc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """Twin of `core.algos.span_metrics.roc_auc`: Mann-Whitney AUC with mid-ranks for ties,
    (sum of the positives' ranks - n_pos (n_pos + 1) / 2) / (n_pos n_neg); NaN when a class is empty."""
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    labels = np.asarray(labels).reshape(-1).astype(bool)
    n_pos = int(labels.sum())
    n_neg = labels.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts).astype(np.float64)
    mid_ranks = ends - (counts - 1.0) / 2.0
    rank_sum = float(mid_ranks[inverse.reshape(-1)][labels].sum())
    return (rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


# ----------------------------------------------------------------------------- one sample of a credit frame


def sample_arrays(sample_df: pd.DataFrame, rewards: Sequence[str]) -> dict[str, np.ndarray]:
    """One sample's rows as (1, K, T) arrays `distance`, `weight`, `in_span` and (1, K) `score`, `acted` for `rewards`
    in that order (K of them; T = the response's tokens). `acted`: the reward applies (score not NaN) and its
    replay was not skipped, the pairs the trainer's metrics average over (core/run/record.py)."""
    t_max = int(sample_df["t"].max()) + 1
    k = len(rewards)
    out = {"distance": np.full((1, k, t_max), np.nan, np.float32), "weight": np.zeros((1, k, t_max), np.float32),
           "in_span": np.zeros((1, k, t_max), bool), "score": np.full((1, k), np.nan, np.float32),
           "acted": np.zeros((1, k), bool)}
    for kk, name in enumerate(rewards):
        rows = sample_df[sample_df["reward"] == name]
        if rows.empty:
            continue
        t = rows["t"].to_numpy(dtype=np.int64)
        out["distance"][0, kk, t] = rows["distance"].to_numpy(dtype=np.float32)
        out["weight"][0, kk, t] = rows["weight"].to_numpy(dtype=np.float32)
        out["in_span"][0, kk, t] = rows["in_span"].to_numpy(dtype=bool)
        score = float(rows["score"].iloc[0])
        out["score"][0, kk] = score
        skipped = bool(rows["distance_skipped"].iloc[0]) if "distance_skipped" in rows else False
        out["acted"][0, kk] = not np.isnan(score) and not skipped
    return out


def _shares(a: dict[str, np.ndarray]) -> np.ndarray:
    """Token shares of the routing weights over the acted rewards (the others NaN), as `specificity` does."""
    w = np.where(a["acted"][:, :, None], a["weight"], np.nan)
    return token_shares(w, np.ones(w.shape[::2], np.float32))


def sample_overlap(sample_df: pd.DataFrame, rewards: Sequence[str]) -> tuple[pd.DataFrame, float]:
    """The pairwise routing overlap O[k, j] (`pairwise_overlap` of the routing-weight shares) of the rewards
    in `rewards` on one response, as a K x K frame (NaN on the diagonal and where a reward did not act), and
    its mean over the pairs (the sample's part of `span/overlap`)."""
    a = sample_arrays(sample_df, rewards)
    o = pairwise_overlap(_shares(a))[0]
    vals = o[~np.isnan(o)]
    return pd.DataFrame(o, index=list(rewards), columns=list(rewards)), float(vals.mean()) if vals.size else float("nan")


def overlap_table(overlap: pd.DataFrame) -> pd.DataFrame:
    """`sample_overlap`'s K x K frame as text to show whole (every column): values to 3 decimals, "—" on the
    diagonal (a reward with itself is not a pair), "n/a" where a reward did not act on the response."""
    out = overlap.map(lambda v: "n/a" if pd.isna(v) else f"{v:.3f}")
    for name in overlap.index:
        if name in out.columns:
            out.loc[name, name] = "—"
    return out


def not_applicable_note(reward: str, score: float) -> str | None:
    """Why a reward's span metrics mean nothing on this response (docs/METHOD.md, "Specificity"), or None."""
    if reward in WHOLE_TEXT_SPAN and score >= 1.0:
        return "rule holds: the span is the whole text (only eos lies outside it)"
    if reward in EOS_DECISION and score < 1.0:
        return "phrase missing: the decision sits on eos, which no span can contain"
    return None


def sample_metrics(sample_df: pd.DataFrame, rewards: Sequence[str]) -> pd.DataFrame:
    """Per reward of one response (the rewards in `rewards` it states): `mass_in` (share of routing weight
    inside the span), `lift`, `lift_rotated` (the next acted reward's mass on k's span / its token share: the lift
    with the labels rotated), `mass_control` (mean over the other acted rewards j of ctl[k, j]), `retained`
    (sum_t w / T: the share of the reward's advantage mass its credit keeps on this response), `auc` (ROC AUC
    of the stored d at telling span tokens from the other tokens of this response), the outcome the AUC belongs
    to (satisfied / violated: `auc_satisfied` / `auc_violated` in the step metrics) and `no metrics because`: why
    the numbers mean nothing for this response, in which case they are left empty. The AUC vs entropy baseline
    needs the per-token entropy, which the credit Parquet does not store."""
    a = sample_arrays(sample_df, rewards)
    p = _shares(a)
    lift, ctl = mass_control(p, a["in_span"], np.ones(p.shape[::2], np.float32))
    acted = [k for k in range(len(rewards)) if a["acted"][0, k]]
    # lift with the labels rotated (`core.algos.span_metrics.rotate_labels`): the next acted reward's mass on k's span
    rotated = {k: float(ctl[0, k, acted[(pos + 1) % len(acted)]]) if len(acted) > 1 else float("nan")
               for pos, k in enumerate(acted)}
    rows = []
    for k, name in enumerate(rewards):
        score = float(a["score"][0, k])
        if np.isnan(score):
            continue
        note = not_applicable_note(name, score)
        span = a["in_span"][0, k]
        w = a["weight"][0, k]
        d = a["distance"][0, k]
        ctl_k = ctl[0, k][~np.isnan(ctl[0, k])]
        row = {"reward": name, "score": score, "outcome": "satisfied" if score >= 1.0 else "violated",
               "span tokens": int(span.sum()),
               "mass_in": float(w[span].sum() / w.sum()) if a["acted"][0, k] and w.sum() > 0 else float("nan"),
               "lift": float(lift[0, k]), "lift_rotated": rotated.get(k, float("nan")),
               "mass_control": float(ctl_k.mean()) if ctl_k.size else float("nan"),
               "retained": float(w.sum() / w.size) if a["acted"][0, k] and w.size else float("nan"),
               "auc": roc_auc(d, span) if not np.isnan(d).all() else float("nan"),
               "no metrics because": note or ""}
        if note:
            for key in ("mass_in", "lift", "lift_rotated", "mass_control", "auc"):
                row[key] = float("nan")
        rows.append(row)
    return pd.DataFrame(rows, columns=["reward", "score", "outcome", "span tokens", "mass_in", "lift", "lift_rotated",
                                       "mass_control", "retained", "auc", "no metrics because"])


# ----------------------------------------------------------------------------- switching the relevance variant


def computable_variants(cfg: Mapping) -> tuple[list[str], dict[str, str]]:
    """(variants recomputable from a step's stored d, {other variant: why not}) for a run config.

    The credit Parquet stores d[k,i,t] (`distance`), the distance of the run's own contrast (remove / swap) and kind
    (JS / sampled-token log-prob), before the variant's combine step. A variant with the same contrast and
    distance differs only in the combine (plain d or `specific_relevance`), so it is recomputable; any other
    needs another contrastive prompt's pass or token log-probs that were not stored. Runs without replay
    (grpo, gdpo, span / uniform routing) store no d: nothing is recomputable."""
    if not routes_by_replay(cfg):
        return [], {v: "this run did no contrastive replay, so it stored no d" for v in VARIANTS}
    own = str(cfg.get("relevance") or DEFAULT_RELEVANCE)
    contrast, distance, _ = VARIANTS.get(own, VARIANTS[DEFAULT_RELEVANCE])
    ok, why = [], {}
    for name, (c, dist, _) in VARIANTS.items():
        if (c, dist) == (contrast, distance):
            ok.append(name)
            continue
        need = []
        if c != contrast:
            need.append(f"a pass on {CONTRAST_TEXT[c]}")
        if dist != distance:
            need.append(DISTANCE_TEXT[dist] + {"js": " (full distributions are not stored)",
                                               "logp": " (token log-probs are not stored)"}.get(dist, " (another pass)"))
        why[name] = "needs " + " and ".join(need)
    return ok, why


def recompute_variant(df: pd.DataFrame, variant: str, cfg: Mapping, rewards: Sequence[str]) -> pd.DataFrame:
    """The step's credit frame with `weight`, `credit` and `token_adv` as the trainer would have computed them
    under relevance `variant` (one of `computable_variants`), and a column `relevance` (what routing used).

    relevance = d or `specific_relevance`(d) over the pairs with a stored d (NaN elsewhere, as in the trainer:
    a skipped pair stays uniform); w = `routing_weights`(relevance, lam, w_max, sharpen of the run). Credit is
    linear in w: credit[i,k,t] = c[i,k] w[k,i,t] with c[i,k] = w_k a[k,i] / (sigma + eps) (docs/METHOD.md,
    "MRTPO"), read off the stored credit / weight at the token with the largest stored weight (> 0 whenever
    lam <= 1); the total advantage moves by the change of the credit summed over rewards."""
    out = df.copy()
    specific = VARIANTS[variant][2]
    lam, w_max = float(cfg.get("lam", 1.0)), float(cfg.get("w_max", 5.0))
    sharpen = float(cfg.get("sharpen", 1.0))
    clip = str(cfg.get("routing_clip") or "clip")  # a run recorded before the field clipped its weights
    out["relevance"] = out["distance"].astype(np.float32)
    out["credit"] = out["credit"].astype(np.float32)
    out["weight"] = out["weight"].astype(np.float32)
    new_credit = out["credit"].to_numpy(dtype=np.float32).copy()
    new_weight = out["weight"].to_numpy(dtype=np.float32).copy()
    new_rel = out["relevance"].to_numpy(dtype=np.float32).copy()
    names = [r for r in rewards if r in set(out["reward"])]
    for _, rows in out.groupby("sample", sort=False):
        idx = {name: rows.index[rows["reward"] == name] for name in names}
        t_max = int(rows["t"].max()) + 1
        d = np.full((1, len(names), t_max), np.nan, np.float32)
        for k, name in enumerate(names):
            d[0, k, rows.loc[idx[name], "t"].to_numpy()] = rows.loc[idx[name], "distance"].to_numpy(np.float32)
        mask = np.zeros((1, t_max), np.float32)
        mask[0, rows["t"].to_numpy()] = 1.0
        rel = specific_relevance(d) if specific else d
        w = routing_weights(rel, mask, lam=lam, w_max=w_max, sharpen=sharpen, clip=clip)
        for k, name in enumerate(names):
            ix = idx[name]
            if ix.empty or np.isnan(d[0, k]).all():
                continue  # no stored d (does not apply, or skipped): weights, credit stay as stored (uniform)
            pos = out.index.get_indexer(ix)
            t = rows.loc[ix, "t"].to_numpy()
            old_w, old_c = new_weight[pos], new_credit[pos]
            j = int(np.argmax(old_w))
            factor = old_c[j] / old_w[j] if old_w[j] > 0 else 0.0
            new_weight[pos] = w[0, k, t]
            new_credit[pos] = factor * w[0, k, t]
            new_rel[pos] = rel[0, k, t]
    delta = pd.Series(new_credit - out["credit"].to_numpy(np.float32), index=out.index)
    by_token = delta.groupby([out["sample"], out["t"]]).transform("sum")
    out["token_adv"] = (out["token_adv"].to_numpy(np.float32) + by_token.to_numpy(np.float32)).astype(np.float32)
    out["weight"], out["credit"], out["relevance"] = new_weight, new_credit, new_rel
    return out
