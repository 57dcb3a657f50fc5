"""Advantage estimators for multi-reward RL: GRPO, GDPO and MRTPO (docs/METHOD.md).

Small pure torch functions, chosen by name through `ESTIMATORS` / `get_estimator` (the only place
that knows the names). Conventions shared by every function here:

- `rewards` is `(B, K)`: sample i (row), reward k (column). Rows of one prompt group are
  contiguous: samples `g*G .. g*G+G-1` form group g, so `B % G == 0`.
- A reward that does not apply to a prompt is NaN; it contributes nothing (its group-normalised
  advantage is 0 and it is left out of every sum and statistic).
- Standard deviations are unbiased (Bessel-corrected, divide by n-1); `eps` is added to the std.
- A set of values with zero spread (all equal), or with fewer than 2 applicable values (std
  undefined), normalises to exactly 0.
- `weights` are the per-reward weights `w_k` (sequence, tensor, or None for all ones).
- Local rows (data-parallel training): every statistic is a statistic of the whole batch, so a
  process that holds rows `rows` of it passes the whole batch's rewards (gathered, identical on every
  process) with only its own rows' routing weights and mask (`rows=` on the estimators,
  `batch_statistics` + `rows_token_advantages`); the result equals those rows of the full
  computation bitwise (docs/METHOD.md, "Local rows").

Never imports streamlit or plotly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
from torch import Tensor

DEFAULT_EPS = 1e-4


class TokenAdvantages(NamedTuple):
    """What every registered estimator returns.

    advantages: (B, T) token advantage A[i, t], 0 at padding.
    credit:     (B, K, T) reward k's term of A[i, t] (what the heatmaps show), 0 at padding.
    """

    advantages: Tensor
    credit: Tensor


# ----------------------------------------------------------------------------- helpers


def _as_float(rewards: Tensor) -> Tensor:
    rewards = torch.as_tensor(rewards)
    return rewards if rewards.is_floating_point() else rewards.to(torch.float32)


def _weights(weights: Sequence[float] | Tensor | None, k: int, like: Tensor) -> Tensor:
    """(K,) reward weights w_k on `like`'s device and dtype; None -> all ones."""
    if weights is None:
        return torch.ones(k, dtype=like.dtype, device=like.device)
    w = torch.as_tensor(weights, dtype=like.dtype, device=like.device).reshape(-1)
    if w.numel() != k:
        raise ValueError(f"got {w.numel()} reward weights for {k} rewards")
    return w


def _check_groups(n: int, group_size: int) -> int:
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    if n % group_size:
        raise ValueError(f"batch of {n} samples is not a whole number of groups of {group_size}")
    return n // group_size


def _normalize_within(x: Tensor, eps: float) -> Tensor:
    """Normalise along dim 1 of `x` (N, G, ...), ignoring NaN entries.

    z = (x - mean) / (std + eps), mean and unbiased std over the non-NaN entries of each slice.
    Edge cases: NaN entries -> 0; a slice with fewer than 2 non-NaN entries (std undefined) or with
    all its non-NaN entries equal (zero spread) -> exactly 0 (not (x - mean) / eps, which rounding
    in the mean could make nonzero).
    """
    valid = ~torch.isnan(x)
    n = valid.sum(dim=1, keepdim=True)
    x0 = torch.where(valid, x, torch.zeros_like(x))
    mean = x0.sum(dim=1, keepdim=True) / n.clamp(min=1)
    dev = torch.where(valid, x - mean, torch.zeros_like(x))
    var = (dev * dev).sum(dim=1, keepdim=True) / (n - 1).clamp(min=1)
    std = var.sqrt()
    hi = torch.where(valid, x, torch.full_like(x, -torch.inf)).amax(dim=1, keepdim=True)
    lo = torch.where(valid, x, torch.full_like(x, torch.inf)).amin(dim=1, keepdim=True)
    degenerate = (n < 2) | (hi == lo)
    z = dev / (std + eps)
    return torch.where(valid & ~degenerate, z, torch.zeros_like(z))


def _weighted_sum(w: Tensor, terms: Sequence[Tensor]) -> Tensor:
    """sum_k w_k * terms[k], accumulated left to right in a fixed order.

    A plain loop (K is small) so that the same numbers summed as (B,) or broadcast as (B, T) give
    bitwise identical results: that is what makes the MRTPO -> GDPO reduction exact.
    """
    total = w[0] * terms[0]
    for k in range(1, len(terms)):
        total = total + w[k] * terms[k]
    return total


def token_broadcast(seq_advantages: Tensor, mask: Tensor) -> Tensor:
    """(B,) per-response advantages -> (B, T) token advantages: A[i, t] = A_i * mask[i, t]."""
    return seq_advantages[:, None] * mask.to(seq_advantages.dtype)


# ----------------------------------------------------------------------------- the formulas


def group_normalized(rewards: Tensor, group_size: int, eps: float = DEFAULT_EPS) -> Tensor:
    """GDPO per-reward group normalisation a[k, i] (returned as (B, K), like `rewards`).

    a[k, i] = (r[k, i] - mean_G r[k]) / (std_G r[k] + eps), statistics over the applicable
    (non-NaN) members of sample i's group. NaN reward -> a = 0; a reward constant inside a group,
    or applicable to fewer than 2 of its samples (std undefined), gives 0 there.
    """
    rewards = _as_float(rewards)
    b, k = rewards.shape
    n_groups = _check_groups(b, group_size)
    return _normalize_within(rewards.reshape(n_groups, group_size, k), eps).reshape(b, k)


def grpo_advantages(
    rewards: Tensor, group_size: int, weights: Sequence[float] | Tensor | None = None, eps: float = DEFAULT_EPS
) -> Tensor:
    """GRPO: one advantage per response, (B, K) -> (B,).

    s_i = sum over the applicable (non-NaN) rewards of w_k r[k, i];
    A_i = (s_i - mean_G s) / (std_G s + eps) over sample i's group of G.
    Edge cases: a group whose s is constant (zero spread), or G = 1, gives 0; a sample with no
    applicable reward has s_i = 0.
    """
    rewards = _as_float(rewards)
    b, k = rewards.shape
    w = _weights(weights, k, rewards)
    n_groups = _check_groups(b, group_size)
    r0 = torch.nan_to_num(rewards, nan=0.0)
    s = _weighted_sum(w, [r0[:, j] for j in range(k)])  # (B,)
    return _normalize_within(s.reshape(n_groups, group_size), eps).reshape(b)


def gdpo_sums(rewards: Tensor, group_size: int, weights: Sequence[float] | Tensor | None = None,
              eps: float = DEFAULT_EPS) -> tuple[Tensor, Tensor]:
    """(a, s): a = `group_normalized` (B, K) and s_i = sum_k w_k a[k, i] (B,)."""
    rewards = _as_float(rewards)
    a = group_normalized(rewards, group_size, eps)
    w = _weights(weights, a.shape[1], a)
    return a, _weighted_sum(w, [a[:, j] for j in range(a.shape[1])])


def batch_stats(s: Tensor) -> tuple[Tensor, Tensor]:
    """(mu, sigma): batch mean and unbiased std of the GDPO sums s (B,); sigma = 0 when B < 2."""
    mu = s.mean()
    sigma = s.std(unbiased=True) if s.numel() > 1 else torch.zeros((), dtype=s.dtype, device=s.device)
    return mu, sigma


def _batch_degenerate(s: Tensor) -> bool:
    """True when batch normalisation is undefined (B < 2) or s has zero spread (-> advantages 0)."""
    return s.numel() < 2 or bool((s.amax() == s.amin()).item())


def gdpo_advantages(
    rewards: Tensor, group_size: int, weights: Sequence[float] | Tensor | None = None, eps: float = DEFAULT_EPS
) -> Tensor:
    """GDPO (group reward-decoupled normalisation): one advantage per response, (B, K) -> (B,).

    a[k, i] = (r[k, i] - mean_G r[k]) / (std_G r[k] + eps)   (`group_normalized`; NaN -> 0)
    s_i = sum_k w_k a[k, i]
    A_i = (s_i - mean_batch s) / (std_batch s + eps)
    Edge cases: a reward constant in a group contributes 0 there; a sample with no applicable
    reward has s_i = 0 and still counts in the batch statistics; a batch whose s is constant
    (e.g. every reward constant in every group) or B = 1 gives all 0.
    """
    _, s = gdpo_sums(rewards, group_size, weights, eps)
    if _batch_degenerate(s):
        return torch.zeros_like(s)
    mu, sigma = batch_stats(s)
    return (s - mu) / (sigma + eps)


class BatchStatistics(NamedTuple):
    """The GDPO statistics of a whole batch, from its (B, K) rewards (`batch_statistics`).

    group_adv: (B, K) a[k, i]; sums: (B,) s_i = sum_k w_k a[k, i]; mu, sigma: batch mean and unbiased
    std of s (0-dim); degenerate: True when batch normalisation is undefined (B < 2 or s constant:
    every advantage is then 0).
    """

    group_adv: Tensor
    sums: Tensor
    mu: Tensor
    sigma: Tensor
    degenerate: bool


def batch_statistics(
    rewards: Tensor, group_size: int, weights: Sequence[float] | Tensor | None = None, eps: float = DEFAULT_EPS
) -> BatchStatistics:
    """GDPO statistics of a batch (B, K): a = `group_normalized`, s = `gdpo_sums`, (mu, sigma) = `batch_stats`.

    In data-parallel training `rewards` is the gathered batch (the same on every process), so every
    process computes the same statistics and applies them to its own rows (`rows_token_advantages`).
    """
    a, s = gdpo_sums(rewards, group_size, weights, eps)
    mu, sigma = batch_stats(s)
    return BatchStatistics(a, s, mu, sigma, _batch_degenerate(s))


def _rows(rows: slice | None, n: int) -> slice:
    """`rows` as a slice of a batch of n samples (None: all of them); step 1, inside the batch."""
    if rows is None:
        return slice(0, n)
    start = 0 if rows.start is None else rows.start
    stop = n if rows.stop is None else rows.stop
    if rows.step not in (None, 1) or not 0 <= start <= stop <= n:
        raise ValueError(f"rows {rows} are not a contiguous range of the batch's {n} samples")
    return slice(start, stop)


def rows_token_advantages(
    stats: BatchStatistics,
    routing_weights: Tensor,
    rows: slice | None = None,
    weights: Sequence[float] | Tensor | None = None,
    eps: float = DEFAULT_EPS,
) -> tuple[Tensor, Tensor]:
    """MRTPO token advantages of some rows of a batch, from the whole batch's statistics.

    `stats` = `batch_statistics` of the whole batch (B, K); `routing_weights` (b, K, T) are w[k, i, t]
    for the rows `rows` of the batch (a slice of length b, default: all B rows). For those rows,
        A[i, t] = (sum_k w_k * w[k, i, t] * a[k, i] - mu) / (sigma + eps)
        credit[i, k, t] = w_k * w[k, i, t] * a[k, i] / (sigma + eps)
    Every operation after the statistics is elementwise per row, so the result is bitwise equal to
    rows `rows` of the same computation on the whole batch (docs/METHOD.md, "Local rows").
    Returns (advantages (b, T), credit (b, K, T)); no mask is applied (see `mrtpo_token_advantages`).
    """
    a_all = stats.group_adv
    rows = _rows(rows, a_all.shape[0])
    a = a_all[rows]
    routing_weights = routing_weights.to(a.dtype)
    b, k = a.shape
    if routing_weights.shape[:2] != (b, k):
        raise ValueError(f"routing weights {tuple(routing_weights.shape)} do not match rewards {(b, k)}")
    w = _weights(weights, k, a)
    if stats.degenerate:
        return torch.zeros_like(routing_weights[:, 0]), torch.zeros_like(routing_weights)
    # (w_k * w[k,i,t]) * a[k,i]: multiplying by a routing weight of exactly 1 leaves the term bitwise
    # equal to GDPO's w_k * a[k,i], and `_weighted_sum` adds the terms in the same order.
    terms = [routing_weights[:, j, :] * a[:, j, None] for j in range(k)]  # K x (b, T)
    numerator = _weighted_sum(w, terms)  # (b, T)
    advantages = (numerator - stats.mu) / (stats.sigma + eps)
    # credit = w[k, i, t] x c[i, k], one rounding after the pair's scale: the run store keeps c per pair and gives
    # the credit back bitwise from the stored weights (core.run.credit_format.credit_scales)
    scale = w[None, :] * a / (stats.sigma + eps)  # (b, K): c[i, k] = w_k a[k, i] / (sigma + eps)
    credit = routing_weights * scale[:, :, None]  # (b, K, T)
    return advantages, credit


def mrtpo_token_advantages(
    rewards: Tensor,
    routing_weights: Tensor,
    group_size: int,
    weights: Sequence[float] | Tensor | None = None,
    eps: float = DEFAULT_EPS,
    rows: slice | None = None,
) -> tuple[Tensor, Tensor]:
    """MRTPO token advantages: rewards (B, K), routing weights w[k, i, t] as (B, K, T).

    a[k, i] GDPO group-normalised advantages, s_i = sum_k w_k a[k, i], mu / sigma = batch mean /
    unbiased std of s;
        A[i, t] = (sum_k w_k * w[k, i, t] * a[k, i] - mu) / (sigma + eps)
        credit[i, k, t] = w_k * w[k, i, t] * a[k, i] / (sigma + eps)
    so that sum_k credit[i, k, t] - mu / (sigma + eps) == A[i, t] (up to rounding).
    Returns (advantages (B, T), credit (B, K, T)). No mask is applied here: padding positions,
    where the routing weights are 0, get A = -mu / (sigma + eps) (mu is ~0 since every a[k] has
    zero mean per group); multiply by the response mask (the registry entry does).
    Reduction: with all routing weights 1, A[i, t] equals `gdpo_advantages` A_i bitwise.
    Edge case: a batch whose s is constant (or B = 1) gives all 0, like GDPO.
    Local rows: with `rows` (a slice of the batch), `routing_weights` are those rows' (b, K, T) and the
    result is those rows of the full computation, bitwise (`rows_token_advantages`).
    """
    stats = batch_statistics(rewards, group_size, weights, eps)
    return rows_token_advantages(stats, routing_weights, rows, weights, eps)


# ----------------------------------------------------------------------------- registry
# Every registered estimator has the same signature:
#   estimator(rewards (B, K), routing_weights (b, K, T) | None, mask (b, T), group_size, weights, eps, rows=None)
#     -> TokenAdvantages(advantages (b, T), credit (b, K, T)), both 0 at padding (mask == 0).
# `rewards` is always the whole batch (its statistics are the batch's); `rows` (a slice, default all B) says
# which rows of it the routing weights and mask belong to, and the result is those rows (bitwise equal to
# slicing the full result). grpo and gdpo ignore routing_weights (their credit is each reward's share of the
# per-response advantage).

Estimator = Callable[..., TokenAdvantages]


def _grpo_estimator(
    rewards: Tensor, routing_weights: Tensor | None, mask: Tensor, group_size: int,
    weights: Sequence[float] | Tensor | None = None, eps: float = DEFAULT_EPS, rows: slice | None = None,
) -> TokenAdvantages:
    """GRPO broadcast over tokens. credit[i, k, t] = w_k (r[k, i] - mean_G r[k]) / (std_G s + eps),
    which sums over k to A_i when each reward's applicability is constant within a group (the case
    for NaN = "does not apply to this prompt"); 0 in groups whose s has zero spread."""
    rewards = _as_float(rewards)
    b, k = rewards.shape
    mask_f = mask.to(rewards.dtype)
    seq = grpo_advantages(rewards, group_size, weights, eps)
    n_groups = _check_groups(b, group_size)
    w = _weights(weights, k, rewards)
    r0 = torch.nan_to_num(rewards, nan=0.0)
    s = _weighted_sum(w, [r0[:, j] for j in range(k)]).reshape(n_groups, group_size)
    s_std = s.std(dim=1, keepdim=True, unbiased=True) if group_size > 1 else torch.zeros_like(s[:, :1])
    dead = (s.amax(1, keepdim=True) == s.amin(1, keepdim=True)) | (group_size < 2)  # (n_groups, 1)
    grouped = rewards.reshape(n_groups, group_size, k)
    valid = ~torch.isnan(grouped)
    mean_r = torch.where(valid, grouped, 0).sum(1, keepdim=True) / valid.sum(1, keepdim=True).clamp(min=1)
    dev = torch.where(valid, grouped - mean_r, 0) * w  # (n_groups, G, K)
    share = torch.where(dead[:, :, None], 0, dev / (s_std[:, :, None] + eps)).reshape(b, k)
    rows = _rows(rows, b)
    return TokenAdvantages(token_broadcast(seq[rows], mask_f), share[rows, :, None] * mask_f[:, None, :])


def _gdpo_estimator(
    rewards: Tensor, routing_weights: Tensor | None, mask: Tensor, group_size: int,
    weights: Sequence[float] | Tensor | None = None, eps: float = DEFAULT_EPS, rows: slice | None = None,
) -> TokenAdvantages:
    """GDPO broadcast over tokens; credit = MRTPO's credit with all routing weights 1:
    credit[i, k, t] = w_k a[k, i] / (sigma + eps)."""
    rewards = _as_float(rewards)
    ones = mask.to(rewards.dtype)[:, None, :].expand(-1, rewards.shape[1], -1)
    return _mrtpo_estimator(rewards, ones, mask, group_size, weights, eps, rows)


def scale_matched_gdpo_estimator(
    rewards: Tensor, routing_weights: Tensor | None, mask: Tensor, group_size: int,
    weights: Sequence[float] | Tensor | None = None, eps: float = DEFAULT_EPS, rows: slice | None = None,
) -> TokenAdvantages:
    """Scale-matched GDPO (the control, `reward_scales`; docs/METHOD.md "Controls"): `routing_weights` are c_k on
    every real token (`scale_matched_weights`), and
        A_i = (sum_k w_k c_k a[k, i] - mu) / (sigma + eps),  mu, sigma of s_i = sum_k w_k a[k, i] (unscaled)
        credit[i, k, t] = w_k c_k a[k, i] / (sigma + eps)
    so c_k survives the batch normalisation (reward_weights w_k do not: sigma moves with them). With every c_k = 1
    it is `gdpo` exactly. Not in `ESTIMATORS`: a gdpo run with reward_scales uses it (`core.run.batch.estimator`)."""
    rewards = _as_float(rewards)
    ones = mask.to(rewards.dtype)[:, None, :].expand(-1, rewards.shape[1], -1)
    scaled = ones if routing_weights is None else routing_weights.to(rewards.dtype) * ones
    return _mrtpo_estimator(rewards, scaled, mask, group_size, weights, eps, rows)


def scale_matched_weights(scales: Sequence[float], mask: Tensor) -> Tensor:
    """(B, K, T) weights c_k on every real token of `mask` (B, T), 0 at padding: what the gdpo estimator takes as
    `routing_weights` to scale reward k's group advantage by c_k (scale-matched GDPO)."""
    c = torch.as_tensor(list(scales), dtype=torch.float32)
    return c[None, :, None] * mask.to(torch.float32)[:, None, :]


def _mrtpo_estimator(
    rewards: Tensor, routing_weights: Tensor | None, mask: Tensor, group_size: int,
    weights: Sequence[float] | Tensor | None = None, eps: float = DEFAULT_EPS, rows: slice | None = None,
) -> TokenAdvantages:
    """`mrtpo_token_advantages`, then zeroed at padding."""
    if routing_weights is None:
        raise ValueError("the mrtpo estimator needs routing weights (B, K, T)")
    adv, credit = mrtpo_token_advantages(rewards, routing_weights, group_size, weights, eps, rows)
    mask_f = mask.to(adv.dtype)
    return TokenAdvantages(adv * mask_f, credit * mask_f[:, None, :])


ESTIMATORS: dict[str, Estimator] = {
    "grpo": _grpo_estimator,
    "gdpo": _gdpo_estimator,
    "mrtpo": _mrtpo_estimator,
}


# ----------------------------------------------------------------------------- TRL's sum_then_normalize, routed

SCALES = ("group", "batch", "none")


def sum_then_normalize_credit(rewards: Tensor, group_size: int, weights: Sequence[float] | Tensor | None = None,
                              scale: str = "group", eps: float = DEFAULT_EPS) -> Tensor:
    """Each reward's share c[i, k] (B, K) of TRL's `sum_then_normalize` advantage (docs/METHOD.md, "TRL's
    aggregations"), so that sum_k c[i, k] is TRL's A_i exactly:

        r~[i, k] = r[i, k] with NaN -> 0;  R_i = sum_k w_k r~[i, k]
        m[g, k]  = mean of r~[., k] over the scorable samples of group g (a sample is scorable when any reward
                   applies to it); sum_k w_k m[g, k] = mean_g R
        D_i      = std_g R + eps (scale "group"), std_batch R + eps ("batch"), 1 ("none"); unbiased std over the
                   scorable samples, TRL's nanstd
        c[i, k]  = w_k (r~[i, k] - m[g, k]) / D_i,   0 for an unscorable sample or where D_i is undefined
                   (fewer than 2 scorable samples)
    """
    if scale not in SCALES:
        raise ValueError(f"unknown scale_rewards {scale!r}; valid: {', '.join(SCALES)}")
    rewards = _as_float(rewards)
    b, k = rewards.shape
    n_groups = _check_groups(b, group_size)
    w = _weights(weights, k, rewards)
    scorable = ~torch.isnan(rewards).all(1)  # (B,)
    r0 = torch.nan_to_num(rewards, nan=0.0) * scorable[:, None]
    total = _weighted_sum(w, [r0[:, j] for j in range(k)])  # (B,) R_i
    sg = scorable.reshape(n_groups, group_size)
    n_g = sg.sum(1, keepdim=True)  # (groups, 1)
    mean_k = r0.reshape(n_groups, group_size, k).sum(1) / n_g.clamp(min=1)  # (groups, K)
    mean_r = _weighted_sum(w, [mean_k[:, j] for j in range(k)])  # (groups,)
    dev = torch.where(sg, total.reshape(n_groups, group_size) - mean_r[:, None], 0.0)  # (groups, G)
    if scale == "group":
        std = ((dev * dev).sum(1, keepdim=True) / (n_g - 1).clamp(min=1)).sqrt().expand(-1, group_size)
        denom, defined = std + eps, (n_g >= 2).expand(-1, group_size)
    elif scale == "batch":
        n = scorable.sum()
        mean_all = torch.where(scorable, total, 0.0).sum() / n.clamp(min=1)
        var = (torch.where(scorable, total - mean_all, 0.0) ** 2).sum() / (n - 1).clamp(min=1)
        denom, defined = (var.sqrt() + eps).expand(n_groups, group_size), (n >= 2).expand(n_groups, group_size)
    else:  # "none": the deviation from the group mean as it is
        denom, defined = torch.ones_like(dev), torch.ones_like(dev, dtype=torch.bool)
    share = w * (r0 - mean_k.repeat_interleave(group_size, 0)) / denom.reshape(b, 1)  # (B, K)
    live = (scorable & defined.reshape(b))[:, None]
    return torch.where(live, share, torch.zeros_like(share))


def routed_sum_estimator(scale: str) -> Estimator:
    """The estimator of TRL's `sum_then_normalize` with `scale_rewards=scale`, routed to tokens:
    A[i, t] = sum_k w[k, i, t] c[i, k] and credit[i, k, t] = w[k, i, t] c[i, k] (`sum_then_normalize_credit`);
    with every routing weight 1 (routing=uniform, method grpo) A[i, t] is TRL's own A_i on every token."""

    def estimator(rewards: Tensor, routing_weights: Tensor | None, mask: Tensor, group_size: int,
                  weights: Sequence[float] | Tensor | None = None, eps: float = DEFAULT_EPS,
                  rows: slice | None = None) -> TokenAdvantages:
        c = sum_then_normalize_credit(rewards, group_size, weights, scale, eps)[_rows(rows, rewards.shape[0])]
        mask_f = mask.to(c.dtype)
        omega = mask_f[:, None, :].expand(-1, c.shape[1], -1) if routing_weights is None else \
            routing_weights.to(c.dtype)
        credit = omega * c[:, :, None] * mask_f[:, None, :]  # (b, K, T)
        adv = _weighted_sum(torch.ones(c.shape[1], dtype=c.dtype), [credit[:, j] for j in range(c.shape[1])])
        return TokenAdvantages(adv * mask_f, credit)

    return estimator


def trl_estimator(method: str, aggregation: str, scale: str = "group") -> Estimator:
    """The estimator `MRTPOTrainer` uses for TRL's `multi_objective_aggregation` and `scale_rewards`:
    normalize_then_sum -> the registered `method` (mrtpo routes GDPO; gdpo; grpo); sum_then_normalize ->
    `routed_sum_estimator(scale)` (mrtpo routes it; grpo is it with uniform weights)."""
    if aggregation == "normalize_then_sum":
        return get_estimator(method)
    if aggregation != "sum_then_normalize" or method == "gdpo":
        raise ValueError(f"method {method!r} with multi_objective_aggregation {aggregation!r} is not defined")
    routed = routed_sum_estimator(scale)
    if method == "mrtpo":
        return routed

    def uniform(rewards, routing_weights, mask, group_size, weights=None, eps=DEFAULT_EPS, rows=None):
        return routed(rewards, None, mask, group_size, weights, eps, rows)

    return uniform


def get_estimator(name: str) -> Estimator:
    """The registered estimator called `name`; unknown names raise ValueError listing the valid ones."""
    try:
        return ESTIMATORS[name]
    except KeyError:
        raise ValueError(f"unknown advantage estimator {name!r}; valid: {', '.join(sorted(ESTIMATORS))}") from None
