"""Pre-registered endpoints of a study: paired t intervals against GDPO and Holm's correction.

    python -m core.tools.study_endpoints runs/study-v3/efficiency.csv --out runs/study-v3

Reads the long table `mrtpo bench efficiency` writes (method, seed, step, metric, value) and reports, for every
arm against the baseline (GDPO), paired by seed (a seed trains every arm on the same prompts):

- the primary endpoint (docs/results/study-v3.md): held-out all-satisfied averaged over the run's evaluations
  (steps >= 1; step 0, the initial model, is the same for every arm), `primary_values`; the contrasts of the
  MRTPO arms against GDPO are tested together with Holm's step-down correction (`holm`), two-sided, alpha 0.05;
- secondary endpoints, reported as such (95% paired t intervals, no correction, no verdict): final all-satisfied
  (last evaluated step) and each reward kind's held-out score averaged over evaluations.

Only seeds whose runs reached the study's last evaluated step in both arms are paired. Writes `endpoints.md`
and `endpoints.csv` under `--out` and prints the Markdown. Pure Python and pandas (no scipy: the Student t
distribution is computed here, `t_cdf`). Never imports torch, streamlit or plotly.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

ALL_SATISFIED = "eval/all_satisfied"
BASELINE = "gdpo"
ALPHA = 0.05


# ---------------------------------------------------------------------------------------------- the t distribution


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta function (Lentz's method)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b) for a, b > 0 and x in [0, 1]."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df degrees of freedom: 1 - I_{df/(df+t^2)}(df/2, 1/2) / 2 for t >= 0."""
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The t with t_cdf(t, df) = p (bisection to 1e-10), p in (0, 1)."""
    lo, hi = -1e3, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-10:
            break
    return (lo + hi) / 2.0


def paired_t(diffs: Sequence[float], level: float = 0.95) -> dict[str, float]:
    """Paired t on per-seed differences d_s: mean, sd (n - 1), n, t = mean / (sd / sqrt n), two-sided p with
    n - 1 degrees of freedom and the `level` interval mean -+ t_{(1+level)/2, n-1} sd / sqrt n.
    With n < 2 (or sd = 0 and mean = 0) the interval and p are NaN (sd = 0, mean != 0: p = 0, interval a point)."""
    d = [float(x) for x in diffs if not math.isnan(float(x))]
    n = len(d)
    out = {"n": n, "mean": sum(d) / n if n else float("nan"), "sd": float("nan"), "t": float("nan"),
           "p": float("nan"), "low": float("nan"), "high": float("nan")}
    if n < 2:
        return out
    mean = out["mean"]
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
    se = sd / math.sqrt(n)
    out["sd"] = sd
    if se == 0:
        if mean != 0:
            out.update(t=math.copysign(math.inf, mean), p=0.0, low=mean, high=mean)
        return out
    t = mean / se
    q = t_quantile((1.0 + level) / 2.0, n - 1)
    out.update(t=t, p=min(1.0, 2.0 * (1.0 - t_cdf(abs(t), n - 1))), low=mean - q * se, high=mean + q * se)
    return out


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values: with p sorted ascending p_(1) <= ... <= p_(m),
    adj_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)); returned in the input order. NaN stays NaN and does not
    count in m. Reject H_i at family-wise level alpha when adj_i <= alpha."""
    idx = [i for i, p in enumerate(pvalues) if not math.isnan(p)]
    m = len(idx)
    out = [float("nan")] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda i: pvalues[i])):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


# ---------------------------------------------------------------------------------------------- endpoints


def complete_runs(df: pd.DataFrame, metric: str = ALL_SATISFIED) -> pd.DataFrame:
    """The rows of the runs that reached the study's last evaluated step (the largest step any run evaluated)."""
    ev = df[(df["metric"] == metric) & (df["step"] >= 1)]
    if not len(ev):
        return df.iloc[0:0]
    last = int(ev["step"].max())
    done = ev.groupby(["method", "seed"])["step"].max()
    keep = set(done[done >= last].index)
    return df[[(m, s) in keep for m, s in zip(df["method"], df["seed"], strict=True)]]


def mean_over_evaluations(df: pd.DataFrame, metric: str) -> pd.Series:
    """(method, seed) -> mean of `metric` over the evaluated steps >= 1 of complete runs."""
    ev = complete_runs(df)
    ev = ev[(ev["metric"] == metric) & (ev["step"] >= 1)]
    return ev.groupby(["method", "seed"])["value"].mean()


def primary_values(df: pd.DataFrame) -> pd.Series:
    """The primary endpoint per (method, seed): held-out all-satisfied averaged over evaluations."""
    return mean_over_evaluations(df, ALL_SATISFIED)


def final_values(df: pd.DataFrame, metric: str = ALL_SATISFIED) -> pd.Series:
    """(method, seed) -> `metric` at the last evaluated step of complete runs."""
    ev = complete_runs(df)
    ev = ev[ev["metric"] == metric]
    last = ev.groupby(["method", "seed"])["step"].transform("max")
    return ev[ev["step"] == last].groupby(["method", "seed"])["value"].mean()


def kind_values(df: pd.DataFrame) -> dict[str, pd.Series]:
    """kind -> (method, seed) -> the mean over evaluations of the kind's rewards' held-out scores (each reward
    averaged over evaluations first, then the kind's rewards averaged): format, safety, style, ..."""
    from core.verifiers.shared.kinds import REWARD_KIND

    out: dict[str, list[pd.Series]] = {}
    for metric in sorted(m for m in df["metric"].unique() if str(m).startswith("eval/reward/")):
        kind = REWARD_KIND.get(metric[len("eval/reward/"):])
        if kind:
            out.setdefault(kind, []).append(mean_over_evaluations(df, metric))
    return {kind: pd.concat(parts, axis=1).mean(axis=1) for kind, parts in out.items()}


def paired(values: pd.Series, method: str, baseline: str = BASELINE) -> dict[str, float]:
    """`paired_t` of values[method, s] - values[baseline, s] over the seeds both have."""
    if method not in values.index.get_level_values(0) or baseline not in values.index.get_level_values(0):
        return paired_t([])
    a, b = values.loc[method], values.loc[baseline]
    seeds = sorted(set(a.index) & set(b.index))
    return paired_t([a[s] - b[s] for s in seeds])


def endpoint_rows(df: pd.DataFrame, baseline: str = BASELINE, planned: int | None = None) -> pd.DataFrame:
    """One row per (endpoint, method): n seeds, mean difference, sd, 95% paired t interval, p, and for the
    primary endpoint of the MRTPO arms Holm's adjusted p and the verdict. With `planned` (the pre-registered seed
    count), an arm with fewer paired seeds gets the verdict "interim" instead: a study is judged once, at its end."""
    methods = [m for m in dict.fromkeys(df["method"]) if m != baseline]  # none in a study with no finished run
    rows = []
    endpoints: list[tuple[str, str, pd.Series]] = [("primary", "all-satisfied, mean over evaluations",
                                                    primary_values(df)),
                                                   ("secondary", "all-satisfied, final", final_values(df))]
    endpoints += [("secondary", f"{kind}, mean over evaluations", v) for kind, v in kind_values(df).items()]
    for role, name, values in endpoints:
        for method in methods:
            r = paired(values, method, baseline)
            level = values.loc[method].mean() if method in values.index.get_level_values(0) else float("nan")
            rows.append({"role": role, "endpoint": name, "method": method, "method_mean": level, **r})
    out = pd.DataFrame(rows, columns=["role", "endpoint", "method", "method_mean", "n", "mean", "sd", "t", "p", "low",
                                      "high"])
    out["p_holm"] = float("nan")
    prim = (out["role"] == "primary") & out["method"].str.startswith("mrtpo")
    out.loc[prim, "p_holm"] = holm(out.loc[prim, "p"].tolist())
    out["verdict"] = ""
    for i in out.index[prim]:
        p, mean = out.at[i, "p_holm"], out.at[i, "mean"]
        out.at[i, "verdict"] = ("n/a" if math.isnan(p) else
                                ("beats GDPO" if mean > 0 else "behind GDPO") if p <= ALPHA else "not shown")
        if planned and out.at[i, "n"] < planned:
            out.at[i, "verdict"] = "interim"
    return out


def _f(v: float, sign: bool = True) -> str:
    return "n/a" if v is None or math.isnan(v) else (f"{v:+.3f}" if sign else f"{v:.3f}")


def markdown(rows: pd.DataFrame, baseline: str = BASELINE, planned: int | None = None) -> str:
    prim = rows[rows["role"] == "primary"]
    seeds = int(prim["n"].max()) if len(prim) else 0
    interim = [f"**Interim: {seeds} of {planned} pre-registered seeds.** No verdict until every seed has run; the "
               "p-values below are shown for completeness and decide nothing.", ""] if planned and seeds < planned else []
    lines = ["# Pre-registered endpoints", "", *interim,
             f"Each arm against {baseline}, paired by seed; 95% paired t intervals. Primary endpoint: held-out "
             "all-satisfied averaged over the evaluations (steps >= 1) of each run; the MRTPO arms' contrasts are "
             f"Holm-corrected together (two-sided, family-wise alpha {ALPHA}). Secondary endpoints: uncorrected "
             "intervals, no verdict.", "",
             "## Primary", "",
             "| arm | seeds | arm mean | difference | 95% t interval | p | p (Holm) | verdict |",
             "|---|---|---|---|---|---|---|---|"]
    for _, r in rows[rows["role"] == "primary"].iterrows():
        lines.append(f"| {r['method']} | {r['n']} | {_f(r['method_mean'], False)} | {_f(r['mean'])} | "
                     f"[{_f(r['low'])}, {_f(r['high'])}] | {_f(r['p'], False)} | {_f(r['p_holm'], False)} | "
                     f"{r['verdict'] or '-'} |")
    lines += ["", "## Secondary (reported as such)", "",
              "| endpoint | arm | seeds | difference | 95% t interval |", "|---|---|---|---|---|"]
    for _, r in rows[rows["role"] == "secondary"].iterrows():
        lines.append(f"| {r['endpoint']} | {r['method']} | {r['n']} | {_f(r['mean'])} | "
                     f"[{_f(r['low'])}, {_f(r['high'])}] |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m core.tools.study_endpoints", description=__doc__.split("\n\n")[1])
    p.add_argument("csv", help="efficiency.csv of a study")
    p.add_argument("--out", help="folder for endpoints.md / endpoints.csv (default: the CSV's folder)")
    p.add_argument("--baseline", default=BASELINE)
    p.add_argument("--planned-seeds", type=int, help="the pre-registered seed count: fewer paired seeds = interim")
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        df = pd.read_csv(args.csv)
    except (OSError, ValueError) as exc:
        print(f"study_endpoints: cannot read {args.csv}: {exc}", file=sys.stderr)
        return 2
    rows = endpoint_rows(df, args.baseline, args.planned_seeds)
    out = Path(args.out or Path(args.csv).parent)
    out.mkdir(parents=True, exist_ok=True)
    rows.to_csv(out / "endpoints.csv", index=False)
    text = markdown(rows, args.baseline, args.planned_seeds)
    (out / "endpoints.md").write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
