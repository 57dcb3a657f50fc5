"""JS divergence: per-position JS distance of each reward on one sample (the token text on the axis, verifier
spans shaded; rewards the sample's prompt does not state have no panel), the in-span vs out-of-span
distributions of a step, and JS and span agreement over training: three tabs, of which only the open one is built
and drawn (`ui.view_tabs`). The state (run, step, sample, view) is the page's URL. The selectors and the step's
distributions come from the step's index and distance summary (`loaders.credit_index`, `loaders.credit_summary`);
only the shown sample's tokens are read."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from core.run.store import credit_path
from mrtpo_viz import analysis, figures, loaders, opening, ui

PAGE = "js"
STEP_KEY = "js_step"

st.title("JS divergence")
runs = ui.page_runs(with_credit=True, mrtpo_first=True, charts=True)  # only MRTPO runs have JS distances
target = ui.link_target(PAGE, ("run", "step", "sample", "view"))
VIEWS = {"sample": "This sample: JS per position", "step": "This step: in vs out of spans",
         "training": "Over training"}
if target:
    ui.apply_run_link(runs, target)

c1, c2 = st.columns([3, 1])
run = ui.pick_run(runs, where=c1)
path = str(run.path)
rewards = loaders.reward_names(path)
cfg, _ = loaders.config(path)
if cfg.get("method") in ("grpo", "gdpo"):
    st.info(f"This is a {ui.plain(str(cfg['method']).upper())} run: it does no contrastive replay, so it has no JS distances. "
            "Pick an MRTPO run.")
    ui.write_link(PAGE, {"run": loaders.run_label(run)})
    st.stop()
steps = loaders.credit_steps(path)
if not steps:
    st.info(f"**{run.name}** has no credit map yet: its first step is not written.")
    ui.rerun_when(lambda: bool(loaders.credit_steps(path)), active=run.state in ("starting", "running"))
    st.stop()
if "step" in target:
    wanted = target["step"][0]
    if wanted.isdigit() and int(wanted) in steps:
        st.session_state[STEP_KEY] = int(wanted)
    else:
        ui.link_warning("step", wanted, f"step {steps[-1]} (the latest)")
        st.session_state[STEP_KEY] = steps[-1]
if st.session_state.get(STEP_KEY + "_run") != path:  # another run: its latest step
    st.session_state[STEP_KEY + "_run"] = path
    if "step" not in target:
        st.session_state[STEP_KEY] = steps[-1]
ui.keep_choice(STEP_KEY, steps, steps[-1])
step = c2.selectbox("Step", steps, key=STEP_KEY)
# The step's index and distance summary (the file's footer) draw the selectors and the step-wide plots; only the
# shown sample's token rows are read.
index, warnings = loaders.credit_index(path, step)
ui.show_warnings(loaders.run_label(run), warnings)
if index.empty:
    st.warning("This step's credit map holds no tokens.")
    st.stop()
computed, skipped = analysis.replay_coverage_from_index(index)
if skipped:
    st.caption(f"Replay computed JS for {computed} of the {computed + skipped} (sample, reward) pairs of this step. "
               f"The other {skipped} had a group advantage of 0 (every sample of the group scored the same), so "
               "their JS could not change any credit and was not computed (`--replay-pairs all` computes them).")
present = [r for r in rewards if r in set(index["reward"])] + [r for r in dict.fromkeys(index["reward"])
                                                                 if r not in rewards]
sample = ui.pick_sample(index, present, PAGE, target, owner=(path, step))
if sample is None:
    ui.write_link(PAGE, {"run": loaders.run_label(run), "step": step, "sample": sample})
    st.stop()
sample_df, variant = ui.shown_sample(path, step, sample, loaders.run_label(run), cfg, present, PAGE)
view, tab = ui.view_tabs(PAGE, VIEWS, target)
ui.write_link(PAGE, {"run": loaders.run_label(run), "step": step, "sample": sample,
                     "view": None if view == "sample" else view})
recomputed = "relevance" in sample_df.columns
credit_key = (path, step, loaders.file_key(credit_path(Path(path), step)), tuple(rewards), variant)
# Under a recomputed variant the panels show its relevance (what routing used) in place of the stored d.
shown_df = sample_df.assign(distance=sample_df["relevance"]) if recomputed else sample_df
if view == "sample":
    with tab:
        order = opening.opening_order(index, sample, present)  # the rewards that acted on the sample on top
        ui.chart(ui.cached_figure(("js_positions", *credit_key, sample, tuple(order)),
                                  lambda: figures.js_positions_figure(shown_df, rewards, order=order)),
                 key="fig_js_positions")
        for r, why in opening.zero_credit_notes(index, sample, order, show=ui.plain).items():
            st.caption(f"The credit of {ui.plain(r)} on this sample is zero: {why}.")
        if recomputed:
            st.caption(f"Per-position values: the relevance under {ui.plain(variant)}, recomputed from the stored d.")
        stated = analysis.stated_rewards(analysis.sample_scores(sample_df).get(sample, {}), present)
        unstated = [r for r in present if r not in stated]
        if unstated:
            st.caption("No panel for " + ", ".join(ui.plain(u) for u in unstated) + ": this sample's prompt does not "
                       "state " + ("it." if len(unstated) == 1 else "them."))
        with st.expander("Response text of this sample"):
            ui.response_text(sample_df["response"].iloc[0])
        ui.specificity_panel(sample_df, present)
elif view == "step":
    with tab:
        summary, _ = loaders.credit_summary(path, step)
        ui.chart(ui.cached_figure(("js_in_out", *credit_key),
                                  lambda: figures.js_in_out_summary_figure(summary, rewards)),
                 key="fig_js_inout")
        # under the figure, across the page: in half of it the table's six columns were cut at the third
        st.caption("Mean JS distance of this step's tokens inside and outside each verifier's spans:")
        ui.html_table(analysis.js_in_out_table_from_summary(summary, rewards), {"ratio": ".2f"})
else:
    with tab:
        metrics, mwarn = loaders.metrics(path)
        ui.show_warnings(loaders.run_label(run), mwarn)
        label = loaders.run_label(run)
        ui.chart(ui.cached_figure(("js_training", path, label, loaders.file_key(Path(path) / "metrics.jsonl"),
                                   tuple(rewards)),
                                  lambda: figures.for_display(figures.replay_training_figure({label: metrics}, rewards))),
                 key="fig_js_training")
