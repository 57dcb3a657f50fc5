"""Report of the sample-efficiency study: efficiency.csv -> figure (HTML, PNG with kaleido) and Markdown tables.

    python -m mrtpo_viz.tools.efficiency_report runs/efficiency/efficiency.csv --out runs/efficiency

Input: the long table `core.tools.efficiency` writes (columns method, seed, step, metric, value; metric keys
as in the run store, held-out ones `eval/all_satisfied` and `eval/reward/<name>`, step 0 = the initial
model). Output:
- `efficiency.html`: interactive plotly figure, one panel for the held-out all-satisfied rate and one per
  reward's held-out rate, mean over seeds against steps with a min-max (or ±std) band, one colour per
  method; the tables below it;
- `efficiency.md`: steps to reach target all-satisfied rates, final per-reward held-out rates
  (mean ± std over seeds), each method's differences against GDPO paired by seed with bootstrap 95%
  intervals (steps ratio per target, final rate per reward kind; docs/METHOD.md, "Paired differences
  against GDPO") and a plain verdict, seconds per step per method;
- `efficiency.png`: the figure, only when kaleido is importable (it renders with a local Chrome/Chromium).

The numbers (frames, paired differences, verdicts) come from `efficiency_stats`; this module renders them:
Markdown, HTML and the plotly figure. Never imports torch.
"""

from __future__ import annotations

import argparse
import html
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.verifiers.shared.kinds import OTHER_KIND, REWARD_KINDS
from mrtpo_viz.tools.efficiency_stats import (
    BASELINE,
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    TIME_KEYS,
    credit_placement,
    eval_metrics,
    final_rates,
    initial_rate,
    label_of,
    load,
    measure_label,
    methods_of,
    paired_differences,
    seconds_per_step,
    seed_spread,
    steps_to_target,
    verdicts,
)

METHOD_COLORS = {"grpo": "#7f7f7f", "gdpo": "#1f77b4", "mrtpo-replay": "#d62728", "mrtpo-span": "#ff7f0e",
                 "mrtpo-js-specific": "#9467bd", "mrtpo-swap-specific": "#2ca02c", "mrtpo-swap": "#8c564b"}
EXTRA_COLORS = ("#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
NOT_REACHED = "n/r"


# ---------------------------------------------------------------------------------------------- frames


def method_colors(methods: Sequence[str]) -> dict[str, str]:
    out, extra = {}, 0
    for m in methods:
        if m in METHOD_COLORS:
            out[m] = METHOD_COLORS[m]
        else:
            out[m] = EXTRA_COLORS[extra % len(EXTRA_COLORS)]
            extra += 1
    return out


# ---------------------------------------------------------------------------------------------- where credit went


def credit_table(df: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Method rows; columns: mean pairwise overlap, then per reward kind 'mass_in / ceiling · control'."""
    cp = credit_placement(df)
    if cp.empty:
        return [], []
    kinds = [k for k in (*REWARD_KINDS, OTHER_KIND) if k in set(cp["kind"])]
    header = ["method", "overlap"] + [f"{k}: mass_in / ceiling · control" for k in kinds]
    rows = []
    for method in methods_of(df):
        part = cp[cp["method"] == method].set_index(["kind", "measure"])["mean"]
        if part.empty:
            continue
        cell = {key: f"{v:.2f}" for key, v in part.items()}
        rows.append([method, cell.get(("overlap", "overlap"), "–")] + [" / ".join(
            cell.get((k, q), "–") for q in ("mass_in", "mass_in_ceiling")) + " · " + cell.get((k, "mass_control"), "–")
            for k in kinds])
    return header, rows


def controls_table(df: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Method rows; per reward kind 'lift - lift_rotated · retained' (docs/METHOD.md, "Reading the credit metrics"):
    the lift gap a router that ignores which reward it routes cannot win, beside the share of the reward's GDPO
    advantage mass its credit keeps. Empty when no run logged these (runs from before issue 28)."""
    cp = credit_placement(df)
    if cp.empty or not cp["measure"].isin(["lift_rotated", "retained"]).any():
        return [], []
    kinds = [k for k in (*REWARD_KINDS, OTHER_KIND) if k in set(cp["kind"])]
    header = ["method"] + [f"{k}: lift gap · retained" for k in kinds]
    rows = []
    for method in methods_of(df):
        part = cp[cp["method"] == method].set_index(["kind", "measure"])["mean"]
        if part.empty:
            continue
        cells = []
        for k in kinds:
            lift, rot, kept = (part.get((k, q), math.nan) for q in ("lift", "lift_rotated", "retained"))
            gap = "–" if math.isnan(lift - rot) else f"{lift - rot:+.2f}"
            cells.append(f"{gap} · {'–' if math.isnan(kept) else f'{kept:.2f}'}")
        rows.append([method, *cells])
    return header, rows


CONTROLS_NOTE = ("Mean over each run's training steps, then over seeds. lift gap = lift - lift_rotated: how much "
                 "more a reward's routing favours its own span than another reward's routing does (0 for a router "
                 "that ignores which reward it routes: GDPO, a position prior, noise); retained = share of the "
                 "reward's GDPO advantage mass its credit keeps (1 for GDPO and for routing_clip = mass; below 1 by "
                 "what the w_max cap threw away). Read a low overlap or control only beside a positive lift gap.")


CREDIT_NOTE = ("Mean over each run's training steps, then over seeds, of the span metrics the trainer logs "
               "(docs/METHOD.md, \"Specificity\"): overlap = mean pairwise overlap of a response's rewards' routing "
               "shares (1 = every reward credits the same tokens, as in GDPO); mass_in = share of a reward's routing "
               "mass on the tokens its verifier inspected, next to the ceiling its spans allow; control = the other "
               "rewards' mass on those tokens over the tokens' share (1 = no preference, < 1 = they stay away). A "
               "kind's value is the unweighted mean of its rewards'. GDPO and GRPO give every token weight 1: their "
               "row is the uniform baseline.")


# ---------------------------------------------------------------------------------------------- paired by seed


def verdict_sentences(pd_rows: pd.DataFrame, baseline: str = BASELINE) -> list[str]:
    """One plain sentence per method: 'X beats GDPO beyond the interval on: a, b' (or 'on none'), and where it
    falls behind."""
    name = baseline.upper()
    lines = []
    for method, (better, worse) in verdicts(pd_rows).items():
        if int(pd_rows.loc[pd_rows["method"] == method, "n"].max()) < 2:
            lines.append(f"{method}: one paired seed, so no interval and no verdict.")
            continue
        text = f"{method} beats {name} beyond the interval on: {', '.join(better)}" if better else (
            f"{method} beats {name} beyond the interval on none")
        text += f"; falls behind it beyond the interval on: {', '.join(worse)}." if worse else "."
        lines.append(text)
    return lines


def paired_cell(r: pd.Series) -> str:
    """'0.80 [0.67, 1.00]' for a steps ratio (+ '*' when a seed did not reach the target), '+0.04 [-0.02, +0.10]'
    for a rate difference, '–' without pairs."""
    if not math.isfinite(r["point"]):
        return "–"
    if not math.isfinite(r["low"]):  # one seed
        return f"{r['point']:.2f}" if r["measure"].startswith("steps>=") else f"{r['point']:+.2f}"
    if r["measure"].startswith("steps>="):
        star = "*" if r["censored_method"] or r["censored_baseline"] else ""
        return f"{r['point']:.2f} [{r['low']:.2f}, {r['high']:.2f}]{star}"
    return f"{r['point']:+.2f} [{r['low']:+.2f}, {r['high']:+.2f}]"


def paired_table(pd_rows: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    measures = list(dict.fromkeys(pd_rows["measure"]))
    header = ["method", "seeds"] + [measure_label(m) for m in measures]
    rows = []
    for method, part in pd_rows.groupby("method", sort=False):
        cells = {r["measure"]: paired_cell(r) for _, r in part.iterrows()}
        rows.append([method, str(int(part["n"].max()))] + [cells.get(m, "–") for m in measures])
    return header, rows


PAIRED_NOTE = (
    "Each method against GDPO, paired by seed (a seed trains every method on the same prompts): point estimate "
    "[95% percentile bootstrap interval over seeds, {resamples} resamples, fixed RNG seed {seed}]. Steps: geometric "
    "mean over seeds of the ratio steps(method) / steps(GDPO) to reach the held-out all-satisfied target (< 1: "
    "fewer steps); `*`: some run did not reach it and counts as its last evaluated step (a lower bound). Rates: "
    "mean over seeds of final(method) − final(GDPO), per reward kind the unweighted mean of its rewards' final "
    "held-out rates. With n seeds the interval never leaves the range of the n per-seed values and is too narrow "
    "for small n: read it as a screen, not a test (docs/METHOD.md, \"Paired differences against GDPO\")."
)


# ---------------------------------------------------------------------------------------------- text


def initial_note(df: pd.DataFrame, targets: Sequence[float], template: str) -> str:
    """The initial model's rate, and a warning for targets it already meets (they say nothing about training)."""
    initial = initial_rate(df)
    if initial is None:
        return ""
    text = f"Initial model (step 0): held-out all-satisfied {initial:.3f}."
    low = [f"{t:g}" for t in targets if t <= initial]
    if low:
        text += (f" Target(s) {', '.join(low)} are already met by the initial model (step 0 for every run): "
                 "choose targets above the initial rate (--targets).")
    return template.format(html.escape(text) if template.startswith("<") else text)


def _pm(mean: float, std: float, digits: int = 2) -> str:
    if not math.isfinite(mean):
        return "–"
    return f"{mean:.{digits}f} ± {std:.{digits}f}" if math.isfinite(std) else f"{mean:.{digits}f}"


def target_cell(row: pd.Series) -> str:
    """'10.0 (3/3: 5, 10, 15)', '≥ 13.3 (2/3: 5, 15, n/r)' or 'not reached (0/3)'."""
    n, k = int(row["n_seeds"]), int(row["n_reached"])
    if n == 0:
        return "–"
    if k == 0:
        return f"not reached (0/{n})"
    seeds = ", ".join(NOT_REACHED if s is None else str(s) for s in row["per_seed"])
    mean = f"{row['mean_bound']:.1f}" if k == n else f"≥ {row['mean_bound']:.1f}"
    return f"{mean} ({k}/{n}: {seeds})"


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def target_table(df: pd.DataFrame, targets: Sequence[float]) -> tuple[list[str], list[list[str]]]:
    stt = steps_to_target(df, targets)
    header = ["method"] + [f"all-satisfied ≥ {t:g}" for t in targets]
    rows = []
    for method in methods_of(df):
        cells = [target_cell(r) for _, r in stt[stt["method"] == method].iterrows()]
        rows.append([method] + cells)
    return header, rows


def final_table(df: pd.DataFrame, reward_names: Sequence[str] = ()) -> tuple[list[str], list[list[str]]]:
    fr = final_rates(df, reward_names)
    metrics = eval_metrics(df, reward_names)
    header = ["method", "step"] + [label_of(m) for m in metrics]
    rows = []
    for method in methods_of(df):
        part = fr[fr["method"] == method].set_index("metric")
        if part.empty:
            continue
        cells = [_pm(part.at[m, "mean"], part.at[m, "std"]) if m in part.index else "–" for m in metrics]
        rows.append([method, str(int(part["step"].max()))] + cells)
    return header, rows


def time_table(df: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    sp = seconds_per_step(df)
    header = ["method"] + list(TIME_KEYS.values())
    rows = []
    for method in methods_of(df):
        part = sp[sp["method"] == method].set_index("metric")
        if part.empty:
            continue
        rows.append([method] + [_pm(part.at[k, "mean"], part.at[k, "std"]) if k in part.index else "–"
                                for k in TIME_KEYS])
    return header, rows


def settings_line(study: dict | None) -> str:
    if not study:
        return ""
    keys = ("model", "steps", "group_size", "prompts_per_step", "lr", "max_new_tokens", "eval_every",
            "eval_prompts", "seeds")
    return "; ".join(f"{k} {study[k]}" for k in keys if k in study)


def paired_section(df: pd.DataFrame, targets: Sequence[float], reward_names: Sequence[str] = ()) -> list[str]:
    """Markdown lines: the plain verdict per method, the paired table and what its numbers are."""
    head = [f"## Paired differences against {BASELINE.upper()} (bootstrap 95% over seeds)", ""]
    rows = paired_differences(df, targets, reward_names)
    if rows.empty:
        return head + [f"No {BASELINE} runs in this study, so no paired differences.", ""]
    note = PAIRED_NOTE.format(resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED)
    return head + [" ".join(verdict_sentences(rows)), "", _md_table(*paired_table(rows)), "", note, ""]


def markdown_report(df: pd.DataFrame, targets: Sequence[float], study: dict | None = None) -> str:
    """The three tables as Markdown, each with a sentence saying exactly what its numbers are."""
    seeds = sorted(df["seed"].unique())
    names = (study or {}).get("reward_names") or ()
    out = ["# Sample efficiency on held-out prompts", ""]
    line = settings_line(study)
    out += [f"Settings: {line}." if line else f"{len(methods_of(df))} methods x {len(seeds)} seeds.", ""]
    out += ["## Steps to reach a held-out all-satisfied rate", ""]
    note = initial_note(df, targets, "{}\n")
    out += [note] if note else []
    out += [_md_table(*target_table(df, targets)), "",
            "First evaluated step at which a run's held-out all-satisfied rate is >= the target (step 0 = the "
            "initial model; evaluations only every few steps, so a step is the first *evaluated* one), mean over "
            "seeds. `k/n` seeds reached it; per-seed steps follow (n/r = not reached). `≥ x`: some seeds never "
            "reached it and count as their last evaluated step, so the true mean is larger.", ""]
    out += ["## Final held-out rates", "", _md_table(*final_table(df, names)), "",
            "Mean ± std over seeds (sample std; no ± with one seed) at each run's last evaluated step: share of "
            "held-out responses (4 sampled per prompt at temperature 1) that satisfy every constraint, and each reward's mean score over "
            "the prompts that state it.", ""]
    out += paired_section(df, targets, names)
    credit = credit_table(df)
    if credit[1]:
        out += ["## Where the credit went during training", "", _md_table(*credit), "", CREDIT_NOTE, ""]
    controls = controls_table(df)
    if controls[0]:
        out += ["## Controls a useless router cannot win", "", _md_table(*controls), "", CONTROLS_NOTE, ""]
    out += ["## Seconds per step", "", _md_table(*time_table(df)), "",
            "Trainer wall-clock seconds per optimizer step (mean over a run's steps, then mean ± std over seeds), "
            "with its generate / replay / update parts; held-out evaluation is not included. Runs trained in "
            "parallel share the CPU, so compare methods within one study.", ""]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------- figure


def _rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def efficiency_figure(df: pd.DataFrame, band: str = "minmax", title: str = "",
                      reward_names: Sequence[str] = ()) -> go.Figure:
    """One panel per held-out metric (all satisfied, then each reward): per method the mean over seeds against
    steps, with a band from min to max over seeds (`band="minmax"`) or mean ± std (`band="std"`)."""
    if band not in ("minmax", "std"):
        raise ValueError(f"band must be 'minmax' or 'std', got {band!r}")
    metrics = eval_metrics(df, reward_names)
    methods = methods_of(df)
    colors = method_colors(methods)
    if not metrics:
        fig = go.Figure()
        fig.add_annotation(text="no held-out evaluation in this study (eval/... metrics)", showarrow=False,
                           x=0.5, y=0.5, xref="paper", yref="paper")
        return fig
    ncols = 1 if len(metrics) == 1 else 2
    nrows = math.ceil(len(metrics) / ncols)
    fig = make_subplots(rows=nrows, cols=ncols, subplot_titles=[f"held-out {label_of(m)}" for m in metrics],
                        shared_xaxes=False, vertical_spacing=0.32 / nrows, horizontal_spacing=0.08)
    n_seeds = df.groupby("method")["seed"].nunique().to_dict()
    band_name = "min-max" if band == "minmax" else "±1 std"
    for i, metric in enumerate(metrics):
        row, col = i // ncols + 1, i % ncols + 1
        spread = seed_spread(df, metric)
        for method in methods:
            s = spread[spread["method"] == method].sort_values("step")
            if s.empty:
                continue
            if band == "minmax":
                lo, hi = s["min"], s["max"]
            else:
                sd = s["std"].fillna(0.0)
                lo, hi = s["mean"] - sd, s["mean"] + sd
            if n_seeds.get(method, 1) > 1:
                fig.add_trace(go.Scatter(
                    x=list(s["step"]) + list(s["step"])[::-1], y=list(hi) + list(lo)[::-1], fill="toself",
                    fillcolor=_rgba(colors[method], 0.15), line=dict(width=0), hoverinfo="skip",
                    legendgroup=method, showlegend=False, name=f"{method} {band_name}",
                ), row=row, col=col)
            fig.add_trace(go.Scatter(
                x=s["step"], y=s["mean"], mode="lines+markers", name=method, legendgroup=method,
                showlegend=i == 0, line=dict(color=colors[method], width=2.5 if i == 0 else 2), marker=dict(size=5),
                customdata=list(zip(s["n"], s["min"], s["max"], s["std"].fillna(0.0), strict=True)),
                hovertemplate=(f"<b>{method}</b> step %{{x}}<br>mean %{{y:.3f}} over %{{customdata[0]}} seed(s)"
                               "<br>min %{customdata[1]:.3f} · max %{customdata[2]:.3f} · std %{customdata[3]:.3f}"
                               "<extra></extra>"),
            ), row=row, col=col)
        fig.update_yaxes(range=[-0.02, 1.02], row=row, col=col)
        fig.update_xaxes(title_text="step" if row == nrows or i + ncols >= len(metrics) else None, row=row, col=col)
    seeds = sorted(df["seed"].unique())
    fig.update_layout(
        title=dict(text=title or f"Held-out rates against training steps: mean over {len(seeds)} seed(s)"
                   + (f", band = {band_name} over seeds" if len(seeds) > 1 else ""), x=0, xanchor="left"),
        template="plotly_white", height=120 + 290 * nrows, width=1100,
        legend=dict(orientation="h", yanchor="bottom", y=1.0 + 0.12 / nrows, x=1, xanchor="right"),
        margin=dict(l=55, r=20, t=110, b=50), hovermode="closest",
    )
    fig.update_annotations(font_size=13)
    return fig


def paired_html(df: pd.DataFrame, targets: Sequence[float], reward_names: Sequence[str], table) -> list[str]:
    """The paired section for the page: heading, verdicts, table (drawn by `table`), note."""
    rows = paired_differences(df, targets, reward_names)
    head = f"<h3>Paired differences against {BASELINE.upper()} (bootstrap 95% over seeds)</h3>"
    if rows.empty:
        return [head, f"<p class='note'>No {BASELINE} runs in this study, so no paired differences.</p>"]
    note = PAIRED_NOTE.format(resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED)
    return [head, f"<p>{html.escape(' '.join(verdict_sentences(rows)))}</p>", table(*paired_table(rows)),
            f"<p class='note'>{html.escape(note)}</p>"]


def html_page(fig: go.Figure, df: pd.DataFrame, targets: Sequence[float], study: dict | None) -> str:
    """A self-contained page (plotly.js inline, works offline): the figure, then the three tables."""

    def table(header, rows) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    line = settings_line(study)
    names = (study or {}).get("reward_names") or ()
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>MRTPO sample efficiency</title><style>"
        "body{font-family:sans-serif;margin:16px;color:#222}table{border-collapse:collapse;margin:8px 0 4px}"
        "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:left}th{background:#f3f3f3}"
        "p.note{font-size:12px;color:#555;max-width:1000px}</style></head><body>",
        fig.to_html(full_html=False, include_plotlyjs=True),
        f"<p class='note'>Settings: {html.escape(line)}</p>" if line else "",
        "<h3>Steps to reach a held-out all-satisfied rate</h3>", initial_note(df, targets, "<p class='note'>{}</p>"),
        table(*target_table(df, targets)),
        "<p class='note'>First evaluated step with held-out all-satisfied rate &ge; target, mean over seeds; k/n "
        "seeds reached it (n/r = not reached); &ge; x: unreached seeds counted as their last evaluated step.</p>",
        "<h3>Final held-out rates (mean ± std over seeds)</h3>", table(*final_table(df, names)),
        *paired_html(df, targets, names, table),
        "<h3>Seconds per step (mean ± std over seeds)</h3>", table(*time_table(df)),
        "</body></html>",
    ]
    return "\n".join(parts)


def write_png(fig: go.Figure, path: Path) -> str:
    """Write the figure as PNG with kaleido when it is importable; returns what happened, in words."""
    try:
        import kaleido  # noqa: F401
    except ImportError:
        return "efficiency.png skipped (kaleido is not installed: pip install kaleido; it uses a local Chromium)"
    try:
        fig.write_image(str(path), width=int(fig.layout.width or 1100), height=int(fig.layout.height or 700), scale=2)
    except Exception as exc:  # kaleido without a usable browser raises several kinds of errors
        return f"efficiency.png skipped (kaleido could not render: {exc.__class__.__name__}: {exc})"
    return f"wrote {path}"


def write_report(csv: str | Path, out: str | Path, targets: Sequence[float] = (0.2, 0.3, 0.4),
                 band: str = "minmax", png: bool = True) -> tuple[dict[str, Path], str]:
    """Write efficiency.md, efficiency.html (and efficiency.png) to `out`: (paths written, a note on the PNG)."""
    df = load(csv)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    study = None
    study_file = Path(csv).parent / "study.json"
    if study_file.exists():
        try:
            study = json.loads(study_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            study = None
    paths = {"md": out / "efficiency.md", "html": out / "efficiency.html"}
    paths["md"].write_text(markdown_report(df, targets, study), encoding="utf-8")
    fig = efficiency_figure(df, band, reward_names=(study or {}).get("reward_names") or ())
    paths["html"].write_text(html_page(fig, df, targets, study), encoding="utf-8")
    note = "efficiency.png not asked for"
    if png:
        note = write_png(fig, out / "efficiency.png")
        if note.startswith("wrote"):
            paths["png"] = out / "efficiency.png"
    return paths, note


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mrtpo_viz.tools.efficiency_report", description=__doc__.split("\n\n")[0])
    p.add_argument("csv", help="efficiency.csv written by `mrtpo bench efficiency`")
    p.add_argument("--out", help="folder for the report files (default: the CSV's folder)")
    p.add_argument("--targets", nargs="+", type=float, default=[0.2, 0.3, 0.4])
    p.add_argument("--band", choices=("minmax", "std"), default="minmax")
    p.add_argument("--no-png", action="store_true")
    args = p.parse_args(argv)
    csv = Path(args.csv)
    paths, note = write_report(csv, args.out or csv.parent, args.targets, args.band, png=not args.no_png)
    print(paths["md"].read_text(encoding="utf-8"))
    print(f"wrote {paths['md']}\nwrote {paths['html']}\n{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
