"""The Training curves and Compare figures: per-reward curves, replay metrics, loss and step times."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from mrtpo_viz.figures.lines import X_TITLES, metric_lines, reward_series, small_multiples
from mrtpo_viz.figures.style import (
    FOREGROUND,
    MAX_BARS,
    OTHER_PALETTE,
    SMALL_MULTIPLES_FROM,
    TIME_PARTS,
    _empty,
    _layout,
)
from mrtpo_viz.heatmap import reward_colors


def reward_curves(metrics_by_run: Mapping[str, pd.DataFrame], reward_names: Sequence[str],
                  source: str = "train", **style) -> go.Figure:
    """Mean reward per step, one line per reward plus the all-satisfied rate (text colour, thicker).
    `style`: metric_lines' keyword options (x, smooth, log_y). With SMALL_MULTIPLES_FROM rewards or more, one
    small panel per reward (the all-satisfied rate first) sharing one x axis (`small_multiples`): one line per
    run in each, coloured by run (`run_colors`) when several runs are drawn, else in the reward's colour."""
    series, colors = reward_series(reward_names, source)
    title = ("Rewards (mean over samples) and all-satisfied rate" if source == "train"
             else "Held-out eval: rewards and all-satisfied rate (sampled, at checkpoints)")
    if len(reward_names) >= SMALL_MULTIPLES_FROM:
        several = len(metrics_by_run) > 1
        keys = [*list(series)[-1:], *list(series)[:-1]]  # the all-satisfied rate first
        parts = {series[k]: metric_lines(metrics_by_run, {k: series[k]}, series[k], "", colors,
                                         color_by="run" if several else "key", layout=False, **style) for k in keys}
        x = style.get("x", "step")
        return small_multiples(parts, title, cols=4, row_px=210, legend=several, y_range=(-0.03, 1.03),
                               x_title=X_TITLES.get(x, x))
    fig = metric_lines(metrics_by_run, series, title, "reward", colors, height=420, **style)
    if fig.data:
        fig.update_yaxes(range=[-0.03, 1.03])
    return fig


def per_reward_lines(metrics_by_run: Mapping[str, pd.DataFrame], reward_names: Sequence[str], template: str,
                     title: str, yaxis_title: str = "", **style) -> go.Figure:
    """One line per reward for keys like `js/{name}/mean` (template with `{name}`)."""
    cols = reward_colors(reward_names)
    series = {template.format(name=n): n for n in reward_names}
    colors = {template.format(name=n): cols[n] for n in reward_names}
    return metric_lines(metrics_by_run, series, title, yaxis_title, colors, **style)


def replay_training_figure(metrics_by_run: Mapping[str, pd.DataFrame], reward_names: Sequence[str]) -> go.Figure:
    """Replay over training in one figure of four panels (a browser draws one chart much faster than four):
    mean and max JS distance per reward, the routing mass inside the verifier's spans per reward, and the
    share of (sample, reward) pairs replayed. One legend entry per reward toggles its lines in every panel."""
    parts = [
        per_reward_lines(metrics_by_run, reward_names, "js/{name}/mean", "Mean JS distance", "JS"),
        per_reward_lines(metrics_by_run, reward_names, "js/{name}/max", "Max JS distance", "JS"),
        per_reward_lines(metrics_by_run, reward_names, "span/{name}/mass_in", "Routing mass inside spans", "share"),
        metric_lines(metrics_by_run, {"replay/pass_share": "pairs replayed"}, "Share of (sample, reward) pairs "
                     "replayed", "share"),
    ]
    fig = make_subplots(rows=2, cols=2, subplot_titles=[p.layout.title.text for p in parts],
                        horizontal_spacing=0.08, vertical_spacing=0.16)
    fig.update_annotations(font_size=13)  # the panel titles
    for i, part in enumerate(parts):
        row, col = i // 2 + 1, i % 2 + 1
        for tr in part.data:
            tr.legendgroup = tr.name
            tr.showlegend = i == 0 or (i == 3 and tr.name not in reward_names)
            fig.add_trace(tr, row=row, col=col)
        fig.update_yaxes(title_text=part.layout.yaxis.title.text, row=row, col=col)
        if not part.data:
            fig.add_annotation(text="no data", showarrow=False, x=0.5, y=0.5, font=dict(color="#888"),
                               xref=f"x{i + 1 if i else ''} domain", yref=f"y{i + 1 if i else ''} domain")
    _layout(fig, "Replay over training", height=640)
    return fig


def loss_figure(metrics_by_run: Mapping[str, pd.DataFrame], with_kl: bool = True, **style) -> go.Figure:
    """Policy loss, KL term (only `with_kl`: runs with a reference model) and total loss."""
    series = {"loss/policy": "policy", "loss/kl": "KL to reference", "loss/total": "total"}
    if not with_kl:
        series.pop("loss/kl")
    return metric_lines(metrics_by_run, series, "Loss parts", "loss", **style)


def step_time_figure(metrics_by_run: Mapping[str, pd.DataFrame]) -> go.Figure:
    """Step time split: stacked bars of the phases in TIME_PARTS for one run (stacked areas beyond MAX_BARS
    steps); lines for several."""
    labels = {k: k.split("/", 1)[1] for k in TIME_PARTS}
    if len(metrics_by_run) != 1:
        return metric_lines(metrics_by_run, labels, "Step time split", "seconds")
    (run, df), = metrics_by_run.items()
    fig = go.Figure()
    areas = df is not None and len(df) > MAX_BARS
    for i, key in enumerate(TIME_PARTS):
        if df is None or key not in df.columns:
            continue
        y = pd.to_numeric(df[key], errors="coerce")
        if areas:
            fig.add_trace(go.Scatter(x=df["step"], y=y.fillna(0.0), name=labels[key], mode="lines", stackgroup="time",
                                     line=dict(width=0, color=OTHER_PALETTE[i]), meta=[run, key]))
        else:
            fig.add_trace(go.Bar(x=df["step"], y=y, name=labels[key], marker_color=OTHER_PALETTE[i], meta=[run, key]))
    if df is not None and "time/step" in df.columns:
        fig.add_trace(go.Scatter(x=df["step"], y=df["time/step"], name="step total", mode="lines",
                                 line=dict(color=FOREGROUND, width=1.5), meta=[run, "time/step"]))
    fig.update_layout(barmode="stack")
    _layout(fig, "Step time split", "seconds")
    if not fig.data:
        _empty(fig, "no timing metrics yet")
    return fig
