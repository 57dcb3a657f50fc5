"""What a step leaves behind: its metrics line and its credit map (docs/CONTRACTS.md, "Run store").

- `StepRecord`: everything one step produced, in one value;
- `step_metrics(record)`: the metrics line (`reward/...`, `adv/...`, `loss/...`, `policy/...`,
  `js/...`, `span/...`, `time/...`, `response/length`);
- `credit_frame(record)`: the long-format credit map, one row per (sample, reward, response token);
- `reward_metrics`: reward means and the all-satisfied rate (training and held-out evaluation);
- `summary_line`: the one line per step the terminal shows.

Shapes: B samples, K rewards, T response tokens. Never imports streamlit or plotly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from core.algos import span_metrics
from core.run.batch import Advantages, Rollout, Routing, Scores


@dataclass
class StepRecord:
    """One step's results, as `train_step` hands them to the recorders."""

    step: int
    reward_names: list[str]
    group_size: int
    rollout: Rollout
    scores: Scores
    routing: Routing
    adv: Advantages
    loss_stats: dict[str, float]
    times: dict[str, float]
    w_max: float = 5.0  # the routing cap, for routing/clipped_share


def _nanmean(x: Tensor) -> float:
    x = x[~torch.isnan(x)]
    return float(x.mean()) if x.numel() else float("nan")


def reward_metrics(rewards: Tensor, names: Sequence[str], prefix: str = "") -> dict[str, float]:
    """`<prefix>reward/<name>`: mean score where the reward applies (NaN = does not apply), and
    `<prefix>all_satisfied` (`reward/all_satisfied` without a prefix): the share of samples whose every
    applicable reward is satisfied (score >= 1). rewards: (N, K)."""
    m = {f"{prefix}reward/{name}": _nanmean(rewards[:, k]) for k, name in enumerate(names)}
    satisfied = torch.where(torch.isnan(rewards), torch.ones_like(rewards), (rewards >= 1.0).float())  # (N, K)
    m[f"{prefix}all_satisfied" if prefix else "reward/all_satisfied"] = float(satisfied.min(1).values.mean())
    return m


LOSS_KEYS = ("loss/policy", "loss/kl", "loss/total", "policy/clip_frac", "policy/kl", "policy/entropy")


def step_metrics(rec: StepRecord) -> dict[str, Any]:
    """The step's metrics line (keys in docs/CONTRACTS.md)."""
    names, rollout, token_adv = rec.reward_names, rec.rollout, rec.adv.token_adv
    m: dict[str, Any] = {"step": rec.step}
    m.update(reward_metrics(rec.scores.rewards, names))
    real = token_adv[rollout.mask.bool()]
    m["adv/mean"] = float(real.mean())
    m["adv/std"] = float(real.std()) if real.numel() > 1 else 0.0
    m["adv/abs_mean"] = float(real.abs().mean())
    for key in LOSS_KEYS:
        m[key] = rec.loss_stats.get(key, float("nan"))
    m["response/length"] = float(rollout.mask.sum(1).float().mean())
    js = rec.routing.distances
    if js is not None:
        m.update(span_metrics.js_summary(js, rollout.mask, names))
    replayed = rec.routing.replayed
    if replayed is not None:
        m["replay/pass_share"] = replay_pass_share(replayed, rec.scores.applicable, rollout.mask)
    weights = rec.routing.weights
    if weights is None:
        weights = rollout.mask[:, None, :].expand(-1, len(names), -1)
    # Credit metrics over the pairs that carry credit (nonzero group advantage), the same for every method.
    acted = span_metrics.active_pairs(rec.adv.group_adv, rec.scores.applicable)
    m.update(span_metrics.credit_mass(weights, rec.adv.group_adv, rollout.mask, rec.scores.applicable, names, rec.w_max))
    m.update(span_metrics.rotated_controls(weights, rec.scores.span_mask, rollout.mask, acted, names))
    m.update(span_metrics.span_agreement(js, weights, rec.scores.span_mask, rollout.mask, names, acted))
    m.update(span_metrics.specificity(weights, js, rec.scores.span_mask, rollout.mask, rec.scores.rewards, names,
                                      acted, rec.routing.entropy))
    m.update(rec.times)
    return m


def replay_pass_share(replayed: Tensor, applicable: Tensor, mask: Tensor) -> float:
    """`replay/pass_share`: contrastive passes run / passes replaying every applicable (sample, reward) pair
    would run (pairs with a non-empty response); 1.0 when there is no such pair."""
    live = applicable.bool() & (mask.sum(1) > 0)[:, None]  # (B, K)
    total = int(live.sum())
    return float((replayed.bool() & live).sum()) / total if total else 1.0


def js_skipped(rec: StepRecord) -> Tensor:
    """(B, K) bool: reward k applies to sample i but its contrastive pass was skipped (its JS is not computed)."""
    applicable = rec.scores.applicable
    if rec.routing.replayed is None:
        return torch.zeros_like(applicable)
    return applicable & ~rec.routing.replayed.bool()


def credit_frame(rec: StepRecord) -> pd.DataFrame:
    """The step's credit map, long format: one row per (sample, reward, response token)."""
    names, rollout = rec.reward_names, rec.rollout
    credit = rec.adv.credit
    k = len(names)
    lengths = rollout.mask.sum(1).tolist()
    # Row order: sample, then reward, then token (a sample's rows are contiguous, so are a group's).
    blocks = [(i, kk, n) for i, n in enumerate(lengths) for kk in range(k)]
    si = np.concatenate([np.full(n, i) for i, _, n in blocks]).astype(np.int64)  # (N,)
    sk = np.concatenate([np.full(n, kk) for _, kk, n in blocks]).astype(np.int64)  # (N,)
    st = np.concatenate([np.arange(n) for _, _, n in blocks]).astype(np.int64)  # (N,)
    offsets = [np.asarray(o, dtype=np.int64).reshape(-1, 2) for o in rollout.offsets]
    tokens = rollout.tokens
    js = rec.routing.distances if rec.routing.distances is not None else torch.full(credit.shape, float("nan"))
    weights = rec.routing.weights if rec.routing.weights is not None else torch.ones(credit.shape)
    rewards = rec.scores.rewards.numpy()
    return pd.DataFrame(
        {
            "step": np.full(len(si), rec.step, dtype=np.int32),
            "sample": si.astype(np.int32),
            "group": (si // rec.group_size).astype(np.int32),
            "prompt_key": [rollout.items[i].key for i in si],
            "prompt": [rollout.items[i].prompt() for i in si],
            "response": [rollout.texts[i] for i in si],
            "reward": [names[kk] for kk in sk],
            "score": rewards[si, sk].astype(np.float32),
            "group_adv": rec.adv.group_adv.numpy()[si, sk].astype(np.float32),
            "t": st.astype(np.int32),
            "token_id": rollout.response_ids.numpy()[si, st].astype(np.int32),
            "token": [tokens[i][t] for i, t in zip(si, st, strict=True)],
            "start": np.array([offsets[i][t, 0] for i, t in zip(si, st, strict=True)], dtype=np.int32),
            "end": np.array([offsets[i][t, 1] for i, t in zip(si, st, strict=True)], dtype=np.int32),
            "js": js.numpy()[si, sk, st].astype(np.float32),
            "js_skipped": js_skipped(rec).numpy()[si, sk],
            "weight": weights.numpy()[si, sk, st].astype(np.float32),
            "credit": credit.float().numpy()[si, sk, st].astype(np.float32),
            "in_span": rec.scores.span_mask.numpy()[si, sk, st],
            "token_adv": rec.adv.token_adv.float().numpy()[si, st].astype(np.float32),
        }
    )


def summary_line(m: dict[str, Any], total: int, names: list[str]) -> str:
    """One line per step for the terminal: rewards, advantage spread, loss, KL, clip, time split."""

    def short(name: str) -> str:  # "length_constraints:number_words#2" -> "number_wor#2" (a repeat stays distinct)
        family, mark, n = name.partition("#")
        return family.split(":")[-1][:10] + mark + n

    def t(key: str) -> float:
        return m.get(key, 0.0)

    rewards = " ".join(f"{short(n)} {m.get(f'reward/{n}', float('nan')):.2f}" for n in names)
    return (
        f"step {m['step']}/{total} | {rewards} | all {m['reward/all_satisfied']:.2f} | "
        f"adv_std {m['adv/std']:.2f} | loss {m['loss/total']:+.4f} kl {m['policy/kl']:.4f} "
        f"clip {m['policy/clip_frac']:.2f} ent {m['policy/entropy']:.2f} | {m['time/step']:.1f}s "
        f"(gen {t('time/generate'):.1f} ver {t('time/verify'):.2f} logp {t('time/logprobs'):.1f} "
        f"rep {t('time/replay'):.1f} upd {t('time/update'):.1f})"
    )
