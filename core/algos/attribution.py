"""Gradient-times-input relevance: how much the constraint sentence's tokens move each response token's log-prob.

- `constraint_token_range`: the positions [s, e) of the prompt x that x^-k lacks (common prefix / suffix);
- `gradxinput_relevance`: a[i, k, t] = |sum_{j in S_ik} e_j . grad_{e_j} log p(y_t | x_i, y_<t)|, all t at
  once by one forward-mode derivative per (sample, reward) row (docs/METHOD.md, "Relevance variants",
  "Gradient x input (`gradxinput`)").

The SAME sampled response ids are teacher-forced (never a re-encoding of the text), with the padding,
attention mask and position ids of `core.algos.forward_passes.teacher_forced_batch`.
Shapes: B samples, K rewards, T response tokens (right-padded), P prompt tokens (left-padded).
Never imports streamlit or plotly.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.autograd.forward_ad as fwad
from torch import Tensor

from core.algos.forward_passes import (
    _accepts_logits_to_keep,
    _cache_kwarg,
    _output_cache,
    chunk_ranges,
    teacher_forced_batch,
)


def constraint_token_range(prompt_ids: Sequence[int], contrastive_ids: Sequence[int]) -> tuple[int, int] | None:
    """The token positions [s, e) of x (`prompt_ids`) that x^-k (`contrastive_ids`) lacks, or None.

    x^-k is x with one contiguous part removed, x = prefix + removed + suffix, so
    s = len(longest common prefix) and e = len(x) - len(longest common suffix), the suffix not allowed to
    overlap the prefix in either list (its length is at most min(len(x), len(x^-k)) - s). Where the
    tokenisation at the cut differs (a merged token), [s, e) also covers the differing tokens of x.
    None when x^-k lacks nothing of x (e <= s: equal lists, or x^-k only inserts tokens).
    (docs/METHOD.md, "Gradient x input (`gradxinput`)".)
    """
    x, c = list(prompt_ids), list(contrastive_ids)
    s = 0
    while s < len(x) and s < len(c) and x[s] == c[s]:
        s += 1
    limit = min(len(x), len(c)) - s
    suf = 0
    while suf < limit and x[len(x) - 1 - suf] == c[len(c) - 1 - suf]:
        suf += 1
    e = len(x) - suf
    return (s, e) if e > s else None


def _forward_ad_attention():
    """SDPA restricted to its math backend: the fused CPU / CUDA kernels (flash, memory-efficient) have no
    forward-mode derivative, the math backend is plain matmul / softmax and has one."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(SDPBackend.MATH)


def _row_logp(model: torch.nn.Module, embeds: Tensor, attention_mask: Tensor, position_ids: Tensor,
              response_ids: Tensor, keep: dict, **cache_kwargs) -> Tensor:
    """(n, t) float32 log p(y_t | x, y_<t) of the teacher-forced response ids from input embeddings (n, P + t, d)."""
    t = response_ids.shape[1]
    kwargs = {"use_cache": False, **keep, **cache_kwargs}
    out = model(inputs_embeds=embeds, attention_mask=attention_mask, position_ids=position_ids, **kwargs)
    logits = out.logits[:, -(t + 1):-1, :].float()  # row t predicts response token t
    logp = torch.log_softmax(logits, dim=-1)
    return torch.gather(logp, -1, response_ids.long().unsqueeze(-1)).squeeze(-1)


def _log_prob_jvp(model: torch.nn.Module, embeds: Tensor, tangent: Tensor, attention_mask: Tensor,
                  position_ids: Tensor, response_ids: Tensor, keep: dict, cut: int) -> Tensor:
    """(n, t) d/dalpha log p(y_t) by forward-mode AD: the JVP of the token log-probs in the input embeddings
    `embeds` (n, L, d) along `tangent` (n, L, d). With `cut` > 0 (every tangent is 0 on columns < cut) those
    columns run first, without AD, into a KV cache (their states do not depend on alpha: the model is causal),
    and the derivative pass runs on columns >= cut only; `cut` = 0, or a model without a KV cache, runs all."""
    cache_kw = _cache_kwarg(model) if cut > 0 else None
    cache_kwargs: dict = {}
    start = 0
    with torch.no_grad(), _forward_ad_attention():  # no_grad: no backward graph over the parameters
        if cache_kw is not None:
            out = model(inputs_embeds=embeds[:, :cut], attention_mask=attention_mask[:, :cut],
                        position_ids=position_ids[:, :cut], use_cache=True)
            cache = _output_cache(out)
            if cache is not None:
                cache_kwargs, start = {cache_kw: cache, "use_cache": True}, cut
        with fwad.dual_level():
            dual = fwad.make_dual(embeds[:, start:], tangent[:, start:])
            logp = _row_logp(model, dual, attention_mask, position_ids[:, start:], response_ids, keep, **cache_kwargs)
            deriv = fwad.unpack_dual(logp).tangent
    if deriv is None:  # the tangent did not reach the log-probs: forward AD was off
        raise RuntimeError("forward-mode AD produced no derivative for the response log-probs")
    return deriv


def gradxinput_relevance(
    model: torch.nn.Module,
    prompts_ids: Sequence[Sequence[int]],
    contrastive_ids: Sequence[Sequence[Sequence[int] | None]],
    response_ids: Tensor,
    resp_mask: Tensor,
    pad_token_id: int = 0,
    chunk_size: int = 8,
    prefix_cache: bool = True,
) -> Tensor:
    """Relevance a[i, k, t] (B, K, T) by gradient x input over the constraint sentence's tokens
    (docs/METHOD.md, "Relevance variants", "Gradient x input (`gradxinput`)"):

        a[i,k,t] = | sum_{j in S_ik} e_j . grad_{e_j} log p(y_t | x_i, y_<t) |

    e_j the input embedding of prompt token j, S_ik = `constraint_token_range(prompts_ids[i],
    contrastive_ids[i][k])`. All t come from ONE forward-mode derivative per (i, k): with the constraint
    tokens' embeddings scaled, e_j -> (1 + alpha) e_j for j in S_ik, d/dalpha log p(y_t) at alpha = 0 is
    exactly the sum above (chain rule), i.e. the Jacobian-vector product of the token log-probs in the input
    embeddings along the tangent e_j on S_ik, 0 elsewhere (forward-mode AD, `torch.autograd.forward_ad`, with
    SDPA on its math backend: the fused kernels have no forward derivative). `chunk_size` (i, k) rows run per
    pass (rows are independent, so one JVP with every row's tangent gives every row's derivative), each
    chunk cut to its longest response, left-padded as `teacher_forced_batch` does it. With `prefix_cache`
    the chunk's columns before its earliest constraint token (tangent 0, states independent of alpha) run
    first without AD into a KV cache, and the derivative pass covers the rest (exact; a model without a KV
    cache runs whole). The embeddings are detached and no backward runs: no gradient reaches the model's
    parameters (their .grad is untouched). NaN on the whole row where `contrastive_ids[i][k]` is None
    (the reward does not apply) or S_ik is None (x^-k lacks nothing of x); 0 on padding (`resp_mask` 0).
    The model runs as the caller left it (train/eval mode, autocast: under bf16 autocast the tangent is
    bf16 too), outside inference mode (which switches forward AD off); log-softmax is taken in float32.
    """
    with torch.inference_mode(False):  # inference mode switches forward AD off: run outside it
        return _gradxinput(model, prompts_ids, contrastive_ids, response_ids, resp_mask, pad_token_id, chunk_size,
                           prefix_cache)


def _gradxinput(model, prompts_ids, contrastive_ids, response_ids, resp_mask, pad_token_id, chunk_size,
                prefix_cache) -> Tensor:
    """`gradxinput_relevance` in normal (not inference) mode."""
    b, t = response_ids.shape
    if len(prompts_ids) != b:
        raise ValueError(f"{len(prompts_ids)} prompts for {b} response rows")
    if len(contrastive_ids) != b:
        raise ValueError(f"contrastive prompts for {len(contrastive_ids)} samples, responses for {b}")
    k_count = max((len(c) for c in contrastive_ids), default=0)
    device = response_ids.device
    a = torch.full((b, k_count, t), float("nan"), dtype=torch.float32, device=device)
    mask = resp_mask.bool().to(device)
    lengths = mask.sum(-1).tolist()
    jobs: list[tuple[int, int, int, int]] = []  # (i, k, s, e)
    for i in range(b):
        for k in range(k_count):
            c = contrastive_ids[i][k] if k < len(contrastive_ids[i]) else None
            span = None if c is None else constraint_token_range(prompts_ids[i], c)
            if span is None:
                continue
            a[i, k] = 0.0
            if lengths[i] > 0:
                jobs.append((i, k, *span))
    embedding = model.get_input_embeddings()
    keep_kw = _accepts_logits_to_keep(model)
    for rows in chunk_ranges(len(jobs), chunk_size):
        chunk = [jobs[j] for j in rows]
        idx = torch.tensor([i for i, _, _, _ in chunk], dtype=torch.long, device=device)
        t_c = int(max(lengths[i] for i, _, _, _ in chunk))
        resp, resp_m = response_ids[idx, :t_c].to(device), mask[idx, :t_c]
        prompts = [prompts_ids[i] for i, _, _, _ in chunk]
        input_ids, attention_mask, position_ids = teacher_forced_batch(prompts, resp, resp_m, pad_token_id)
        p_max = input_ids.shape[1] - t_c
        scale = torch.zeros(input_ids.shape, dtype=torch.float32, device=device)  # d(1 + alpha m)/d alpha = m
        for row, (i, _, s, e) in enumerate(chunk):
            off = p_max - len(prompts_ids[i])
            scale[row, off + s: off + e] = 1.0
        cut = min(p_max - len(prompts_ids[i]) + s for i, _, s, _ in chunk)  # columns < cut: tangent 0
        with torch.no_grad():
            embeds = embedding(input_ids).detach()  # (n, P + t_c, d)
        tangent = embeds * scale.to(embeds.dtype)[..., None]  # e_j on S_ik, 0 elsewhere
        keep = {"logits_to_keep": t_c + 1} if keep_kw else {}
        deriv = _log_prob_jvp(model, embeds, tangent, attention_mask, position_ids, resp, keep,
                              cut if prefix_cache else 0)
        deriv = deriv.float().abs().masked_fill(~resp_m, 0.0)
        kk = torch.tensor([k for _, k, _, _ in chunk], dtype=torch.long, device=device)
        a[idx, kk, :t_c] = deriv
    return a
