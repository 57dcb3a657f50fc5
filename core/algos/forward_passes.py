"""Teacher-forced forward passes over a causal LM: the sampled response ids re-scored under prompts.

- `teacher_forced_batch`, `response_logits`: the plain (uncached, gradient-capable) pass the update
  uses and the reference the cached path is tested against;
- `teacher_forced_chunks`: chunked, no-gradient passes in which each distinct prompt's KV state is
  computed once (`_PrefixStore`, over transformers' Cache API) and shared by the G responses of its
  group, rows longest-first.

The maths on the logits (log-probs, entropy, relevance distances) is `core.algos.teacher_forcing`.
Shapes: n rows, T response tokens (right-padded), P prompt tokens (left-padded), V vocabulary.
Never imports streamlit or plotly.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import torch
from torch import Tensor


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


def chunk_ranges(n: int, size: int) -> list[range]:
    size = max(1, int(size))
    return [range(s, min(s + size, n)) for s in range(0, n, size)]


# ---- prompt-prefix caching: each distinct prompt's KV state is computed once and shared by its rows

SORT_WINDOW_CHUNKS = 8  # teacher_forced_chunks sorts jobs by response length within windows of this many chunks


def _cache_kwarg(model: torch.nn.Module) -> str | None:
    """The name under which `model.forward` takes a KV cache (`cache` in transformers >= 5.x, formerly
    `past_key_values`), or None when it takes none (then the uncached path runs)."""
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return None
    return next((name for name in ("cache", "past_key_values") if name in params), None)


def _output_cache(out):
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


def _cache_layers(cache) -> list[tuple[Tensor, Tensor]] | None:
    """Per-layer (keys, values), each (n, heads, P, head_dim), of a transformers `DynamicCache` (None
    when the cache has another layout)."""
    layers = getattr(cache, "layers", None)
    if not layers or not all(hasattr(layer, "keys") and hasattr(layer, "values") for layer in layers):
        return None
    return [(layer.keys, layer.values) for layer in layers]


def _new_cache(model: torch.nn.Module, kv: Sequence[tuple[Tensor, Tensor]]):
    from transformers import DynamicCache

    cache = DynamicCache(config=getattr(model, "config", None))
    for layer, (keys, values) in enumerate(kv):
        cache.update(keys, values, layer)
    return cache


class _NoCache(Exception):
    """The model returned no DynamicCache-style KV cache (e.g. caching is switched off)."""


def _left_pad(x: Tensor, width: int, seq_dim: int) -> Tensor:
    """x with zeros prepended along `seq_dim` up to `width` columns (x itself when already that wide)."""
    extra = width - x.shape[seq_dim]
    if extra == 0:
        return x
    shape = list(x.shape)
    shape[seq_dim] = extra
    return torch.cat([x.new_zeros(shape), x], dim=seq_dim)


class _PrefixBatch:
    """The KV state of a few distinct prompts, left-padded to their longest one (P columns)."""

    def __init__(self, kv: list[tuple[Tensor, Tensor]], attn: Tensor, first_logits: Tensor, last_use: int):
        self.kv = kv  # per layer (keys, values), each (n, heads, P, head_dim)
        self.attn = attn  # (n, P) 1 on prompt tokens
        self.lengths = attn.sum(-1)  # (n,) prompt lengths
        self.first_logits = first_logits  # (n, V) logits at the last prompt token: predict response token 0
        self.last_use = last_use  # the last chunk that reads this batch


class _PrefixStore:
    """Distinct prompts' KV states for `teacher_forced_chunks`: computed `batch` prompts per forward
    pass (left-padded, attention mask 0 on the padding, position ids counting real tokens) in the
    order the chunks first need them, and dropped after the last chunk that reads them (with
    group-contiguous jobs: the prompts of about two sorting windows, however many a step has)."""

    def __init__(self, model, order: list[tuple[int, ...]], last_use: dict[tuple[int, ...], int], batch: int,
                 pad_token_id: int, cache_kw: str, device: torch.device):
        self.model, self.order, self.last_use, self.batch = model, order, last_use, max(1, int(batch))
        self.pad, self.cache_kw, self.device = pad_token_id, cache_kw, device
        self.keep = {"logits_to_keep": 1} if _accepts_logits_to_keep(model) else {}
        self.next = 0  # order[:next] have been computed
        self.where: dict[tuple[int, ...], tuple[_PrefixBatch, int]] = {}

    def compute_next(self) -> None:
        prompts = self.order[self.next: self.next + self.batch]
        self.next += len(prompts)
        n, p_max = len(prompts), max(len(p) for p in prompts)
        ids = torch.full((n, p_max), self.pad, dtype=torch.long, device=self.device)
        attn = torch.zeros((n, p_max), dtype=torch.long, device=self.device)
        for row, p in enumerate(prompts):
            ids[row, p_max - len(p):] = torch.as_tensor(p, dtype=torch.long, device=self.device)
            attn[row, p_max - len(p):] = 1
        position_ids = (attn.cumsum(-1) - 1).clamp(min=0)
        out = self.model(input_ids=ids, attention_mask=attn, position_ids=position_ids, use_cache=True, **self.keep)
        kv = _cache_layers(_output_cache(out))
        if kv is None:
            raise _NoCache()
        entry = _PrefixBatch(kv, attn, out.logits[:, -1, :], max(self.last_use[p] for p in prompts))
        for row, p in enumerate(prompts):
            self.where[p] = (entry, row)

    def gather(self, prompts: Sequence[tuple[int, ...]]):
        """A fresh cache holding the rows' prompts, its attention mask (n, P), the prompt lengths (n,) and
        the logits for response token 0 (n, V). Rows from batches of different widths are left-padded
        (zero keys and values, attention mask 0) to the widest of them."""
        while any(p not in self.where for p in prompts):
            self.compute_next()
        batches: list[_PrefixBatch] = []
        idx = []  # each row's index into the batches stacked in this order
        for p in prompts:
            entry, row = self.where[p]
            j = next((j for j, b in enumerate(batches) if b is entry), None)
            if j is None:
                j = len(batches)
                batches.append(entry)
            idx.append((j, row))
        offsets = [0]
        for entry in batches:
            offsets.append(offsets[-1] + entry.attn.shape[0])
        index = torch.tensor([offsets[j] + row for j, row in idx], dtype=torch.long, device=self.device)
        width = max(entry.attn.shape[1] for entry in batches)

        def stacked(parts: list[Tensor], seq_dim: int) -> Tensor:
            parts = [_left_pad(x, width, seq_dim) for x in parts]
            return (parts[0] if len(parts) == 1 else torch.cat(parts, 0)).index_select(0, index)

        kv = [
            (stacked([e.kv[layer][0] for e in batches], 2), stacked([e.kv[layer][1] for e in batches], 2))
            for layer in range(len(batches[0].kv))
        ]
        attn = stacked([e.attn for e in batches], 1)
        firsts = [e.first_logits for e in batches]
        first = (firsts[0] if len(firsts) == 1 else torch.cat(firsts, 0)).index_select(0, index)
        return _new_cache(self.model, kv), attn, attn.sum(-1), first

    def release(self, chunk: int) -> None:
        """Drop the batches no chunk after `chunk` reads."""
        self.where = {p: (e, r) for p, (e, r) in self.where.items() if e.last_use > chunk}


@torch.no_grad()  # on a generator function: grad mode is off inside each step, not in the caller's code
def teacher_forced_chunks(
    model: torch.nn.Module,
    prompts_ids: Sequence[Sequence[int]],
    response_ids: Tensor,
    lengths: Sequence[int],
    chunk: int = 8,
    pad_token_id: int = 0,
    rows: Sequence[int] | None = None,
):
    """Teacher-force response rows under prompts, `chunk` rows per forward pass; yields
    `(jobs, logits)` per chunk: `jobs` a list of job indices, `logits` (n, t_c, V) whose row t is the
    distribution that predicts response token t (t_c = the chunk's longest response; rows beyond a
    response's length are padding). Job j teacher-forces `response_ids[rows[j]]` (its first
    `lengths[rows[j]]` tokens) under `prompts_ids[j]` (`rows` defaults to 0..n-1).

    Within each window of `SORT_WINDOW_CHUNKS` chunks of jobs (in the given order), jobs run longest
    response first (a stable sort: equal lengths keep their job order), so a chunk's rows have
    similar lengths and little padding. Each distinct prompt runs once
    (`_PrefixStore`): its KV state is shared by all its rows, and the logits at its last token give
    every row's distribution for token 0. The response tokens 0..t_c-2 then run on top of the prompt
    cache (attention mask = prompt mask + response mask, position ids continuing from the prompt's
    length), giving the distributions for tokens 1..t_c-1. Equal to `response_logits` on the full
    left-padded sequences up to float rounding. Memory: one chunk's rows plus the KV state of the
    distinct prompts still needed; give jobs that share a prompt contiguously (a group's rows) and
    that is the prompts of about two windows (a prompt costs P tokens of KV, a row P + T in the
    uncached path). Models whose forward takes no KV cache fall back to `response_logits`.
    No gradient is tracked."""
    n_jobs = len(prompts_ids)
    rows = list(range(n_jobs)) if rows is None else list(rows)
    if len(rows) != n_jobs:
        raise ValueError(f"{n_jobs} prompts for {len(rows)} response rows")
    if any(len(p) == 0 for p in prompts_ids):
        raise ValueError("every prompt needs at least one token (nothing would predict response token 0)")
    device = response_ids.device
    lengths = [int(x) for x in lengths]
    window = max(1, int(chunk)) * SORT_WINDOW_CHUNKS  # sort by length within windows of jobs (bounds memory)
    order = [j for w in chunk_ranges(n_jobs, window) for j in sorted(w, key=lambda j: -lengths[rows[j]])]
    chunks = [[order[j] for j in c] for c in chunk_ranges(n_jobs, chunk)]
    cache_kw = _cache_kwarg(model)
    store = None
    if cache_kw is not None and chunks:
        keys = [tuple(int(x) for x in p) for p in prompts_ids]
        need: list[tuple[int, ...]] = []  # distinct prompts in order of first need
        last_use: dict[tuple[int, ...], int] = {}
        for c, jobs in enumerate(chunks):
            for j in jobs:
                if keys[j] not in last_use:
                    need.append(keys[j])
                last_use[keys[j]] = c
        store = _PrefixStore(model, need, last_use, chunk, pad_token_id, cache_kw, device)
        try:
            store.compute_next()  # the first prompts; a model that returns no usable cache runs uncached
        except _NoCache:
            store = None
    for c, jobs in enumerate(chunks):
        lens = torch.tensor([lengths[rows[j]] for j in jobs], dtype=torch.long, device=device)
        t_c = int(lens.max())
        idx = torch.tensor([rows[j] for j in jobs], dtype=torch.long, device=device)
        if store is None:
            mask = torch.arange(t_c, device=device)[None, :] < lens[:, None]
            yield jobs, response_logits(model, [prompts_ids[j] for j in jobs], response_ids[idx, :t_c], mask,
                                        pad_token_id)
            continue
        cache, prompt_attn, prompt_len, first = store.gather([keys[j] for j in jobs])
        if t_c <= 1:
            logits = first[:, None, :][:, :t_c]
        else:
            steps = torch.arange(t_c - 1, device=device)
            out = model(
                input_ids=response_ids[idx, : t_c - 1].long(),
                attention_mask=torch.cat([prompt_attn, (steps[None, :] < lens[:, None]).long()], dim=1),
                position_ids=prompt_len[:, None] + steps[None, :],
                use_cache=True,
                **{cache_kw: cache},
            )  # logits (n, t_c - 1, V) predict tokens 1..t_c-1
            logits = torch.cat([first[:, None, :].to(out.logits.dtype), out.logits], dim=1)
        del cache
        store.release(c)
        yield jobs, logits
