"""Policy loss: PPO clipped surrogate on token advantages, optional k3 KL penalty to a frozen
reference (docs/METHOD.md, "Policy loss"), and the per-token quantities it needs.

All token tensors are (B, T) with a response mask (B, T) that is 1 on real response tokens.
`policy_loss` returns the scalar loss and a dict of floats keyed like the run metrics
(`loss/policy`, `loss/kl`, `loss/total`, `policy/clip_frac`, `policy/kl`, `policy/entropy`).
Never imports streamlit or plotly.
"""

from __future__ import annotations

import torch
from torch import Tensor

# ----------------------------------------------------------------------------- per-token quantities


def token_logprobs(logits: Tensor, token_ids: Tensor) -> Tensor:
    """log pi(y_t | ...) of the given tokens: log_softmax(logits)[..., y_t]; logits (B, T, V), ids (B, T).
    Computed in float32 (logits may be bf16 under autocast)."""
    logits = logits.float()
    return torch.gather(logits, -1, token_ids.long().unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)


def entropy_from_logits(logits: Tensor) -> Tensor:
    """Entropy of the next-token distribution, H = logsumexp(l) - sum_v softmax(l)_v l_v; (B, T, V) -> (B, T)."""
    logits = logits.float()
    return torch.logsumexp(logits, dim=-1) - (torch.softmax(logits, dim=-1) * logits).sum(-1)


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """sum(x * m) / max(sum(m), 1): the mean over real tokens (0 when there are none)."""
    m = mask.to(x.dtype)
    return (x * m).sum() / m.sum().clamp(min=1.0)


# ----------------------------------------------------------------------------- the surrogate


def importance_ratio(logp: Tensor, old_logp: Tensor) -> Tensor:
    """rho_t = pi(y_t) / pi_old(y_t) = exp(logp - old_logp) against the rollout policy."""
    return torch.exp(logp - old_logp)


def clipped_surrogate(logp: Tensor, old_logp: Tensor, advantages: Tensor, clip_range: float) -> tuple[Tensor, Tensor]:
    """Per-token PPO loss and clip indicator.

    L_t = max(-A_t rho_t, -A_t clip(rho_t, 1 - eps, 1 + eps)), eps = clip_range (minimising L_t
    maximises the clipped objective). clipped_t = 1 where the clipped term is the larger one
    (the gradient through rho_t is cut there).
    """
    ratio = importance_ratio(logp, old_logp)
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - clip_range, 1.0 + clip_range)
    return torch.maximum(unclipped, clipped), (clipped > unclipped).to(logp.dtype)


def k3_kl(logp: Tensor, ref_logp: Tensor, clamp: float = 20.0) -> Tensor:
    """Schulman's k3 estimator of KL(pi || ref) from tokens sampled by pi (per token, >= 0):
    k3 = exp(ref_logp - logp) - (ref_logp - logp) - 1. The log-ratio is clamped to [-clamp, clamp]
    so that a token the reference finds very unlikely cannot overflow."""
    log_ratio = (ref_logp - logp).clamp(-clamp, clamp)
    return torch.exp(log_ratio) - log_ratio - 1.0


def aggregate(per_token: Tensor, mask: Tensor, mode: str = "token-mean") -> Tensor:
    """Reduce a (B, T) per-token loss to a scalar.

    token-mean:           sum_{i,t} L m / sum_{i,t} m  (every real token weighs the same);
    seq-mean-token-mean:  mean over responses with >= 1 token of (sum_t L m / sum_t m).
    """
    m = mask.to(per_token.dtype)
    if mode == "token-mean":
        return masked_mean(per_token, m)
    if mode == "seq-mean-token-mean":
        n = m.sum(-1)
        has = n > 0
        per_seq = (per_token * m).sum(-1) / n.clamp(min=1.0)
        return per_seq[has].mean() if bool(has.any()) else per_token.sum() * 0.0
    raise ValueError(f"unknown loss aggregation {mode!r}; valid: {', '.join(sorted(AGGREGATIONS))}")


AGGREGATIONS = ("token-mean", "seq-mean-token-mean")


def policy_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_range: float = 0.2,
    ref_logp: Tensor | None = None,
    kl_beta: float = 0.0,
    entropy: Tensor | None = None,
    logits: Tensor | None = None,
    agg: str = "token-mean",
) -> tuple[Tensor, dict[str, float]]:
    """Total loss = agg(clipped surrogate) + kl_beta * agg(k3 KL to the reference).

    logp: (B, T) current log-probs of the sampled tokens (with gradient); old_logp: the rollout
    policy's (no gradient); advantages: (B, T) token advantages; ref_logp: the frozen reference's
    (optional; the KL term is skipped when None). Entropy for the stats: pass `entropy` (B, T) or
    `logits` (B, T, V), else it is reported as NaN.
    Stats: loss/policy, loss/kl (the unscaled mean k3 KL to the reference, 0 without one),
    loss/total, policy/clip_frac (share of tokens where the clip is active), policy/kl (k3 estimate
    of KL(pi_old || pi), mean exp(logp - old) - (logp - old) - 1: how far the update moved),
    policy/entropy (mean over real tokens).
    """
    per_token, clipped = clipped_surrogate(logp, old_logp, advantages, clip_range)
    pg = aggregate(per_token, mask, agg)
    if ref_logp is not None:
        kl_ref = aggregate(k3_kl(logp, ref_logp), mask, agg)
    else:
        kl_ref = torch.zeros((), dtype=pg.dtype, device=pg.device)
    total = pg + kl_beta * kl_ref if (ref_logp is not None and kl_beta) else pg
    with torch.no_grad():
        d = (logp - old_logp).detach()
        approx_kl_old = masked_mean(torch.exp(d) - d - 1.0, mask)
        if entropy is None and logits is not None:
            entropy = entropy_from_logits(logits.detach())
        ent = float(masked_mean(entropy.detach().float(), mask)) if entropy is not None else float("nan")
        stats = {
            "loss/policy": float(pg.detach()),
            "loss/kl": float(kl_ref.detach()),
            "loss/total": float(total.detach()),
            "policy/clip_frac": float(masked_mean(clipped, mask)),
            "policy/kl": float(approx_kl_old),
            "policy/entropy": ent,
        }
    return total, stats

