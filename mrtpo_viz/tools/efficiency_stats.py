"""The efficiency study's numbers: efficiency.csv read into frames, steps to a target, final rates, where the
credit went, and each method's differences against GDPO paired by seed with bootstrap intervals and verdicts
(docs/METHOD.md, "Paired differences against GDPO"). `efficiency_report` renders them (Markdown, HTML, figure).

Input: the long table `core.tools.efficiency` writes (columns method, seed, step, metric, value). Pure
pandas/numpy: never imports torch or plotly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from core.verifiers.shared.kinds import OTHER_KIND, REWARD_KINDS, reward_kind

ALL_SATISFIED = "eval/all_satisfied"


EVAL_REWARD_PREFIX = "eval/reward/"


METHOD_ORDER = ("grpo", "gdpo", "mrtpo-replay", "mrtpo-span", "mrtpo-js-specific", "mrtpo-swap-specific", "mrtpo-swap")


TIME_KEYS = {"time/step": "s/step", "time/generate": "generate", "time/logprobs": "logprobs", "time/replay": "replay",
             "time/update": "update"}


def load(csv: str | Path) -> pd.DataFrame:
    """The study table with typed columns (method str, seed int, step int, metric str, value float)."""
    df = pd.read_csv(csv)
    missing = {"method", "seed", "step", "metric", "value"} - set(df.columns)
    if missing:
        raise ValueError(f"{csv} lacks columns {sorted(missing)}")
    df["method"] = df["method"].astype(str)
    df["metric"] = df["metric"].astype(str)
    df["seed"] = df["seed"].astype("int64")
    df["step"] = df["step"].astype("int64")
    df["value"] = pd.to_numeric(df["value"], errors="coerce")
    return df


def methods_of(df: pd.DataFrame) -> list[str]:
    """Methods in the study's usual order (baselines first), then any others in order of appearance."""
    present = list(dict.fromkeys(df["method"]))
    return [m for m in METHOD_ORDER if m in present] + [m for m in present if m not in METHOD_ORDER]


def eval_metrics(df: pd.DataFrame, reward_names: Sequence[str] = ()) -> list[str]:
    """`eval/all_satisfied` first, then `eval/reward/<name>`: in `reward_names` order, then any others in
    order of appearance."""
    present = list(dict.fromkeys(df["metric"]))
    known = [f"{EVAL_REWARD_PREFIX}{n}" for n in reward_names if f"{EVAL_REWARD_PREFIX}{n}" in present]
    rewards = known + [m for m in present if m.startswith(EVAL_REWARD_PREFIX) and m not in known]
    return ([ALL_SATISFIED] if ALL_SATISFIED in present else []) + rewards


def label_of(metric: str) -> str:
    if metric == ALL_SATISFIED:
        return "all satisfied"
    return metric.removeprefix(EVAL_REWARD_PREFIX)


def seed_spread(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per (method, step): n seeds with a value, mean, std (sample std, ddof=1; NaN with one seed), min, max."""
    part = df[df["metric"] == metric].dropna(subset=["value"])
    cols = ["method", "step", "n", "mean", "std", "min", "max"]
    if part.empty:
        return pd.DataFrame(columns=cols)
    g = part.groupby(["method", "step"], sort=True)["value"]
    out = g.agg(n="count", mean="mean", std=lambda v: v.std(ddof=1), min="min", max="max").reset_index()
    return out[cols]


def first_step_reaching(steps: Sequence[int], values: Sequence[float], target: float) -> int | None:
    """min{ s : value(s) >= target } over the evaluated steps, or None when no evaluated step reaches it.

    >>> first_step_reaching([0, 5, 10], [0.1, 0.3, 0.2], 0.25)
    5
    """
    hits = [int(s) for s, v in zip(steps, values, strict=True) if v is not None and math.isfinite(v) and v >= target]
    return min(hits) if hits else None


def seed_steps(df: pd.DataFrame, method: str, target: float, metric: str = ALL_SATISFIED) -> dict[int, tuple[int | None, int]]:
    """Per seed of `method`: (first evaluated step reaching `target` or None, that step or else the run's last
    evaluated step: a lower bound on the steps it needs)."""
    part = df[(df["metric"] == metric) & (df["method"] == method)].dropna(subset=["value"])
    out = {}
    for seed in sorted(part["seed"].unique()):
        r = part[part["seed"] == seed].sort_values("step")
        first = first_step_reaching(r["step"].tolist(), r["value"].tolist(), target)
        out[int(seed)] = (first, first if first is not None else int(r["step"].max()))
    return out


def steps_to_target(df: pd.DataFrame, targets: Sequence[float], metric: str = ALL_SATISFIED) -> pd.DataFrame:
    """Per (method, target): each seed's first step reaching it, and two means over seeds.

    `mean_reached` = mean of the first steps of the seeds that reached the target (NaN when none did);
    `mean_bound` = mean over all seeds with an unreached seed counted as its last evaluated step, a lower
    bound on the true mean (that seed would need more steps); equal to `mean_reached` when all reached.
    `per_seed` is a list (seed order) of steps, None for not reached.
    """
    rows = []
    for method in methods_of(df):
        for target in targets:
            per_seed = seed_steps(df, method, target, metric)
            firsts = [first for first, _ in per_seed.values()]
            bounds = [bound for _, bound in per_seed.values()]
            reached = [s for s in firsts if s is not None]
            rows.append({
                "method": method, "target": float(target), "n_seeds": len(per_seed), "n_reached": len(reached),
                "mean_reached": sum(reached) / len(reached) if reached else math.nan,
                "mean_bound": sum(bounds) / len(bounds) if bounds else math.nan,
                "per_seed": firsts,
            })
    return pd.DataFrame(rows, columns=["method", "target", "n_seeds", "n_reached", "mean_reached", "mean_bound",
                                       "per_seed"])


def final_values(df: pd.DataFrame, reward_names: Sequence[str] = ()) -> pd.DataFrame:
    """Per run (method, seed) and eval metric: the value at the run's last evaluated step.

    A run's last evaluated step is the largest step with an `eval/all_satisfied` value (or, without one,
    with any eval value); a reward that applied to no held-out prompt there is left out for that run.
    """
    ev = df[df["metric"].isin(eval_metrics(df, reward_names))].dropna(subset=["value"])
    if ev.empty:
        return pd.DataFrame(columns=["method", "seed", "metric", "step", "value"])
    anchor = ev[ev["metric"] == ALL_SATISFIED] if (ev["metric"] == ALL_SATISFIED).any() else ev
    last = anchor.groupby(["method", "seed"])["step"].max().rename("last").reset_index()
    at_last = ev.merge(last, on=["method", "seed"])
    return at_last[at_last["step"] == at_last["last"]][["method", "seed", "metric", "step", "value"]]


def final_rates(df: pd.DataFrame, reward_names: Sequence[str] = ()) -> pd.DataFrame:
    """Per (method, eval metric): mean and std (ddof=1) over seeds of each run's final value (`final_values`)."""
    at_last = final_values(df, reward_names)
    rows = []
    for method in methods_of(df):
        for metric in eval_metrics(df, reward_names):
            v = at_last[(at_last["method"] == method) & (at_last["metric"] == metric)]
            if v.empty:
                continue
            rows.append({"method": method, "metric": metric, "n": len(v), "mean": float(v["value"].mean()),
                         "std": float(v["value"].std(ddof=1)) if len(v) > 1 else math.nan,
                         "step": int(v["step"].max())})
    return pd.DataFrame(rows, columns=["method", "metric", "n", "mean", "std", "step"])


def seconds_per_step(df: pd.DataFrame) -> pd.DataFrame:
    """Per method and time key: mean over steps within each seed's run, then mean and std (ddof=1) over seeds."""
    part = df[df["metric"].isin(list(TIME_KEYS)) & (df["step"] > 0)].dropna(subset=["value"])
    per_run = part.groupby(["method", "seed", "metric"])["value"].mean().reset_index()
    rows = []
    for method in methods_of(df):
        for key in TIME_KEYS:
            v = per_run[(per_run["method"] == method) & (per_run["metric"] == key)]["value"]
            if v.empty:
                continue
            rows.append({"method": method, "metric": key, "n": len(v), "mean": float(v.mean()),
                         "std": float(v.std(ddof=1)) if len(v) > 1 else math.nan})
    return pd.DataFrame(rows, columns=["method", "metric", "n", "mean", "std"])


SPAN_PREFIX = "span/"


CREDIT_MEASURES = ("mass_in", "mass_in_ceiling", "mass_control", "lift", "lift_rotated", "retained")


def credit_placement(df: pd.DataFrame) -> pd.DataFrame:
    """Where each method's routing put each reward kind's credit during training (docs/METHOD.md, "Specificity").

    Per run (method, seed): m[r, q] = mean over the run's steps (NaN skipped) of `span/<r>/<q>`, q in
    `CREDIT_MEASURES`, and the run's mean `span/overlap`; per reward kind K: the unweighted mean over K's
    rewards of m[r, q]. Rows: method, kind ("overlap" for the overlap), measure, n (seeds), mean and std over
    seeds (ddof=1). GDPO/GRPO rows are the uniform baseline (weight 1 on every token: mass_in = the span's token
    share, overlap 1)."""
    part = df[df["metric"].str.startswith(SPAN_PREFIX) & (df["step"] > 0)].dropna(subset=["value"])
    per_run = part.groupby(["method", "seed", "metric"])["value"].mean().reset_index()
    cols = ["method", "kind", "measure", "n", "mean", "std"]
    if per_run.empty:
        return pd.DataFrame(columns=cols)
    reward, measure = per_run["metric"].str[len(SPAN_PREFIX):].str.rpartition("/")[[0, 2]].T.values
    per_run = per_run.assign(measure=measure, kind=["overlap" if not r else reward_kind(r) for r in reward])
    rows = per_run[(per_run["metric"] == "span/overlap") | per_run["measure"].isin(CREDIT_MEASURES)]
    by_kind = rows.groupby(["method", "seed", "kind", "measure"], sort=False)["value"].mean()
    agg = by_kind.groupby(["method", "kind", "measure"], sort=False).agg(
        n="count", mean="mean", std=lambda v: v.std(ddof=1) if len(v) > 1 else math.nan)
    return agg.reset_index()[cols]


BASELINE = "gdpo"


BOOTSTRAP_RESAMPLES = 10_000


BOOTSTRAP_SEED = 0  # fixed: the same table gives the same intervals


def bootstrap_interval(values: Sequence[float], geometric: bool = False, resamples: int = BOOTSTRAP_RESAMPLES,
                       seed: int = BOOTSTRAP_SEED, level: float = 0.95) -> tuple[float, float, float]:
    """(point, low, high): the mean of the per-seed paired values and its percentile bootstrap interval.

    With values v_1..v_n: point = (1/n) sum_i v_i; B resamples draw n indices uniformly with replacement
    (`numpy.random.default_rng(seed)`), each gives the mean of its values; low / high = the (1-level)/2 and
    (1+level)/2 percentiles of the B means (numpy's linear interpolation). `geometric=True` (ratios): the same on
    log v, then exp: point = (prod_i v_i)^(1/n). With one value there is no interval (low = high = NaN), so no
    verdict. docs/METHOD.md, "Paired differences against GDPO".

    >>> bootstrap_interval([0.0, 1.0])  # resample means 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4
    (0.5, 0.0, 1.0)
    """
    v = np.asarray(values, dtype=float)
    if v.size == 0 or not np.isfinite(v).all() or (geometric and (v <= 0).any()):
        return math.nan, math.nan, math.nan
    x = np.log(v) if geometric else v
    back = np.exp if geometric else (lambda t: t)
    if x.size < 2:  # one seed: a point, no spread to resample
        return float(back(x.mean())), math.nan, math.nan
    idx = np.random.default_rng(seed).integers(0, x.size, size=(resamples, x.size))
    means = x[idx].mean(axis=1)
    lo, hi = np.percentile(means, [50 * (1 - level), 50 * (1 + level)])
    return float(back(x.mean())), float(back(lo)), float(back(hi))


def kind_values(df: pd.DataFrame, reward_names: Sequence[str] = ()) -> pd.DataFrame:
    """Per run (method, seed) and reward kind (`core.verifiers.shared.kinds.REWARD_KIND` of each reward's family):
    the unweighted mean of the run's final held-out rates of that kind's rewards (`final_values`), plus the
    final all-satisfied rate under its own metric name. Columns method, seed, metric, value."""
    fv = final_values(df, reward_names)
    fv = fv.assign(metric=[m if m == ALL_SATISFIED else reward_kind(label_of(m)) for m in fv["metric"]])
    return fv.groupby(["method", "seed", "metric"], sort=False)["value"].mean().reset_index()


def kinds_of(df: pd.DataFrame, reward_names: Sequence[str] = ()) -> list[str]:
    """The reward kinds of the study's rewards in `REWARD_KINDS` order, `other` last."""
    present = {reward_kind(label_of(m)) for m in eval_metrics(df, reward_names) if m != ALL_SATISFIED}
    return [k for k in (*REWARD_KINDS, OTHER_KIND) if k in present]


def paired_differences(df: pd.DataFrame, targets: Sequence[float], reward_names: Sequence[str] = (),
                       baseline: str = BASELINE) -> pd.DataFrame:
    """Each method against `baseline`, paired by seed (the same seed trains on the same prompts), with
    `bootstrap_interval`s. Rows (method, measure, n, point, low, high, censored_method, censored_baseline):
    - measure `steps>=t`: per seed r_s = steps_method,s / steps_baseline,s to reach held-out all-satisfied >= t
      (`seed_steps`; an unreached run counts as its last evaluated step, and `censored_*` counts those seeds),
      geometric mean; a seed where either run meets t at step 0 (the initial model) is left out;
    - measure `eval/all_satisfied` or a reward kind: per seed d_s = final_method,s - final_baseline,s
      (`kind_values`), mean.
    Seeds that only one of the two methods has are left out. Empty without baseline runs."""
    cols = ["method", "measure", "n", "point", "low", "high", "censored_method", "censored_baseline"]
    if baseline not in set(df["method"]):
        return pd.DataFrame(columns=cols)
    rows = []
    base_steps = {t: seed_steps(df, baseline, t) for t in targets}
    kv: dict[tuple[str, str], dict[int, float]] = {}
    for r in kind_values(df, reward_names).itertuples(index=False):
        kv.setdefault((r.method, r.metric), {})[int(r.seed)] = float(r.value)
    for method in methods_of(df):
        if method == baseline:
            continue
        for t in targets:
            mine, base = seed_steps(df, method, t), base_steps[t]
            pairs = [(mine[s], base[s]) for s in sorted(set(mine) & set(base)) if mine[s][1] > 0 and base[s][1] > 0]
            ratios = [m[1] / b[1] for m, b in pairs]
            rows.append([method, f"steps>={t:g}", len(ratios), *bootstrap_interval(ratios, geometric=True),
                         sum(m[0] is None for m, _ in pairs), sum(b[0] is None for _, b in pairs)])
        for measure in [ALL_SATISFIED, *kinds_of(df, reward_names)]:
            mine, base = kv.get((method, measure), {}), kv.get((baseline, measure), {})
            if not mine or not base:
                continue
            diffs = [mine[s] - base[s] for s in sorted(set(mine) & set(base))]
            rows.append([method, measure, len(diffs), *bootstrap_interval(diffs), 0, 0])
    return pd.DataFrame(rows, columns=cols)


def measure_label(measure: str) -> str:
    if measure.startswith("steps>="):
        return f"steps to all-satisfied ≥ {measure.removeprefix('steps>=')}"
    return label_of(measure)


def verdicts(pd_rows: pd.DataFrame) -> dict[str, tuple[list[str], list[str]]]:
    """Per method: (measures where it beats the baseline beyond the interval, measures where it falls behind).

    Beats: a rate difference with low > 0, or a steps ratio with high < 1 and every seed of the method reaching
    the target (an unreached run's ratio is only a lower bound). Falls behind: high < 0, or low > 1 with every
    seed of the baseline reaching it."""
    out: dict[str, tuple[list[str], list[str]]] = {}
    for method, part in pd_rows.groupby("method", sort=False):
        better, worse = [], []
        for _, r in part.iterrows():
            label = measure_label(r["measure"])
            if r["measure"].startswith("steps>="):
                if r["high"] < 1 and r["censored_method"] == 0:
                    better.append(label)
                elif r["low"] > 1 and r["censored_baseline"] == 0:
                    worse.append(label)
            elif r["low"] > 0:
                better.append(label)
            elif r["high"] < 0:
                worse.append(label)
        out[method] = (better, worse)
    return out


def initial_rate(df: pd.DataFrame, metric: str = ALL_SATISFIED) -> float | None:
    """The step-0 (initial model) value of `metric`: the mean over the runs that have one, else None."""
    v = df[(df["metric"] == metric) & (df["step"] == 0)]["value"].dropna()
    return float(v.mean()) if len(v) else None
