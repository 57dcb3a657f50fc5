"""JS divergence: per-position JS distance of each reward on one sample (the token text on the axis, verifier
spans shaded; rewards the sample's prompt does not state have no panel), the in-span vs out-of-span
distributions of a step, and JS and span agreement over training. The state (run, step, sample) is the
page's URL."""

from __future__ import annotations

import streamlit as st

from mrtpo_viz import analysis, figures, loaders, ui

PAGE = "js"
STEP_KEY = "js_step"

st.title("JS divergence")
runs = ui.page_runs(with_credit=True, mrtpo_first=True)  # only MRTPO runs have JS distances
target = ui.link_target(PAGE, ("run", "step", "sample"))
if target:
    ui.apply_run_link(runs, target)

c1, c2 = st.columns([3, 1])
run = ui.pick_run(runs, where=c1)
path = str(run.path)
rewards = loaders.reward_names(path)
cfg, _ = loaders.config(path)
if cfg.get("method") in ("grpo", "gdpo"):
    st.info(f"This is a {cfg['method'].upper()} run: it does no contrastive replay, so it has no JS distances. "
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
df, warnings = loaders.credit(path, step)
ui.show_warnings(loaders.run_label(run), warnings)
if df.empty:
    st.warning("This step's credit map holds no tokens.")
    st.stop()
computed, skipped = analysis.replay_coverage(df)
if skipped:
    st.caption(f"Replay computed JS for {computed} of the {computed + skipped} (sample, reward) pairs of this step. "
               f"The other {skipped} had a group advantage of 0 (every sample of the group scored the same), so "
               "their JS could not change any credit and was not computed (`--replay-pairs all` computes them).")
present = [r for r in rewards if r in set(df["reward"])] + [r for r in dict.fromkeys(df["reward"]) if r not in rewards]
sample = ui.pick_sample(df, present, PAGE, target)
ui.write_link(PAGE, {"run": loaders.run_label(run), "step": step, "sample": sample})
if sample is None:
    st.stop()
sample_df = df[df["sample"] == sample]

st.plotly_chart(figures.js_positions_figure(sample_df, rewards), key="fig_js_positions")
unstated = [r for r in present if r not in analysis.stated_rewards(analysis.sample_scores(sample_df).get(sample, {}),
                                                                    present)]
if unstated:
    st.caption("No panel for " + ", ".join(unstated) + ": this sample's prompt does not state "
               + ("it." if len(unstated) == 1 else "them."))
with st.expander("Response text of this sample"):
    st.code(sample_df["response"].iloc[0], language=None, wrap_lines=True)

left, right = st.columns(2)
left.plotly_chart(figures.js_in_out_figure(df, rewards), key="fig_js_inout")
metrics, mwarn = loaders.metrics(path)
ui.show_warnings(loaders.run_label(run), mwarn)
mm = {loaders.run_label(run): metrics}
right.plotly_chart(figures.per_reward_lines(mm, rewards, "js/{name}/mean", "Mean JS distance over training", "JS"),
                   key="fig_js_mean")
left, right = st.columns(2)
left.plotly_chart(figures.per_reward_lines(mm, rewards, "js/{name}/max", "Max JS distance over training", "JS"),
                  key="fig_js_max")
right.plotly_chart(figures.per_reward_lines(mm, rewards, "span/{name}/mass_in",
                                            "Span agreement: routing mass inside spans", "share"), key="fig_mass")
left, _ = st.columns(2)
left.plotly_chart(figures.metric_lines(mm, {"replay/pass_share": "contrastive passes run"},
                                       "Share of (sample, reward) pairs replayed", "share"), key="fig_pass_share")
st.caption("Mean JS distance of this step's tokens inside and outside each verifier's spans:")
st.dataframe(analysis.js_in_out_table(df), hide_index=True, width="stretch")
