"""Span agreement metrics: does a reward's relevance / routing mass land on its verifier's spans?

Logged per step and reward (`span/<name>/...`, `js/<name>/...`; docs/METHOD.md, "Span agreement"):
`mass_in_span`, `roc_auc`, `span_auc` with its `control_auc`, `span_agreement`, `js_summary`; and how
reward-specific the routing is ("Specificity"): `token_shares`, `pairwise_overlap`, `mass_control`,
`specificity`.

Shapes: B samples, K rewards, T response tokens (`mask` (B, T) is 1 on real tokens); relevance d
(B, K, T) is NaN for a reward that does not apply to a sample's prompt.
Pure torch: never imports transformers, streamlit or plotly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from core.algos.routing import applicable_from


def mass_in_span(x: Tensor, span_mask: Tensor, mask: Tensor) -> Tensor:
    """Per-response share of x's mass inside the verifier's span, (B, K).

    share[i, k] = sum_t x[k,i,t] s[k,i,t] m[i,t] / sum_t x[k,i,t] m[i,t] for x = routing weights or
    relevance d (B, K, T), s the span mask (B, K, T), m the response mask (B, T). NaN where x has
    no mass there (or is NaN: the reward does not apply). The step metric is the NaN-mean over samples.
    """
    m = mask.to(torch.float32)[:, None, :]
    x = x.to(torch.float32)
    not_applicable = torch.isnan(x).all(-1)
    x = torch.nan_to_num(x, nan=0.0) * m
    total = x.sum(-1)
    inside = (x * span_mask.to(torch.float32)).sum(-1)
    share = inside / total.clamp(min=torch.finfo(torch.float32).tiny)
    return torch.where((total > 0) & ~not_applicable, share, torch.full_like(share, torch.nan))


def roc_auc(scores: Tensor, labels: Tensor) -> float:
    """ROC AUC of `scores` for telling label-1 items from label-0 items (1-D tensors, same length).

    Mann-Whitney: AUC = (sum of the positives' ranks - n_pos (n_pos + 1) / 2) / (n_pos n_neg), with
    tied scores given their mid-rank (a tie counts 1/2). NaN when either class is empty.
    """
    scores = torch.as_tensor(scores, dtype=torch.float64).reshape(-1)
    labels = torch.as_tensor(labels).reshape(-1).bool()
    n_pos = int(labels.sum())
    n_neg = labels.numel() - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    _, inverse, counts = torch.unique(scores, sorted=True, return_inverse=True, return_counts=True)
    ends = counts.cumsum(0).to(torch.float64)  # rank of the last element of each tie block (1-based)
    mid_ranks = ends - (counts.to(torch.float64) - 1.0) / 2.0
    rank_sum = mid_ranks[inverse][labels].sum().item()
    return (rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


def _pooled_auc(scores: Tensor, span_mask: Tensor, token_ok: Tensor) -> float:
    """AUC over the tokens where `token_ok` (B, T) holds, scores / span labels (B, T)."""
    return roc_auc(scores[token_ok], span_mask[token_ok])


def span_auc(d: Tensor, span_mask: Tensor, mask: Tensor, k: int, scorer: int | None = None) -> float:
    """ROC AUC of reward `scorer`'s relevance (default: k's own) at telling reward k's span tokens
    from its other response tokens, pooled over the samples where both rewards apply. NaN when
    undefined."""
    j = k if scorer is None else scorer
    app = applicable_from(d)
    rows = app[:, k] & app[:, j]  # (B,)
    token_ok = mask.bool() & rows[:, None]
    return _pooled_auc(d[:, j, :], span_mask[:, k, :].bool(), token_ok)


def control_auc(d: Tensor, span_mask: Tensor, mask: Tensor, k: int) -> float:
    """The control beside reward k's AUC: the same spans scored with each other reward's relevance
    d[j] (j != k), the AUCs averaged over the j where defined. NaN with K = 1 or none defined.
    Position and model uncertainty alone can score high; a real AUC should beat this."""
    values = [span_auc(d, span_mask, mask, k, scorer=j) for j in range(d.shape[1]) if j != k]
    values = [v for v in values if not math.isnan(v)]
    return sum(values) / len(values) if values else float("nan")


def span_agreement(
    d: Tensor | None,
    weights: Tensor,
    span_mask: Tensor,
    mask: Tensor,
    reward_names: Sequence[str],
    applicable: Tensor | None = None,
) -> dict[str, float]:
    """Step metrics `span/<name>/mass_in`, `span/<name>/auc`, `span/<name>/auc_control`.

    mass_in: NaN-mean over samples of the share of routing weight mass inside the span
    (`mass_in_span` on `weights`), over the samples where the reward applies (`applicable` (B, K);
    default: where d is not NaN, or every sample when d is None);
    auc / auc_control: `span_auc` / `control_auc` of d (NaN when d is None: no replay was run).
    """
    out: dict[str, float] = {}
    w = weights.to(torch.float32)
    if applicable is None and d is not None:
        applicable = applicable_from(d)
    if applicable is not None:
        w = torch.where(applicable.to(w.device)[:, :, None], w, torch.full_like(w, torch.nan))
    share = mass_in_span(w, span_mask, mask)  # (B, K)
    for k, name in enumerate(reward_names):
        col = share[:, k]
        col = col[~torch.isnan(col)]
        out[f"span/{name}/mass_in"] = float(col.mean()) if col.numel() else float("nan")
        out[f"span/{name}/auc"] = span_auc(d, span_mask, mask, k) if d is not None else float("nan")
        out[f"span/{name}/auc_control"] = control_auc(d, span_mask, mask, k) if d is not None else float("nan")
    return out


def js_summary(d: Tensor, mask: Tensor, reward_names: Sequence[str]) -> dict[str, float]:
    """Step metrics `js/<name>/mean` and `js/<name>/max` over the real tokens of the samples where
    the reward applies (NaN when there are none)."""
    out: dict[str, float] = {}
    valid = mask.bool()
    for k, name in enumerate(reward_names):
        vals = d[:, k, :][valid]
        vals = vals[~torch.isnan(vals)]
        out[f"js/{name}/mean"] = float(vals.mean()) if vals.numel() else float("nan")
        out[f"js/{name}/max"] = float(vals.max()) if vals.numel() else float("nan")
    return out



# ----------------------------------------------------------------------------- specificity (docs/METHOD.md)


def token_shares(x: Tensor, mask: Tensor) -> Tensor:
    """p[i, k, t] = x[k,i,t] m[i,t] / sum_t x[k,i,t] m[i,t]: x (B, K, T) (routing weights or relevance)
    normalised over each response's real tokens; NaN for a row with no mass (or NaN x: does not apply)."""
    m = mask.to(torch.float32)[:, None, :]
    x = x.to(torch.float32)
    dead = torch.isnan(x).all(-1, keepdim=True)
    x = torch.nan_to_num(x, nan=0.0).clamp(min=0.0) * m
    total = x.sum(-1, keepdim=True)
    p = x / total.clamp(min=torch.finfo(torch.float32).tiny)
    return torch.where((total > 0) & ~dead, p, torch.full_like(p, torch.nan))


def pairwise_overlap(p: Tensor) -> Tensor:
    """(B, K, K) routing overlap of two rewards on one response: O[i, k, j] = sum_t min(p_k(t), p_j(t)) for
    the token shares p (B, K, T) of `token_shares`; 1 = identical routing (GRPO/GDPO), 0 = disjoint.
    NaN where either row is NaN and on the diagonal."""
    o = torch.minimum(p[:, :, None, :], p[:, None, :, :]).sum(-1)  # NaN propagates
    eye = torch.eye(p.shape[1], dtype=torch.bool, device=p.device)[None]
    return torch.where(eye, torch.full_like(o, torch.nan), o)


def mass_control(p: Tensor, span_mask: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """(lift (B, K), control (B, K, K)): routing mass on reward k's span relative to the span's token share.

        share_k   = |S_k| / T_i                               (the span's share of the response's tokens)
        lift[i,k] = sum_{t in S_k} p_k(t) / share_k            (k's own mass; 1 = no preference)
        ctl[i,k,j] = sum_{t in S_k} p_j(t) / share_k           (reward j's mass on k's span; < 1 avoids it)

    NaN where k's span is empty, where row k or j of p is NaN (does not apply), and on the diagonal of ctl."""
    s = span_mask.to(torch.float32) * mask.to(torch.float32)[:, None, :]  # (B, K, T)
    share = s.sum(-1) / mask.to(torch.float32).sum(-1, keepdim=True).clamp(min=1.0)  # (B, K)
    on_span = torch.einsum("bkt,bjt->bkj", s, torch.nan_to_num(p, nan=0.0))  # mass of j on k's span
    dead = torch.isnan(p).all(-1)  # (B, K)
    ratio = on_span / share[:, :, None].clamp(min=torch.finfo(torch.float32).tiny)
    ok = (share[:, :, None] > 0) & ~dead[:, None, :] & ~dead[:, :, None]
    ratio = torch.where(ok, ratio, torch.full_like(ratio, torch.nan))
    eye = torch.eye(p.shape[1], dtype=torch.bool, device=p.device)[None]
    lift = torch.diagonal(ratio, dim1=1, dim2=2)
    return lift, torch.where(eye, torch.full_like(ratio, torch.nan), ratio)


def _nanmean(x: Tensor) -> float:
    x = x[~torch.isnan(x)]
    return float(x.mean()) if x.numel() else float("nan")


def specificity(
    weights: Tensor,
    d: Tensor | None,
    span_mask: Tensor,
    mask: Tensor,
    rewards: Tensor,
    reward_names: Sequence[str],
    applicable: Tensor,
    entropy: Tensor | None = None,
) -> dict[str, float]:
    """Step metrics of how reward-specific the routing is (docs/METHOD.md, "Specificity"):

    - `span/overlap` and `span/<name>/overlap`: `pairwise_overlap` of the routing-weight shares, averaged
      over the response's pairs of rewards that both apply (per reward: its pairs);
    - `span/<name>/lift`, `span/<name>/mass_control`: `mass_control` averaged over the samples with a
      non-empty span of k (control: over the other applicable rewards j too);
    - `span/<name>/mass_in_ceiling`: share of k's applicable samples with a non-empty span (`mass_in`
      cannot exceed it: an empty span takes no mass);
    - `span/<name>/auc_vs_entropy`: `span_auc` of d minus the same AUC of the policy's next-token entropy
      (NaN without entropy or d);
    - `span/<name>/auc_satisfied`, `span/<name>/auc_violated`: `span_auc` of d over the samples whose
      score on k is 1 / below 1.
    `weights` (B, K, T), d (B, K, T) or None, rewards (B, K), applicable (B, K) bool, entropy (B, T) or None.
    """
    app = applicable.bool()
    w = torch.where(app[:, :, None], weights.to(torch.float32), torch.full_like(weights, torch.nan, dtype=torch.float32))
    p = token_shares(w, mask)
    o = pairwise_overlap(p)
    lift, ctl = mass_control(p, span_mask, mask)
    nonempty = (span_mask.bool() & mask.bool()[:, None, :]).any(-1)  # (B, K)
    out = {"span/overlap": _nanmean(o)}
    for k, name in enumerate(reward_names):
        out[f"span/{name}/overlap"] = _nanmean(o[:, k, :])
        out[f"span/{name}/lift"] = _nanmean(lift[:, k])
        out[f"span/{name}/mass_control"] = _nanmean(ctl[:, k, :])
        n_app = int(app[:, k].sum())
        out[f"span/{name}/mass_in_ceiling"] = float((nonempty[:, k] & app[:, k]).sum()) / n_app if n_app else float("nan")
        auc_k = span_auc(d, span_mask, mask, k) if d is not None else float("nan")
        if d is not None and entropy is not None:
            ent = torch.where(torch.isnan(d), d, entropy.to(d.dtype)[:, None, :].expand_as(d))
            out[f"span/{name}/auc_vs_entropy"] = auc_k - span_auc(ent, span_mask, mask, k)
        else:
            out[f"span/{name}/auc_vs_entropy"] = float("nan")
        for outcome, rows in (("satisfied", rewards[:, k] >= 1.0), ("violated", rewards[:, k] < 1.0)):
            if d is None:
                out[f"span/{name}/auc_{outcome}"] = float("nan")
                continue
            keep = torch.where(rows[:, None, None], d, torch.full_like(d, torch.nan))
            out[f"span/{name}/auc_{outcome}"] = span_auc(keep, span_mask, mask, k)
    return out


# ----------------------------------------------------------------------------- metrics that a useless router cannot
# flatter (docs/METHOD.md, "Reading the credit metrics")


def active_pairs(group_adv: Tensor, applicable: Tensor) -> Tensor:
    """(B, K) bool: the (sample, reward) pairs whose GDPO group advantage a[k, i] is nonzero and that apply: the
    pairs that carry credit. Every method's credit metrics average over these, so GDPO, GRPO and every MRTPO
    variant are scored on the same samples (replay may have run on more pairs, never on fewer)."""
    return applicable.bool() & (group_adv != 0)


def retained_mass(weights: Tensor, group_adv: Tensor, mask: Tensor, active: Tensor) -> Tensor:
    """(K,) share of each reward's GDPO advantage mass its routed credit keeps.

    Reward k's credit on token t of sample i is c_k a[k, i] w[k, i, t] (c_k = reward weight / (sigma + eps), the
    same for GDPO); GDPO's is c_k a[k, i] on every real token. Over the active pairs:
        retained_k = sum_i |a[k,i]| sum_t w[k,i,t] m[i,t] / sum_i |a[k,i]| T_i
    1 for GDPO (w = 1) and for weights of mean 1 (`routing_clip="mass"`); below 1 when clipping at w_max drops
    mass. NaN for a reward with no active pair. weights (B, K, T), group_adv (B, K), mask (B, T), active (B, K)."""
    m = mask.to(torch.float32)
    a = group_adv.to(torch.float32).abs() * active.to(torch.float32)  # (B, K)
    kept = (a * (weights.to(torch.float32) * m[:, None, :]).sum(-1)).sum(0)  # (K,)
    full = (a * m.sum(-1, keepdim=True)).sum(0)
    return torch.where(full > 0, kept / full.clamp(min=torch.finfo(torch.float32).tiny), torch.full_like(full, torch.nan))


def clipped_share(weights: Tensor, w_max: float, active: Tensor) -> float:
    """Share of the active pairs with at least one routing weight at the cap w_max (within 1e-5): how often the
    cap binds. With `routing_clip="clip"` those pairs lose mass (`retained_mass`); with "mass" it is handed on."""
    n = int(active.sum())
    if not n:
        return float("nan")
    hit = (weights.to(torch.float32) >= w_max - 1e-5).any(-1) & active.bool()
    return float(hit.sum()) / n


def rotate_labels(x: Tensor, applicable: Tensor) -> Tensor:
    """x (B, K, T) with each sample's reward rows rotated among its applicable rewards: the row of reward k
    becomes the row of the next applicable reward (cyclically, in reward order); non-applicable rows stay NaN.
    A sample with one applicable reward gets NaN (no other label to rotate to). The control for any
    reward-specific metric: a router that ignores which reward it routes scores the same on rotated labels."""
    out = torch.full_like(x, torch.nan, dtype=torch.float32)
    app = applicable.bool()
    for i in range(x.shape[0]):
        ks = app[i].nonzero().flatten().tolist()
        if len(ks) < 2:
            continue
        for pos, k in enumerate(ks):
            out[i, k] = x[i, ks[(pos + 1) % len(ks)]].to(torch.float32)
    return out


def rotated_controls(weights: Tensor, span_mask: Tensor, mask: Tensor, active: Tensor, reward_names: Sequence[str]
                     ) -> dict[str, float]:
    """Step metrics `span/<name>/lift_rotated` and `span/<name>/mass_in_rotated`: `lift` and `mass_in` of the
    routing weights with the reward labels rotated within each sample (`rotate_labels`; the pairs of `active`).
    lift - lift_rotated > 0 means reward k's routing favours k's own span more than another reward's routing
    does; a router that puts every reward's mass in the same place (position, entropy) scores 0."""
    w = torch.where(active.bool()[:, :, None], weights.to(torch.float32), torch.full_like(weights, torch.nan,
                                                                                            dtype=torch.float32))
    rotated = rotate_labels(w, active)
    p = token_shares(rotated, mask)
    lift, _ = mass_control(p, span_mask, mask)
    share = mass_in_span(rotated, span_mask, mask)
    out = {}
    for k, name in enumerate(reward_names):
        out[f"span/{name}/lift_rotated"] = _nanmean(lift[:, k])
        out[f"span/{name}/mass_in_rotated"] = _nanmean(share[:, k])
    return out


def credit_mass(weights: Tensor, group_adv: Tensor, mask: Tensor, applicable: Tensor, reward_names: Sequence[str],
                w_max: float) -> dict[str, float]:
    """Step metrics `span/<name>/retained` (`retained_mass`), `span/retained` (all rewards pooled the same way) and
    `routing/clipped_share` (`clipped_share`), over the active pairs (`active_pairs`)."""
    active = active_pairs(group_adv, applicable)
    kept = retained_mass(weights, group_adv, mask, active)
    out = {f"span/{name}/retained": float(kept[k]) for k, name in enumerate(reward_names)}
    m = mask.to(torch.float32)
    a = group_adv.to(torch.float32).abs() * active.to(torch.float32)
    full = float((a * m.sum(-1, keepdim=True)).sum())
    out["span/retained"] = float((a * (weights.to(torch.float32) * m[:, None, :]).sum(-1)).sum()) / full if full > 0 \
        else float("nan")
    out["routing/clipped_share"] = clipped_share(weights, w_max, active)
    return out
