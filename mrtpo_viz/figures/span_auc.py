"""The Verifier debugger's span ROC AUC of JS: one small panel per reward (issue 46, item 8: ten jagged lines in one
panel could not be read), optionally smoothed by a trailing rolling mean (docs/METHOD.md, "Span agreement").
No Streamlit here; never imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from mrtpo_viz.figures.lines import small_multiples
from mrtpo_viz.figures.style import MARKERS_BELOW, _empty, _layout, run_colors
from mrtpo_viz.heatmap import reward_colors

RAW_OPACITY = 0.3  # the raw values under a smoothed line
CHANCE = 0.5


def rolling_mean(values: Sequence[float] | pd.Series, window: int) -> pd.Series:
    """Trailing rolling mean over `window` logged steps (docs/METHOD.md, "Span agreement"): s_t = the mean of the
    finite values among x_{t-window+1} .. x_t, NaN where none of them is finite (a reward that applies on few steps
    keeps a line across gaps shorter than the window; a longer gap stays a gap). window = 1 returns the values.

    >>> [round(v, 3) for v in rolling_mean([1.0, 3.0, float("nan"), 5.0, float("nan"), float("nan")], 2)]
    [1.0, 2.0, 3.0, 5.0, 5.0, nan]
    """
    if int(window) != window or window < 1:
        raise ValueError(f"the window must be a whole number of steps >= 1, got {window}")
    x = pd.to_numeric(pd.Series(values), errors="coerce").astype("float64").reset_index(drop=True)
    x[~np.isfinite(x)] = np.nan
    if window == 1:
        return x
    return x.rolling(int(window), min_periods=1).mean()


def auc_title(window: int = 1) -> str:
    """The figure's title: what the lines are, and the smoothing window when there is one."""
    title = "Span ROC AUC of JS per reward (solid: the reward's own JS; dotted: control)"
    return title + (f" · rolling mean over {window} steps, raw faint" if window > 1 else "")


def auc_figure(metrics_by_run: Mapping[str, pd.DataFrame], reward_names: Sequence[str], window: int = 1,
               cols: int = 3) -> go.Figure:
    """ROC AUC of JS for span vs non-span tokens (`span/<name>/auc`, solid), with its control (`auc_control`,
    dotted, same colour: the AUC of the other rewards' JS on the same spans), one small panel per reward
    (`small_multiples`, `cols` a row, one x axis, the y axis [0, 1.02]) and a dashed grey line at chance (0.5) in
    each. One run: in the reward's colour, no legend; several: one colour per run (`run_colors`), a legend entry
    per run and line that toggles it in every panel. `window` > 1: both lines
    are the `rolling_mean` over that many steps, the raw AUC drawn faint under its smoothed line. Each trace's
    `meta` is [run, key, "raw" | "smoothed"]."""
    rolling_mean([], window)  # checks the window
    multi = len(metrics_by_run) > 1
    colours = run_colors(list(metrics_by_run)) if multi else {}
    parts: dict[str, go.Figure] = {}
    for n in reward_names:
        part = go.Figure()
        for run, df in metrics_by_run.items():
            if df is None or df.empty:
                continue
            colour = colours[run] if multi else reward_colors(reward_names)[n]
            for key, label, dash, width in ((f"span/{n}/auc", "AUC", "solid", 2.0),
                                            (f"span/{n}/auc_control", "control", "dot", 1.5)):
                if key not in df.columns:
                    continue
                y = rolling_mean(df[key], 1)  # as numbers, NaN where missing
                if y.isna().all():
                    continue
                name = f"{run} · {label}" if multi else label
                mode = "lines+markers" if len(df) < MARKERS_BELOW else "lines"  # 1000s of markers: seconds to draw
                if window > 1 and label == "AUC":  # the raw values, faint under the smoothed line
                    part.add_trace(go.Scatter(x=df["step"], y=y, mode="lines", name=name, showlegend=False,
                                              legendgroup=name, opacity=RAW_OPACITY, hoverinfo="skip",
                                              line=dict(color=colour, width=1), meta=[run, key, "raw"]))
                smoothed = window > 1
                part.add_trace(go.Scatter(
                    x=df["step"], y=rolling_mean(y, window) if smoothed else y, mode=mode, name=name, legendgroup=name,
                    line=dict(color=colour, dash=dash, width=width), marker=dict(size=4),
                    meta=[run, key, "smoothed" if smoothed else "raw"]))
        parts[n] = part
    if not any(p.data for p in parts.values()):
        return _empty(_layout(go.Figure(), auc_title(window), "AUC"),
                      "no span AUC metrics (GRPO/GDPO runs do no replay)")
    # one run: no legend (each panel's title names its reward, the figure's title the line styles)
    fig = small_multiples(parts, auc_title(window), cols=cols, row_px=200, legend=multi, y_range=(0, 1.02))
    fig.update_layout(shapes=[dict(type="line", xref=f"x{i + 1 if i else ''} domain", yref=f"y{i + 1 if i else ''}",
                                   x0=0, x1=1, y0=CHANCE, y1=CHANCE, line=dict(color="#999", dash="dash", width=1))
                              for i in range(len(parts))])
    return fig


def auc_scope(cfg: Mapping) -> str:
    """What one point of `auc_figure` is computed over, from the run's config: the response tokens of one step's
    samples where the reward applies (up to prompts_per_step x group_size samples, each up to max_new_tokens
    tokens: `core.algos.span_metrics.span_auc`)."""
    prompts, group, tokens = (cfg.get(k) for k in ("prompts_per_step", "group_size", "max_new_tokens"))
    if prompts and group:
        batch = f"up to {int(prompts) * int(group)} samples ({int(prompts)} prompts x G = {int(group)})"
    else:
        batch = "the step's samples"
    length = f", each up to {int(tokens)} response tokens" if tokens else ""
    return (f"Each point is one training step: the AUC pools the response tokens of that step's samples where the "
            f"reward applies, {batch}{length}. It tells the reward's span tokens from its other tokens by the "
            "reward's own JS (solid); the control scores the same spans with the other rewards' JS (dotted); 0.5 "
            "(dashed) is chance.")
