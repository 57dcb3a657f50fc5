"""Line charts of per-step metrics: one colour per series, one dash per run (`metric_lines`), the thinning of a
line for the browser (`for_display`), the series a figure plotted (`plotted_series`) and small multiples."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from mrtpo_viz.analysis import BAND_HI, BAND_LO, ema
from mrtpo_viz.figures.style import (
    ALL_SATISFIED_COLOR,
    MARKERS_BELOW,
    OTHER_PALETTE,
    RUN_DASHES,
    _empty,
    _few_steps,
    _integer_steps,
    _layout,
    _layout_props,
    _merged,
    _rgba,
    _white,
    run_colors,
)
from mrtpo_viz.heatmap import reward_colors


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
    A step whose row lacks the key (no sample of it carried that reward, no JS for it) breaks the line: a gap, not
    a straight segment, marked by a hollow marker whose hover says why (`gap_traces`); eval keys, logged at
    checkpoint steps only, are bridged.
    Each trace's `meta` is [run, key, "raw" | "smoothed" | "band low" | "band high" | "gap" | "alone"]
    (`plotted_series` exports the values, not the gaps' marks).
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
                # the band filled and outlined in the line's colour, so that a light colour's band (GDPO's
                # yellow beside MRTPO's) stays visible on a white page
                edge = dict(width=BAND_EDGE_WIDTH, color=_rgba(color, BAND_EDGE_ALPHA))
                fig.add_trace(go.Scatter(x=df[x], y=hi, mode="lines", line=edge, showlegend=False,
                                         hoverinfo="skip", legendgroup=group, meta=[run, key, "band high"]))
                fig.add_trace(go.Scatter(x=df[x], y=lo, mode="lines", line=edge, showlegend=False,
                                         hoverinfo="skip", legendgroup=group, fill="tonexty",
                                         fillcolor=_rgba(color, BAND_FILL_ALPHA), meta=[run, key, "band low"]))
            bridge = key.startswith("eval/")  # eval keys exist only at checkpoint steps: bridged; others break
            if smooth > 0:
                fig.add_trace(go.Scatter(  # the raw values, faint under the smoothed line
                    x=df[x], y=y, mode="lines", connectgaps=bridge, name=name, showlegend=False, hoverinfo="skip",
                    opacity=0.25, line=dict(color=color, dash=dash, width=1), legendgroup=group,
                    meta=[run, key, "raw"]))
            shown_y = ema(y, smooth) if smooth > 0 else y
            fig.add_trace(
                go.Scatter(
                    x=df[x], y=shown_y, mode=mode, connectgaps=bridge, name=name,
                    line=dict(color=color, dash=dash, width=width), marker=dict(size=5), legendgroup=group,
                    meta=[run, key, "smoothed" if smooth > 0 else "raw"],
                )
            )
            if not bridge:
                for trace in gap_traces(df[x], shown_y, key, label, color, group, run, alone=mode == "lines"):
                    fig.add_trace(trace)
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


def gap_reason(key: str, label: str) -> str:
    """Why a per-step metric has no value at a step that was logged (its row exists, this key does not)."""
    name = key.split("/")[1] if key.count("/") >= 1 else key
    if key.startswith("reward/") and key != "reward/all_satisfied":
        return f"no sample of this step carried {label} (its prompts do not state it), so it has no mean"
    if key.startswith(("js/", "span/")):
        return (f"no contrastive pass for {name} at this step (no sample carried it, or every group it was in "
                "scored the same, so its advantage was 0)")
    return "this step logged no value for it"


def gap_traces(x: pd.Series, y: pd.Series, key: str, label: str, color: str, group: str, run: str,
               alone: bool = True) -> list[go.Scatter]:
    """The marks of a line's gaps (its steps without a value: the line breaks there): a hollow marker at each,
    at the height the line would pass (interpolated; before the first or after the last value, at that value),
    whose hover says why (`gap_reason`); `alone`: the values with a gap on both sides as markers (a line of
    one point draws nothing). Traces' `meta` kind "gap" / "alone": `plotted_series` leaves them out."""
    y = pd.to_numeric(pd.Series(list(y)), errors="coerce")
    x = pd.Series(list(x))
    missing = y.isna().to_numpy()
    if not missing.any() or missing.all():
        return []
    traces = []
    where = y.interpolate(limit_direction="both")
    why = gap_reason(key, label)
    xs = x[missing].tolist()
    traces.append(go.Scatter(
        x=xs, y=where[missing].tolist(), mode="markers", showlegend=False, legendgroup=group,
        marker=dict(symbol="circle-open", size=7, color=color, line=dict(width=1)), opacity=0.7,
        hovertext=[f"{label}, step {v}: no value — {why}" for v in xs], hoverinfo="text", meta=[run, key, "gap"]))
    before, after = np.r_[True, missing[:-1]], np.r_[missing[1:], True]
    single = ~missing & before & after
    if alone and single.any():
        traces.append(go.Scatter(x=x[single].tolist(), y=y[single].tolist(), mode="markers", showlegend=False,
                                 legendgroup=group, marker=dict(size=5, color=color), name=label,
                                 meta=[run, key, "alone"]))
    return traces


def nonpositive_count(fig: go.Figure) -> int:
    """How many finite y values <= 0 the figure's drawn lines hold (a log axis cannot show them; the faint raw
    lines under smoothed ones and seed groups' bands are not counted)."""
    n = 0
    for tr in fig.data:
        meta = tr.meta if isinstance(tr.meta, (list, tuple)) else ()
        kind = str(meta[2]) if len(meta) > 2 else ""
        if tr.y is None or kind.startswith("band") or kind in GAP_KINDS or (kind == "raw" and tr.showlegend is False):
            continue
        y = pd.to_numeric(pd.Series(list(tr.y)), errors="coerce")
        n += int((y <= 0).sum())
    return n


# A seed group's band: its fill's and its outline's opacity, the outline's width (px); at a fill of 0.15 and no
# outline the band of a light colour (yellow) was barely visible beside a dark one's (issue 46).
BAND_FILL_ALPHA, BAND_EDGE_ALPHA, BAND_EDGE_WIDTH = 0.28, 0.75, 1
GAP_KINDS = ("gap", "alone")  # the marks of a line's gaps (`gap_traces`), not its values

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
            if not meta or len(meta) < 2 or tr.x is None or tr.y is None or (len(meta) > 2 and meta[2] in GAP_KINDS):
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
