"""JS divergence: per-position JS distance of each reward on one sample (verifier spans shaded), the
in-span vs out-of-span distributions of a step, and JS and span agreement over training."""

from __future__ import annotations

import streamlit as st

from mrtpo_viz import analysis, figures, loaders, ui

st.title("JS divergence")
runs = ui.page_runs(with_credit=True, mrtpo_first=True)  # only MRTPO runs have JS distances

c1, c2, c3 = st.columns([3, 1, 2])
run = ui.pick_run(runs, where=c1)
path = str(run.path)
rewards = loaders.reward_names(path)
cfg, _ = loaders.config(path)
if cfg.get("method") in ("grpo", "gdpo"):
    st.info(f"This is a {cfg['method'].upper()} run: it does no contrastive replay, so it has no JS distances. "
            "Pick an MRTPO run.")
    st.stop()
steps = loaders.credit_steps(path)
step = c2.selectbox("Step", steps, index=len(steps) - 1)
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
samples = sorted(df["sample"].unique().tolist())
keys = df.drop_duplicates("sample").set_index("sample")["prompt_key"]
sample = c3.selectbox("Sample", samples, format_func=lambda i: f"sample {i} · {keys.get(i, '?')}")
sample_df = df[df["sample"] == sample]

st.plotly_chart(figures.js_positions_figure(sample_df, rewards), key="fig_js_positions")
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
