"""Per-token figures of one sample: JS distance per position with the verifier's spans drawn under it, and JS
inside against outside the spans."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from mrtpo_viz.figures.style import FOREGROUND, _empty, _layout, _white
from mrtpo_viz.heatmap import JS_SKIPPED_TEXT, reward_colors, skipped_rewards


def span_runs(mask: Sequence[bool], positions: Sequence[int]) -> list[tuple[int, int]]:
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


def js_positions_figure(sample_df: pd.DataFrame, reward_names: Sequence[str],
                        order: Sequence[str] | None = None) -> go.Figure:
    """Per-position JS distance d[k,t] of one sample, one row per reward the sample's prompt states (a reward
    it does not state has no credit and no panel), with the verifier's inspected spans shaded in the reward's
    colour and the token text on the x axis. Hover: position, token, JS, routing weight, credit. A reward whose
    contrastive pass replay skipped (`distance_skipped`) says so in its row instead of drawing nothing. `order`: the
    rows' order from the top (`opening.opening_order`: the rewards that acted on the sample first); colours follow
    `reward_names` whatever the order."""
    present = [n for n in reward_names if n in set(sample_df["reward"])] if not sample_df.empty else []
    present += [n for n in dict.fromkeys(sample_df.get("reward", [])) if n not in present]
    if "score" in sample_df.columns and not sample_df.empty:
        scores = sample_df.groupby("reward", sort=False, observed=True)["score"].first()
        present = [n for n in present if pd.notna(scores.get(n))]
    if order:
        rank = {n: i for i, n in enumerate(order)}
        present = sorted(present, key=lambda n: rank.get(n, len(rank)))
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
        runs = span_runs(d["in_span"].astype(bool).tolist(), d["t"].astype(int).tolist())
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
