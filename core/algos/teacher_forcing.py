"""Teacher forcing: what the trainers compute from re-scoring sampled responses under prompts.

The forward passes themselves (the plain pass and the prompt-prefix-cached chunks) are
`core.algos.forward_passes`; this module is the maths on their logits:

- `response_logprobs`: rollout log-probs (and p_t for replay) under the full prompt x, by a pass;
  `logprobs_from_logits`: the same from the logits the sampling computed (no pass);
- `contrastive_distances`: relevance d[i, k, t] = JS distance between p_t and q_t, the distribution under
  the contrastive prompt x^-k (docs/METHOD.md, "MRTPO").

The SAME sampled token ids are teacher-forced in every pass, never a re-encoding of the text.
Shapes: B samples, K rewards, T response tokens (right-padded, `mask` (B, T) is 1 on real tokens),
V vocabulary. Never imports streamlit or plotly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from core.algos.forward_passes import chunk_ranges, teacher_forced_chunks
from core.algos.routing import PASS_DISTANCES, js_distance, logp_distance


def replay_precision(device_type: str, replay_dtype: str, run_context: contextlib.AbstractContextManager):
    """The context replay's no-gradient passes run in (docs/METHOD.md, "Replay precision"): `run_context`, the
    run's own precision, for replay_dtype "auto"; bf16 autocast on `device_type` for "bfloat16"; autocast off
    (fp32 compute for fp32 weights) for "float32". Only the compute precision of the forward changes: the
    log-softmax and the distances stay in float32 (`contrastive_distances` upcasts the logits)."""
    if replay_dtype == "auto":
        return run_context
    if replay_dtype not in ("float32", "bfloat16"):
        raise ValueError(f"unknown replay_dtype {replay_dtype!r}; valid: auto, float32, bfloat16")
    return torch.autocast(device_type, dtype=torch.bfloat16, enabled=replay_dtype == "bfloat16")


@dataclass
class ResponseLogprobs:
    """One teacher-forced pass over the sampled responses.

    token_logp: (B, T) log pi(y_t) of the sampled tokens (0 at padding) - the rollout log-probs;
    entropy: (B, T) next-token entropy (0 at padding);
    logp_full: (B, T, V) float32 next-token log-distributions (or None when not kept) - hand it to
    `contrastive_distances` so replay only runs the K contrastive passes.
    """

    token_logp: Tensor
    entropy: Tensor
    logp_full: Tensor | None


def _gather_tokens(logp: Tensor, token_ids: Tensor) -> Tensor:
    """(N,) log-probs of the tokens `token_ids` (N,) from log-distributions (N, V)."""
    return torch.gather(logp, -1, token_ids.long().unsqueeze(-1)).squeeze(-1)


def _logp_stats(logp: Tensor, token_ids: Tensor) -> tuple[Tensor, Tensor]:
    """(log pi(y), entropy) from log-distributions (..., V): gather, and H = -sum_v exp(l_v) l_v."""
    token_logp = torch.gather(logp, -1, token_ids.long().unsqueeze(-1)).squeeze(-1)
    entropy = -(logp.exp() * logp).sum(-1)
    return token_logp, entropy


class _LogprobsBuilder:
    """Fills a `ResponseLogprobs` chunk by chunk from logits whose row t predicts response token t:
    log-softmax, token log-probs and entropies on real tokens only."""

    def __init__(self, response_ids: Tensor, mask: Tensor, keep_full: bool):
        b, t = response_ids.shape
        self.response_ids, self.mask, self.keep_full = response_ids, mask.bool(), keep_full
        self.token_logp = torch.zeros((b, t), dtype=torch.float32, device=response_ids.device)
        self.entropy = torch.zeros_like(self.token_logp)
        self.logp_full: Tensor | None = None

    def add(self, idx: Tensor, logits: Tensor) -> None:
        """logits (n, t_c, V) for the samples `idx` (n,)."""
        t_c = logits.shape[1]
        real = self.mask[idx, :t_c]  # (n, t_c)
        ii, tt = idx[:, None].expand(-1, t_c)[real], real.nonzero()[:, 1]  # sample, position of each real token
        logp = torch.log_softmax(logits[real].float(), dim=-1)  # (N, V) real tokens only
        self.token_logp[ii, tt], self.entropy[ii, tt] = _logp_stats(logp, self.response_ids[ii, tt])
        if self.keep_full:
            if self.logp_full is None:
                b, t = self.token_logp.shape
                self.logp_full = torch.zeros((b, t, logp.shape[-1]), dtype=torch.float32, device=logp.device)
            self.logp_full[ii, tt] = logp

    def result(self) -> ResponseLogprobs:
        return ResponseLogprobs(self.token_logp, self.entropy, self.logp_full)


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
    no gradient (`teacher_forced_chunks`: each distinct prompt runs once; each chunk is cut to its
    longest response). log-softmax, token log-probs and entropies are taken on real tokens only.
    See `ResponseLogprobs`."""
    b, t = response_ids.shape
    if len(prompts_ids) != b:
        raise ValueError(f"{len(prompts_ids)} prompts for {b} response rows")
    lengths = resp_mask.bool().sum(-1).tolist()
    device = response_ids.device
    out = _LogprobsBuilder(response_ids, resp_mask, keep_full)
    live = [i for i in range(b) if lengths[i] > 0]
    for jobs, logits in teacher_forced_chunks(
        model, [prompts_ids[i] for i in live], response_ids, lengths, chunk, pad_token_id, rows=live
    ):
        out.add(torch.tensor([live[j] for j in jobs], dtype=torch.long, device=device), logits)
    return out.result()


@torch.no_grad()
def logprobs_from_logits(logits: Tensor, response_ids: Tensor, resp_mask: Tensor, keep_full: bool = True,
                         chunk: int = 64) -> ResponseLogprobs:
    """`ResponseLogprobs` from logits (B, T, V) whose row t predicts response token t, e.g. the ones the
    sampling computed (`core.model.sample_responses(keep_logits=True)`): the same quantities as
    `response_logprobs` without a forward pass (equal up to float rounding, since sampling ran the
    same policy on the same tokens). `chunk` rows at a time bound the float32 temporaries."""
    b, t = response_ids.shape
    if logits.shape[:2] != (b, t):
        raise ValueError(f"logits {tuple(logits.shape)} do not match responses {(b, t)}")
    out = _LogprobsBuilder(response_ids, resp_mask, keep_full)
    for rows in chunk_ranges(b, chunk):
        idx = torch.arange(rows.start, rows.stop, device=response_ids.device)
        out.add(idx, logits[rows.start: rows.stop].to(response_ids.device))
    return out.result()


@torch.no_grad()
def contrastive_distances(
    model: torch.nn.Module,
    prompts_ids: Sequence[Sequence[int]],
    contrastive_ids: Sequence[Sequence[Sequence[int] | None]],
    response_ids: Tensor,
    resp_mask: Tensor,
    chunk_size: int = 8,
    logp_full: Tensor | None = None,
    pad_token_id: int = 0,
    distance: str = "js",
    token_logp: Tensor | None = None,
) -> Tensor:
    """Relevance d[i, k, t] = js_distance(p_t, q_t) (B, K, T) by contrastive replay (`distance="logp"`:
    d = logp_distance(log p_t(y_t), log q_t(y_t)), the sampled token's log-probs only).

    p_t: next-token distribution at response position t under the full prompt x_i; q_t: the same
    under the contrastive prompt x_i^-k (`contrastive_ids[i][k]`, None when reward k does not apply
    to sample i -> d = NaN there). The SAME sampled response ids are teacher-forced in every pass
    (never a re-encoding of the text). All (sample, prompt variant) rows are batched together,
    `chunk_size` rows per forward pass, each chunk cut to its longest response, no gradient; each
    distinct prompt's KV state is computed once and shared by the G responses of its group
    (`teacher_forced_chunks`), and JS is computed on real tokens only.
    `logp_full` (B, T, V) from `response_logprobs` (the rollout pass) is reused when given;
    otherwise the full-prompt rows join the job list (a group's full rows before its contrastive
    rows) and are kept only until their sample's contrastive rows are done (memory stays bounded by
    the chunk). Padding positions get d = 0. For `distance="logp"` the full-prompt side needs only the
    sampled tokens' log-probs: `token_logp` (B, T) when given (else gathered from `logp_full`, else from
    the full-prompt rows, of which only the gathered (T_i,) values are kept).
    """
    if distance not in PASS_DISTANCES:
        raise ValueError(f"unknown distance {distance!r}; valid: {', '.join(PASS_DISTANCES)}")
    if distance == "logp" and token_logp is None and logp_full is not None:
        token_logp = torch.gather(logp_full, -1, response_ids.to(logp_full.device).long().unsqueeze(-1)).squeeze(-1)
    have_full = logp_full is not None if distance == "js" else token_logp is not None
    b, t = response_ids.shape
    if len(contrastive_ids) != b:
        raise ValueError(f"contrastive prompts for {len(contrastive_ids)} samples, responses for {b}")
    if len(prompts_ids) != b:
        raise ValueError(f"{len(prompts_ids)} prompts for {b} response rows")
    k_count = max((len(c) for c in contrastive_ids), default=0)
    device = response_ids.device
    d = torch.zeros((b, k_count, t), dtype=torch.float32, device=device)
    mask = resp_mask.bool()
    lengths = mask.sum(-1).tolist()
    applies = [
        [k for k in range(k_count) if k < len(contrastive_ids[i]) and contrastive_ids[i][k] is not None]
        for i in range(b)
    ]
    # Jobs (sample, k) with k = -1 for a full-prompt row: per group (same full prompt, first-seen order)
    # its full rows, then its contrastive rows prompt by prompt. A sample's rows all have its response
    # length, so the stable length sort in `teacher_forced_chunks` keeps its full row before them.
    groups: dict[tuple[int, ...], list[int]] = {}
    for i in range(b):
        if lengths[i] > 0 and applies[i]:
            groups.setdefault(tuple(prompts_ids[i]), []).append(i)
    jobs: list[tuple[int, int]] = []
    for members in groups.values():
        if not have_full:
            jobs.extend((i, -1) for i in members)
        variants: dict[tuple[int, ...], list[tuple[int, int]]] = {}
        for i in members:
            for k in applies[i]:
                variants.setdefault(tuple(contrastive_ids[i][k]), []).append((i, k))
        for rows in variants.values():
            jobs.extend(rows)
    remaining = {i: len(applies[i]) for i in {i for i, _ in jobs}}  # contrastive rows still to run
    prompts = [prompts_ids[i] if k < 0 else contrastive_ids[i][k] for i, k in jobs]
    # sample -> its (T_i, V) full-prompt log-distribution ((T_i,) sampled-token log-probs for "logp"), while needed
    cache: dict[int, Tensor] = {}
    for chunk_jobs, logits in teacher_forced_chunks(
        model, prompts, response_ids, lengths, chunk_size, pad_token_id, rows=[i for i, _ in jobs]
    ):
        t_c = logits.shape[1]
        pairs = [jobs[j] for j in chunk_jobs]
        idx = torch.tensor([i for i, _ in pairs], dtype=torch.long, device=device)
        real = mask[idx, :t_c]  # (n, t_c)
        n_real = real.sum(-1).tolist()
        logq = torch.log_softmax(logits[real].float(), dim=-1)  # (N, V): real tokens only, row by row
        starts = [0]
        for n in n_real:
            starts.append(starts[-1] + n)
        contrast = []  # (row in chunk) of the contrastive rows
        for row, (i, k) in enumerate(pairs):
            if k < 0:
                rows = logq[starts[row]: starts[row + 1]]
                cache[i] = rows if distance == "js" else _gather_tokens(rows, response_ids[i, : rows.shape[0]])
            else:
                contrast.append(row)
        if contrast:
            sel = torch.tensor(contrast, dtype=torch.long, device=device)
            real_c = real[sel]  # (n_c, t_c)
            ii = idx[sel][:, None].expand(-1, t_c)[real_c]  # sample, reward and position of each real token
            kk = torch.tensor([pairs[row][1] for row in contrast], dtype=torch.long, device=device)
            kk = kk[:, None].expand(-1, t_c)[real_c]
            tt = real_c.nonzero()[:, 1]
            full = logp_full if distance == "js" else token_logp
            if not have_full:
                logp = torch.cat([cache[pairs[row][0]] for row in contrast], 0)
            else:
                logp = full[ii.to(full.device), tt.to(full.device)].to(device)
            logq_c = logq if len(contrast) == len(pairs) else torch.cat(
                [logq[starts[row]: starts[row + 1]] for row in contrast], 0)
            if distance == "js":
                d[ii, kk, tt] = js_distance(logp, logq_c)
            else:
                d[ii, kk, tt] = logp_distance(logp, _gather_tokens(logq_c, response_ids[ii, tt]))
        for i, k in pairs:
            if k >= 0:
                remaining[i] -= 1
                if remaining[i] == 0:
                    cache.pop(i, None)
    for i in range(b):
        for k in range(k_count):
            if k not in applies[i]:
                d[i, k, :] = torch.nan
    return d
