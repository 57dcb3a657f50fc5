"""Contrastive replay (DESIGN.md §2, MRTPO steps 2-4) and span agreement metrics.

- `js_distance`: base-2 Jensen-Shannon distance between next-token distributions, in [0, 1].
- `routing_weights`, `specific_relevance`, `span_routing`: from relevance d[k, i, t] to routing
  weights w[k, i, t] (mean 1 over a response's tokens before clipping).
- `response_logprobs`, `contrastive_js`: teacher-force the sampled response ids under the full
  prompt and under each contrastive prompt (no gradient), batched and chunked.
- `mass_in_span`, `roc_auc`, `span_agreement`, `js_summary`: the per-step metrics.

Shapes: B samples, K rewards, T response tokens (right-padded, `mask` (B, T) is 1 on real tokens),
V vocabulary. A reward that does not apply to a sample's prompt has d = NaN for that sample.
Never imports streamlit or plotly.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from core.loss import entropy_from_logits, token_logprobs

LN2 = math.log(2.0)

# ----------------------------------------------------------------------------- relevance and routing


def js_distance(logp: Tensor, logq: Tensor) -> Tensor:
    """Base-2 Jensen-Shannon distance between distributions given as log-probs over the last dim.

    JSD(p, q) = 1/2 KL(p || m) + 1/2 KL(q || m), m = (p + q) / 2, in bits; distance = sqrt(JSD),
    in [0, 1]. Each KL term is computed as sum_v p_v * -log1p(expm1(log q_v - log p_v) / 2)
    (= p log(p / m)), which is exactly 0 where p_v == q_v (no sqrt-amplified rounding noise) and
    takes p_v = 0 (term 0) and q_v = 0 (term p log 2) safely. Symmetric bitwise. Returns shape
    logp.shape[:-1] in the input dtype (at least float32).
    """
    dtype = torch.promote_types(torch.promote_types(logp.dtype, logq.dtype), torch.float32)
    logp, logq = logp.to(dtype), logq.to(dtype)

    def kl_to_mixture(la: Tensor, lb: Tensor) -> Tensor:
        # p log(p/m) = -p log((1 + q/p) / 2) = -p log1p(expm1(lb - la) / 2); clamp keeps expm1 finite.
        diff = (lb - la).clamp(max=60.0)
        term = -torch.exp(la) * torch.log1p(0.5 * torch.expm1(diff))
        return torch.where(torch.isneginf(la), torch.zeros_like(term), term).sum(-1)

    jsd_bits = 0.5 * (kl_to_mixture(logp, logq) + kl_to_mixture(logq, logp)) / LN2
    return jsd_bits.clamp(0.0, 1.0).sqrt()


def routing_weights(d: Tensor, mask: Tensor, lam: float = 1.0, w_max: float = 5.0, sharpen: float = 1.0) -> Tensor:
    """Routing weights w[k, i, t] from relevance d (B, K, T) and the response mask (B, T).

    u[k, i, t] = T_i * d'[k, i, t] / sum_t d'[k, i, t],  d' = d ** sharpen (sharpen = 1: plain d),
    so u has mean 1 over the response's T_i tokens (sharpening is an exponent on u renormalised to
    mean 1);  w = clip((1 - lam) + lam * u, 0, w_max).
    lam = 1 is pure routing, lam = 0 uniform weights. A response whose d is all zero (or NaN: the
    reward does not apply) gets uniform weights 1; padding positions get 0.
    """
    mask_f = mask.to(torch.float32 if not d.is_floating_point() else d.dtype)[:, None, :]  # (B, 1, T)
    d = torch.nan_to_num(d.to(mask_f.dtype), nan=0.0).clamp(min=0.0) * mask_f
    if sharpen != 1.0:
        d = d.pow(sharpen)
    n_tokens = mask_f.sum(-1, keepdim=True)  # (B, 1, 1) = T_i
    total = d.sum(-1, keepdim=True)  # (B, K, 1)
    u = torch.where(total > 0, n_tokens * d / total.clamp(min=torch.finfo(d.dtype).tiny), torch.ones_like(d))
    w = ((1.0 - lam) + lam * u).clamp(0.0, w_max)
    return w * mask_f


def applicable_from(d: Tensor) -> Tensor:
    """(B, K) bool: reward k applies to sample i, i.e. its relevance row is not all NaN."""
    return ~torch.isnan(d).all(dim=-1)


def specific_relevance(d: Tensor, applicable: Tensor | None = None) -> Tensor:
    """`js_specific`: d_spec[k, i, t] = max(d[k, i, t] - mean_{j != k, j applicable} d[j, i, t], 0).

    The part of reward k's JS that removing the other constraints does not also cause. The mean
    runs over the other rewards that apply to sample i (`applicable` (B, K), default: rows of d that
    are not all NaN); with no other applicable reward (e.g. K = 1) d_spec = d. Non-applicable
    rewards stay NaN.
    """
    if applicable is None:
        applicable = applicable_from(d)
    app = applicable.to(d.dtype)[:, :, None]  # (B, K, 1)
    d0 = torch.nan_to_num(d, nan=0.0) * app
    others_sum = d0.sum(1, keepdim=True) - d0  # sum over applicable j != k
    others_n = app.sum(1, keepdim=True) - app
    others_mean = torch.where(others_n > 0, others_sum / others_n.clamp(min=1), torch.zeros_like(others_sum))
    spec = (d0 - others_mean).clamp(min=0.0)
    return torch.where(app.bool().expand_as(spec), spec, torch.full_like(spec, torch.nan))


def span_routing(span_mask: Tensor, mask: Tensor, lam: float = 1.0, w_max: float = 5.0) -> Tensor:
    """The `span` oracle: u = the verifier's inspected-span mask (B, K, T) scaled to mean 1 over the
    response (u = T_i s / sum_t s), then w = clip((1 - lam) + lam * u, 0, w_max) as in
    `routing_weights`. An empty span mask gives uniform weights; padding gets 0."""
    return routing_weights(span_mask.to(torch.float32), mask, lam=lam, w_max=w_max, sharpen=1.0)


# ----------------------------------------------------------------------------- span agreement metrics


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


# ----------------------------------------------------------------------------- teacher-forced passes


def teacher_forced_batch(
    prompts_ids: Sequence[Sequence[int]], response_ids: Tensor, resp_mask: Tensor, pad_token_id: int = 0
) -> tuple[Tensor, Tensor, Tensor]:
    """Inputs for teacher-forcing response rows under prompts: (input_ids, attention_mask, position_ids).

    Prompts are left-padded to the longest prompt P, so response token t of every row sits at
    column P + t and is predicted by the logits at column P + t - 1. The attention mask is 0 on the
    left padding and on the response's right padding; position ids count real tokens only
    (cumsum(attention_mask) - 1), so a row's positions do not depend on how much padding it got.
    """
    n, t = response_ids.shape
    if len(prompts_ids) != n:
        raise ValueError(f"{len(prompts_ids)} prompts for {n} response rows")
    if any(len(p) == 0 for p in prompts_ids):
        raise ValueError("every prompt needs at least one token (nothing would predict response token 0)")
    p_max = max(len(p) for p in prompts_ids)
    device = response_ids.device
    prompt_block = torch.full((n, p_max), pad_token_id, dtype=torch.long, device=device)
    prompt_attn = torch.zeros((n, p_max), dtype=torch.long, device=device)
    for row, ids in enumerate(prompts_ids):
        prompt_block[row, p_max - len(ids):] = torch.as_tensor(list(ids), dtype=torch.long, device=device)
        prompt_attn[row, p_max - len(ids):] = 1
    input_ids = torch.cat([prompt_block, response_ids.long()], dim=1)  # (n, P + T)
    attention_mask = torch.cat([prompt_attn, resp_mask.long()], dim=1)  # (n, P + T)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    return input_ids, attention_mask, position_ids


def _accepts_logits_to_keep(model: torch.nn.Module) -> bool:
    try:
        return "logits_to_keep" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


def response_logits(
    model: torch.nn.Module,
    prompts_ids: Sequence[Sequence[int]],
    response_ids: Tensor,
    resp_mask: Tensor,
    pad_token_id: int = 0,
) -> Tensor:
    """Logits (n, T, V) whose row t is the distribution that predicts response token t
    (model logits at column P + t - 1 of the left-padded sequence). Gradient follows the caller's
    context (wrap in torch.no_grad() for rollout / replay passes)."""
    t = response_ids.shape[1]
    input_ids, attention_mask, position_ids = teacher_forced_batch(prompts_ids, response_ids, resp_mask, pad_token_id)
    kwargs = {"logits_to_keep": t + 1} if _accepts_logits_to_keep(model) else {}
    out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False, **kwargs)
    logits = out.logits  # (n, T + 1, V) with logits_to_keep, else (n, P + T, V)
    return logits[:, -(t + 1):-1, :]


@dataclass
class ResponseLogprobs:
    """One teacher-forced pass over the sampled responses.

    token_logp: (B, T) log pi(y_t) of the sampled tokens (0 at padding) - the rollout log-probs;
    entropy: (B, T) next-token entropy (0 at padding);
    logp_full: (B, T, V) float32 next-token log-distributions (or None when not kept) - hand it to
    `contrastive_js` so replay only runs the K contrastive passes.
    """

    token_logp: Tensor
    entropy: Tensor
    logp_full: Tensor | None


def _chunks(n: int, size: int) -> list[range]:
    size = max(1, int(size))
    return [range(s, min(s + size, n)) for s in range(0, n, size)]


@torch.no_grad()
def response_logprobs(
    model: torch.nn.Module,
    prompts_ids: Sequence[Sequence[int]],
    response_ids: Tensor,
    resp_mask: Tensor,
    chunk: int = 8,
    keep_full: bool = True,
    pad_token_id: int = 0,
) -> ResponseLogprobs:
    """Teacher-force the sampled response ids under their prompts, `chunk` rows per forward pass,
    no gradient. Each chunk is cut to its longest response. See `ResponseLogprobs`."""
    b, t = response_ids.shape
    mask = resp_mask.bool()
    token_logp = torch.zeros((b, t), dtype=torch.float32, device=response_ids.device)
    entropy = torch.zeros_like(token_logp)
    logp_full = None
    for rows in _chunks(b, chunk):
        sl = slice(rows.start, rows.stop)
        t_c = int(mask[sl].sum(-1).max()) if t else 0
        if t_c == 0:
            continue
        logits = response_logits(
            model, [prompts_ids[i] for i in rows], response_ids[sl, :t_c], resp_mask[sl, :t_c], pad_token_id
        ).float()
        m = mask[sl, :t_c]
        token_logp[sl, :t_c] = torch.where(m, token_logprobs(logits, response_ids[sl, :t_c]), 0.0)
        entropy[sl, :t_c] = torch.where(m, entropy_from_logits(logits), 0.0)
        if keep_full:
            if logp_full is None:
                logp_full = torch.zeros((b, t, logits.shape[-1]), dtype=torch.float32, device=logits.device)
            logp_full[sl, :t_c] = torch.log_softmax(logits, dim=-1)
    return ResponseLogprobs(token_logp, entropy, logp_full)


@torch.no_grad()
def contrastive_js(
    model: torch.nn.Module,
    prompts_ids: Sequence[Sequence[int]],
    contrastive_ids: Sequence[Sequence[Sequence[int] | None]],
    response_ids: Tensor,
    resp_mask: Tensor,
    chunk_size: int = 8,
    logp_full: Tensor | None = None,
    pad_token_id: int = 0,
) -> Tensor:
    """Relevance d[i, k, t] = js_distance(p_t, q_t) (B, K, T) by contrastive replay.

    p_t: next-token distribution at response position t under the full prompt x_i; q_t: the same
    under the contrastive prompt x_i^-k (`contrastive_ids[i][k]`, None when reward k does not apply
    to sample i -> d = NaN there). The SAME sampled response ids are teacher-forced in every pass
    (never a re-encoding of the text). All (sample, prompt variant) rows are batched together,
    `chunk_size` rows per forward pass, each chunk cut to its longest response, no gradient.
    `logp_full` (B, T, V) from `response_logprobs` (the rollout pass) is reused when given;
    otherwise the full-prompt rows join the job list and are kept only until their sample's
    contrastive rows are done (memory stays bounded by the chunk). Padding positions get d = 0.
    """
    b, t = response_ids.shape
    if len(contrastive_ids) != b:
        raise ValueError(f"contrastive prompts for {len(contrastive_ids)} samples, responses for {b}")
    k_count = max((len(c) for c in contrastive_ids), default=0)
    device = response_ids.device
    d = torch.zeros((b, k_count, t), dtype=torch.float32, device=device)
    lengths = resp_mask.bool().sum(-1).tolist()
    full = object()  # marks a full-prompt job
    jobs: list[tuple[int, object]] = []
    last_job: dict[int, int] = {}
    for i in range(b):
        ks = [k for k in range(k_count) if k < len(contrastive_ids[i]) and contrastive_ids[i][k] is not None]
        if lengths[i] == 0 or not ks:
            continue
        if logp_full is None:
            jobs.append((i, full))
        jobs.extend((i, k) for k in ks)
        last_job[i] = len(jobs) - 1
    cache: dict[int, Tensor] = {}
    for rows in _chunks(len(jobs), chunk_size):
        chunk_jobs = [jobs[j] for j in rows]
        idx = torch.tensor([i for i, _ in chunk_jobs], dtype=torch.long, device=device)
        t_c = max(lengths[i] for i, _ in chunk_jobs)
        prompts = [prompts_ids[i] if k is full else contrastive_ids[i][k] for i, k in chunk_jobs]
        logits = response_logits(model, prompts, response_ids[idx, :t_c], resp_mask[idx, :t_c], pad_token_id)
        logq = torch.log_softmax(logits.float(), dim=-1)  # (n, t_c, V)
        for row, (i, k) in enumerate(chunk_jobs):  # full rows precede their sample's contrastive rows
            if k is full:
                cache[i] = logq[row, : lengths[i]]
        for row, (i, k) in enumerate(chunk_jobs):
            if k is full:
                continue
            n_i = lengths[i]
            logp = cache[i] if logp_full is None else logp_full[i, :n_i].to(device).float()
            d[i, k, :n_i] = js_distance(logp, logq[row, :n_i])
            if rows.start + row == last_job[i]:
                cache.pop(i, None)
    for i in range(b):
        for k in range(k_count):
            if k >= len(contrastive_ids[i]) or contrastive_ids[i][k] is None:
                d[i, k, :] = torch.nan
    return d
