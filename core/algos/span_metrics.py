"""Span agreement metrics: does a reward's relevance / routing mass land on its verifier's spans?

Logged per step and reward (`span/<name>/...`, `js/<name>/...`; docs/METHOD.md, "Span agreement"):
`mass_in_span`, `roc_auc`, `span_auc` with its `control_auc`, `span_agreement`, `js_summary`.

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

