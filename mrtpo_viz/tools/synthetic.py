"""Synthetic run stores for the app's tests and `mrtpo bench app`.

The numbers are made up (random scores, JS peaks near span tokens) but every frame follows the run
store schema and is written through `core.run.store.RunWriter`, so the app reads them exactly as it
reads a real run. Not used by training. Never imports torch.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd

from core.run.store import RunWriter

DEFAULT_REWARDS = ("keywords:existence", "punctuation:no_comma", "change_case:english_lowercase",
                   "startend:end_checker")
WORDS = ("the", "river", "runs", "steady", "under", "a", "bridge", "and", "light", "falls", "on", "water", "<script>",
         "stone", "calm", "end", "note", "is", "here", "slow")


def _tokens(rng: np.random.Generator, n_tokens: int) -> list[str]:
    toks = []
    for t in range(n_tokens):
        w = WORDS[rng.integers(len(WORDS))]
        if t and rng.random() < 0.07:
            toks.append(",")
        elif t and rng.random() < 0.04:
            toks.append("\n")
        else:
            toks.append(w if t == 0 else " " + w)
    return toks


def _spans(reward: str, tokens: list[str], rng: np.random.Generator) -> np.ndarray:
    """A token mask that looks like what the reward's verifier inspects."""
    n = len(tokens)
    mask = np.zeros(n, dtype=bool)
    if reward.startswith("keywords"):
        mask = np.array([tok.strip() == "steady" for tok in tokens])
    elif "comma" in reward:
        mask = np.array([tok == "," for tok in tokens])
    elif reward.startswith("startend"):
        mask[max(0, n - 3):] = True
    elif "case" in reward:
        mask[:] = True
    else:
        a = int(rng.integers(0, max(1, n - 4)))
        mask[a:a + 4] = True
    return mask


def synthetic_credit_frame(step: int = 1, n_samples: int = 8, n_tokens: int = 32,
                           rewards: tuple[str, ...] = DEFAULT_REWARDS[:2], group_size: int = 4,
                           seed: int = 0, with_js: bool = True) -> pd.DataFrame:
    """A credit map (run store schema) with made-up but self-consistent numbers.

    Per sample i and reward k: score in {0, 1}, a = group-normalised score, JS higher on span tokens,
    routing weights w = T * d / sum d, credit = w * a / sigma, token_adv = sum_k credit - mu / sigma.
    As in a replay run, a reward that does not apply (score NaN) has no JS, and a pair whose a is 0 (its
    group scored the same) has no JS either (`distance_skipped`); both get weight 1.
    """
    rng = np.random.default_rng(seed * 1000 + step)
    rows: list[dict] = []
    scores = rng.integers(0, 2, size=(len(rewards), n_samples)).astype(float)
    if len(rewards) > 1:
        scores[-1, : n_samples // 4] = np.nan  # a reward that does not apply to some prompts
    adv = np.zeros_like(scores)
    for g0 in range(0, n_samples, group_size):
        blk = scores[:, g0:g0 + group_size]
        with warnings.catch_warnings(), np.errstate(invalid="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)  # a reward that applies to no sample of the group
            mean = np.nanmean(blk, axis=1, keepdims=True) if blk.size else 0
            std = np.nanstd(blk, axis=1, keepdims=True)
            a = (blk - mean) / (std + 1e-4)
        adv[:, g0:g0 + group_size] = np.nan_to_num(a)
    s = adv.sum(axis=0)
    mu, sigma = float(s.mean()), float(s.std())
    for i in range(n_samples):
        toks = _tokens(rng, n_tokens)
        starts = np.cumsum([0] + [len(x) for x in toks[:-1]])
        response = "".join(toks)
        key = f"p{(i // group_size):04d}"
        prompt = f"Write a short note about rivers. Include the keyword steady. Do not use any commas. ({key})"
        per_k = []
        for k, reward in enumerate(rewards):
            mask = _spans(reward, toks, rng)
            d = np.clip(rng.gamma(1.5, 0.03, n_tokens) + mask * rng.uniform(0.1, 0.4), 0, 1)
            skipped = with_js and not np.isnan(scores[k, i]) and adv[k, i] == 0
            if with_js and not skipped and not np.isnan(scores[k, i]):
                u = n_tokens * d / d.sum()
                w = np.clip(u, 0, 5.0)
            else:
                d = np.full(n_tokens, np.nan)
                w = np.ones(n_tokens)
            credit = w * adv[k, i] / (sigma + 1e-4)
            per_k.append((reward, mask, d, w, credit, skipped))
        token_adv = sum(c for *_, c, _ in per_k) - mu / (sigma + 1e-4)
        for k, (reward, mask, d, w, credit, skipped) in enumerate(per_k):
            for t in range(n_tokens):
                rows.append(dict(
                    step=step, sample=i, group=i // group_size, prompt_key=key, prompt=prompt, response=response,
                    reward=reward, score=scores[k, i], group_adv=adv[k, i], t=t, token_id=int(rng.integers(0, 500)),
                    token=toks[t], start=int(starts[t]), end=int(starts[t] + len(toks[t])), distance=d[t],
                    distance_skipped=skipped, weight=w[t],
                    credit=credit[t], in_span=bool(mask[t]), token_adv=token_adv[t],
                ))
    df = pd.DataFrame(rows)
    for col in ("step", "sample", "group", "t", "token_id", "start", "end"):
        df[col] = df[col].astype("int32")
    for col in ("score", "group_adv", "distance", "weight", "credit", "token_adv"):
        df[col] = df[col].astype("float32")
    return df


def synthetic_metrics(step: int, rewards: tuple[str, ...], rng: np.random.Generator, with_js: bool = True) -> dict:
    """One metrics.jsonl row with every key of the contract (made-up values trending upward)."""
    base = min(0.95, 0.3 + 0.05 * step)
    row: dict[str, float] = {"step": step}
    for r in rewards:
        row[f"reward/{r}"] = float(np.clip(base + rng.normal(0, 0.05), 0, 1))
        if with_js:
            row[f"js/{r}/mean"] = float(rng.uniform(0.05, 0.15))
            row[f"js/{r}/max"] = float(rng.uniform(0.3, 0.6))
            row[f"span/{r}/mass_in"] = float(rng.uniform(0.1, 0.5))
            row[f"span/{r}/auc"] = float(rng.uniform(0.6, 0.9))
            row[f"span/{r}/auc_control"] = float(rng.uniform(0.45, 0.7))
    row["reward/all_satisfied"] = float(np.clip(base - 0.2 + rng.normal(0, 0.05), 0, 1))
    row.update({"adv/mean": 0.0, "adv/std": 1.0, "adv/abs_mean": 0.8, "loss/policy": float(rng.normal(0, 0.05)),
                "loss/kl": 0.0, "policy/clip_frac": float(rng.uniform(0, 0.1)), "policy/kl": float(rng.uniform(0, 0.01)),
                "policy/entropy": float(rng.uniform(1.5, 2.5))})
    row["loss/total"] = row["loss/policy"] + row["loss/kl"]
    parts = {"time/generate": rng.uniform(0.5, 1.0), "time/verify": rng.uniform(0.01, 0.02),
             "time/replay": rng.uniform(0.2, 0.4) if with_js else 0.0, "time/update": rng.uniform(0.3, 0.6),
             "time/logprobs": rng.uniform(0.05, 0.1), "time/advantages": rng.uniform(0.001, 0.002)}
    row.update({k: float(v) for k, v in parts.items()})
    row["time/step"] = float(sum(parts.values()))
    row["response/length"] = float(rng.uniform(20, 40))
    return row


def write_synthetic_run(runs_dir, name: str, steps: int = 3, method: str = "mrtpo",
                        rewards: tuple[str, ...] = DEFAULT_REWARDS[:2], n_samples: int = 8, n_tokens: int = 24,
                        state: str = "completed", seed: int = 0, pid: int | None = None,
                        config: dict | None = None, with_eval: bool = True) -> RunWriter:
    """Write a finished (or `state`) synthetic run with `steps` steps of metrics and credit maps; `config`
    overrides config.json fields; `with_eval`: the last step logs a held-out evaluation."""
    if not re.match(r"^[a-z]+$", method):
        raise ValueError(method)
    with_js = method == "mrtpo"
    config = {"model": "synthetic", "prompt_set": "synthetic", "method": method, "routing": "replay",
              "steps": steps, "group_size": 4, "prompts_per_step": n_samples // 4, "seed": seed,
              "lam": 1.0, "kl_beta": 0.0, "inner_epochs": 1, "reward_names": list(rewards), "reward_weights": {},
              **(config or {})}
    w = RunWriter.create(runs_dir, name, config)
    rng = np.random.default_rng(seed)
    for step in range(1, steps + 1):
        w.write_credit(step, synthetic_credit_frame(step, n_samples, n_tokens, rewards, 4, seed, with_js))
        row = synthetic_metrics(step, rewards, rng, with_js)
        if step == steps and with_eval:  # a checkpoint step: the held-out eval
            row.update({f"eval/reward/{r}": float(rng.uniform(0.2, 0.8)) for r in rewards})
            row["eval/all_satisfied"] = float(rng.uniform(0.1, 0.4))
        w.append_metrics(row)
    fields = {"state": state, "step": steps, "total_steps": steps}
    if pid is not None:
        fields["pid"] = pid
    w.set_status(**fields)
    return w
