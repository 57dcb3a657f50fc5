"""Training curves: rewards, losses, KL, entropy, clip fraction, JS, span agreement and step time of one
or several runs, refreshed every 2 s while a chosen run is active (polling stops when it ends)."""

from __future__ import annotations

import streamlit as st

from core.run.store import ACTIVE_STATES
from mrtpo_viz import figures, launcher, loaders, ui

REFRESH_S = 2.0

st.title("Training curves")
runs = ui.page_runs()
chosen = ui.pick_runs(runs, "Runs (overlaid: one dash style per run)")
if not chosen:
    st.info("Pick at least one run.")
    st.stop()

paths = [str(r.path) for r in chosen]
labels = {str(r.path): loaders.run_label(r) for r in chosen}
active_at_start = any(launcher.run_state(p).get("state") in ACTIVE_STATES for p in paths)


@st.fragment(run_every=REFRESH_S if active_at_start else None)
def live_curves() -> None:
    states = {p: launcher.run_state(p) for p in paths}
    active = any(s.get("state") in ACTIVE_STATES for s in states.values())
    if active != active_at_start:
        st.rerun()  # a run started or ended: redraw the page so polling starts or stops
    metrics, rewards = {}, []
    for p in paths:
        df, warnings = loaders.metrics(p)
        ui.show_warnings(labels[p], warnings)
        metrics[labels[p]] = df
        rewards += [n for n in loaders.reward_names(p) if n not in rewards]
    for p, s in states.items():
        step, total = s.get("step") or 0, s.get("total_steps")
        state = s.get("state", "unknown")
        if state in ACTIVE_STATES and total:
            st.progress(min(1.0, step / total), text=f"{labels[p]}: {ui.state_badge(state)} · step {step}/{total}")
        elif state in ("crashed", "failed"):
            st.error(f"{labels[p]}: {state}. {str(s.get('error') or '')[-600:]}")
    if active:
        st.caption(f"Live: refreshing every {REFRESH_S:g} s while a run is active.")

    st.plotly_chart(figures.reward_curves(metrics, rewards), key="fig_rewards")
    c1, c2 = st.columns(2)
    c1.plotly_chart(figures.loss_figure(metrics), key="fig_loss")
    c2.plotly_chart(figures.metric_lines(metrics, {"policy/kl": "KL to rollout policy"}, "KL", "KL"), key="fig_kl")
    c1, c2 = st.columns(2)
    c1.plotly_chart(figures.metric_lines(metrics, {"policy/entropy": "entropy"}, "Entropy", "nats"),
                    key="fig_entropy")
    c2.plotly_chart(figures.metric_lines(metrics, {"policy/clip_frac": "clip fraction"}, "Clip fraction", "fraction"),
                    key="fig_clip")
    c1, c2 = st.columns(2)
    c1.plotly_chart(figures.per_reward_lines(metrics, rewards, "js/{name}/mean", "Mean JS distance per reward", "JS"),
                    key="fig_js")
    c2.plotly_chart(figures.per_reward_lines(metrics, rewards, "span/{name}/mass_in",
                                             "Span agreement: routing mass inside verifier spans", "share"),
                    key="fig_span")
    c1, c2 = st.columns(2)
    c1.plotly_chart(figures.step_time_figure(metrics), key="fig_time")
    c2.plotly_chart(figures.metric_lines(metrics, {"response/length": "mean response length"}, "Response length",
                                         "tokens"), key="fig_length")
    if any(any(c.startswith("eval/") for c in df.columns) for df in metrics.values()):
        st.plotly_chart(figures.reward_curves(metrics, rewards, source="eval"), key="fig_eval")


live_curves()
