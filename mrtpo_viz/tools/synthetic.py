"""Synthetic run stores for the app's tests and `mrtpo bench app`.

The numbers are made up (random scores, JS peaks near span tokens) but every credit map is a
`core.run.credit_format.CreditStep`, the value the trainers build (`core.run.record.credit_step`), written
through `core.run.store.RunWriter`, so the app reads them exactly as it reads a real run. Not used by training. Never imports torch.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd

from core.run.credit_format import CreditStep
from core.run.store import RunWriter

DEFAULT_REWARDS = ("keywords:existence", "punctuation:no_comma", "change_case:english_lowercase",
                   "startend:end_checker")
WORDS = ("the", "river", "runs", "steady", "under", "a", "bridge", "and", "light", "falls", "on", "water", "<script>",
         "stone", "calm", "end", "note", "is", "here", "slow")


def _tokens(rng: np.random.Generator, n_samples: int, n_tokens: int) -> np.ndarray:
    """(S, T) made-up response tokens: words with a leading space, some commas and newlines."""
    words = np.array([w for w in WORDS] + [" " + w for w in WORDS], dtype=object)
    pick = rng.integers(len(WORDS), size=(n_samples, n_tokens))
    toks = words[pick + len(WORDS)]
    toks[:, 0] = words[pick[:, 0]]  # the first token has no leading space
    r = rng.random((n_samples, n_tokens))
    later = np.arange(n_tokens)[None, :] > 0
    toks[later & (r < 0.07)] = ","
    toks[later & (r >= 0.07) & (r < 0.107)] = "\n"
    return toks


def _spans(rewards: tuple[str, ...], toks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(S, K, T) bool: token masks that look like what each reward's verifier inspects."""
    n_samples, n = toks.shape
    mask = np.zeros((n_samples, len(rewards), n), dtype=bool)
    stripped = np.vectorize(str.strip, otypes=[object])(toks) if toks.size else toks
    t = np.arange(n)[None, :]
    for k, reward in enumerate(rewards):
        if reward.startswith("keywords"):
            mask[:, k] = stripped == "steady"
        elif "comma" in reward:
            mask[:, k] = toks == ","
        elif reward.startswith("startend"):
            mask[:, k] = t >= n - 3
        elif "case" in reward:
            mask[:, k] = True
        else:
            a = rng.integers(0, max(1, n - 4), size=(n_samples, 1))
            mask[:, k] = (t >= a) & (t < a + 4)
    return mask


def synthetic_credit_step(step: int = 1, n_samples: int = 8, n_tokens: int = 32,
                          rewards: tuple[str, ...] = DEFAULT_REWARDS[:2], group_size: int = 4,
                          seed: int = 0, with_js: bool = True) -> CreditStep:
    """A credit map as the trainers build it (`core.run.credit_format.CreditStep`, what `core.run.record.credit_step`
    returns and `RunWriter.write_credit` writes), with made-up but self-consistent numbers, built with array
    operations (no per-row objects: 128 x 1,024 x 5 costs what the trainers' own path costs).

    Per sample i and reward k: score in {0, 1}, a = group-normalised score, JS higher on span tokens,
    routing weights w = T * d / sum d (capped at 5), credit = w * a / sigma, token_adv = sum_k credit - mu / sigma
    (docs/METHOD.md). As in a replay run, a reward that does not apply (score NaN) has no JS, and a pair whose a is
    0 (its group scored the same) has no JS either (`distance_skipped`); both get weight 1.
    """
    rewards = tuple(rewards)
    rng = np.random.default_rng(seed * 1000 + step)
    S, K, T = n_samples, len(rewards), n_tokens
    scores = rng.integers(0, 2, size=(K, S)).astype(float)
    if K > 1:
        scores[-1, : S // 4] = np.nan  # a reward that does not apply to some prompts
    adv = np.zeros_like(scores)
    for g0 in range(0, S, group_size):
        blk = scores[:, g0:g0 + group_size]
        with warnings.catch_warnings(), np.errstate(invalid="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)  # a reward that applies to no sample of the group
            mean = np.nanmean(blk, axis=1, keepdims=True) if blk.size else 0
            std = np.nanstd(blk, axis=1, keepdims=True)
            a = (blk - mean) / (std + 1e-4)
        adv[:, g0:g0 + group_size] = np.nan_to_num(a)
    s = adv.sum(axis=0)
    mu, sigma = float(s.mean()), float(s.std())
    score, group_adv = scores.T.astype(np.float32), adv.T.astype(np.float32)  # (S, K)
    toks = _tokens(rng, S, T)  # (S, T)
    lens = np.vectorize(len, otypes=[np.int64])(toks) if toks.size else np.zeros((S, T), np.int64)
    end = np.cumsum(lens, axis=1)
    start = end - lens
    mask = _spans(rewards, toks, rng)  # (S, K, T)
    d = np.clip(rng.gamma(1.5, 0.03, (S, K, T)) + mask * rng.uniform(0.1, 0.4, (S, K, 1)), 0, 1)
    applies = ~np.isnan(score)
    skipped = with_js & applies & (group_adv == 0)  # (S, K)
    has_js = (with_js & applies & ~skipped)[:, :, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(has_js, np.clip(T * d / d.sum(-1, keepdims=True), 0, 5.0), 1.0)
    d = np.where(has_js, d, np.nan)
    credit = w * group_adv[:, :, None] / (sigma + 1e-4)
    token_adv = credit.sum(1) - mu / (sigma + 1e-4)  # (S, T)
    keys = [f"p{(i // group_size):04d}" for i in range(S)]
    return CreditStep(
        step=int(step), reward_names=list(rewards), sample=np.arange(S, dtype=np.int32),
        group=(np.arange(S) // group_size).astype(np.int32), prompt_key=keys,
        prompt=[f"Write a short note about rivers. Include the keyword steady. Do not use any commas. ({key})"
                for key in keys],
        response=["".join(row) for row in toks], length=np.full(S, T, dtype=np.int64),
        score=score, group_adv=group_adv, distance_skipped=skipped,
        token_id=rng.integers(0, 500, S * T).astype(np.int32), token=[str(x) for x in toks.ravel()],
        start=start.ravel().astype(np.int32), end=end.ravel().astype(np.int32),
        token_adv=token_adv.ravel().astype(np.float32), distance=d.astype(np.float32), weight=w.astype(np.float32),
        credit=credit.astype(np.float32), in_span=mask,
    )


def synthetic_credit_frame(step: int = 1, n_samples: int = 8, n_tokens: int = 32,
                           rewards: tuple[str, ...] = DEFAULT_REWARDS[:2], group_size: int = 4,
                           seed: int = 0, with_js: bool = True) -> pd.DataFrame:
    """`synthetic_credit_step(...)` as the long frame (run store schema, one row per (sample, reward, token))."""
    return synthetic_credit_step(step, n_samples, n_tokens, rewards, group_size, seed, with_js).frame()


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
        w.write_credit(step, synthetic_credit_step(step, n_samples, n_tokens, rewards, 4, seed, with_js))
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


def main(argv: list[str] | None = None) -> None:
    """`python -m mrtpo_viz.tools.synthetic [steps samples tokens rewards]`: write a synthetic run in a temporary
    folder and print its wall time and the process's peak RSS (default: 2 steps at 128 x 1,024 x 5)."""
    import resource
    import sys
    import tempfile
    import time

    steps, n_samples, n_tokens, n_rewards = [int(x) for x in (argv if argv is not None else sys.argv[1:])] or [2, 128, 1024, 5]
    rewards = (*DEFAULT_REWARDS, *(f"length_constraints:number_words#{i}" for i in range(n_rewards)))[:n_rewards]
    with tempfile.TemporaryDirectory() as d:
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        write_synthetic_run(d, "bench", steps=steps, rewards=rewards, n_samples=n_samples, n_tokens=n_tokens)
        wall = time.perf_counter() - t0
        rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(f"write_synthetic_run {steps} steps x {n_samples} samples x {n_tokens} tokens x {n_rewards} rewards: "
          f"{wall:.2f} s, peak RSS {rss1 / 1024:.0f} MB (+{(rss1 - rss0) / 1024:.0f} MB over the import)")


if __name__ == "__main__":
    main()
