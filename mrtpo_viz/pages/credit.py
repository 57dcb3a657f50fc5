"""Token credit: one sampled response with each token coloured by a reward's credit (or one row per
reward plus the total advantage), the verifiers' inspected spans drawn under the tokens, the sample's
rewards, and downloads of the sample's or the step's credit map. The selectors and the step-wide colour scale
come from the step's index (`loaders.credit_index`); only the shown sample's tokens are read (`loaders.credit_sample`).

The state (run, step, sample, reward) is the page's URL: a link such as `credit?run=x&step=3&sample=5`
opens that sample (the Verifier debugger links here), and a target the run does not have is named in a
warning. A run opens on its latest step; the arrow keys step through samples (shift: steps). While the
chosen run is active and the latest step is shown, the page follows new steps.
"""

from __future__ import annotations

import streamlit as st

from core.run.store import ACTIVE_STATES
from mrtpo_viz import analysis, heatmap, launcher, loaders, opening, ui

PAGE = "credit"
TARGET_KEY = "credit_target"  # a target set by another page in session state (run, step, sample, reward)
STEP_KEY, SAMPLE_KEY, COLOR_KEY = "credit_step", f"{PAGE}_sample", "credit_color"
COLOR_PREF = "credit_color_wanted"  # the reward the user chose to colour by (kept when a sample does not state it)
RUN_OF_STEP = "credit_step_run"  # the run the step choice belongs to (a new run starts at its latest step)
FOLLOW_KEY = "credit_follow"  # the latest step is shown: move to each new step of a live run

st.title("Token credit")
runs = ui.page_runs(with_credit=True)

# A target set by another page (session state) or a link (query params) preselects run/step/sample/reward.
target = {**ui.link_target(PAGE, ("run", "step", "sample", "reward")),
          **{k: [str(v)] for k, v in (st.session_state.pop(TARGET_KEY, None) or {}).items()}}
if target:
    ui.apply_run_link(runs, target)

top = st.columns([3, 1])
run = ui.pick_run(runs, where=top[0])
path = str(run.path)
rewards = loaders.reward_names(path)
steps = loaders.credit_steps(path)
state = launcher.run_state(path).get("state")
if not steps:
    st.info(f"**{run.name}** has no credit map yet: its first step is not written. This page updates when it is.")
    if state in ACTIVE_STATES:
        ui.show_startup(path, launcher.run_state(path))
    ui.write_link(PAGE, {"run": loaders.run_label(run)})
    ui.rerun_when(lambda: bool(loaders.credit_steps(path)), active=state in ACTIVE_STATES)
    st.stop()

run_switched = st.session_state.get(RUN_OF_STEP) != path
if run_switched:  # another run: open its latest step, and follow new ones
    st.session_state[RUN_OF_STEP] = path
    st.session_state[FOLLOW_KEY] = True
if "step" in target:
    wanted = target["step"][0]
    if wanted.isdigit() and int(wanted) in steps:
        st.session_state[STEP_KEY] = int(wanted)
        st.session_state[FOLLOW_KEY] = int(wanted) == steps[-1]
    else:
        ui.link_warning("step", wanted, f"step {steps[-1]} (the latest)")
        st.session_state[FOLLOW_KEY] = True
if st.session_state.get(FOLLOW_KEY):
    st.session_state[STEP_KEY] = steps[-1]
ui.keep_choice(STEP_KEY, steps, steps[-1])


def move(key: str, options: list, delta: int) -> None:
    """Button callback: the previous / next option of a select box (stops at the ends)."""
    i = options.index(st.session_state[key]) if st.session_state.get(key) in options else 0
    st.session_state[key] = options[max(0, min(len(options) - 1, i + delta))]
    if key == STEP_KEY:
        st.session_state[FOLLOW_KEY] = st.session_state[key] == options[-1]


def step_chosen(options: list) -> None:
    """The user picked a step: follow new steps only when it is the latest."""
    st.session_state[FOLLOW_KEY] = st.session_state[STEP_KEY] == options[-1]


def color_chosen() -> None:
    st.session_state[COLOR_PREF] = st.session_state[COLOR_KEY]


step = top[1].selectbox("Step", steps, key=STEP_KEY, on_change=step_chosen, args=(steps,),
                        help="shift + ← / → : previous / next step")
# The step's index (one row per (sample, reward), from the file's footer) draws the selectors and the step-wide
# colour scale; only the shown sample's token rows are read.
index, warnings = loaders.credit_index(path, step)
ui.show_warnings(loaders.run_label(run), warnings)
if index.empty:
    st.warning("This step's credit map holds no tokens.")
    st.stop()
present = [r for r in rewards if r in set(index["reward"])] + [r for r in dict.fromkeys(index["reward"])
                                                                 if r not in rewards]
cfg, _ = loaders.config(path)
chosen = st.session_state.get(COLOR_PREF)
link_reward = target.get("reward", [None])[0]
if link_reward in present:
    chosen = st.session_state[COLOR_PREF] = link_reward
if run_switched and "sample" not in target and chosen in present:
    # the user's reward stays when the new run has it: open a sample whose prompt states it
    stating = [s for s in analysis.filter_samples(index, None, chosen, "satisfied")
               + analysis.filter_samples(index, None, chosen, "violated")]
    if stating and st.session_state.get(SAMPLE_KEY) not in stating:
        st.session_state[SAMPLE_KEY] = min(stating)

sample = ui.pick_sample(index, present, PAGE, target, owner=(path, step))
if sample is None:
    st.stop()
samples = analysis.filter_samples(index, *ui.sample_filter_values(PAGE))
scores = analysis.sample_scores(index)
sample_df, variant = ui.shown_sample(path, step, sample, loaders.run_label(run), cfg, present, PAGE)

# Keyboard: the arrow keys move through samples, with shift through steps (Streamlit button shortcuts).
k = st.columns([1, 1, 1, 1, 2])
k[0].button("◀ sample", key="prev_sample", shortcut="left", on_click=move, args=(SAMPLE_KEY, samples, -1))
k[1].button("sample ▶", key="next_sample", shortcut="right", on_click=move, args=(SAMPLE_KEY, samples, 1))
k[2].button("◀ step", key="prev_step", shortcut="shift+left", on_click=move, args=(STEP_KEY, steps, -1))
k[3].button("step ▶", key="next_step", shortcut="shift+right", on_click=move, args=(STEP_KEY, steps, 1))

c1, c2, c3, c4, c5 = st.columns([1.6, 2, 1.2, 1, 1], vertical_alignment="bottom")
view = c1.radio("View", ["one reward", "one row per reward"])
own = analysis.stated_rewards(scores.get(sample, {}), present)
options = [*own, heatmap.TOTAL_ROW]  # a reward the prompt does not state has no credit: not offered
# Without a choice of the user's, open on a reward that acted on the sample (a failed one first), not a blank map.
opens_on = (opening.opening_order(index, sample, present) or [heatmap.TOTAL_ROW])[0]
warned = False
if "reward" in target:
    wanted = target["reward"][0]
    if wanted not in options:
        warned = True
        ui.link_warning("reward", wanted, f"{opens_on} (this sample's prompt does not state {wanted!r})"
                        if wanted in present else opens_on)
if chosen in options:
    st.session_state[COLOR_KEY] = chosen
else:
    st.session_state[COLOR_KEY] = opens_on
    if chosen and not warned:  # the user's reward is kept for the samples and runs that have it; say why not here
        st.info(f"Showing {ui.plain(opens_on)}: " + (
            f"sample {sample}'s prompt does not state {ui.plain(chosen)}, the reward you chose (it comes back on a "
            "sample that states it)." if chosen in present else
            f"this run has no reward {ui.plain(chosen)}, the one you chose (it comes back on a run that has it)."))
color_by = c2.selectbox("Colour by", options, key=COLOR_KEY, disabled=view != "one reward",
                        on_change=color_chosen,
                        help="the rewards this sample's prompt states, and the total advantage")
if view == "one reward":
    fixed = c3.checkbox("Fixed scale", help="One colour scale for every sample of the step (its largest |value|), "
                        "so samples can be compared; off: each sample uses its own largest |value|")
    per_row = False
else:
    per_row = c3.checkbox("Scale per row", help="each reward's row on its own colour scale (its largest |value|), "
                          "so a reward with small credit is not washed out; off: one scale for all rows")
    fixed = False if per_row else c3.checkbox("Fixed scale", key="credit_fixed_rows",
                                              help="one scale for every sample of the step")
# The whole step is read only when a download is asked for.
c4.download_button("Step credit CSV", lambda: analysis.to_csv_bytes(loaders.credit(path, step)[0]),
                   f"{run.name}_step{step}_credit.csv", "text/csv", on_click="ignore")
c5.download_button("Step credit Parquet", lambda: analysis.to_parquet_bytes(loaders.credit(path, step)[0]),
                   f"{run.name}_step{step}_credit.parquet", "application/octet-stream", on_click="ignore")

ui.write_link(PAGE, {"run": loaders.run_label(run), "step": step, "sample": sample,
                     "reward": chosen if chosen in present else None})

mode = "single" if view == "one reward" else "rows"
scale = None
if fixed:  # the step's largest |value| from the index (the stored values; a recomputed variant's may differ)
    if mode == "single" and color_by != heatmap.TOTAL_ROW:
        scale = heatmap.auto_scale(index.loc[index["reward"] == color_by, "abs_credit_max"])
    elif mode == "single":
        scale = heatmap.auto_scale(index["abs_token_adv_max"])
    else:
        scale = heatmap.auto_scale(list(index["abs_credit_max"]) + list(index["abs_token_adv_max"]))

st.html(heatmap.token_heatmap_html(sample_df, color_by if mode == "single" else None, mode=mode, scale=scale,
                                   reward_names=rewards, row_scale=per_row))
zero = opening.zero_credit_notes(index, sample, [color_by] if mode == "single" else own, show=ui.plain)
for r, why in zero.items():
    st.info(f"The credit of {ui.plain(r)} on this sample is zero: {why}.")
st.caption("Hover a token for its credit, JS distance, routing weight and span membership per reward; click it to "
           "keep them open and select them. Bars under tokens: each verifier's inspected spans, in the reward's "
           "colour.")
no_spans = [r for r in loaders.rewards_without_spans(path) if r in rewards]
if no_spans:
    st.caption(f"No spans reported by {', '.join(no_spans)}: their reward functions do not say which part of the "
               "response they read, so they have no bars and no span metrics (docs/TRL.md, \"Spans\").")

st.subheader("Rewards of this sample")
ui.html_table(analysis.sample_rewards_table(sample_df), {"credit_share_in_span": ".2f"})
ui.specificity_panel(sample_df, present)
with st.expander("Response text"):
    ui.response_text(sample_df["response"].iloc[0])
d1, d2, _ = st.columns([1, 1, 3])
d1.download_button("Sample credit CSV", lambda: analysis.to_csv_bytes(sample_df),
                   f"{run.name}_step{step}_sample{sample}_credit.csv", "text/csv", on_click="ignore")
d2.download_button("Sample credit Parquet", lambda: analysis.to_parquet_bytes(sample_df),
                   f"{run.name}_step{step}_sample{sample}_credit.parquet", "application/octet-stream",
                   on_click="ignore")

# Follow a live run: while the latest step is shown, open the next one when it is written.
if state in ACTIVE_STATES and st.session_state.get(FOLLOW_KEY):
    ui.rerun_when(lambda: loaders.credit_steps(path)[-1:] != [step])
