"""One generation batch as both trainers hold it, and the phases they share (verify, route).

The built-in loop (`core.run.step`) and `MRTPOTrainer` on TRL (`core.integrations.trl`) differ in how a
batch is generated and updated; the middle of a step is the same code:

    Rollout      (B,) prompts and sampled responses: ids and mask (B, T), text, each token's text and
                 character offsets (`decode_responses`)
    Scores       rewards (B, K), NaN where a reward does not apply; span masks (B, K, T) (`verify`)
    Routing      routing weights and relevance distances (B, K, T), the replayed pairs (B, K), the
                 policy's entropy (B, T) (`route`: `core.algos.routing.ROUTING`, replay through a
                 `distances` callable each trainer provides: its contrastive passes)
    Advantages   token advantages (B, T), per-reward credit (B, K, T), GDPO group advantages (B, K)

`core.run.record` turns these four into a step's metrics line and credit map. Shapes: B samples (rows of
a group contiguous), K rewards, T response tokens (right-padded; `mask` is 1 on real tokens, eos
included). The config `cfg` of `choose_replay_pairs` / `route` is a `TrainConfig` or an `MRTPOConfig`:
both have `method`, `routing`, `relevance`, `lam`, `w_max`, `routing_clip`, `sharpen` and `replay_pairs`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from core import model as model_lib
from core.algos import advantages as adv_lib
from core.algos import routing as routing_lib
from core.choices import routing_source

# ------------------------------------------------------------------------------------------ the batch


@dataclass
class Rollout:
    """G sampled responses per prompt, with what the later phases need per sample."""

    items: list  # (B,) each sample's prompt: a PromptItem (or any object with `.key` and `.prompt()`)
    prompt_ids: list[list[int]]  # (B,) chat-formatted prompt token ids
    response_ids: Tensor  # (B, T) sampled ids, padded with pad_id after the response
    mask: Tensor  # (B, T) 1 on response tokens (up to and including eos)
    logits: Tensor | None = None  # (B, T, V) next-token logits sampling computed (kept when replay needs p_t)
    texts: list[str] = field(default_factory=list)  # (B,) decoded responses
    tokens: list[list[str]] = field(default_factory=list)  # (B, T_i) each token's text
    offsets: list[list[tuple[int, int]]] = field(default_factory=list)  # (B, T_i) char range in texts[i]


@dataclass
class Scores:
    rewards: Tensor  # (B, K), NaN where reward k does not apply to sample i's prompt
    span_mask: Tensor  # (B, K, T) bool: token t overlaps a span verifier k inspected

    @property
    def applicable(self) -> Tensor:
        """(B, K) bool: reward k applies to sample i's prompt."""
        return ~torch.isnan(self.rewards)


@dataclass
class Routing:
    weights: Tensor | None  # (B, K, T) routing weights; None when the estimator ignores them
    distances: Tensor | None  # (B, K, T) relevance distance d, JS or log-prob (NaN where not computed); None: no replay
    replayed: Tensor | None = None  # (B, K) bool: pairs whose contrastive pass ran; None when no replay ran
    entropy: Tensor | None = None  # (B, T) the policy's next-token entropy under x (replay only; the metrics' baseline)
    routable: Tensor | None = None  # (B, K) bool: pairs that have a contrast (None: every applicable pair)


@dataclass
class Advantages:
    token_adv: Tensor  # (B, T) A[i, t], 0 at padding
    credit: Tensor  # (B, K, T) reward k's term of A[i, t]
    group_adv: Tensor  # (B, K) a[k, i], the GDPO group-normalised advantages


# ------------------------------------------------------------------------------------------ decode


def decode_responses(tokenizer, responses: Sequence[Sequence[int]]
                     ) -> tuple[list[str], list[list[str]], list[list[tuple[int, int]]]]:
    """Each response's text, its tokens' texts and their character offsets in the text (B lists), decoded
    incrementally from the sampled ids (`core.model.decode_with_offsets`), never from a re-encoding."""
    texts, tokens, offsets = [], [], []
    for ids in responses:
        text, offs = model_lib.decode_with_offsets(tokenizer, list(ids))
        texts.append(text)
        offsets.append([(int(a), int(b)) for a, b in offs])
        tokens.append([text[a:b] for a, b in offs])
    return texts, tokens, offsets


# ------------------------------------------------------------------------------------------ verify


def span_token_mask(offsets: list[tuple[int, int]], spans, width: int) -> np.ndarray:
    """(width,) bool: token t overlaps a character span [s, e) (start_t < e and s < end_t; empty tokens never)."""
    out = np.zeros(width, dtype=bool)
    if not spans or not offsets:
        return out
    tok = np.asarray(offsets, dtype=np.int64)  # (T_i, 2)
    sp = np.asarray(spans, dtype=np.int64)  # (S, 2)
    hit = (tok[:, None, 0] < sp[None, :, 1]) & (sp[None, :, 0] < tok[:, None, 1])  # (T_i, S)
    out[: len(offsets)] = hit.any(1) & (tok[:, 0] < tok[:, 1])
    return out


def verify(items: Sequence, texts: Sequence[str], offsets: Sequence[list[tuple[int, int]]], names: Sequence[str],
           width: int, check_stop: Callable[[], None] | None = None) -> Scores:
    """Score every response with every reward its prompt states (`PromptItem.verify`) and map the verifiers'
    character spans to tokens: rewards (B, K), NaN where a reward does not apply, span masks (B, K, width).
    `check_stop` is called before each response (it raises to stop: a stop request is honoured within one
    response's checks, each at most the custom verifiers' time limit)."""
    rewards = torch.full((len(items), len(names)), float("nan"))  # (B, K)
    span_mask = np.zeros((len(items), len(names), width), dtype=bool)  # (B, K, T)
    for i, (item, text) in enumerate(zip(items, texts, strict=True)):
        if check_stop is not None:
            check_stop()
        for k, result in enumerate(item.verify(text, names)):
            if result is None:
                continue
            rewards[i, k] = float(result.score)
            span_mask[i, k] = span_token_mask(offsets[i], result.spans, width)
    return Scores(rewards, torch.from_numpy(span_mask))


# ------------------------------------------------------------------------------------------ route


def estimator(cfg: Any, base: adv_lib.Estimator) -> adv_lib.Estimator:
    """The estimator a run uses: `base` (the config's method, or TRL's aggregation of it), or scale-matched GDPO
    (`core.algos.advantages.scale_matched_gdpo_estimator`) for a gdpo run with `reward_scales`, whose routing
    weights `route` gives as c_k."""
    if getattr(cfg, "method", None) == "gdpo" and getattr(cfg, "reward_scales", None):
        return adv_lib.scale_matched_gdpo_estimator
    return base

# (B, K) bool pairs -> (B, K, T) relevance distances d, NaN outside the pairs: the trainer's contrastive passes
# (`core.algos.teacher_forcing.contrastive_distances` on its model and its prompts' token ids).
DistanceFn = Callable[[Tensor], Tensor]


def choose_replay_pairs(cfg: Any, group_adv: Tensor, applicable: Tensor) -> Tensor:
    """(B, K) bool: the (sample, reward) pairs replay runs a contrastive pass for. `replay_pairs=nonzero_adv`:
    where reward k's GDPO group advantage a[k, i] (B, K) is nonzero (`core.algos.routing.replay_pairs`; the
    others cannot change a token advantage); `all`: every applicable pair."""
    if cfg.replay_pairs == "all":
        return applicable
    return routing_lib.replay_pairs(group_adv, applicable, cfg.relevance)


def route(cfg: Any, mask: Tensor, scores: Scores, group_adv: Tensor, distances: DistanceFn,
          entropy: Tensor | None = None, routable: Tensor | None = None, step: int = 0,
          scales: Sequence[float] | None = None, rows_before: int = 0) -> Routing:
    """Routing weights w[k, i, t] (B, K, T) from the config's routing source (`core.choices.routing_source`,
    `core.algos.routing.ROUTING`); replay calls `distances` for the pairs `choose_replay_pairs` selects.
    `Routing(None, None)` for estimators that ignore routing (grpo, gdpo). `entropy` (B, T), the policy's
    next-token entropy under x where the trainer has it, is kept for the span metrics' baseline. `routable` (B, K)
    bool: the pairs that have a contrastive prompt (MRTPOTrainer: a reward without a contrast, or a row where its
    contrast finds nothing); replay skips the others, whose weights are then uniform (None: every pair).
    The controls (docs/METHOD.md, "Controls"): `routing=entropy` needs `entropy`; `routing_shuffle=on` permutes the
    weights with the generator of (`routing_shuffle_seed`, `step`) (`rows_before`: the batch rows of the processes
    before this one, `shuffle_routing`); `scales` (K,), GDPO's `reward_scales` in reward
    order, become constant weights c_k on every real token, which the gdpo estimator applies after its statistics."""
    source = routing_source(cfg)
    if source is None:
        if scales is None:
            return Routing(None, None)
        return Routing(adv_lib.scale_matched_weights(scales, mask), None)  # (B, K, T) c_k on real tokens
    applicable = scores.applicable
    pairs = choose_replay_pairs(cfg, group_adv, applicable) if source == "replay" else None
    if pairs is not None and routable is not None:
        pairs = pairs & routable.bool()
    inputs = routing_lib.RoutingInputs(
        mask=mask, span_mask=scores.span_mask, applicable=applicable, lam=cfg.lam, w_max=cfg.w_max,
        sharpen=cfg.sharpen, relevance=cfg.relevance, distances=distances, replay=pairs, clip=cfg.routing_clip,
        entropy=entropy, entropy_q=getattr(cfg, "entropy_q", 0.2),
    )
    with torch.no_grad():
        weights, d = routing_lib.get_routing(source)(inputs)
        if getattr(cfg, "routing_shuffle", "off") == "on":
            weights = routing_lib.shuffle_routing(weights, mask, routing_lib.shuffle_generator(
                cfg.routing_shuffle_seed, step), rows_before=rows_before)
    return Routing(weights.float(), d, None if d is None else pairs & applicable,
                   None if d is None or entropy is None else entropy, None if d is None else routable)
