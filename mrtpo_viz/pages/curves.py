"""Training curves: rewards, losses, KL, entropy, clip fraction, JS, span agreement, step time and response
length of one or several runs (panels whose quantity a run does not have are left out, with the reason);
smoothing, x axis (step, samples seen, training time), log scale and a CSV of the plotted series.

While a chosen run is active only its progress line is live: a fragment polls the run's status every 2 s
and sends that line alone. The figures are drawn outside it, by a run of the whole page that the fragment asks
for only when the figures' `signature` (each run's metrics file and state) changed and the figures were drawn
`ui.FIGURE_REFRESH_S` or more ago, or when a run starts or ends; unchanged figures are never sent again, so watching
a run takes little CPU from its trainer (measured with `mrtpo bench live`). Built figures are shared by every
session of the server (a new visitor of a run that someone has viewed gets them without building them again).
A run that has not finished a step shows what its trainer is doing (its startup phase and log tail). The
page's state is its URL (a shareable link).
"""

from __future__ import annotations

import time
from pathlib import Path

import streamlit as st

from core.run.store import ACTIVE_STATES
from mrtpo_viz import analysis, figures, launcher, loaders, panels, ui

PAGE = "curves"
DRAWN_KEY = "curves_drawn"  # session state: (the signature of the figures on the page, when they were drawn)

st.title("Training curves")
runs = ui.page_runs(charts=True)
target = ui.link_target(PAGE, ("run", *ui.STYLE_PARAMS))
if target:
    ui.apply_run_link(runs, target, multi=True)
    ui.apply_style_link(target, PAGE)
chosen = ui.pick_runs(runs, "Runs (overlaid: one dash style per run)")
style = ui.curve_controls(PAGE)
ui.write_link(PAGE, {"run": [loaders.run_label(r) for r in chosen], **ui.style_params(style)})
if not chosen:
    st.info("Pick at least one run.")
    st.stop()

paths = [str(r.path) for r in chosen]
labels = {str(r.path): loaders.run_label(r) for r in chosen}
states_now = {p: launcher.run_state(p) for p in paths}
active_at_start = any(s.get("state") in ACTIVE_STATES for s in states_now.values())


def signature(states: dict[str, dict]) -> tuple:
    """What the figures depend on: each run's metrics file (mtime, size) and state, and the chosen style."""
    return (tuple((p, loaders.file_key(Path(p) / "metrics.jsonl"), states[p].get("state")) for p in paths),
            tuple(sorted(style.items())))


def build() -> tuple[dict, list[str], dict[str, list[str]]]:
    """(figures by panel name, reasons of the panels left out, warnings by run)."""
    metrics, configs, rewards, problems = {}, {}, [], {}
    for p in paths:
        df, warnings = loaders.metrics(p)
        problems[labels[p]] = warnings
        cfg, _ = loaders.config(p)
        cfg = cfg or launcher.launched_config(p)
        samples = int(cfg.get("prompts_per_step") or 0) * int(cfg.get("group_size") or 0) or None
        metrics[labels[p]] = analysis.with_x_columns(df, samples)
        configs[labels[p]] = cfg
        rewards += [n for n in loaders.reward_names(p) if n not in rewards]
    drawn, hidden = panels.build_panels(metrics, rewards, configs, x=style["x"], smooth=style["smooth"],
                                        log_y=style["log_y"])
    return drawn, hidden, problems


@st.cache_resource(show_spinner=False, max_entries=16)
def built(key: tuple, run_labels: tuple) -> tuple[dict, list[str], dict[str, list[str]]]:
    """`build()` once per signature and run labels, for every session (the figures are only read)."""
    return build()


@st.fragment(run_every=ui.REFRESH_S if active_at_start else None)
def live_progress() -> None:
    """The runs' progress lines (every REFRESH_S s while one is active); asks for a run of the whole page when
    a run started or ended, or when the figures are out of date and ui.FIGURE_REFRESH_S has passed since drawing."""
    states = {p: launcher.run_state(p) for p in paths}
    active = any(s.get("state") in ACTIVE_STATES for s in states.values())
    if active != active_at_start:
        st.rerun()  # a run started or ended: redraw the page so polling starts or stops
    for p, s in states.items():
        step, total = s.get("step") or 0, s.get("total_steps")
        state = s.get("state", "unknown")
        if state in ACTIVE_STATES and total:
            st.progress(min(1.0, step / total), text=f"{labels[p]}: {ui.state_badge(state)} · step {step}/{total}")
        if state in ACTIVE_STATES and not step:
            ui.show_startup(p, s)
        elif state in ("crashed", "failed"):
            st.error(f"{ui.plain(labels[p])}: {ui.plain(state)}")
            st.code(str(s.get("error") or "no error text")[-4000:], language=None)
    if not active:
        return
    st.caption(f"Live: the progress is checked every {ui.REFRESH_S:g} s; the figures are redrawn when a step has "
               f"been written, at most every {ui.FIGURE_REFRESH_S:g} s.")
    drawn_sig, drawn_at = st.session_state.get(DRAWN_KEY, (None, 0.0))
    if signature(states) != drawn_sig and time.monotonic() - drawn_at >= ui.FIGURE_REFRESH_S:
        st.rerun()  # the whole page, so the figures below are drawn again


# The figures' signature is taken before the progress fragment's first run, so that run never asks for another.
key = signature(states_now)
st.session_state[DRAWN_KEY] = (key, time.monotonic())
live_progress()

drawn, hidden, problems = built(key, tuple(labels.items()))
for label, warnings in problems.items():
    ui.show_warnings(label, warnings)

row = None
for name, (panel, fig) in drawn.items():
    if panel.full:
        st.plotly_chart(fig, key=f"fig_{name}")
        row = None
        continue
    if row is None:
        row = iter(st.columns(2))
    try:
        col = next(row)
    except StopIteration:
        row = iter(st.columns(2))
        col = next(row)
    col.plotly_chart(fig, key=f"fig_{name}")
for why in hidden:
    st.caption(f"Not shown — {why}.")
st.download_button("Plotted series (CSV)", lambda: figures.plotted_series(
    {fig.layout.title.text: fig for _, fig in drawn.values()}).to_csv(index=False).encode(),
    "training_curves.csv", "text/csv", on_click="ignore", key="curves_csv")
