"""The training loop: GRPO, GDPO or MRTPO on a causal LM, writing a run store as it goes.

One step reads top to bottom (`train_step`):

    rollout  = collect_rollout(...)                sample_prompts (seeded by seed and step), generate
                                                   (G responses per prompt, token ids kept), decode_rollout
                                                   (each token's text and char offsets, incremental decode)
    scores   = verify(...)                         rewards (B, K), NaN where a reward does not apply; span masks
    replay   = replay_pass(...)                    rollout log-probs (B, T) + routing weights (B, K, T)
    adv      = estimator(rewards, weights, ...)    token advantages (B, T) and per-reward credit (B, K, T)
    stats    = update(...)                         clipped surrogate (+ KL), AdamW, `inner_epochs` passes
    metrics, credit map                            -> run store

`train(cfg)` wraps the steps with the run store (config, status, metrics, credit maps),
checkpoints, resume and signal handling. The names of methods and routing sources live in
registries (`core.advantages.ESTIMATORS`, `ROUTING`, `RELEVANCE` below), not in if/elif chains.

Shapes: B = prompts_per_step * group_size samples (rows of a group contiguous), K rewards,
T response tokens (right-padded; `mask` (B, T) is 1 on real tokens, eos included), V vocabulary.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as _dt
import json
import math
import os
import random
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from core import advantages as adv_lib
from core import loss as loss_lib
from core import model as model_lib
from core import replay as replay_lib
from core.config import TrainConfig
from core.store import SCHEMA_VERSION, RunStore, RunWriter, atomic_write_json, run_dir

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

    def check_stop(self) -> None:
        if self.stop_requested:
            raise StopRequested()


@dataclass
class Rollout:
    """G sampled responses per prompt, with what the later phases need per sample."""

    items: list  # (B,) PromptItem of each sample
    prompt_ids: list[list[int]]  # (B,) chat-formatted prompt token ids
    response_ids: Tensor  # (B, T) sampled ids, padded with pad_id after the response
    mask: Tensor  # (B, T) 1 on response tokens (up to and including eos)
    texts: list[str] = field(default_factory=list)  # (B,) decoded responses
    tokens: list[list[str]] = field(default_factory=list)  # (B, T_i) each token's text
    offsets: list[list[tuple[int, int]]] = field(default_factory=list)  # (B, T_i) char range in texts[i]


@dataclass
class Scores:
    rewards: Tensor  # (B, K), NaN where reward k does not apply to sample i's prompt
    span_mask: Tensor  # (B, K, T) bool: token t overlaps a span verifier k inspected


@dataclass
class Routing:
    old_logp: Tensor  # (B, T) log-prob of each sampled token under the rollout policy
    weights: Tensor | None  # (B, K, T) routing weights; None when the estimator ignores them
    js: Tensor | None  # (B, K, T) relevance d; None when no replay ran


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


def generate(state: TrainState, prompts: list, seed: int) -> Rollout:
    """Sample G responses per prompt at `temperature` with the full distribution (top_k=0, top_p=1).

    Each response ends at its first eos or at max_new_tokens. The sampled ids are kept as they are:
    later passes teacher-force them, never a re-encoding of the text.
    """
    cfg, tok = state.cfg, state.tokenizer
    samples = [item for item in prompts for _ in range(cfg.group_size)]  # (B,) rows of a group contiguous
    encoded = [model_lib.encode_prompt(tok, item.prompt()) for item in prompts]
    prompt_ids = [ids for ids in encoded for _ in range(cfg.group_size)]
    if state.device.type == "cuda":
        torch.cuda.manual_seed_all(seed)
    with state.autocast():
        response_ids, mask = model_lib.generate_responses(
            state.model, tok, prompt_ids, cfg.max_new_tokens, cfg.temperature, generator_seed=seed
        )  # (B, T) each
    response_ids, mask = response_ids.cpu(), mask.cpu().long()
    response_ids = torch.where(mask.bool(), response_ids, torch.full_like(response_ids, pad_token_id(tok)))
    t_max = max(int(mask.sum(1).max()), 1)  # drop columns no response reaches
    return Rollout(samples, prompt_ids, response_ids[:, :t_max].contiguous(), mask[:, :t_max].contiguous())


def pad_token_id(tokenizer) -> int:
    if tokenizer.pad_token_id is not None:
        return int(tokenizer.pad_token_id)
    return int(tokenizer.eos_token_id)


def decode_rollout(state: TrainState, rollout: Rollout) -> Rollout:
    lengths = rollout.mask.sum(1).tolist()
    for i, n in enumerate(lengths):
        text, offsets = model_lib.decode_with_offsets(state.tokenizer, rollout.response_ids[i, :n].tolist())
        rollout.texts.append(text)
        rollout.tokens.append([text[a:b] for a, b in offsets])
        rollout.offsets.append([(int(a), int(b)) for a, b in offsets])
    return rollout


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


def verify(state: TrainState, rollout: Rollout) -> Scores:
    """Score every response with every reward its prompt states; map the verifiers' spans to tokens."""
    names = state.reward_names
    b, t = rollout.response_ids.shape
    rewards = torch.full((b, len(names)), float("nan"))  # (B, K)
    span_mask = np.zeros((b, len(names), t), dtype=bool)  # (B, K, T)
    for i, (item, text) in enumerate(zip(rollout.items, rollout.texts, strict=True)):
        for k, result in enumerate(item.verify(text, names)):
            if result is None:
                continue
            rewards[i, k] = float(result.score)
            span_mask[i, k] = span_token_mask(rollout.offsets[i], result.spans, t)
    return Scores(rewards, torch.from_numpy(span_mask))


# ---- routing sources: name -> fn(state, rollout, scores, logp_full) -> (weights (B, K, T), js or None)


def contrastive_prompt_ids(state: TrainState, rollout: Rollout) -> list[list[list[int] | None]]:
    """(B, K) token ids of x^-k for every sample and reward (None where the reward does not apply)."""
    cache: dict[tuple[str, int], list[int]] = {}
    out = []
    for item in rollout.items:
        row: list[list[int] | None] = []
        families = item.families()
        for name in state.reward_names:
            if name not in families:
                row.append(None)
                continue
            key = (item.key, families.index(name))
            if key not in cache:
                cache[key] = list(model_lib.encode_prompt(state.tokenizer, item.contrastive_prompt(key[1])))
            row.append(cache[key])
        out.append(row)
    return out


def _relevance_js(d: Tensor, applicable: Tensor) -> Tensor:
    return d


RELEVANCE: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
    "js": _relevance_js,
    "js_specific": replay_lib.specific_relevance,
}


def _route_replay(state, rollout, scores, logp_full):
    cfg = state.cfg
    dev = state.device
    with state.autocast():
        d = replay_lib.contrastive_js(
            state.model, rollout.prompt_ids, contrastive_prompt_ids(state, rollout), rollout.response_ids.to(dev),
            rollout.mask.to(dev), cfg.replay_chunk, logp_full=logp_full, pad_token_id=pad_token_id(state.tokenizer),
        )  # (B, K, T)
    d = d.float().cpu()
    applicable = ~torch.isnan(scores.rewards)  # (B, K)
    d = torch.where(applicable[:, :, None], d, torch.full_like(d, float("nan")))
    relevance = RELEVANCE[cfg.relevance](d, applicable)
    w = replay_lib.routing_weights(relevance, rollout.mask, lam=cfg.lam, w_max=cfg.w_max, sharpen=cfg.sharpen)
    return w, d


def _route_span(state, rollout, scores, logp_full):
    cfg = state.cfg
    return replay_lib.span_routing(scores.span_mask, rollout.mask, lam=cfg.lam, w_max=cfg.w_max), None


def _route_uniform(state, rollout, scores, logp_full):
    k = len(state.reward_names)
    return rollout.mask[:, None, :].expand(-1, k, -1).to(torch.float32), None


ROUTING: dict[str, Callable] = {"replay": _route_replay, "span": _route_span, "uniform": _route_uniform}
# Estimators that spread credit by routing weights; the others (grpo, gdpo) give every token the same advantage.
ROUTED_ESTIMATORS = ("mrtpo",)


def routing_source(cfg: TrainConfig) -> str | None:
    return cfg.routing if cfg.method in ROUTED_ESTIMATORS else None


def replay_pass(state: TrainState, rollout: Rollout, scores: Scores) -> Routing:
    """The no-gradient passes: rollout log-probs under x (also p_t for replay), then the routing source."""
    source = routing_source(state.cfg)
    dev = state.device
    with torch.no_grad(), state.autocast():
        full = replay_lib.response_logprobs(
            state.model, rollout.prompt_ids, rollout.response_ids.to(dev), rollout.mask.to(dev),
            state.cfg.replay_chunk, keep_full=source == "replay", pad_token_id=pad_token_id(state.tokenizer),
        )
    old_logp = full.token_logp.float().cpu() * rollout.mask  # (B, T)
    if source is None:
        return Routing(old_logp, None, None)
    with torch.no_grad():
        weights, js = ROUTING[source](state, rollout, scores, full.logp_full)
    return Routing(old_logp, weights.float(), js)


# ---- the update


def update(state: TrainState, rollout: Rollout, routing: Routing, token_adv: Tensor) -> dict[str, float]:
    """`inner_epochs` AdamW steps on the clipped surrogate (+ kl_beta * KL to the reference).

    Token-mean over the whole batch: a micro-batch of n_c real tokens (out of n) adds
    (n_c / n) * its own token-mean loss, so the summed gradient is the batch's token-mean gradient.
    """
    cfg, model, dev = state.cfg, state.model, state.device
    b = rollout.response_ids.shape[0]
    pad = pad_token_id(state.tokenizer)
    n_tokens = float(rollout.mask.sum())
    chunks = [slice(s, min(s + cfg.replay_chunk, b)) for s in range(0, b, cfg.replay_chunk)]
    ref_logp = None
    if state.ref_model is not None and cfg.kl_beta > 0:
        with torch.no_grad(), state.autocast():
            ref = replay_lib.response_logprobs(
                state.ref_model, rollout.prompt_ids, rollout.response_ids.to(dev), rollout.mask.to(dev),
                cfg.replay_chunk, keep_full=False, pad_token_id=pad,
            )
        ref_logp = ref.token_logp.float().cpu()  # (B, T)
    totals: dict[str, float] = {}
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
                logits = replay_lib.response_logits(model, rollout.prompt_ids[sl], ids, mask, pad)  # (b, t_c, V)
            logp = loss_lib.token_logprobs(logits, ids)  # (b, t_c), float32
            loss, stats = loss_lib.policy_loss(
                logp,
                routing.old_logp[sl, :t_c].to(dev),
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
    credit: pd.DataFrame
    rollout: Rollout


def collect_rollout(state: TrainState, step: int) -> Rollout:
    """The step's prompts (seeded by seed and step), G sampled responses each, decoded with offsets."""
    cfg = state.cfg
    prompts = sample_prompts(state.items, cfg.prompts_per_step, cfg.seed, step)
    state.model.eval()  # no dropout anywhere: the ratio must be 1 on the first on-policy pass
    rollout = generate(state, prompts, step_seed(cfg.seed, step))
    return decode_rollout(state, rollout)


def train_step(state: TrainState, step: int, rollout: Rollout | None = None) -> StepResult:
    """One optimizer step of the run, top to bottom. Returns its metrics and credit map.

    `rollout` skips generation (the overhead benchmark runs several methods on the same batch).
    """
    cfg = state.cfg
    times: dict[str, float] = {}
    t0 = time.perf_counter()

    # 1. rollout: sample prompts and G responses per prompt
    if rollout is None:
        rollout = collect_rollout(state, step)
    times["time/generate"] = time.perf_counter() - t0
    state.check_stop()

    # 2. verify: rewards (B, K) and the verifiers' spans as token masks (B, K, T)
    t1 = time.perf_counter()
    scores = verify(state, rollout)
    times["time/verify"] = time.perf_counter() - t1

    # 3. replay: rollout log-probs, then routing weights w[k, i, t] from the routing source
    t1 = time.perf_counter()
    routing = replay_pass(state, rollout, scores)
    estimator = adv_lib.get_estimator(cfg.method)
    token_adv, credit = estimator(
        scores.rewards, routing.weights, rollout.mask, cfg.group_size, state.reward_weights, cfg.eps
    )  # (B, T), (B, K, T)
    group_adv = adv_lib.group_normalized(scores.rewards, cfg.group_size, cfg.eps)  # (B, K)
    times["time/replay"] = time.perf_counter() - t1
    state.check_stop()

    # 4. update: clipped surrogate on the token advantages
    t1 = time.perf_counter()
    loss_stats = update(state, rollout, routing, token_adv)
    times["time/update"] = time.perf_counter() - t1
    times["time/step"] = time.perf_counter() - t0

    metrics = step_metrics(state, step, rollout, scores, routing, token_adv, loss_stats, times)
    frame = credit_frame(state, step, rollout, scores, routing, group_adv, token_adv, credit)
    return StepResult(metrics, frame, rollout)


# ------------------------------------------------------------------------------------------ metrics


def _nanmean(x: Tensor) -> float:
    x = x[~torch.isnan(x)]
    return float(x.mean()) if x.numel() else float("nan")


def step_metrics(state, step, rollout, scores, routing, token_adv, loss_stats, times) -> dict[str, Any]:
    names = state.reward_names
    rewards = scores.rewards  # (B, K)
    m: dict[str, Any] = {"step": step}
    for k, name in enumerate(names):
        m[f"reward/{name}"] = _nanmean(rewards[:, k])
    satisfied = torch.where(torch.isnan(rewards), torch.ones_like(rewards), (rewards >= 1.0).float())  # (B, K)
    m["reward/all_satisfied"] = float(satisfied.min(1).values.mean())
    real = token_adv[rollout.mask.bool()]
    m["adv/mean"] = float(real.mean())
    m["adv/std"] = float(real.std()) if real.numel() > 1 else 0.0
    m["adv/abs_mean"] = float(real.abs().mean())
    for key in ("loss/policy", "loss/kl", "loss/total", "policy/clip_frac", "policy/kl", "policy/entropy"):
        m[key] = loss_stats.get(key, float("nan"))
    m["response/length"] = float(rollout.mask.sum(1).float().mean())
    if routing.js is not None:
        m.update(replay_lib.js_summary(routing.js, rollout.mask, names))
    weights = routing.weights if routing.weights is not None else rollout.mask[:, None, :].expand(-1, len(names), -1)
    applicable = ~torch.isnan(rewards)  # (B, K)
    m.update(replay_lib.span_agreement(routing.js, weights, scores.span_mask, rollout.mask, names, applicable))
    m.update(times)
    return m


def credit_frame(state, step, rollout, scores, routing, group_adv, token_adv, credit) -> pd.DataFrame:
    """The step's credit map, long format: one row per (sample, reward, response token)."""
    names = state.reward_names
    k = len(names)
    lengths = rollout.mask.sum(1).tolist()
    # Row order: sample, then reward, then token (a sample's rows are contiguous, so are a group's).
    blocks = [(i, kk, n) for i, n in enumerate(lengths) for kk in range(k)]
    si = np.concatenate([np.full(n, i) for i, _, n in blocks]).astype(np.int64)  # (N,)
    sk = np.concatenate([np.full(n, kk) for _, kk, n in blocks]).astype(np.int64)  # (N,)
    st = np.concatenate([np.arange(n) for _, _, n in blocks]).astype(np.int64)  # (N,)
    offsets = [np.asarray(o, dtype=np.int64).reshape(-1, 2) for o in rollout.offsets]
    tokens = rollout.tokens
    js = routing.js if routing.js is not None else torch.full(credit.shape, float("nan"))
    weights = routing.weights if routing.weights is not None else torch.ones(credit.shape)
    rewards = scores.rewards.numpy()
    frame = pd.DataFrame(
        {
            "step": np.full(len(si), step, dtype=np.int32),
            "sample": si.astype(np.int32),
            "group": (si // state.cfg.group_size).astype(np.int32),
            "prompt_key": [rollout.items[i].key for i in si],
            "prompt": [rollout.items[i].prompt() for i in si],
            "response": [rollout.texts[i] for i in si],
            "reward": [names[kk] for kk in sk],
            "score": rewards[si, sk].astype(np.float32),
            "group_adv": group_adv.numpy()[si, sk].astype(np.float32),
            "t": st.astype(np.int32),
            "token_id": rollout.response_ids.numpy()[si, st].astype(np.int32),
            "token": [tokens[i][t] for i, t in zip(si, st, strict=True)],
            "start": np.array([offsets[i][t, 0] for i, t in zip(si, st, strict=True)], dtype=np.int32),
            "end": np.array([offsets[i][t, 1] for i, t in zip(si, st, strict=True)], dtype=np.int32),
            "js": js.numpy()[si, sk, st].astype(np.float32),
            "weight": weights.numpy()[si, sk, st].astype(np.float32),
            "credit": credit.float().numpy()[si, sk, st].astype(np.float32),
            "in_span": scores.span_mask.numpy()[si, sk, st],
            "token_adv": token_adv.float().numpy()[si, st].astype(np.float32),
        }
    )
    return frame


def summary_line(m: dict[str, Any], total: int, names: list[str]) -> str:
    """One line per step for the terminal: rewards, advantage spread, loss, KL, clip, time split."""

    def short(name: str) -> str:
        return name.split(":")[-1][:10]

    rewards = " ".join(f"{short(n)} {m.get(f'reward/{n}', float('nan')):.2f}" for n in names)
    return (
        f"step {m['step']}/{total} | {rewards} | all {m['reward/all_satisfied']:.2f} | "
        f"adv_std {m['adv/std']:.2f} | loss {m['loss/total']:+.4f} kl {m['policy/kl']:.4f} "
        f"clip {m['policy/clip_frac']:.2f} ent {m['policy/entropy']:.2f} | {m['time/step']:.1f}s "
        f"(gen {m['time/generate']:.1f} ver {m['time/verify']:.2f} rep {m['time/replay']:.1f} "
        f"upd {m['time/update']:.1f})"
    )


class ProgressBar:
    """A one-line progress bar on stderr, drawn only on a terminal (train.log stays clean)."""

    def __init__(self, total: int, stream=None):
        self.total = total
        self.stream = stream or sys.stderr
        self.enabled = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.start = time.monotonic()

    def show(self, done: int, phase: str = "") -> None:
        if not self.enabled:
            return
        frac = done / max(self.total, 1)
        filled = int(30 * frac)
        elapsed = time.monotonic() - self.start
        eta = elapsed / done * (self.total - done) if done else float("nan")
        eta_s = f"{eta:5.0f}s" if math.isfinite(eta) else "    ?"
        self.stream.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{self.total} eta {eta_s} {phase:<10}")
        self.stream.flush()

    def clear(self) -> None:
        if self.enabled:
            self.stream.write("\r" + " " * 70 + "\r")
            self.stream.flush()


# ------------------------------------------------------------------------------------------ evaluation


@torch.no_grad()
def evaluate(state: TrainState, limit: int = 32, chunk: int = 64) -> dict[str, float]:
    """Sampled responses to up to `limit` held-out prompts: `eval/reward/<name>` and `eval/all_satisfied`.

    `eval_samples` responses per prompt at the training temperature (the distribution RL changes; greedy
    decoding saturates some constraints and hides others), with a generator seed fixed per run seed, so
    every evaluation of a run, and every method trained with that seed, draws the same random numbers.
    """
    items = (state.eval_items or [])[:limit]
    if not items:
        return {}
    cfg, tok, names = state.cfg, state.tokenizer, state.reward_names
    rows = [item for item in items for _ in range(cfg.eval_samples)]
    encoded = {item.key: model_lib.encode_prompt(tok, item.prompt()) for item in items}
    rewards = torch.full((len(rows), len(names)), float("nan"))  # (N, K)
    for c0 in range(0, len(rows), chunk):
        part = rows[c0 : c0 + chunk]
        with torch.no_grad(), state.autocast():
            resp, mask = model_lib.generate_responses(
                state.model, tok, [encoded[item.key] for item in part], cfg.max_new_tokens, cfg.temperature,
                generator_seed=EVAL_SEED_BASE + cfg.seed + c0,
            )  # (n, T) each
        resp, mask = resp.cpu(), mask.cpu()
        for j, item in enumerate(part):
            text = tok.decode(resp[j][mask[j].bool()].tolist(), skip_special_tokens=True)
            for k, result in enumerate(item.verify(text, names)):
                if result is not None:
                    rewards[c0 + j, k] = float(result.score)
    m = {f"eval/reward/{name}": _nanmean(rewards[:, k]) for k, name in enumerate(names)}
    satisfied = torch.where(torch.isnan(rewards), torch.ones_like(rewards), (rewards >= 1.0).float())
    m["eval/all_satisfied"] = float(satisfied.min(1).values.mean())
    return m


EVAL_SEED_BASE = 1_000_003


# ------------------------------------------------------------------------------------------ checkpoints


def save_checkpoint(state: TrainState, writer: RunWriter, step: int) -> Path:
    """Policy + tokenizer (save_pretrained), optimizer state and the step, written to a temp folder then renamed."""
    final = writer.checkpoint_dir(step)
    tmp = final.parent / f".{final.name}.tmp"  # hidden: readers never list a half-written checkpoint
    if tmp.exists():
        _rmtree(tmp)
    tmp.mkdir(parents=True)
    state.model.save_pretrained(tmp)
    state.tokenizer.save_pretrained(tmp)
    torch.save(state.optimizer.state_dict(), tmp / "optimizer.pt")
    (tmp / "trainer_state.json").write_text(json.dumps({"step": step, "seed": state.cfg.seed}) + "\n")
    if final.exists():
        _rmtree(final)
    os.replace(tmp, final)
    return final


def _rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def latest_checkpoint(path: Path) -> tuple[int, Path] | None:
    """The newest complete checkpoint of a run folder (one with trainer_state.json), or None."""
    best = None
    for ckpt in RunStore(path).checkpoints():
        state_file = ckpt / "trainer_state.json"
        if not state_file.exists():
            continue
        step = int(json.loads(state_file.read_text())["step"])
        if best is None or step > best[0]:
            best = (step, ckpt)
    return best


# ------------------------------------------------------------------------------------------ the run


def auto_run_name(cfg: TrainConfig) -> str:
    return f"{cfg.method}-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"


def unique_run_name(runs_dir: str, base: str) -> str:
    name, n = base, 1
    while run_dir(runs_dir, name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


def build_state(cfg: TrainConfig, model_path: str | None = None, optimizer_state: Path | None = None) -> TrainState:
    """Load prompts, policy (from `model_path` when resuming), reference model and optimizer.

    Raises ConfigError for a bad prompt set / weights before anything heavy is loaded.
    """
    items, names = cfg.load_prompts()
    eval_items = cfg.load_prompts(cfg.eval_prompt_set)[0] if cfg.eval_prompt_set else None
    seed_everything(cfg.seed)
    model, tokenizer, _info = model_lib.load_policy(model_path or cfg.model, device=cfg.device)
    device = next(model.parameters()).device
    model.float()  # fp32 master weights; CUDA compute runs under bf16 autocast
    ref_model = None
    if cfg.kl_beta > 0:
        ref_model = copy.deepcopy(model).eval()
        ref_model.requires_grad_(False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.999), weight_decay=0.0)
    if optimizer_state is not None and optimizer_state.exists():
        optimizer.load_state_dict(torch.load(optimizer_state, map_location=device))
    weights = torch.tensor([cfg.reward_weight(n) for n in names], dtype=torch.float32)
    return TrainState(cfg, model, tokenizer, optimizer, items, names, weights, device, ref_model, eval_items)


class _SignalGuard:
    """SIGTERM/SIGINT request a stop (checked between phases); a second signal gets the previous handler.

    Installed before the model loads, so an early stop is not lost; `attach(state)` hands the
    request to the loop's state.
    """

    def __init__(self):
        self.requested = False
        self.state: TrainState | None = None
        self.previous: dict[int, Any] = {}

    def attach(self, state: TrainState) -> None:
        self.state = state
        state.stop_requested = state.stop_requested or self.requested

    def _handle(self, signum, frame):
        self.requested = True
        if self.state is not None:
            self.state.stop_requested = True
        signal.signal(signum, self.previous.get(signum, signal.SIG_DFL))

    def __enter__(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self.previous[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread: signals stay with the caller
                pass
        return self

    def __exit__(self, *exc):
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        return False


StepHook = Callable[[TrainState, dict], None]


def train(
    cfg: TrainConfig,
    *,
    resume: str | os.PathLike | None = None,
    hooks: list[StepHook] | None = None,
    out=None,
) -> Path:
    """Run (or resume) a training run; returns the run folder. Status ends completed, stopped or failed."""
    out = out or sys.stdout
    with _SignalGuard() as guard:
        return _run(cfg, guard, resume, hooks or [], out)


def _run(cfg: TrainConfig, guard: _SignalGuard, resume, hooks: list[StepHook], out) -> Path:
    if resume is not None:
        path = Path(resume)
        ckpt = latest_checkpoint(path)
        start = ckpt[0] if ckpt else 0
        state = build_state(cfg, model_path=str(ckpt[1]) if ckpt else None,
                            optimizer_state=ckpt[1] / "optimizer.pt" if ckpt else None)
        writer = RunWriter(path)
        # Record what resuming may change (steps, device, ...) so config.json describes the run.
        atomic_write_json(path / "config.json", {**cfg.to_dict(), "reward_names": state.reward_names,
                                                 "schema_version": SCHEMA_VERSION})
        writer.truncate_after(start)
        for leftover in (path / "checkpoints").glob(".*.tmp"):
            _rmtree(leftover)
        writer.set_status(state="running", pid=os.getpid(), step=start, total_steps=cfg.steps, error=None)
        print(f"resuming {path.name} from step {start}", file=out, flush=True)
    else:
        state = build_state(cfg)
        name = cfg.run_name or unique_run_name(cfg.runs_dir, auto_run_name(cfg))
        cfg.run_name = name
        writer = RunWriter.create(cfg.runs_dir, name, {**cfg.to_dict(), "reward_names": state.reward_names})
        path = writer.path
        start = 0
        writer.set_status(state="running", pid=os.getpid(), step=0, total_steps=cfg.steps)
        print(f"run {name}: {path}", file=out, flush=True)
    guard.attach(state)
    state.step = start
    bar = ProgressBar(cfg.steps)
    last_saved = start if resume is not None and start > 0 else -1
    try:
        for step in range(start + 1, cfg.steps + 1):
            bar.show(step - 1, "step")
            state.check_stop()
            result = train_step(state, step)
            state.step = step
            metrics = result.metrics
            is_ckpt = step == cfg.steps or (cfg.checkpoint_every > 0 and step % cfg.checkpoint_every == 0)
            if is_ckpt:
                metrics.update(evaluate(state))
            # Credit map, then the metrics line (the step is complete), then the checkpoint: a kill
            # between them resumes from an older checkpoint and truncates the later steps.
            writer.write_credit(step, result.credit)
            writer.append_metrics(metrics)
            if is_ckpt:
                save_checkpoint(state, writer, step)
                last_saved = step
            writer.set_status(state="running", step=step)
            bar.clear()
            print(summary_line(metrics, cfg.steps, state.reward_names), file=out, flush=True)
            for hook in hooks:
                hook(state, metrics)
        bar.clear()
        writer.set_status(state="completed", step=state.step, error=None)
    except StopRequested:
        bar.clear()
        if state.step > 0 and last_saved != state.step:
            save_checkpoint(state, writer, state.step)
        writer.set_status(state="stopped", step=state.step, error=None)
        print(f"stopped after step {state.step}", file=out, flush=True)
    except BaseException as exc:
        bar.clear()
        tail = "".join(traceback.format_exception(exc))[-4000:]
        state_name = "stopped" if isinstance(exc, KeyboardInterrupt) else "failed"
        writer.set_status(state=state_name, step=state.step, error=None if state_name == "stopped" else tail)
        raise
    return path
