"""Shared look of every figure: palettes, dashes, the text colour Streamlit's theme replaces, the white template,
legend sizing and the layout helpers the figure modules use. No Streamlit; never imports torch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
import plotly.io as pio

from mrtpo_viz.heatmap import palette_colors

RUN_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
OTHER_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
# One colour per run where runs are compared, fixed by its name (`run_colors`): 8 colours of Okabe & Ito's and Paul
# Tol's colour-blind-safe palettes, any two >= 17 apart in CIEDE2000 and >= 13 as a dichromat sees them (Machado
# 2009; tests/test_colours.py).
RUN_PALETTE = ("#117733", "#EE3377", "#66CCEE", "#999933", "#AA4499", "#F0E442", "#009988", "#FFAABB")
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
