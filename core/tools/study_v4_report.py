"""Study v4's tables from its raw CSV alone (docs/results/study-v4.md): paired t against GDPO with Holm's correction,
the two-way bootstrap (seeds x prompts), the key contrast js - js+shuffle, ood, final values and per kind.

    python -m core.tools.study_v4 report --from-csv docs/results/study-v4.csv.gz

The CSV (`CSV_COLUMNS`) holds one number a row: `arm, seed, step, set, prompt, metric, value`; `set` is `heldout`,
`ood` or `train`; `prompt` is a held-out / ood prompt's key (its rate over its samples) or "" for a run-level
number. An endpoint is computed from the per-prompt rows: a run's rate at an evaluation is the mean over its
prompts (every prompt has the same number of samples). Never imports torch.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import pandas as pd

from core.tools.study_endpoints import holm, paired_t
from core.verifiers.shared.kinds import reward_kind

CSV_COLUMNS = ["arm", "seed", "step", "set", "prompt", "metric", "value"]
BASELINE = "gdpo"
ALL = "eval/all_satisfied"
SETS = ("heldout", "ood")
SET_LABELS = {"heldout": "held-out", "ood": "out-of-template (ood)"}  # how the tables name each set
KINDS = ("format", "safety", "style", "content", "correctness")
DONE = "run/complete"  # the last row a run's scoring appends: the run is in the CSV whole
INITIAL = "initial"  # the untrained model's rows (step 0, one per seed: the evaluation seed follows the run seed)
BOOTSTRAP = 10_000
ALPHA = 0.05


def prompt_rows(rewards: Sequence[Sequence[float]], keys: Sequence[str], names: Sequence[str],
                samples: int) -> list[tuple[str, str, float]]:
    """(prompt, metric, value) rows of one evaluation: `rewards` is (P * samples, K), row r a response to prompt
    r // samples, NaN where reward k does not apply (`core.run.step.held_out_rewards`).

    Per prompt p over its samples: `eval/all_satisfied` = mean_s min_k sat(r_sk), sat = 1 where NaN, else
    [r_sk >= 1] (the trainer's `record.reward_metrics` rule); `eval/reward/<k>` = mean_s r_sk where it applies.
    Then the set's rows (prompt ""): the mean over all responses, the trainer's `eval/...` metrics; with the
    same number of samples per prompt the all-satisfied mean equals the mean of the per-prompt rates."""
    out: list[tuple[str, str, float]] = []
    sat_all: list[float] = []
    by_reward: list[list[float]] = [[] for _ in names]
    for p, key in enumerate(keys):
        block = rewards[p * samples : (p + 1) * samples]
        sat = [min((1.0 if math.isnan(v) else float(v >= 1.0)) for v in row) if len(row) else 1.0 for row in block]
        sat_all += sat
        out.append((key, ALL, sum(sat) / len(sat)))
        for k, name in enumerate(names):
            vals = [float(row[k]) for row in block if not math.isnan(row[k])]
            by_reward[k] += vals
            if vals:
                out.append((key, f"eval/reward/{name}", sum(vals) / len(vals)))
    if sat_all:
        out.append(("", ALL, sum(sat_all) / len(sat_all)))
    out += [("", f"eval/reward/{n}", sum(v) / len(v)) for n, v in zip(names, by_reward, strict=True) if v]
    return out


def on_grid(steps: pd.Series) -> pd.Series:
    """Whether each evaluated step of one run is on its checkpoint grid: a multiple of the most frequent gap between
    its consecutive evaluated steps (10 in the study: steps 10, 20, ..., 150). A run stopped and resumed also has the
    checkpoint it stopped at (e.g. 45), which the scorer scores too; the pre-registered endpoint leaves it out. A run
    with one evaluated step keeps it.

    >>> on_grid(pd.Series([10, 20, 30, 40, 45, 50, 60])).tolist()
    [True, True, True, True, False, True, True]
    """
    uniq = sorted(set(int(s) for s in steps))
    if len(uniq) < 2:
        return pd.Series(True, index=steps.index)
    gaps = pd.Series([b - a for a, b in zip(uniq[:-1], uniq[1:], strict=True)])
    every = int(gaps.mode().min())  # ties: the finer grid
    return steps.astype(int) % every == 0


def per_prompt(df: pd.DataFrame, set_name: str, metric: str = ALL, final: bool = False) -> pd.DataFrame:
    """(arm, seed, prompt) -> the metric averaged over the run's pre-registered evaluations (steps >= 1 on its
    checkpoint grid, `on_grid`), or at its last step (`final`). Only runs the CSV holds whole (their `DONE` row)."""
    done = df[df["metric"] == DONE][["arm", "seed"]].drop_duplicates()
    rows = df[(df["set"] == set_name) & (df["metric"] == metric) & (df["prompt"] != "") & (df["step"] >= 1)]
    if len(rows):
        rows = rows[rows.groupby(["arm", "seed"])["step"].transform(on_grid).astype(bool)]
    rows = rows.merge(done, on=["arm", "seed"])
    if final:
        last = rows.groupby(["arm", "seed"])["step"].transform("max")
        rows = rows[rows["step"] == last]
    return rows.groupby(["arm", "seed", "prompt"], as_index=False)["value"].mean()


def run_values(pp: pd.DataFrame) -> pd.Series:
    """(arm, seed) -> the mean over prompts of `per_prompt`'s values (a run's endpoint)."""
    return pp.groupby(["arm", "seed"])["value"].mean()


def two_way_bootstrap(pp: pd.DataFrame, arm: str, baseline: str, n: int = BOOTSTRAP, seed: int = 0,
                      level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the mean paired difference (arm - baseline) when the seeds and, independently, the
    prompts are drawn with replacement (the same prompt draw for both arms): docs/METHOD.md, "Study v4's per-prompt
    rows and the two-way bootstrap"."""
    a = pp[pp["arm"] == arm].pivot(index="seed", columns="prompt", values="value")
    b = pp[pp["arm"] == baseline].pivot(index="seed", columns="prompt", values="value")
    seeds = sorted(set(a.index) & set(b.index))
    prompts = sorted(set(a.columns) & set(b.columns))
    if len(seeds) < 2 or not prompts:
        return float("nan"), float("nan")
    diff = (a.loc[seeds, prompts] - b.loc[seeds, prompts]).to_numpy()  # (S, P)
    rng = random.Random(seed)
    s_idx, p_idx = range(len(seeds)), range(len(prompts))
    means = []
    for _ in range(n):
        rs = rng.choices(s_idx, k=len(seeds))
        rp = rng.choices(p_idx, k=len(prompts))
        means.append(float(diff[rs][:, rp].mean()))
    means.sort()
    lo = means[int((1 - level) / 2 * n)]
    hi = means[min(n - 1, int((1 + level) / 2 * n))]
    return lo, hi


def compare(pp: pd.DataFrame, arm: str, baseline: str, n_boot: int = BOOTSTRAP) -> dict[str, float]:
    """Paired t (by seed) of the runs' values, arm - baseline, and the two-way bootstrap interval."""
    values = run_values(pp)
    a, b = values.get(arm), values.get(baseline)
    if a is None or b is None:
        return {"n": 0}
    both = sorted(set(a.index) & set(b.index))
    diffs = [float(a[s] - b[s]) for s in both]
    out = {"n": len(both), "arm_mean": float(a[both].mean()) if both else float("nan")}
    if len(diffs) >= 2:
        t = paired_t(diffs)
        out.update(mean=t["mean"], lo=t["low"], hi=t["high"], p=t["p"])
    else:
        out.update({"mean": diffs[0] if diffs else float("nan"), "lo": float("nan"), "hi": float("nan"),
                    "p": float("nan")})
    out["boot_lo"], out["boot_hi"] = two_way_bootstrap(pp, arm, baseline, n_boot)
    return out


def verdict(row: dict[str, float]) -> str:
    if row.get("p_holm", float("nan")) <= ALPHA:
        return "beats GDPO" if row["mean"] > 0 else "behind GDPO"
    return "not shown"


def _f(v: float, sign: bool = True) -> str:
    return "-" if v != v else (f"{v:+.3f}" if sign else f"{v:.3f}")


def _p(v: float) -> str:
    return "-" if v != v else ("< 0.001" if v < 0.001 else f"{v:.3f}")


def comparison_table(pp: pd.DataFrame, arms: Sequence[str], baseline: str = BASELINE, correct: bool = True,
                     n_boot: int = BOOTSTRAP) -> str:
    """Markdown: every arm against the baseline, paired t and bootstrap intervals (Holm-adjusted p and verdicts
    when `correct`)."""
    rows = [{"arm": arm, **compare(pp, arm, baseline, n_boot)} for arm in arms if arm != baseline]
    rows = [r for r in rows if r["n"]]
    if correct:
        for r, adj in zip(rows, holm([r["p"] for r in rows]), strict=True):
            r["p_holm"] = adj
    head = "| arm | seeds | arm mean | difference | 95% paired t | 95% two-way bootstrap |"
    sep = "|---|---|---|---|---|---|"
    if correct:
        head, sep = head + " p (Holm) | verdict |", sep + "---|---|"
    lines = [head, sep]
    for r in rows:
        line = (f"| {r['arm']} | {r['n']} | {_f(r['arm_mean'], False)} | {_f(r['mean'])} | [{_f(r['lo'])}, "
                f"{_f(r['hi'])}] | [{_f(r['boot_lo'])}, {_f(r['boot_hi'])}] |")
        if correct:
            line += f" {_p(r['p_holm'])} | {verdict(r)} |"
        lines.append(line)
    return "\n".join(lines)


def kind_metric_names(df: pd.DataFrame, set_name: str) -> dict[str, list[str]]:
    """Reward kind -> the per-reward metrics of that kind the CSV holds for a set."""
    out: dict[str, list[str]] = {}
    names = df[(df["set"] == set_name) & df["metric"].str.startswith("eval/reward/")]["metric"].unique()
    for metric in names:
        out.setdefault(reward_kind(metric.removeprefix("eval/reward/")), []).append(metric)
    return out


def kind_table(df: pd.DataFrame, set_name: str, arms: Sequence[str], baseline: str = BASELINE,
               n_boot: int = BOOTSTRAP) -> str:
    """Markdown: per reward kind, every arm minus the baseline (the kind's rewards averaged per prompt)."""
    lines = ["| kind | arm | seeds | difference | 95% paired t | 95% two-way bootstrap |", "|---|---|---|---|---|---|"]
    for kind, metrics in sorted(kind_metric_names(df, set_name).items(), key=lambda kv: _kind_order(kv[0])):
        frames = [per_prompt(df, set_name, m) for m in metrics]
        pp = pd.concat(frames).groupby(["arm", "seed", "prompt"], as_index=False)["value"].mean()
        for arm in arms:
            if arm == baseline:
                continue
            r = compare(pp, arm, baseline, n_boot)
            if r["n"]:
                lines.append(f"| {kind} | {arm} | {r['n']} | {_f(r['mean'])} | [{_f(r['lo'])}, {_f(r['hi'])}] | "
                             f"[{_f(r['boot_lo'])}, {_f(r['boot_hi'])}] |")
    return "\n".join(lines)


def _kind_order(kind: str) -> int:
    return KINDS.index(kind) if kind in KINDS else len(KINDS)


def report(df: pd.DataFrame, arms: Sequence[str] | None = None, n_boot: int = BOOTSTRAP) -> str:
    """Every table of study-v4.md's results, from the CSV's rows alone."""
    df = df.copy()
    df["prompt"] = df["prompt"].fillna("").astype(str)
    present = list(dict.fromkeys(df[df["metric"] == DONE]["arm"]))
    arms = [a for a in (arms or present) if a in present and not a.startswith(("pilot", INITIAL))]
    seeds = df[df["metric"] == DONE].groupby("arm")["seed"].nunique()
    out = ["Runs in the CSV (whole): " + ", ".join(f"{a} {seeds[a]}" for a in arms) + "."]
    held = per_prompt(df, "heldout")
    shares = {set_name: constraint_share(df, set_name) for set_name in SETS}  # read by two tables of each set
    out += ["", "**Primary endpoint** (held-out all-satisfied averaged over the evaluations, paired by seed; "
            "Holm over the arms):", "", comparison_table(held, arms, n_boot=n_boot)]
    if {"mrtpo-js", "mrtpo-js-shuffle"} <= set(arms):
        out += ["", "**Key contrast** mrtpo-js minus mrtpo-js-shuffle (held-out, then ood; no correction):", "",
                comparison_table(held, ["mrtpo-js"], baseline="mrtpo-js-shuffle", correct=False, n_boot=n_boot)]
        ood = per_prompt(df, "ood")
        if len(ood):
            out += ["", comparison_table(ood, ["mrtpo-js"], baseline="mrtpo-js-shuffle", correct=False,
                                         n_boot=n_boot)]
        # Added after the 60 runs (stop 57), not in the plan: where the all-satisfied rate is at its floor, the
        # key contrast per reward kind and on the share of a prompt's constraints met says what position does.
        for set_name, label in SET_LABELS.items():
            if kind_metric_names(df, set_name):
                out += ["", f"**Key contrast per reward kind, {label}** (mrtpo-js minus mrtpo-js-shuffle, averaged "
                            "over the evaluations; exploratory, added after the runs, not pre-registered):", "",
                        kind_table(df, set_name, ["mrtpo-js"], baseline="mrtpo-js-shuffle", n_boot=n_boot), "",
                        f"The same contrast on the share of a prompt's constraints satisfied, {label}:", "",
                        comparison_table(shares[set_name], ["mrtpo-js"], baseline="mrtpo-js-shuffle",
                                         correct=False, n_boot=n_boot)]
    if kept := kept_mass(df, arms):
        out += ["", "Advantage mass kept (mean `span/<k>/retained` over steps, seeds and rewards): "
                + ", ".join(f"{a} {v:.3f}" for a, v in kept.items()) + "."]
    if {"mrtpo-js", "gdpo-scaled"} <= set(arms):
        out += ["", "**mrtpo-js minus gdpo-scaled** (held-out; no correction):", "",
                comparison_table(held, ["mrtpo-js"], baseline="gdpo-scaled", correct=False, n_boot=n_boot)]
    for set_name, label in SET_LABELS.items():
        if set_name == "ood" and len(pp := per_prompt(df, "ood")):
            out += ["", f"**{label}**, averaged over the evaluations (secondary, no correction):", "",
                    comparison_table(pp, arms, correct=False, n_boot=n_boot)]
        final = per_prompt(df, set_name, final=True)
        if len(final):
            out += ["", f"**{label}, final values** (last step; secondary):", "",
                    comparison_table(final, arms, correct=False, n_boot=n_boot)]
        if kind_metric_names(df, set_name):
            out += ["", f"**{label}, per reward kind** (averaged over the evaluations; secondary):", "",
                    kind_table(df, set_name, arms, n_boot=n_boot)]
        if len(share := shares[set_name]):
            out += ["", f"**{label}, share of a prompt's constraints satisfied** (averaged over the evaluations; "
                        "exploratory, not pre-registered: `constraint_share`):", "",
                    comparison_table(share, arms, correct=False, n_boot=n_boot)]
    return "\n".join(out) + "\n"


def constraint_share(df: pd.DataFrame, set_name: str) -> pd.DataFrame:
    """(arm, seed, prompt) -> the mean over the prompt's rewards of its per-prompt scores `eval/reward/<k>`, averaged
    over the evaluations: the share of a prompt's constraints its responses satisfy (scores are 0 / 1). Exploratory
    (not in study-v4.md's plan): all-satisfied floors when some constraint is never met (study-v4.md, "Progress")."""
    metrics = [m for names in kind_metric_names(df, set_name).values() for m in names]
    if not metrics:
        return pd.DataFrame(columns=["arm", "seed", "prompt", "value"])
    frames = [per_prompt(df, set_name, m) for m in metrics]
    return pd.concat(frames).groupby(["arm", "seed", "prompt"], as_index=False)["value"].mean()


def kept_mass(df: pd.DataFrame, arms: Sequence[str]) -> dict[str, float]:
    """arm -> the mean over its steps, seeds and rewards of `span/<k>/retained` (the share of reward k's advantage
    mass its routed weights keep, docs/METHOD.md `retained_mass`): what the shuffle and scaled controls match."""
    rows = retained_rows(df, arms)
    return {a: float(v) for a, v in rows.groupby("arm")["value"].mean().items()}


def retained_rows(df: pd.DataFrame, arms: Sequence[str]) -> pd.DataFrame:
    """The training rows `span/<k>/retained` of `arms`: what `kept_mass` and `scale_factors` average."""
    return df[df["arm"].isin(arms) & (df["set"] == "train") & df["metric"].str.match(r"^span/.+/retained$")]


def scale_factors(df: pd.DataFrame, arm: str = "pilot-js") -> dict[str, float]:
    """reward name -> f_k, the mean over the pilot's steps and seeds of `span/<k>/retained` (study-v4.md, "Scale
    factors of gdpo-scaled")."""
    rows = retained_rows(df, [arm])
    means = rows.groupby("metric")["value"].mean()
    return {m.removeprefix("span/").removesuffix("/retained"): round(float(v), 4) for m, v in means.items()}
