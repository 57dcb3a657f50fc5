"""Pickers that remember the choice across pages: the chosen run(s), the run and sample select boxes.

The chosen run lives in `st.session_state` under plain (non-widget) keys, so it survives page switches
(Streamlit drops the state of widgets that a page does not draw). It changes only by a user's action: a
picker, a row of the Runs table, a link, or Start on the Launch page; a page that cannot show the chosen
run shows another without forgetting the choice.

Never imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import streamlit as st

from core.run.store import ACTIVE_STATES, RunInfo
from mrtpo_viz import loaders
from mrtpo_viz.ui.messages import STATE_ICONS, link_warning

RUN_KEY = "mrtpo_run"  # path of the run chosen on single-run pages
RUNS_KEY = "mrtpo_runs"  # paths of the runs overlaid on multi-run pages


def describe(info: RunInfo) -> str:
    """A run in pickers: state icon, name, method; the step count only for finished runs (an active run's step
    changes after the picker is drawn, so it is shown by the page's live part instead)."""
    head = f"{STATE_ICONS.get(info.state, '')} {loaders.run_label(info)} · {info.method or '?'}"
    if info.state in ACTIVE_STATES:
        return f"{head} · in progress"
    total = f"/{info.total_steps}" if info.total_steps else ""
    return f"{head} · step {info.step}{total}"


def set_run(path: str) -> None:
    """Make `path` the chosen run of every page (single-run pages and the multi-run overlays)."""
    st.session_state[RUN_KEY] = str(path)
    st.session_state[RUNS_KEY] = [str(path)]
    st.session_state[RUNS_KEY + "_cleared"] = False


def keep_choice(key: str, options: Sequence, default=None) -> None:
    """Before a keyed widget is drawn: make its state a valid option (`default`, else the first option)
    when it is missing or no longer offered. Widgets given a key this way take no index/default argument."""
    if st.session_state.get(key) not in options:
        st.session_state[key] = default if default in options else (options[0] if len(options) else None)


def drawn_for(key: str, owner) -> bool:
    """Remember that the select box `key` is drawn for `owner` (a run, or a run's step); True when that differs
    from the last time. Then the caller assigns the box's state again: a select box holds its value as the label
    shown, so a label that changed with the owner while the value stayed (sample 5's outcome marks, a variant's
    "(trained)") would stay stale in the browser until the state is set on the server."""
    mark = f"{key}__drawn_for"
    changed = st.session_state.get(mark) != owner
    st.session_state[mark] = owner
    return changed


def pick_run(runs: Sequence[RunInfo], label: str = "Run", where=None, key: str = "run_picker") -> RunInfo | None:
    """A select box over `runs` showing the chosen run (the first one when the chosen run is not offered here,
    without forgetting the choice); a pick by the user becomes the choice. None when there are no runs."""
    where = where or st
    if not runs:
        return None
    by_path = {str(r.path): r for r in runs}
    paths = list(by_path)
    current = st.session_state.get(RUN_KEY)
    st.session_state[key] = current if current in by_path else paths[0]  # the choice drives the widget
    choice = where.selectbox(label, paths, key=key, format_func=lambda p: describe(by_path[p]),
                             on_change=_pick_single, args=(key,))
    return by_path[choice]


def _pick_single(key: str) -> None:
    set_run(st.session_state[key])


def pick_runs(runs: Sequence[RunInfo], label: str = "Runs", where=None, default_count: int = 1,
              key: str = "runs_picker") -> list[RunInfo]:
    """A multiselect over `runs` (overlaid on one figure); defaults to the single-run choice or the newest."""
    where = where or st
    if not runs:
        return []
    by_path = {str(r.path): r for r in runs}
    chosen = [p for p in st.session_state.get(RUNS_KEY, []) if p in by_path]
    if not chosen and not st.session_state.get(RUNS_KEY + "_cleared"):
        single = st.session_state.get(RUN_KEY)
        chosen = [single] if single in by_path else list(by_path)[:default_count]
    st.session_state[key] = chosen
    picked = where.multiselect(label, list(by_path), key=key, format_func=lambda p: describe(by_path[p]),
                               on_change=_store_runs, args=(key,))
    return [by_path[p] for p in picked]


def _store_runs(key: str) -> None:
    picked = list(st.session_state[key])
    st.session_state[RUNS_KEY] = picked
    st.session_state[RUNS_KEY + "_cleared"] = not picked  # an emptied selection stays empty
    if len(picked) == 1:
        st.session_state[RUN_KEY] = picked[0]


def sample_filter_values(page: str) -> tuple[str | None, str | None, str]:
    """(prompt key or None for any, reward, outcome) as chosen in `pick_sample`'s filters."""
    prompt_key = st.session_state.get(f"{page}_prompt", "any")
    return (None if prompt_key in (None, "any") else prompt_key, st.session_state.get(f"{page}_outcome_reward"),
            st.session_state.get(f"{page}_outcome", "any"))


def _outcome_reward_chosen(key: str) -> None:
    st.session_state[key + "_chosen"] = True


def pick_sample(df, present: Sequence[str], page: str, target: Mapping[str, list[str]], owner=None) -> int | None:
    """Filters (prompt, outcome of a reward) and a sample select box whose entries carry one outcome mark per
    reward (✓/✗/·); the link's `sample` when valid. None (with a note) when no sample matches. `owner`: the
    (run, step) the samples belong to; when it changes the box shows the new labels (`drawn_for`)."""
    from mrtpo_viz import analysis, opening

    f1, f2, f3, f4 = st.columns([1, 1.5, 1, 2.5])
    prompt_keys = ["any"] + sorted(df["prompt_key"].astype(str).unique().tolist())
    keep_choice(f"{page}_prompt", prompt_keys)
    reward_key, key = f"{page}_outcome_reward", f"{page}_sample"
    if not st.session_state.get(reward_key + "_chosen") and st.session_state.get(f"{page}_outcome", "any") == "any":
        # Until the user picks one, the filter's reward is one the likely shown sample's prompt states (the one the
        # view opens on); with "any" outcome it filters nothing, so following the sample moves no sample.
        likely = analysis.filter_samples(df, sample_filter_values(page)[0])
        wanted = target.get("sample", [""])[0]
        guess = (int(wanted) if wanted.isdigit() and int(wanted) in likely
                 else st.session_state.get(key) if st.session_state.get(key) in likely else likely[0] if likely else None)
        order = opening.opening_order(df, guess, present) if guess is not None else []
        if order:
            st.session_state[reward_key] = order[0]
    keep_choice(reward_key, list(present))
    f1.selectbox("Prompt", prompt_keys, key=f"{page}_prompt")
    f2.selectbox("Outcome of reward", present, key=reward_key, on_change=_outcome_reward_chosen, args=(reward_key,))
    f3.selectbox("Outcome", analysis.OUTCOMES, key=f"{page}_outcome")
    samples = analysis.filter_samples(df, *sample_filter_values(page))
    if not samples:
        st.info("No sample of this step matches the filters.")
        return None
    scores = analysis.sample_scores(df)
    prompt_of = dict(zip(df["sample"].tolist(), df["prompt_key"].astype(str).tolist(), strict=True))
    if "sample" in target:
        wanted = target["sample"][0]
        if wanted.isdigit() and int(wanted) in samples:
            st.session_state[key] = int(wanted)
        else:
            link_warning("sample", wanted, f"sample {samples[0]}")
    keep_choice(key, samples)
    if drawn_for(key, owner):
        st.session_state[key] = st.session_state[key]
    return f4.selectbox(
        "Sample (✓/✗/· per reward)", samples, key=key,
        format_func=lambda i: f"sample {i} · {prompt_of.get(i, '?')} · "
                              f"{analysis.outcome_marks(scores.get(i, {}), present)}",
        help="✓ satisfied, ✗ violated, · not stated by the prompt (one mark per reward, in the order of the "
             "Outcome of reward list); ← / → : previous / next sample")
