"""Plotly figures for the workbench pages: pure functions from run-store frames to `go.Figure`.

Inputs are the frames `core.run.store.RunStore` returns (`metrics()`: one row per step with namespaced
metric keys; `credit(step)`: the long credit map). Several runs overlay as one colour per series
and one dash style per run. No Streamlit here; never imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from mrtpo_viz.analysis import BAND_HI, BAND_LO, ema
from mrtpo_viz.heatmap import JS_SKIPPED_TEXT, REWARD_PALETTE, palette_colors, reward_colors, skipped_rewards

RUN_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
OTHER_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
# One colour per run where runs are compared (distinct hues that stay visible on light and dark backgrounds); a
# run's colour is fixed by its name (`run_colors`).
RUN_PALETTE = ("#1f77b4", "#e45756", "#54a24b", "#f58518", "#b279a2", "#72b7b2", "#eeca3b", "#9d755d", "#17becf",
               "#bcbd22")
# A per-reward figure with at least this many rewards is drawn as small multiples (one small panel per reward,
# `small_multiples`): ten lines in [0, 1] in one panel cross too often to be read.
SMALL_MULTIPLES_FROM = 5
# The colour of text: Streamlit's plotly theme replaces this placeholder in the browser with its text colour,
# near black on the light theme and near white on the dark one (streamlit.elements.lib.streamlit_plotly_theme
# GRAY_90; a test checks the value). Outside Streamlit it is a very dark blue, readable on white. Lines that
# must stand out from every reward's colour use it (the all-satisfied rate, the step total).
FOREGROUND = "#000037"
ALL_SATISFIED_COLOR = FOREGROUND
# The phases of a step (runs written before the split have no logprobs/advantages: their replay holds both).
TIME_PARTS = ("time/generate", "time/verify", "time/logprobs", "time/replay", "time/advantages", "time/update")
LOSS_KEYS = ("loss/policy", "loss/kl", "loss/total")


# Every figure uses plotly's white template (the app's theme is applied over it in the browser: `ui.charts`).
TEMPLATE = "plotly_white"
# Above this many steps the step-time split is drawn as stacked areas, not bars (thousands of bars take the
# browser seconds to draw; an area is one path per phase).
MAX_BARS = 300
MARKERS_BELOW = 30  # line charts mark their points only when they have fewer than this many

LEGEND_ROW_PX = 22  # height of one row of a horizontal legend
LEGEND_CHAR_PX = 7  # width of one character of a legend entry (12 px font)
LEGEND_WIDTH_PX = 520  # the narrowest a figure is drawn (a half-width panel)


def legend_rows(names: Sequence[str], width_px: int = LEGEND_WIDTH_PX) -> int:
    """How many rows a horizontal legend with these entries takes at `width_px` (an estimate: each entry is its
    text plus ~40 px for the symbol and the gap)."""
    rows, used = (1 if names else 0), 0
    for name in names:
        w = 40 + LEGEND_CHAR_PX * len(name)
        if used and used + w > width_px:
            rows, used = rows + 1, 0
        used += w
    return rows


def run_colors(runs: Sequence[str]) -> dict[str, str]:
    """The colour of each run (or seed group) of a view, fixed by its name: `heatmap.palette_colors(runs,
    RUN_PALETTE)`. The same run has the same colour on every page, in every session and beside any other runs,
    unless a run of the view wants the same colour (then the later by name moves, in name order, to a free one)."""
    return palette_colors(runs, RUN_PALETTE)


def _white(fig: go.Figure) -> go.Figure:
    """Give `fig` the TEMPLATE. Set as `template="plotly_white"`, plotly validates a fresh copy of the whole
    template for every figure (~10-25 ms each, most of a small figure's cost); the registered template is
    valid already, so it is assigned without validation, as plotly itself assigns its default template."""
    layout = fig.layout
    layout._validate = False
    try:
        layout.template = pio.templates[TEMPLATE]
    finally:
        layout._validate = True
    return fig


def _layout_props(names: Sequence[str], title: str, height: int) -> dict:
    """The layout `_layout` gives a figure whose legend shows `names` (title, height, margins, legend, hover), as
    one dict of properties."""
    rows = legend_rows(names)
    # Plotly gives a horizontal legend at most half the figure's height and scrolls the rest inside the figure
    # (entries cut mid-way): the figure is made at least twice as tall as its legend.
    legend_px = LEGEND_ROW_PX * rows + 20
    return dict(
        title=dict(text=title, x=0, xanchor="left"),
        height=max(height + LEGEND_ROW_PX * max(0, rows - 2), 2 * legend_px),
        margin=dict(l=50, r=20, t=40, b=10),
        legend=dict(orientation="h", yref="container", yanchor="bottom", y=0, x=0, xanchor="left"),
        hovermode="x unified",
    )


def _layout(fig: go.Figure, title: str, yaxis_title: str = "", xaxis_title: str = "step", height: int = 360) -> go.Figure:
    """Title, axis titles and the legend under the plot. The legend is placed in the figure's container, at its
    bottom edge (plotly then makes room for it under the axis title), so neither the x axis title nor rotated
    category labels can overlap it; the figure grows by its rows beyond the first two, and to twice the legend's
    height, so that the legend is never cut."""
    fig.update_layout(**_layout_props([str(tr.name) for tr in fig.data if tr.showlegend is not False and tr.name],
                                      title, height))
    _white(fig)
    fig.update_xaxes(title_text=xaxis_title, automargin=True)
    fig.update_yaxes(title_text=yaxis_title)
    return fig


def _merged(base: Mapping, more: Mapping) -> dict:
    """`base` with `more` merged in, dicts key by key at every depth (plotly's update rule for a layout); neither
    is changed."""
    out = dict(base)
    for key, value in more.items():
        out[key] = _merged(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), Mapping) \
            else value
    return out


def _few_steps(xs: Sequence) -> bool:
    """Whether steps `xs` (whole numbers) are few enough to tick every one, not at 1.5, 2.5, ..."""
    return bool(len(xs)) and max(xs) - min(xs) <= 12


def _integer_steps(fig: go.Figure) -> None:
    """Steps are whole numbers: with few of them (`_few_steps`), tick every step."""
    if _few_steps([x for tr in fig.data if getattr(tr, "x", None) is not None for x in tr.x]):
        fig.update_xaxes(dtick=1)


def _rgba(color: str, alpha: float) -> str:
    """A `#rrggbb` colour as `rgba(r,g,b,alpha)` (a seed group's band)."""
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


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
    *,
    x: str = "step",
    xaxis_title: str | None = None,
    smooth: float = 0.0,
    log_y: bool = False,
    color_by: str = "key",
    layout: bool = True,
) -> go.Figure:
    """One line per (run, metric key): by default colour by key and dash style by run; `color_by="run"`: one
    colour per run (`run_colors`: fixed by the run's name) and one dash style per key, for comparing runs.

    series: metric keys, or {key: legend label}. Keys a run does not have (or has only NaN for) are skipped;
    a figure with nothing to draw says so instead of showing empty axes.
    x: the frame column on the x axis (`step`, or a column added by `analysis.with_x_columns`).
    smooth: EMA weight in [0, 1) (`analysis.ema`); above 0 the smoothed line is drawn over the raw one, faint.
    log_y: a logarithmic y axis (values <= 0 are not drawn).
    A frame of a seed group (`analysis.group_metrics`: "run" is the group) with `<key>::lo` / `<key>::hi` columns
    gets its band drawn, filled in the line's colour, under its mean line.
    Each trace's `meta` is [run, key, "raw" | "smoothed" | "band low" | "band high"] (`plotted_series` exports them).
    layout=False: the traces (and a log axis, a "no data" note) without title, axis titles and legend: a panel for
    `small_multiples`, which lays out the whole figure (laying out each panel took most of a panel's time).
    """
    if color_by not in ("key", "run"):
        raise ValueError(f"color_by must be 'key' or 'run', got {color_by!r}")
    if not 0.0 <= smooth < 1.0:
        raise ValueError(f"smooth must lie in [0, 1), got {smooth}")
    labels = dict(series) if isinstance(series, Mapping) else {k: k for k in series}
    colors = dict(colors or {})
    for i, key in enumerate(labels):
        colors.setdefault(key, OTHER_PALETTE[i % len(OTHER_PALETTE)])
    fig = go.Figure()
    multi = len(metrics_by_run) > 1
    by_run = run_colors(list(metrics_by_run)) if color_by == "run" else {}
    for r, (run, df) in enumerate(metrics_by_run.items()):
        if df is None or df.empty or x not in df.columns:
            continue
        for j, (key, label) in enumerate(labels.items()):
            if key not in df.columns:
                continue
            y = pd.to_numeric(df[key], errors="coerce")
            if y.isna().all():
                continue
            if color_by == "run":
                color, dash = by_run[run], RUN_DASHES[j % len(RUN_DASHES)]
                name = run if len(labels) == 1 else f"{run} · {label}"
            else:
                color, dash = colors[key], RUN_DASHES[r % len(RUN_DASHES)]
                name = f"{run} · {label}" if multi else label
            width = 3 if key.endswith("all_satisfied") else 2
            mode = "lines+markers" if y.notna().sum() < MARKERS_BELOW else "lines"
            group = run if (multi and color_by == "key") else name
            lo_key, hi_key = f"{key}{BAND_LO}", f"{key}{BAND_HI}"
            if lo_key in df.columns and hi_key in df.columns:  # a seed group: its band under its mean line
                lo, hi = (pd.to_numeric(df[k], errors="coerce") for k in (lo_key, hi_key))
                if smooth > 0:
                    lo, hi = ema(lo, smooth), ema(hi, smooth)
                fig.add_trace(go.Scatter(x=df[x], y=hi, mode="lines", line=dict(width=0), showlegend=False,
                                         hoverinfo="skip", legendgroup=group, meta=[run, key, "band high"]))
                fig.add_trace(go.Scatter(x=df[x], y=lo, mode="lines", line=dict(width=0), showlegend=False,
                                         hoverinfo="skip", legendgroup=group, fill="tonexty",
                                         fillcolor=_rgba(color, 0.15), meta=[run, key, "band low"]))
            if smooth > 0:
                fig.add_trace(go.Scatter(  # the raw values, faint under the smoothed line
                    x=df[x], y=y, mode="lines", connectgaps=True, name=name, showlegend=False, hoverinfo="skip",
                    opacity=0.25, line=dict(color=color, dash=dash, width=1), legendgroup=group,
                    meta=[run, key, "raw"]))
            fig.add_trace(
                go.Scatter(
                    # connectgaps: eval keys exist only at checkpoint steps
                    x=df[x], y=ema(y, smooth) if smooth > 0 else y, mode=mode, connectgaps=True, name=name,
                    line=dict(color=color, dash=dash, width=width), marker=dict(size=5), legendgroup=group,
                    meta=[run, key, "smoothed" if smooth > 0 else "raw"],
                )
            )
    if layout:
        _layout(fig, title, yaxis_title, xaxis_title or X_TITLES.get(x, x), height=height)
    if not fig.data:
        return _empty(fig, "no data for these metrics yet")
    if log_y:
        fig.update_yaxes(type="log")
        hidden = nonpositive_count(fig)
        if hidden:
            fig.add_annotation(text=f"log axis: {hidden} value{'s' if hidden > 1 else ''} ≤ 0 not drawn", x=1, y=1,
                               xref="paper", yref="paper", xanchor="right", yanchor="bottom", showarrow=False,
                               font=dict(size=11, color="#888"))
    if x == "step" and layout:
        _integer_steps(fig)
    return fig


def nonpositive_count(fig: go.Figure) -> int:
    """How many finite y values <= 0 the figure's drawn lines hold (a log axis cannot show them; the faint raw
    lines under smoothed ones and seed groups' bands are not counted)."""
    n = 0
    for tr in fig.data:
        meta = tr.meta if isinstance(tr.meta, (list, tuple)) else ()
        kind = str(meta[2]) if len(meta) > 2 else ""
        if tr.y is None or kind.startswith("band") or (kind == "raw" and tr.showlegend is False):
            continue
        y = pd.to_numeric(pd.Series(list(tr.y)), errors="coerce")
        n += int((y <= 0).sum())
    return n


# A line drawn in the browser keeps at most this many points (`for_display`); the figure, and its CSV, keep all.
DISPLAY_POINTS = 400
# trace properties that hold one value per point, thinned with x and y
_PER_POINT = ("x", "y", "customdata", "text", "hovertext")


def display_indices(y: Sequence[float], max_points: int = DISPLAY_POINTS) -> np.ndarray:
    """Which of a line's n points to draw (min-max decimation, display only): all n when n <= max_points; else the
    points cut into B = max_points // 2 buckets of ceil(n / B) consecutive points, and of each bucket the index of
    its lowest and of its highest finite y, in order (one index when they are the same point; a bucket of NaN
    alone keeps its first point, so a gap stays one), plus the first and the last point. At most max_points + 2
    indices, increasing. Every bucket's whole range of y is drawn, so no spike of the line disappears, and each
    drawn point is one of the line's own (its hover shows a logged value, never an average)."""
    if max_points < 2:
        raise ValueError(f"max_points must be at least 2, got {max_points}")
    v = np.asarray(y, dtype=np.float64)
    n = len(v)
    if n <= max_points:
        return np.arange(n)
    width = -(-n // (max_points // 2))
    pad = -n % width
    grid = np.concatenate([v, np.full(pad, np.nan)]).reshape(-1, width)
    finite = np.isfinite(grid)
    starts = np.arange(grid.shape[0]) * width
    lo = np.where(finite, grid, np.inf).argmin(axis=1)
    hi = np.where(finite, grid, -np.inf).argmax(axis=1)  # all-NaN buckets: both 0, the bucket's first point
    keep = np.unique(np.concatenate([[0, n - 1], starts + lo, starts + hi]))
    return keep[keep < n]


def for_display(fig: go.Figure, max_points: int = DISPLAY_POINTS) -> go.Figure:
    """A copy of `fig` to draw: each line trace longer than max_points keeps the points of `display_indices` (its
    x, y, customdata, text and hovertext thinned alike); bars, boxes, stacked areas (`stackgroup`: their traces must
    share x) and short traces are kept whole. The Verifier debugger's two figures of a 2,000-step run (15 lines of
    2,000 points) were shown ~0.1 s sooner from the sidebar (docs/results/app-speed.md); on a 500-1,400 px wide
    chart 200 buckets of two points draw the line's envelope. `fig` is not changed (the CSV exports read it)."""
    data = fig.to_dict()  # a copy, its arrays base64-encoded: the values are read from fig's traces
    thinned = False
    for obj, trace in zip(fig.data, data.get("data", []), strict=True):
        y = obj.y
        if trace.get("type") != "scatter" or obj.stackgroup or y is None or len(y) <= max_points:
            continue
        keep = display_indices(pd.to_numeric(pd.Series(y), errors="coerce").to_numpy(), max_points)
        for prop in _PER_POINT:
            values = obj[prop]
            if values is not None and not isinstance(values, str) and len(values) == len(y):
                trace[prop] = np.asarray(values)[keep]
        thinned = True
    return go.Figure(data, _validate=False) if thinned else fig


# Titles of the x axes the curves can be drawn against (columns of `analysis.with_x_columns`).
X_TITLES = {"step": "step", "samples": "samples seen (responses)", "minutes": "training time (min, sum of step times)"}


def plotted_series(figures_by_title: Mapping[str, go.Figure]) -> pd.DataFrame:
    """The data behind the drawn lines, long format: figure, run, metric key, kind (raw / smoothed), x, y.

    Reads the traces of figures built by `metric_lines` (and the other functions that set `meta` to [run, key,
    ...]); traces without such meta are skipped.
    """
    frames = []
    for title, fig in figures_by_title.items():
        for tr in fig.data:
            meta = tr.meta if isinstance(tr.meta, (list, tuple)) else None
            if not meta or len(meta) < 2 or tr.x is None or tr.y is None:
                continue
            frames.append(pd.DataFrame({"figure": title, "run": meta[0], "metric": meta[1],
                                        "kind": meta[2] if len(meta) > 2 else "raw", "x": list(tr.x),
                                        "y": list(tr.y)}))
    cols = ["figure", "run", "metric", "kind", "x", "y"]
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)


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


def small_multiples(parts: Mapping[str, go.Figure], title: str, cols: int = 2, row_px: int = 260,
                    legend: bool = True, y_range: Sequence[float] | None = None,
                    x_title: str | None = None) -> go.Figure:
    """Figures of `metric_lines` (or any figure of traces) as one figure of small panels ({panel title: figure}),
    `cols` per row, in order. One x axis for all: zooming or panning one panel moves every panel (`matches="x"`),
    and a browser draws one figure of n panels much faster than n figures. Each line name has one legend entry
    (legendgroup: a click toggles it in every panel); `legend=False`: none (each panel's title names its only
    line). A panel without data says so. `y_range`: the same y range for every panel (rates in [0, 1]); the
    traces' `meta` is kept, so `plotted_series` reads the panels' data from the result. `parts` are not changed.
    `x_title`: under each column's lowest panel (default: the first part's x axis title, else "step")."""
    titles = list(parts)
    rows = max(1, -(-len(titles) // cols))
    grid = make_subplots(rows=rows, cols=cols, subplot_titles=titles, horizontal_spacing=0.06,
                         vertical_spacing=min(0.3, 0.12 * 3 / max(rows, 1)) if rows > 1 else 0.1)
    first = next(iter(parts.values()), None)
    if x_title is None:
        x_title = (first.layout.xaxis.title.text if first is not None else None) or "step"
    bottom = {max(i for i in range(len(titles)) if i % cols == c) for c in range(min(cols, len(titles)))}
    traces: list[dict] = []
    notes: list[dict] = [{**a.to_plotly_json(), "font": {"size": 13}} for a in grid.layout.annotations]
    shown: set[str] = set()
    layout: dict = {}
    for i in range(rows * cols):  # every cell's axes, the grid's empty cells too: they follow the first x axis
        axis = str(i + 1) if i else ""
        layout[f"xaxis{axis}"] = dict(title=dict(text=x_title if i in bottom else ""), automargin=True,
                                      showticklabels=True, **({"matches": "x"} if i else {}))
        layout[f"yaxis{axis}"] = dict(title=dict(text=""), **({"range": list(y_range)} if y_range is not None else {}))
    for i, part in enumerate(parts.values()):
        axis = str(i + 1) if i else ""
        for tr in part.data:
            trace = tr.to_plotly_json()  # a copy: the parts may be cached and shown elsewhere
            name = str(trace.get("name") or "")
            trace["legendgroup"] = trace.get("legendgroup") or name
            trace["showlegend"] = bool(legend and trace.get("showlegend") is not False and name not in shown)
            if trace["showlegend"]:
                shown.add(name)
            trace["xaxis"], trace["yaxis"] = f"x{axis}", f"y{axis}"
            traces.append(trace)
        if part.layout.barmode:
            layout["barmode"] = part.layout.barmode
        layout[f"yaxis{axis}"]["type"] = part.layout.yaxis.type
        own = [{**note.to_plotly_json(), "xref": f"x{axis} domain", "yref": f"y{axis} domain"}
               for note in part.layout.annotations if note.xref == "paper"]  # e.g. "log axis: n values <= 0 ..."
        if not part.data and not own:
            own.append(dict(text="no data", showarrow=False, x=0.5, y=0.5, font=dict(color="#888"),
                            xref=f"x{axis} domain", yref=f"y{axis} domain"))
        notes += own
    steps = [x for tr in traces for x in (tr.get("x") if tr.get("x") is not None else ())]
    if steps and isinstance(steps[0], (int, np.integer)) and _few_steps(steps):
        for key in [k for k in layout if k.startswith("xaxis")]:
            layout[key]["dtick"] = 1
    props = _layout_props([str(t["name"]) for t in traces if t["showlegend"] and t.get("name")], title,
                          rows * row_px + 70)
    props["margin"]["t"] = 70  # the figure's title above the first row's panel titles
    base = grid.layout.to_plotly_json()
    base.pop("template", None)
    # one figure built from plain dicts: plotly checks each property once (one update at a time, it checked the
    # whole layout again on every call: 60 ms for 8 panels, on every live redraw of Training curves)
    return _white(go.Figure(data=traces, layout=_merged(base, {**layout, **props, "annotations": notes})))


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
                    x=df["step"], y=pd.to_numeric(df[key], errors="coerce"),
                    mode="lines+markers" if len(df) < MARKERS_BELOW else "lines",  # 1000s of markers: seconds to draw
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


MAX_TOKEN_TICKS = 100  # more tokens than this: label every k-th position on the x axis


def token_ticks(positions: Sequence[int], tokens: Sequence[str]) -> tuple[list[int], list[str]]:
    """(tick positions, tick labels) that name each response position by its token text (newline as ↵, an empty
    token as ∅), every k-th one when there are more than MAX_TOKEN_TICKS."""
    every = max(1, -(-len(positions) // MAX_TOKEN_TICKS))
    vals = list(positions)[::every]
    texts = [(str(tok).replace("\n", "↵").replace("\t", "⇥") or "∅") for tok in list(tokens)[::every]]
    return vals, texts


def _hover_columns(*columns) -> np.ndarray:
    """(n, len(columns)) object array for a trace's customdata: plotly takes a numpy array as it is, where a list
    of tuples is checked value by value (~0.2 s for 512 tokens)."""
    out = np.empty((len(columns[0]), len(columns)), dtype=object)
    for j, col in enumerate(columns):
        out[:, j] = list(col)
    return out


def js_positions_figure(sample_df: pd.DataFrame, reward_names: Sequence[str]) -> go.Figure:
    """Per-position JS distance d[k,t] of one sample, one row per reward the sample's prompt states (a reward
    it does not state has no credit and no panel), with the verifier's inspected spans shaded in the reward's
    colour and the token text on the x axis. Hover: position, token, JS, routing weight, credit. A reward whose
    contrastive pass replay skipped (`distance_skipped`) says so in its row instead of drawing nothing."""
    present = [n for n in reward_names if n in set(sample_df["reward"])] if not sample_df.empty else []
    present += [n for n in dict.fromkeys(sample_df.get("reward", [])) if n not in present]
    if "score" in sample_df.columns and not sample_df.empty:
        scores = sample_df.groupby("reward", sort=False, observed=True)["score"].first()
        present = [n for n in present if pd.notna(scores.get(n))]
    cols = reward_colors(list(reward_names) + [n for n in present if n not in reward_names])
    if not present:
        return _empty(_layout(go.Figure(), "JS distance per token"), "no tokens in this sample")
    fig = make_subplots(rows=len(present), cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=[f"{n}" for n in present])
    fig.update_annotations(font_size=12, x=0, xanchor="left")  # subplot titles, left-aligned above each row
    skipped = skipped_rewards(sample_df)
    for row, n in enumerate(present, start=1):
        d = sample_df[sample_df["reward"] == n].sort_values("t")
        js = pd.to_numeric(d["distance"], errors="coerce")
        top = max(0.05, float(js.max()) * 1.1) if js.notna().any() else 1
        # The spans as one filled trace per row, a closed box per run of span tokens (None between boxes): a
        # layout shape per run costs plotly ~0.7 ms each to add and re-validates every earlier shape (a 512-token
        # sample of five rewards took 45 s of CPU with add_vrect).
        runs = _span_runs(d["in_span"].astype(bool).tolist(), d["t"].astype(int).tolist())
        if runs:
            ab = np.asarray(runs, dtype=np.float64)  # (runs, 2): first and last position of each
            xs = (ab[:, [0, 0, 1, 1, 0]] + [-0.5, -0.5, 0.5, 0.5, -0.5]).tolist()
            xs = np.array([x for box in xs for x in (*box, None)], dtype=object)
            ys = np.array([y for _ in runs for y in (0, top, top, 0, 0, None)], dtype=object)
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", fill="toself", fillcolor=cols[n], opacity=0.18,
                                     line=dict(width=0), hoverinfo="skip", showlegend=False, name=f"{n} spans",
                                     meta="spans"), row=row, col=1)
        fig.add_trace(go.Scatter(
            x=d["t"], y=js, mode="lines+markers", name=n, line=dict(color=cols[n], width=1.5), marker=dict(size=4),
            customdata=_hover_columns(d["token"].map(repr), d["weight"], d["credit"], d["in_span"]),
            hovertemplate="t=%{x} token %{customdata[0]}<br>JS %{y:.4f} · weight %{customdata[1]:.3f}"
                          "<br>credit %{customdata[2]:+.4f} · in span %{customdata[3]}<extra>" + n + "</extra>",
            showlegend=False,
        ), row=row, col=1)
        fig.update_yaxes(range=[0, top], row=row, col=1)
        if n in skipped:
            fig.add_annotation(text=f"JS {JS_SKIPPED_TEXT}", showarrow=False, x=0.5, y=0.5, font=dict(color="#888"),
                               xref=f"x{'' if row == 1 else row} domain", yref=f"y{'' if row == 1 else row} domain")
    fig.update_layout(height=max(280, 150 * len(present) + 110), margin=dict(l=50, r=20, t=50, b=90),
                      hovermode="closest",
                      title=dict(text="JS distance per response token (shaded: verifier's inspected spans)", x=0))
    _white(fig)
    first = sample_df[sample_df["reward"] == present[0]].sort_values("t")
    vals, texts = token_ticks(first["t"].astype(int).tolist(), first["token"].astype(str).tolist())
    fig.update_xaxes(tickmode="array", tickvals=vals, ticktext=texts, tickangle=-60, tickfont=dict(size=10))
    fig.update_xaxes(title_text="response token (position t in the hover)", row=len(present), col=1)
    if pd.to_numeric(sample_df["distance"], errors="coerce").isna().all():
        fig.add_annotation(text="no JS in this run (GRPO/GDPO do no replay)", showarrow=False, x=0.5, y=0.5,
                           xref="paper", yref="paper", font=dict(color="#888"))
    return fig


def _in_out_layout(fig: go.Figure, reward_names: Sequence[str], cols: Mapping) -> go.Figure:
    """The in-span vs out-of-span box plots' layout (grouped boxes, rewards in run order, a note when empty)."""
    fig.update_layout(boxmode="group")
    _layout(fig, "JS distance: in-span vs out-of-span tokens", "JS distance", xaxis_title="reward")
    fig.update_layout(hovermode="closest")
    if not fig.data:
        _empty(fig, "no JS distances here (GRPO/GDPO runs do no replay)")
    else:
        fig.update_xaxes(categoryorder="array", categoryarray=[n for n in reward_names if n in cols])
    return fig


def js_in_out_figure(credit_df: pd.DataFrame, reward_names: Sequence[str]) -> go.Figure:
    """Distributions of JS distance for in-span vs out-of-span tokens, per reward (box plots)."""
    cols = reward_colors(reward_names)
    fig = go.Figure()
    if not credit_df.empty:
        df = credit_df[pd.to_numeric(credit_df["distance"], errors="coerce").notna()]
        for where, flag, opacity in (("in span", True, 0.9), ("out of span", False, 0.45)):
            part = df[df["in_span"].astype(bool) == flag]
            if part.empty:
                continue
            fig.add_trace(go.Box(
                x=part["reward"], y=part["distance"], name=where, boxpoints=False, opacity=opacity,
                marker_color=FOREGROUND if flag else "#999999", meta=[where],
            ))
    return _in_out_layout(fig, reward_names, cols)


def js_in_out_summary_figure(summary: pd.DataFrame, reward_names: Sequence[str]) -> go.Figure:
    """`js_in_out_figure` from a step's distance summary (`RunStore.credit_summary`: quartiles, fences and mean
    per reward, in / out of span): box plots drawn from the precomputed statistics, no token rows needed."""
    cols = reward_colors(reward_names)
    fig = go.Figure()
    for where, label, opacity, color in (("in", "in span", 0.9, FOREGROUND), ("out", "out of span", 0.45, "#999999")):
        part = summary[(summary["where"] == where) & (summary["n"] > 0)]
        if part.empty:
            continue
        fig.add_trace(go.Box(
            x=part["reward"].tolist(), q1=part["q1"].tolist(), median=part["median"].tolist(),
            q3=part["q3"].tolist(), lowerfence=part["lowerfence"].tolist(), upperfence=part["upperfence"].tolist(),
            mean=part["mean"].tolist(), name=label, boxpoints=False, opacity=opacity, marker_color=color,
            meta=[label],
        ))
    return _in_out_layout(fig, reward_names, cols)


__all__ = [
    "DISPLAY_POINTS", "REWARD_PALETTE", "auc_figure", "display_indices", "for_display", "js_in_out_figure",
    "js_in_out_summary_figure", "js_positions_figure",
    "loss_figure", "metric_lines",
    "per_reward_lines", "plotted_series", "reward_curves", "reward_series", "step_time_figure",
]
