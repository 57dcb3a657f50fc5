"""Token credit: one sampled response with each token coloured by a reward's credit (or one row per
reward plus the total advantage), the verifiers' inspected spans drawn under the tokens, the sample's
rewards, and downloads of the sample's or the step's credit map.

Opened from the Verifier debugger with query parameters (run, step, sample, reward) or the
`credit_target` session entry.
"""

from __future__ import annotations

import streamlit as st

from mrtpo_viz import analysis, heatmap, loaders, ui

TARGET_KEY = "credit_target"

st.title("Token credit")
runs = ui.page_runs(with_credit=True)

# A target set by another page (session state) or a link (query params) preselects run/step/sample/reward.
target = {**ui.consume_query_target(), **(st.session_state.pop(TARGET_KEY, None) or {})}
if ui.find_run(runs, target.get("run")):
    st.session_state[ui.RUN_KEY] = ui.find_run(runs, target.get("run"))

top = st.columns([3, 1])
run = ui.pick_run(runs, where=top[0])
path = str(run.path)
rewards = loaders.reward_names(path)
steps = loaders.credit_steps(path)
if str(target.get("step", "")).isdigit():
    st.session_state["credit_step"] = int(target["step"])
ui.keep_choice("credit_step", steps, steps[-1])
step = top[1].selectbox("Step", steps, key="credit_step")
df, warnings = loaders.credit(path, step)
ui.show_warnings(loaders.run_label(run), warnings)
if df.empty:
    st.warning("This step's credit map holds no tokens.")
    st.stop()
present = [r for r in rewards if r in set(df["reward"])] + [r for r in dict.fromkeys(df["reward"]) if r not in rewards]

f1, f2, f3, f4 = st.columns([1, 1.5, 1, 2.5])
prompt_keys = ["any"] + sorted(df["prompt_key"].unique().tolist())
prompt_key = f1.selectbox("Prompt", prompt_keys)
outcome_reward = f2.selectbox("Outcome of reward", present)
outcome = f3.selectbox("Outcome", analysis.OUTCOMES)
samples = analysis.filter_samples(df, None if prompt_key == "any" else prompt_key, outcome_reward, outcome)
if not samples:
    st.info("No sample of this step matches the filters.")
    st.stop()

scores = analysis.sample_scores(df)
prompt_of = dict(zip(df["sample"].tolist(), df["prompt_key"].astype(str).tolist(), strict=True))


def sample_label(i: int) -> str:
    row = scores.get(i, {})
    marks = "".join("·" if row.get(r) != row.get(r) or r not in row else ("✓" if row[r] >= 1 else "✗")
                    for r in present)
    return f"sample {i} · {prompt_of.get(i, '?')} · {marks}"


if str(target.get("sample", "")).isdigit():
    st.session_state["credit_sample"] = int(target["sample"])
ui.keep_choice("credit_sample", samples)
sample = f4.selectbox("Sample (✓/✗/· per reward)", samples, key="credit_sample", format_func=sample_label)
c1, c2, c3, c4, c5 = st.columns([1.6, 2, 1.2, 1, 1], vertical_alignment="bottom")
view = c1.radio("View", ["one reward", "one row per reward"])
options = [*present, heatmap.TOTAL_ROW]
if target.get("reward"):
    st.session_state["credit_color"] = target["reward"]
ui.keep_choice("credit_color", options)
color_by = c2.selectbox("Colour by", options, key="credit_color", disabled=view != "one reward")
fixed = c3.checkbox("Fixed scale", help="One colour scale for every sample of the step (its largest |value|), "
                    "so samples can be compared; off: each sample uses its own largest |value|")
c4.download_button("Step credit CSV", lambda: analysis.to_csv_bytes(df), f"{run.name}_step{step}_credit.csv",
                   "text/csv", on_click="ignore")
c5.download_button("Step credit Parquet", lambda: analysis.to_parquet_bytes(df), f"{run.name}_step{step}_credit.parquet",
                   "application/octet-stream", on_click="ignore")

sample_df = df[df["sample"] == sample]
mode = "single" if view == "one reward" else "rows"
scale = None
if fixed:
    if mode == "single" and color_by != heatmap.TOTAL_ROW:
        scale = heatmap.auto_scale(df.loc[df["reward"] == color_by, "credit"])
    elif mode == "single":
        scale = heatmap.auto_scale(df["token_adv"])
    else:
        scale = heatmap.auto_scale(list(df["credit"]) + list(df["token_adv"]))

st.html(heatmap.token_heatmap_html(sample_df, color_by if mode == "single" else None, mode=mode, scale=scale,
                                   reward_names=rewards))
st.caption("Hover a token for its credit, JS distance, routing weight and span membership per reward. "
           "Bars under tokens: each verifier's inspected spans, in the reward's colour.")

st.subheader("Rewards of this sample")
st.dataframe(analysis.sample_rewards_table(sample_df), hide_index=True, width="stretch",
             column_config={"credit_share_in_span": st.column_config.NumberColumn(format="%.2f")})
with st.expander("Response text"):
    st.code(sample_df["response"].iloc[0], language=None, wrap_lines=True)
d1, d2, _ = st.columns([1, 1, 3])
d1.download_button("Sample credit CSV", lambda: analysis.to_csv_bytes(sample_df),
                   f"{run.name}_step{step}_sample{sample}_credit.csv", "text/csv", on_click="ignore")
d2.download_button("Sample credit Parquet", lambda: analysis.to_parquet_bytes(sample_df),
                   f"{run.name}_step{step}_sample{sample}_credit.parquet", "application/octet-stream",
                   on_click="ignore")
