"""What a step leaves behind: its metrics line and its credit map (docs/CONTRACTS.md, "Run store").

- `StepRecord`: everything one step produced, in one value;
- `step_metrics(record)`: the metrics line (`reward/...`, `adv/...`, `loss/...`, `policy/...`,
  `js/...`, `span/...`, `time/...`, `response/length`);
- `credit_step(record, samples)`: the credit map as columns (what the run store writes, schema 3);
- `credit_frame(record)`: the same as the long frame, one row per (sample, reward, response token);
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
from core.run.credit_format import CreditStep


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
    span_rewards: Sequence[str] | None = None  # the rewards that report inspected spans (None: every reward)
    satisfiable: bool = True  # every reward is a verifier (score 1 = satisfied): reward/all_satisfied means something


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
    if not rec.satisfiable:  # a user's reward has no "satisfied" (its scores need not be 0 / 1)
        del m["reward/all_satisfied"]
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
    routable = rec.scores.applicable if rec.routing.routable is None else rec.scores.applicable & rec.routing.routable
    if replayed is not None and bool(routable.any()):  # pairs without a contrast are not replay's to run
        m["replay/pass_share"] = replay_pass_share(replayed, routable, rollout.mask)
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
    return without_span_metrics(m, names, rec.span_rewards)


# span/<name>/... keys that compare credit with the verifier's spans (span/<name>/retained does not read spans)
SPAN_KEYS_KEPT = ("retained",)


def without_span_metrics(m: dict[str, Any], names: Sequence[str], span_rewards: Sequence[str] | None
                         ) -> dict[str, Any]:
    """The metrics line without the span metrics of rewards that report no spans (they would compare credit with an
    empty span and mean nothing), and without the all-reward `span/overlap` unless every reward reports spans."""
    if span_rewards is None:
        return m
    blind = [n for n in names if n not in set(span_rewards)]
    if not blind:
        return m
    prefixes = tuple(f"span/{n}/" for n in blind)
    kept = {f"span/{n}/{key}" for n in blind for key in SPAN_KEYS_KEPT}
    return {k: v for k, v in m.items() if not (k == "span/overlap" or (k.startswith(prefixes) and k not in kept))}


def replay_pass_share(replayed: Tensor, applicable: Tensor, mask: Tensor) -> float:
    """`replay/pass_share`: contrastive passes run / passes replaying every applicable (sample, reward) pair
    would run (pairs with a non-empty response); 1.0 when there is no such pair."""
    live = applicable.bool() & (mask.sum(1) > 0)[:, None]  # (B, K)
    total = int(live.sum())
    return float((replayed.bool() & live).sum()) / total if total else 1.0


def distance_skipped(rec: StepRecord) -> Tensor:
    """(B, K) bool: reward k applies to sample i but its contrastive pass was skipped (its distance is not computed)."""
    applicable = rec.scores.applicable
    if rec.routing.replayed is None:
        return torch.zeros_like(applicable)
    return applicable & ~rec.routing.replayed.bool()


def credit_step(rec: StepRecord, samples: Sequence[int] | None = None) -> CreditStep:
    """The step's credit map as columns (`core.run.credit_format.CreditStep`), for the batch rows `samples`
    (all when None), built with array operations: text once per sample, token columns once per (sample,
    position), the numbers per (sample, reward, position)."""
    rows = np.arange(len(rec.rollout.items)) if samples is None else np.asarray(list(samples), dtype=np.int64)
    rollout, k = rec.rollout, len(rec.reward_names)
    lengths = rollout.mask.sum(1).numpy().astype(np.int64)[rows]  # (S,)
    width = int(lengths.max()) if len(rows) else 0
    credit = rec.adv.credit.float()[rows][:, :, :width].numpy()  # (S, K, T)
    distances = rec.routing.distances
    distances = (np.full(credit.shape, np.nan, dtype=np.float32) if distances is None
                 else distances.float()[rows][:, :, :width].numpy())
    weights = rec.routing.weights
    weights = np.ones(credit.shape, dtype=np.float32) if weights is None else weights.float()[rows][:, :, :width].numpy()
    valid = np.arange(width)[None, :] < lengths[:, None]  # (S, T)
    offsets = [np.asarray(rollout.offsets[i], dtype=np.int32).reshape(-1, 2) for i in rows]
    offsets = np.concatenate(offsets) if offsets else np.zeros((0, 2), np.int32)  # (sum of lengths, 2)
    tokens = [tok for i in rows for tok in rollout.tokens[i]]
    return CreditStep(
        step=rec.step, reward_names=list(rec.reward_names), sample=rows.astype(np.int32),
        group=(rows // rec.group_size).astype(np.int32), prompt_key=[rollout.items[i].key for i in rows],
        prompt=[rollout.items[i].prompt() for i in rows], response=[rollout.texts[i] for i in rows],
        length=lengths, score=rec.scores.rewards.numpy()[rows].astype(np.float32),
        group_adv=rec.adv.group_adv.float().numpy()[rows].astype(np.float32),
        distance_skipped=distance_skipped(rec).numpy()[rows],
        token_id=rollout.response_ids[rows][:, :width].numpy()[valid].astype(np.int32), token=tokens,
        start=offsets[:, 0], end=offsets[:, 1],
        token_adv=rec.adv.token_adv.float()[rows][:, :width].numpy()[valid].astype(np.float32),
        distance=distances, weight=weights, credit=credit,
        in_span=rec.scores.span_mask[rows][:, :, :width].numpy().astype(bool),
    ) if k else CreditStep.from_frame(rec.step, pd.DataFrame(columns=_LONG_COLUMNS))


_LONG_COLUMNS = ["step", "sample", "group", "prompt_key", "prompt", "response", "reward", "score", "group_adv", "t",
                 "token_id", "token", "start", "end", "distance", "distance_skipped", "weight", "credit", "in_span", "token_adv"]


def credit_frame(rec: StepRecord) -> pd.DataFrame:
    """The step's credit map, long format: one row per (sample, reward, response token) (`credit_step(rec)
    .frame()`; text columns as categoricals)."""
    return credit_step(rec).frame()


def summary_line(m: dict[str, Any], total: int, names: list[str]) -> str:
    """One line per step for the terminal: rewards, advantage spread, loss, KL, clip, time split."""

    def short(name: str) -> str:  # "length_constraints:number_words#2" -> "number_wor#2" (a repeat stays distinct)
        family, mark, n = name.partition("#")
        return family.split(":")[-1][:10] + mark + n

    def t(key: str) -> float:
        return m.get(key, 0.0)

    rewards = " ".join(f"{short(n)} {m.get(f'reward/{n}', float('nan')):.2f}" for n in names)
    satisfied = f" all {m['reward/all_satisfied']:.2f} |" if "reward/all_satisfied" in m else ""
    return (
        f"step {m['step']}/{total} | {rewards} |{satisfied} "
        f"adv_std {m['adv/std']:.2f} | loss {m['loss/total']:+.4f} kl {m['policy/kl']:.4f} "
        f"clip {m['policy/clip_frac']:.2f} ent {m['policy/entropy']:.2f} | {m['time/step']:.1f}s "
        f"(gen {t('time/generate'):.1f} ver {t('time/verify'):.2f} logp {t('time/logprobs'):.1f} "
        f"rep {t('time/replay'):.1f} upd {t('time/update'):.1f})"
    )
