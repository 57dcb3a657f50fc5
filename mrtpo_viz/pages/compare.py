"""Compare runs: reward curves of the chosen runs overlaid and the steps each needed to reach given
all-satisfied rates."""

from __future__ import annotations

import streamlit as st

from mrtpo_viz import analysis, figures, loaders, ui

st.title("Compare runs")
runs = ui.page_runs()
chosen = ui.pick_runs(runs, "Runs to compare (one dash style per run)", default_count=min(3, len(runs)))
if not chosen:
    st.info("Pick runs to compare.")
    st.stop()

metrics, rewards = {}, []
for r in chosen:
    df, warnings = loaders.metrics(r.path)
    ui.show_warnings(loaders.run_label(r), warnings)
    metrics[loaders.run_label(r)] = df
    rewards += [n for n in loaders.reward_names(r.path) if n not in rewards]

has_eval = any(any(c.startswith("eval/") for c in df.columns) for df in metrics.values())
c1, c2 = st.columns([3, 1])
shown = c1.multiselect("Rewards", [*rewards, "all satisfied"], default=[*rewards, "all satisfied"])
source = c2.radio("Scored on", ["train", "eval"], horizontal=True, disabled=not has_eval,
                  format_func=lambda s: {"train": "training samples", "eval": "held-out eval"}[s],
                  help="held-out eval: sampled responses to the eval prompt set, logged at checkpoint steps")
series, colors = figures.reward_series([n for n in rewards if n in shown], source)
if "all satisfied" not in shown:
    series = {k: v for k, v in series.items() if not k.endswith("all_satisfied")}
    colors = {k: v for k, v in colors.items() if not k.endswith("all_satisfied")}
st.plotly_chart(figures.metric_lines(metrics, series, "Rewards of the chosen runs", "reward", colors, height=420),
                key="fig_compare")

st.subheader("Steps to reach an all-satisfied rate")
st.caption("On the source chosen above (training samples, or the held-out eval at checkpoint steps).")
text = st.text_input("Targets (comma-separated rates in [0, 1])", "0.25, 0.5, 0.75")
try:
    targets = sorted({float(x) for x in text.replace(";", ",").split(",") if x.strip()})
    if any(not 0 <= t <= 1 for t in targets):
        raise ValueError("every target must lie in [0, 1]")
except ValueError as exc:
    st.error(f"Targets: {exc}")
    targets = []
if targets:
    key = "reward/all_satisfied" if source == "train" else "eval/all_satisfied"
    table = analysis.steps_to_reach(metrics, targets, key=key)
    table.insert(1, "method", [r.method for r in chosen])
    st.dataframe(table, hide_index=True, width="stretch")
    st.caption("None: the run never reached that rate in its logged steps.")
