"""Plotly figures for the workbench pages: pure functions from run-store frames to `go.Figure`.

Inputs are the frames `core.run.store.RunStore` returns (`metrics()`: one row per step with namespaced
metric keys; `credit(step)`: the long credit map). Several runs overlay as one colour per series
and one dash style per run. No Streamlit here; never imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from mrtpo_viz.heatmap import JS_SKIPPED_TEXT, REWARD_PALETTE, reward_colors, skipped_rewards

RUN_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
OTHER_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
ALL_SATISFIED_COLOR = "#111111"
# The phases of a step (runs written before the split have no logprobs/advantages: their replay holds both).
TIME_PARTS = ("time/generate", "time/verify", "time/logprobs", "time/replay", "time/advantages", "time/update")
LOSS_KEYS = ("loss/policy", "loss/kl", "loss/total")


def _layout(fig: go.Figure, title: str, yaxis_title: str = "", xaxis_title: str = "step", height: int = 360) -> go.Figure:
    fig.update_layout(
        title=dict(text=title, x=0, xanchor="left"),
        height=height,
        margin=dict(l=50, r=20, t=40, b=40),
        # below the plot: a legend on top crowds the title and squeezes half-width panels
        legend=dict(orientation="h", yanchor="top", y=-0.27, x=0, xanchor="left"),
        hovermode="x unified",
        template="plotly_white",
    )
    fig.update_xaxes(title_text=xaxis_title)
    fig.update_yaxes(title_text=yaxis_title)
    return fig


def _integer_steps(fig: go.Figure) -> None:
    """Steps are whole numbers: with few of them, tick every step instead of at 1.5, 2.5, ..."""
    xs = [x for tr in fig.data if getattr(tr, "x", None) is not None for x in tr.x]
    if xs and max(xs) - min(xs) <= 12:
        fig.update_xaxes(dtick=1)


def _empty(fig: go.Figure, message: str) -> go.Figure:
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                       font=dict(color="#888"))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


def metric_lines(
    metrics_by_run: Mapping[str, pd.DataFrame],
    series: Mapping[str, str] | Sequence[str],
    title: str,
    yaxis_title: str = "",
    colors: Mapping[str, str] | None = None,
    height: int = 360,
) -> go.Figure:
    """One line per (run, metric key) over steps: colour by key, dash style by run.

    series: metric keys, or {key: legend label}. Keys a run does not have (or has only NaN for) are skipped;
    a figure with nothing to draw says so instead of showing empty axes.
    """
    labels = dict(series) if isinstance(series, Mapping) else {k: k for k in series}
    colors = dict(colors or {})
    for i, key in enumerate(labels):
        colors.setdefault(key, OTHER_PALETTE[i % len(OTHER_PALETTE)])
    fig = go.Figure()
    multi = len(metrics_by_run) > 1
    for r, (run, df) in enumerate(metrics_by_run.items()):
        if df is None or df.empty or "step" not in df.columns:
            continue
        for key, label in labels.items():
            if key not in df.columns:
                continue
            y = pd.to_numeric(df[key], errors="coerce")
            if y.isna().all():
                continue
            fig.add_trace(
                go.Scatter(
                    # connectgaps: eval keys exist only at checkpoint steps
                    x=df["step"], y=y, mode="lines+markers" if y.notna().sum() < 30 else "lines", connectgaps=True,
                    name=f"{run} · {label}" if multi else label,
                    line=dict(color=colors[key], dash=RUN_DASHES[r % len(RUN_DASHES)],
                              width=3 if key.endswith("all_satisfied") else 2),
                    marker=dict(size=5),
                    legendgroup=run if multi else key,
                    meta=[run, key],
                )
            )
    _layout(fig, title, yaxis_title, height=height)
    if not fig.data:
        return _empty(fig, "no data for these metrics yet")
    _integer_steps(fig)
    return fig


def reward_series(reward_names: Sequence[str], source: str = "train") -> tuple[dict[str, str], dict[str, str]]:
    """(metric key -> label, key -> colour) for the reward curves: each reward plus the all-satisfied rate.

    source "train": `reward/<name>`, `reward/all_satisfied` (the step's samples); "eval": `eval/reward/<name>`,
    `eval/all_satisfied` (sampled responses to the held-out prompt set, logged at checkpoint steps).
    """
    if source not in ("train", "eval"):
        raise ValueError(f"source must be 'train' or 'eval', got {source!r}")
    prefix, all_key = ("reward/", "reward/all_satisfied") if source == "train" else ("eval/reward/",
                                                                                    "eval/all_satisfied")
    cols = reward_colors(reward_names)
    series = {f"{prefix}{n}": n for n in reward_names}
    colors = {f"{prefix}{n}": cols[n] for n in reward_names}
    series[all_key] = "all satisfied"
    colors[all_key] = ALL_SATISFIED_COLOR
    return series, colors


def reward_curves(metrics_by_run: Mapping[str, pd.DataFrame], reward_names: Sequence[str],
                  source: str = "train") -> go.Figure:
    """Mean reward per step, one line per reward plus the all-satisfied rate (black, thicker)."""
    series, colors = reward_series(reward_names, source)
    title = ("Rewards (mean over samples) and all-satisfied rate" if source == "train"
             else "Held-out eval: rewards and all-satisfied rate (sampled, at checkpoints)")
    fig = metric_lines(metrics_by_run, series, title, "reward", colors, height=420)
    if fig.data:
        fig.update_yaxes(range=[-0.03, 1.03])
    return fig


def per_reward_lines(metrics_by_run: Mapping[str, pd.DataFrame], reward_names: Sequence[str], template: str,
                     title: str, yaxis_title: str = "") -> go.Figure:
    """One line per reward for keys like `js/{name}/mean` (template with `{name}`)."""
    cols = reward_colors(reward_names)
    series = {template.format(name=n): n for n in reward_names}
    colors = {template.format(name=n): cols[n] for n in reward_names}
    return metric_lines(metrics_by_run, series, title, yaxis_title, colors)


def loss_figure(metrics_by_run: Mapping[str, pd.DataFrame]) -> go.Figure:
    return metric_lines(metrics_by_run, {"loss/policy": "policy", "loss/kl": "KL", "loss/total": "total"},
                        "Loss parts", "loss")


def auc_figure(metrics_by_run: Mapping[str, pd.DataFrame], reward_names: Sequence[str]) -> go.Figure:
    """ROC AUC of JS for span vs non-span tokens per reward (solid), with its control (dotted, same colour):
    the AUC of another reward's JS on the same spans. A dashed grey line marks chance (0.5)."""
    cols = reward_colors(reward_names)
    fig = go.Figure()
    multi = len(metrics_by_run) > 1
    for r, (run, df) in enumerate(metrics_by_run.items()):
        if df is None or df.empty:
            continue
        for n in reward_names:
            for key, suffix, dash, width in ((f"span/{n}/auc", "AUC", RUN_DASHES[r % len(RUN_DASHES)], 2.5),
                                             (f"span/{n}/auc_control", "control", "dot", 1.5)):
                if key not in df.columns or pd.to_numeric(df[key], errors="coerce").isna().all():
                    continue
                fig.add_trace(go.Scatter(
                    x=df["step"], y=pd.to_numeric(df[key], errors="coerce"), mode="lines+markers",
                    name=(f"{run} · " if multi else "") + (n if suffix == "AUC" else f"{n} control"),
                    line=dict(color=cols[n], dash=dash, width=width), marker=dict(size=4), meta=[run, key],
                    # one legend entry per reward: clicking it toggles the AUC and its control together
                    legendgroup=f"{run}/{n}", showlegend=suffix == "AUC",
                ))
    _layout(fig, "Span ROC AUC of JS (dotted: control)", "AUC")
    if not fig.data:
        return _empty(fig, "no span AUC metrics (GRPO/GDPO runs do no replay)")
    fig.add_hline(y=0.5, line=dict(color="#999", dash="dash", width=1))
    fig.update_yaxes(range=[0, 1.02])
    return fig


def step_time_figure(metrics_by_run: Mapping[str, pd.DataFrame]) -> go.Figure:
    """Step time split: stacked bars of the phases in TIME_PARTS for one run; lines for several."""
    labels = {k: k.split("/", 1)[1] for k in TIME_PARTS}
    if len(metrics_by_run) != 1:
        return metric_lines(metrics_by_run, labels, "Step time split", "seconds")
    (run, df), = metrics_by_run.items()
    fig = go.Figure()
    for i, key in enumerate(TIME_PARTS):
        if df is None or key not in df.columns:
            continue
        fig.add_trace(go.Bar(x=df["step"], y=pd.to_numeric(df[key], errors="coerce"), name=labels[key],
                             marker_color=OTHER_PALETTE[i], meta=[run, key]))
    if df is not None and "time/step" in df.columns:
        fig.add_trace(go.Scatter(x=df["step"], y=df["time/step"], name="step total", mode="lines",
                                 line=dict(color="#111", width=1.5), meta=[run, "time/step"]))
    fig.update_layout(barmode="stack")
    _layout(fig, "Step time split", "seconds")
    if not fig.data:
        _empty(fig, "no timing metrics yet")
    return fig


def _span_runs(mask: Sequence[bool], positions: Sequence[int]) -> list[tuple[int, int]]:
    """Maximal runs of consecutive in-span positions, as (first, last) position pairs."""
    out: list[tuple[int, int]] = []
    start = prev = None
    for p, m in zip(positions, mask, strict=True):
        if m and start is not None and p == prev + 1:
            prev = p
            continue
        if start is not None:
            out.append((start, prev))
            start = prev = None
        if m:
            start = prev = p
    if start is not None:
        out.append((start, prev))
    return out


def js_positions_figure(sample_df: pd.DataFrame, reward_names: Sequence[str]) -> go.Figure:
    """Per-position JS distance d[k,t] of one sample, one row per reward, with the verifier's inspected
    spans shaded in the reward's colour. Hover: token text, JS, routing weight, credit. A reward whose
    contrastive pass replay skipped (`js_skipped`) says so in its row instead of drawing nothing."""
    present = [n for n in reward_names if n in set(sample_df["reward"])] if not sample_df.empty else []
    present += [n for n in dict.fromkeys(sample_df.get("reward", [])) if n not in present]
    cols = reward_colors(list(reward_names) + [n for n in present if n not in reward_names])
    if not present:
        return _empty(_layout(go.Figure(), "JS distance per token"), "no tokens in this sample")
    fig = make_subplots(rows=len(present), cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=[f"{n}" for n in present])
    fig.update_annotations(font_size=12, x=0, xanchor="left")  # subplot titles, left-aligned above each row
    skipped = skipped_rewards(sample_df)
    for row, n in enumerate(present, start=1):
        d = sample_df[sample_df["reward"] == n].sort_values("t")
        js = pd.to_numeric(d["js"], errors="coerce")
        fig.add_trace(go.Scatter(
            x=d["t"], y=js, mode="lines+markers", name=n, line=dict(color=cols[n], width=1.5), marker=dict(size=4),
            customdata=list(zip(d["token"].map(repr), d["weight"], d["credit"], d["in_span"], strict=True)),
            hovertemplate="t=%{x} token %{customdata[0]}<br>JS %{y:.4f} · weight %{customdata[1]:.3f}"
                          "<br>credit %{customdata[2]:+.4f} · in span %{customdata[3]}<extra>" + n + "</extra>",
            showlegend=False,
        ), row=row, col=1)
        # Shapes after the trace: plotly skips shapes on subplots that hold no trace yet.
        for first, last in _span_runs(d["in_span"].astype(bool).tolist(), d["t"].astype(int).tolist()):
            fig.add_vrect(x0=first - 0.5, x1=last + 0.5, fillcolor=cols[n], opacity=0.18, line_width=0,
                          row=row, col=1)
        fig.update_yaxes(range=[0, max(0.05, float(js.max()) * 1.1) if js.notna().any() else 1], row=row, col=1)
        if n in skipped:
            fig.add_annotation(text=f"JS {JS_SKIPPED_TEXT}", showarrow=False, x=0.5, y=0.5, font=dict(color="#888"),
                               xref=f"x{'' if row == 1 else row} domain", yref=f"y{'' if row == 1 else row} domain")
    fig.update_layout(height=max(240, 150 * len(present) + 60), margin=dict(l=50, r=20, t=50, b=40),
                      template="plotly_white", hovermode="closest",
                      title=dict(text="JS distance per response token (shaded: verifier's inspected spans)", x=0))
    fig.update_xaxes(title_text="token position t", row=len(present), col=1)
    if pd.to_numeric(sample_df["js"], errors="coerce").isna().all():
        fig.add_annotation(text="no JS in this run (GRPO/GDPO do no replay)", showarrow=False, x=0.5, y=0.5,
                           xref="paper", yref="paper", font=dict(color="#888"))
    return fig


def js_in_out_figure(credit_df: pd.DataFrame, reward_names: Sequence[str]) -> go.Figure:
    """Distributions of JS distance for in-span vs out-of-span tokens, per reward (box plots)."""
    cols = reward_colors(reward_names)
    fig = go.Figure()
    if not credit_df.empty:
        df = credit_df[pd.to_numeric(credit_df["js"], errors="coerce").notna()]
        for where, flag, opacity in (("in span", True, 0.9), ("out of span", False, 0.45)):
            part = df[df["in_span"].astype(bool) == flag]
            if part.empty:
                continue
            fig.add_trace(go.Box(
                x=part["reward"], y=part["js"], name=where, boxpoints=False, opacity=opacity,
                marker_color="#444" if flag else "#aaa", meta=[where],
            ))
    fig.update_layout(boxmode="group")
    _layout(fig, "JS distance: in-span vs out-of-span tokens", "JS distance", xaxis_title="reward")
    fig.update_layout(hovermode="closest")
    if not fig.data:
        _empty(fig, "no JS distances here (GRPO/GDPO runs do no replay)")
    else:
        fig.update_xaxes(categoryorder="array", categoryarray=[n for n in reward_names if n in cols])
    return fig


__all__ = [
    "REWARD_PALETTE", "auc_figure", "js_in_out_figure", "js_positions_figure", "loss_figure", "metric_lines",
    "per_reward_lines", "reward_curves", "reward_series", "step_time_figure",
]
