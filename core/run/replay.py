"""The replay's distances d[k, i, t] of a relevance variant (docs/METHOD.md, "Relevance variants"): one contrastive
pass per (contrast, distance) of the variant, merged; `auto` per reward from the run's evidence; gradxinput's
differentiated pass. `core.run.step.route` calls `relevance_distances`; the benchmark shares the passes between the
variants of one batch (`passes`). Never imports streamlit or plotly."""

from __future__ import annotations

import time
from typing import Any

import torch
from torch import Tensor

from core import contrast as contrast_lib
from core import model as model_lib
from core.algos import routing as routing_lib
from core.algos import teacher_forcing as tf_lib
from core.run.batch import Rollout


def pad_token_id(tokenizer) -> int:
    if tokenizer.pad_token_id is not None:
        return int(tokenizer.pad_token_id)
    return int(tokenizer.eos_token_id)


def contrastive_prompt_ids(state: Any, rollout: Rollout, pairs: Tensor | None = None, contrast: str = "remove"
                           ) -> list[list[list[int] | None]]:
    """(B, K) token ids of x^-k for every sample and reward (None where the reward does not apply, where it has no
    contrast here, or where `pairs` (B, K) bool is False: no contrastive pass for that pair). x^-k is the verifier's
    own (`core.contrast.verifier_contrastive`: `contrast` removes the constraint or swaps its argument) unless
    the config's `reward_contrasts` declares another (`core.contrast.item_contrastive`)."""
    declared = contrast_lib.declared_contrasts(state.cfg.reward_contrasts)
    cache: dict[tuple[str, int], list[int] | None] = {}
    out = []
    for i, item in enumerate(rollout.items):
        row: list[list[int] | None] = []
        for k in range(len(state.reward_names)):
            if pairs is not None and not bool(pairs[i, k]):
                row.append(None)
                continue
            key = (item.key, k)
            if key not in cache:
                text = contrast_lib.item_contrastive(item, state.reward_names, declared, k, contrast)
                cache[key] = None if text is None else list(model_lib.encode_prompt(state.tokenizer, text))
            row.append(cache[key])
        out.append(row)
    return out


def routable_pairs(state: Any, rollout: Rollout) -> Tensor | None:
    """(B, K) bool: the pairs that have a contrastive prompt under the declared contrasts (a reward declared
    `uniform`, or a prompt its contrast finds nothing in, is not replayed); None without declared contrasts."""
    if not state.cfg.reward_contrasts:
        return None
    declared = contrast_lib.declared_contrasts(state.cfg.reward_contrasts)
    return torch.tensor([[contrast_lib.item_contrastive(item, state.reward_names, declared, k) is not None
                          for k in range(len(state.reward_names))] for item in rollout.items], dtype=torch.bool)


def contrast_distances(state: Any, rollout: Rollout, logprobs: tf_lib.ResponseLogprobs | None, chosen: Tensor,
                       contrast: str, distance: str = "js") -> Tensor:
    """(B, K, T) distances d between the passes under x and under the contrastive prompt of kind `contrast`
    (`contrastive_prompt_ids`) for the pairs `chosen` (NaN elsewhere), reusing p_t from `logprobs`."""
    cfg, dev = state.cfg, state.device
    if distance == "gradxinput":  # one forward-mode derivative per pair, not a no-gradient pass
        from core.algos.attribution import gradxinput_relevance

        with state.replay_autocast():
            d = gradxinput_relevance(state.model, rollout.prompt_ids, contrastive_prompt_ids(state, rollout, chosen,
                                     contrast), rollout.response_ids.to(dev), rollout.mask.to(dev),
                                     pad_token_id=pad_token_id(state.tokenizer), chunk_size=cfg.replay_chunk)
        return d.float().cpu()
    with torch.no_grad(), state.replay_autocast():
        d = tf_lib.contrastive_distances(
            state.model, rollout.prompt_ids, contrastive_prompt_ids(state, rollout, chosen, contrast),
            rollout.response_ids.to(dev), rollout.mask.to(dev), cfg.replay_chunk,
            logp_full=None if logprobs is None else logprobs.logp_full, pad_token_id=pad_token_id(state.tokenizer),
            distance=distance, token_logp=None if logprobs is None else logprobs.token_logp,
        )  # (B, K, T)
    return d.float().cpu()


def auto_variants(state: Any) -> list[str]:
    """Per reward (state.reward_names order), the variant `auto` routes it with: its family's in the run's evidence
    (`core.auto_evidence`, TrainConfig.auto_evidence)."""
    from core import auto_evidence

    evidence = auto_evidence.load(state.cfg.auto_evidence or auto_evidence.for_model(state.cfg.model))
    return [auto_evidence.variant_for(evidence, name) for name in state.reward_names]


def relevance_distances(state: Any, rollout: Rollout, logprobs: tf_lib.ResponseLogprobs | None,
                        chosen: Tensor, relevance: str, passes: dict | None = None) -> Tensor:
    """(B, K, T) distance d of relevance variant `relevance` for the pairs `chosen` (docs/METHOD.md, "Relevance
    variants"): one pass per contrast of the variant (`Relevance.contrasts`), merged by its `merge`; for `auto`, each
    reward's columns from the variant its evidence names (`auto_variants`). `passes` caches the passes by (contrast,
    distance, pairs) across calls on the same rollout (the benchmark measures every variant on one batch), with each
    pass's seconds under ("seconds", contrast, distance, pairs)."""
    if relevance == "auto":
        chosen_variants = auto_variants(state)
        d = None
        for name in dict.fromkeys(chosen_variants):
            cols = torch.tensor([v == name for v in chosen_variants])
            pairs = chosen if passes is not None else chosen & cols[None, :]  # cached: the whole passes serve
            d_v = relevance_distances(state, rollout, logprobs, pairs, name, passes)
            d = d_v if d is None else torch.where(cols[None, :, None], d_v, d)
        return d
    variant = routing_lib.get_relevance(relevance)
    ds = []
    for contrast in variant.contrasts:
        key = (contrast, variant.distance, bytes(chosen.numpy().tobytes()))
        if passes is None or key not in passes:
            t0 = time.perf_counter()
            found = contrast_distances(state, rollout, logprobs, chosen, contrast, variant.distance)
            if passes is None:
                ds.append(found)
                continue
            passes[key], passes[("seconds", *key)] = found, time.perf_counter() - t0
        ds.append(passes[key])
    return ds[0] if variant.merge is None else variant.merge(ds)
