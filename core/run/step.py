"""One training step: GRPO, GDPO or MRTPO on a causal LM, read top to bottom in `train_step`:

    rollout  = collect_rollout(...)              sample_prompts (seeded by seed and step), generate
                                                 (G responses per prompt, token ids kept; for replay also
                                                 the logits p_t sampling computed), decode_rollout
                                                 (each token's text and char offsets, incremental decode)
    scores   = verify(...)                       rewards (B, K), NaN where a reward does not apply; span masks
    logprobs = rollout_logprobs(...)             replay only: p_t under x (from the sampling's logits)
    routing  = route(...)                        routing weights (B, K, T) from the routing source
                                                 (replay runs the contrastive passes: `core.algos.routing.ROUTING`,
                                                 only for the pairs `replay_pairs` selects)
    adv      = compute_advantages(...)           token advantages (B, T), per-reward credit (B, K, T)
    stats    = policy_update(...)                clipped surrogate (+ KL), AdamW, `inner_epochs` passes;
                                                 log pi_old(y_t) is the first pass's log-prob, detached
    record   -> metrics, credit map              (`core.run.record`)

The maths lives in `core.algos` (formulas in docs/METHOD.md); the names of estimators, routing
sources and relevance variants live in its registries, not in if/elif chains here. The run around
the steps (run store, checkpoints, resume, signals) is `core.run.lifecycle`.

Shapes: B = prompts_per_step * group_size samples (rows of a group contiguous), K rewards,
T response tokens (right-padded; `mask` (B, T) is 1 on real tokens, eos included), V vocabulary.
"""

from __future__ import annotations

import contextlib
import random
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from core import model as model_lib
from core.algos import advantages as adv_lib
from core.algos import forward_passes
from core.algos import loss as loss_lib
from core.algos import teacher_forcing as tf_lib
from core.choices import routes_by_replay, routing_source
from core.config import TrainConfig
from core.run import batch as batch_lib
from core.run import credit_choice, record
from core.run import replay as replay_lib
from core.run.batch import Advantages, Rollout, Routing, Scores
from core.run.credit_format import CreditStep
from core.run.replay import contrastive_prompt_ids, pad_token_id, routable_pairs  # noqa: F401  (their old home)
from core.verifiers.shared.base import CheckInterrupted

# ------------------------------------------------------------------------------------------ state


class StopRequested(Exception):
    """SIGTERM/SIGINT arrived: abandon the current step and mark the run stopped."""


@dataclass
class TrainState:
    """Everything the loop carries from step to step."""

    cfg: TrainConfig
    model: Any
    tokenizer: Any
    optimizer: torch.optim.Optimizer
    items: list
    reward_names: list[str]
    reward_weights: Tensor  # (K,)
    device: torch.device
    ref_model: Any = None
    eval_items: list | None = None
    step: int = 0
    stop_requested: bool = False

    def autocast(self):
        """bf16 autocast on CUDA (weights stay fp32), plain fp32 on CPU."""
        if self.device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def replay_autocast(self):
        """The precision of replay's contrastive passes: `cfg.replay_dtype` (`core.algos.teacher_forcing.replay_precision`)."""
        return tf_lib.replay_precision(self.device.type, self.cfg.replay_dtype, self.autocast())

    def check_stop(self) -> None:
        if self.stop_requested:
            raise StopRequested()


# ------------------------------------------------------------------------------------------ phases


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def step_seed(seed: int, step: int) -> int:
    """The seed of one step: a resumed run draws what the uninterrupted run would have drawn."""
    return (seed * 1_000_003 + step * 7919) % 2**63


def sample_prompts(items: list, n: int, seed: int, step: int) -> list:
    """Prompts of a step: epochs over a shuffled prompt set, each epoch's order seeded by (seed, epoch).

    Step s takes positions (s-1)*n .. s*n-1 of the concatenated epochs, so it depends only on
    (seed, step) and every prompt is seen once per epoch.
    """
    out = []
    for pos in range((step - 1) * n, step * n):
        epoch, idx = divmod(pos, len(items))
        order = list(range(len(items)))
        random.Random(seed * 1_000_003 + epoch).shuffle(order)
        out.append(items[order[idx]])
    return out


def generate(state: TrainState, prompts: list, seed: int, keep_logits: bool = False) -> Rollout:
    """Sample G responses per prompt at `temperature` with the full distribution (top_k=0, top_p=1).

    Each response ends at its first eos or at max_new_tokens. The sampled ids are kept as they are:
    later passes teacher-force them, never a re-encoding of the text. `keep_logits` keeps the next-token
    logits the sampling computed (p_t under x for replay, so no separate pass recomputes them).
    """
    cfg, tok = state.cfg, state.tokenizer
    samples = [item for item in prompts for _ in range(cfg.group_size)]  # (B,) rows of a group contiguous
    encoded = [model_lib.encode_prompt(tok, item.prompt()) for item in prompts]
    prompt_ids = [ids for ids in encoded for _ in range(cfg.group_size)]
    if state.device.type == "cuda":
        torch.cuda.manual_seed_all(seed)
    with state.autocast():
        sampled = model_lib.sample_responses(
            state.model, tok, prompt_ids, cfg.max_new_tokens, cfg.temperature, generator_seed=seed,
            keep_logits=keep_logits,
        )  # (B, T) ids and mask, (B, T, V) logits
    response_ids, mask = sampled.response_ids.cpu(), sampled.mask.cpu().long()
    response_ids = torch.where(mask.bool(), response_ids, torch.full_like(response_ids, pad_token_id(tok)))
    t_max = max(int(mask.sum(1).max()), 1)  # drop columns no response reaches
    logits = None if sampled.logits is None else sampled.logits[:, :t_max]
    return Rollout(samples, prompt_ids, response_ids[:, :t_max].contiguous(), mask[:, :t_max].contiguous(), logits)


def decode_rollout(state: TrainState, rollout: Rollout) -> Rollout:
    """Each response's text, token texts and character offsets, decoded from its sampled ids."""
    lengths = rollout.mask.sum(1).tolist()
    rollout.texts, rollout.tokens, rollout.offsets = batch_lib.decode_responses(
        state.tokenizer, [rollout.response_ids[i, :n].tolist() for i, n in enumerate(lengths)])
    return rollout


def collect_rollout(state: TrainState, step: int, keep_logits: bool | None = None) -> Rollout:
    """The step's prompts (seeded by seed and step), G sampled responses each, decoded with offsets.
    The sampling's logits are kept when replay will need p_t (`keep_logits` None: as the config says)."""
    cfg = state.cfg
    prompts = sample_prompts(state.items, cfg.prompts_per_step, cfg.seed, step)
    state.model.eval()  # no dropout anywhere: the first update pass must give the rollout policy's log-probs
    keep = routes_by_replay(cfg) if keep_logits is None else keep_logits
    rollout = generate(state, prompts, step_seed(cfg.seed, step), keep_logits=keep)
    return decode_rollout(state, rollout)


def verify(state: TrainState, rollout: Rollout) -> Scores:
    """Score every response with every reward its prompt states; map the verifiers' spans to tokens
    (`core.run.batch.verify`)."""
    try:
        return batch_lib.verify(rollout.items, rollout.texts, rollout.offsets, state.reward_names,
                                rollout.response_ids.shape[1], state.check_stop)
    except CheckInterrupted:  # a stop request ended a custom check: the step stops
        state.check_stop()
        raise


def rollout_logprobs(state: TrainState, rollout: Rollout) -> tf_lib.ResponseLogprobs:
    """p_t, the next-token distributions under the full prompt x that replay compares with q_t: from the
    logits the sampling computed when the rollout kept them, else by a no-gradient pass under x."""
    dev = state.device
    if rollout.logits is not None:
        return tf_lib.logprobs_from_logits(rollout.logits, rollout.response_ids.to(dev), rollout.mask.to(dev))
    with torch.no_grad(), state.autocast():
        return tf_lib.response_logprobs(
            state.model, rollout.prompt_ids, rollout.response_ids.to(dev), rollout.mask.to(dev),
            state.cfg.replay_chunk, keep_full=True, pad_token_id=pad_token_id(state.tokenizer),
        )


def route(state: TrainState, rollout: Rollout, scores: Scores, logprobs: tf_lib.ResponseLogprobs | None,
          step: int = 0, passes: dict | None = None) -> Routing:
    """Routing weights w[k, i, t] from the config's routing source (`core.run.batch.route`); replay runs the
    contrastive passes here for the pairs `core.run.batch.choose_replay_pairs` selects, reusing p_t from
    `logprobs` (and the passes already in `passes`: `core.run.replay.relevance_distances`)."""
    cfg = state.cfg

    def distances(chosen: Tensor) -> Tensor:
        return replay_lib.relevance_distances(state, rollout, logprobs, chosen, cfg.relevance, passes)

    group_adv = adv_lib.group_normalized(scores.rewards, cfg.group_size, cfg.eps)  # (B, K)
    entropy = None if logprobs is None else logprobs.entropy.float().cpu()
    return batch_lib.route(cfg, rollout.mask, scores, group_adv, distances, entropy, routable_pairs(state, rollout),
                           step=step, scales=cfg.reward_scale_vector(state.reward_names))


def compute_advantages(state: TrainState, rollout: Rollout, scores: Scores, routing: Routing) -> Advantages:
    """Token advantages (B, T) and per-reward credit (B, K, T) from the config's estimator, and the
    GDPO group advantages a[k, i] (B, K) the credit map records."""
    cfg = state.cfg
    estimator = batch_lib.estimator(cfg, adv_lib.get_estimator(cfg.method))
    token_adv, credit = estimator(
        scores.rewards, routing.weights, rollout.mask, cfg.group_size, state.reward_weights, cfg.eps
    )  # (B, T), (B, K, T)
    group_adv = adv_lib.group_normalized(scores.rewards, cfg.group_size, cfg.eps)  # (B, K)
    return Advantages(token_adv, credit, group_adv)


def policy_update(state: TrainState, rollout: Rollout, token_adv: Tensor) -> dict[str, float]:
    """`inner_epochs` AdamW steps on the clipped surrogate (+ kl_beta * KL to the reference).

    Token-mean over the whole batch: a micro-batch of n_c real tokens (out of n) adds
    (n_c / n) * its own token-mean loss, so the summed gradient is the batch's token-mean gradient.
    log pi_old(y_t) is the first pass's log-prob, detached: the first pass runs the rollout policy (no
    optimizer step comes before the last micro-batch of a pass, and no dropout runs), so the ratio is
    exactly 1 there and no separate no-gradient pass is needed; later passes compare with it.
    """
    cfg, model, dev = state.cfg, state.model, state.device
    b = rollout.response_ids.shape[0]
    pad = pad_token_id(state.tokenizer)
    n_tokens = float(rollout.mask.sum())
    micro_batch = cfg.replay_chunk  # samples per forward pass, in replay and in the update (memory bound)
    chunks = [slice(s, min(s + micro_batch, b)) for s in range(0, b, micro_batch)]
    ref_logp = None
    if state.ref_model is not None and cfg.kl_beta > 0:
        with torch.no_grad(), state.autocast():
            ref = tf_lib.response_logprobs(
                state.ref_model, rollout.prompt_ids, rollout.response_ids.to(dev), rollout.mask.to(dev),
                micro_batch, keep_full=False, pad_token_id=pad,
            )
        ref_logp = ref.token_logp.float().cpu()  # (B, T)
    totals: dict[str, float] = {}
    old_logp: dict[int, Tensor] = {}  # micro-batch start -> log pi_old (b, t_c), from the first pass
    for _ in range(cfg.inner_epochs):
        state.check_stop()
        state.optimizer.zero_grad(set_to_none=True)
        for sl in chunks:
            mask = rollout.mask[sl]
            t_c = int(mask.sum(1).max())  # cut the micro-batch to its longest response
            if t_c == 0:
                continue
            mask = mask[:, :t_c].to(dev)  # (b, t_c)
            ids = rollout.response_ids[sl, :t_c].to(dev)  # (b, t_c)
            with state.autocast():
                logits = forward_passes.response_logits(model, rollout.prompt_ids[sl], ids, mask, pad)  # (b, t_c, V)
            logp = loss_lib.token_logprobs(logits, ids)  # (b, t_c), float32
            old = old_logp.setdefault(sl.start, logp.detach())
            loss, stats = loss_lib.policy_loss(
                logp,
                old,
                token_adv[sl, :t_c].to(dev),
                mask,
                clip_range=cfg.clip_range,
                ref_logp=None if ref_logp is None else ref_logp[sl, :t_c].to(dev),
                kl_beta=cfg.kl_beta,
                logits=logits,
            )
            share = float(mask.sum()) / n_tokens
            (loss * share).backward()
            for key, value in stats.items():
                totals[key] = totals.get(key, 0.0) + share * value / cfg.inner_epochs
        if cfg.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
        state.optimizer.step()
    state.optimizer.zero_grad(set_to_none=True)
    return totals


# ------------------------------------------------------------------------------------------ one step


@dataclass
class StepResult:
    metrics: dict[str, Any]
    credit_step: CreditStep | None  # what the run store writes (None: this step stores no credit map)
    rollout: Rollout

    @property
    def credit(self) -> pd.DataFrame | None:
        """The step's stored credit map as the long frame (built on each call; None when it stores none)."""
        return None if self.credit_step is None else self.credit_step.frame()


def train_step(state: TrainState, step: int, rollout: Rollout | None = None) -> StepResult:
    """One optimizer step of the run, top to bottom. Returns its metrics and credit map.

    `rollout` skips generation (the overhead benchmark runs several methods on the same batch).
    """
    cfg = state.cfg
    times: dict[str, float] = {}
    t0 = time.perf_counter()

    # 1. rollout: sample prompts and G responses per prompt
    own_rollout = rollout is None
    if own_rollout:
        rollout = collect_rollout(state, step)
    times["time/generate"] = time.perf_counter() - t0
    state.check_stop()

    # 2. verify: rewards (B, K) and the verifiers' spans as token masks (B, K, T)
    t1 = time.perf_counter()
    scores = verify(state, rollout)
    times["time/verify"] = time.perf_counter() - t1

    # 3. replay only: p_t (B, T, V) under x, from the sampling's logits when the rollout kept them
    t1 = time.perf_counter()
    # (routing=entropy reads the entropy of p_t: the `entropy` control)
    logprobs = rollout_logprobs(state, rollout) if routes_by_replay(cfg) or routing_source(cfg) == "entropy" else None
    if own_rollout:
        rollout.logits = None  # not needed any more (B x T x V)
    times["time/logprobs"] = time.perf_counter() - t1

    # 4. routing weights w[k, i, t] (B, K, T) from the routing source (replay: the contrastive passes)
    t1 = time.perf_counter()
    routing = route(state, rollout, scores, logprobs, step)
    del logprobs
    times["time/replay"] = time.perf_counter() - t1
    state.check_stop()

    # 5. advantages: token advantages (B, T) and per-reward credit (B, K, T)
    t1 = time.perf_counter()
    adv = compute_advantages(state, rollout, scores, routing)
    times["time/advantages"] = time.perf_counter() - t1

    # 6. update: clipped surrogate on the token advantages
    t1 = time.perf_counter()
    loss_stats = policy_update(state, rollout, adv.token_adv)
    times["time/update"] = time.perf_counter() - t1
    times["time/step"] = time.perf_counter() - t0

    rec = record.StepRecord(step, state.reward_names, cfg.group_size, rollout, scores, routing, adv, loss_stats, times,
                            w_max=cfg.w_max)
    credit = None
    if credit_choice.stores_credit(step, cfg.credit_every, cfg.steps):  # only the rows the run stores
        credit = record.credit_step(rec, credit_choice.choose_samples(scores.rewards.numpy(), cfg.group_size,
                                                                     cfg.credit_samples))
    return StepResult(record.step_metrics(rec), credit, rollout)


# ------------------------------------------------------------------------------------------ evaluation

EVAL_SEED_BASE = 1_000_003


def evaluate(state: TrainState, chunk: int = 64) -> dict[str, float]:
    """The held-out evaluation of a built-in run (`held_out_metrics` on its model, eval set and settings)."""
    cfg = state.cfg
    items = (state.eval_items or [])[: cfg.eval_prompts]
    prompt_ids = [model_lib.encode_prompt(state.tokenizer, item.prompt()) for item in items]
    return held_out_metrics(state.model, state.tokenizer, items, prompt_ids, state.reward_names,
                            samples=cfg.eval_samples, max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature,
                            seed=cfg.seed, autocast=state.autocast, chunk=chunk)


def held_out_metrics(model, tok, items: list, prompt_ids: list[list[int]], names: list[str], *, samples: int,
                     max_new_tokens: int, temperature: float, seed: int, autocast=contextlib.nullcontext,
                     chunk: int = 64) -> dict[str, float]:
    """Sampled responses to held-out prompts `items` (PromptItems, their token ids `prompt_ids`):
    `eval/reward/<name>`, `eval/all_satisfied` (`record.reward_metrics` over `held_out_rewards`' rows).
    Used by the built-in trainer (`evaluate`) and by the trl backend (`core.integrations.trl`).
    """
    if not items:
        return {}
    rewards = held_out_rewards(model, tok, items, prompt_ids, names, samples=samples, max_new_tokens=max_new_tokens,
                               temperature=temperature, seed=seed, autocast=autocast, chunk=chunk)
    return record.reward_metrics(rewards, names, prefix="eval/")


@torch.no_grad()
def held_out_rewards(model, tok, items: list, prompt_ids: list[list[int]], names: list[str], *, samples: int,
                     max_new_tokens: int, temperature: float, seed: int, autocast=contextlib.nullcontext,
                     chunk: int = 64) -> torch.Tensor:
    """Scores (N, K) of `samples` sampled responses per held-out prompt, row r = prompt r // samples (NaN: reward k
    does not apply to that prompt).

    `samples` responses per prompt at the training temperature (the distribution RL changes; greedy
    decoding saturates some constraints and hides others), with a generator seed fixed per run seed, so
    every evaluation of a run, and every method trained with that seed, draws the same random numbers.
    """
    rows = [i for i in range(len(items)) for _ in range(samples)]
    rewards = torch.full((len(rows), len(names)), float("nan"))  # (N, K)
    for c0 in range(0, len(rows), chunk):
        part = rows[c0 : c0 + chunk]
        with autocast():
            resp, mask = model_lib.generate_responses(
                model, tok, [prompt_ids[i] for i in part], max_new_tokens, temperature,
                generator_seed=EVAL_SEED_BASE + seed + c0,
            )  # (n, T) each
        resp, mask = resp.cpu(), mask.cpu()
        for j, i in enumerate(part):
            text = tok.decode(resp[j][mask[j].bool()].tolist(), skip_special_tokens=True)
            for k, result in enumerate(items[i].verify(text, names)):
                if result is not None:
                    rewards[c0 + j, k] = float(result.score)
    return rewards
