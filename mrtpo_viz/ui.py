"""Streamlit helpers shared by the pages: run pickers that remember the choice across pages, warnings.

The chosen run lives in `st.session_state` under plain (non-widget) keys, so it survives page
switches (Streamlit drops the state of widgets that a page does not draw). Links into a page carry
query parameters (`run` as a run name or `sample/<name>`), read once by `consume_query_target`.

Never imports torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import streamlit as st

from core.run.store import RunInfo
from mrtpo_viz import launcher, loaders

RUN_KEY = "mrtpo_run"  # path of the run chosen on single-run pages
RUNS_KEY = "mrtpo_runs"  # paths of the runs overlaid on multi-run pages
LAUNCHED_KEY = "launched_runs"  # paths of runs started from this session (Launch page), newest last

# Plain symbols (present in every font, unlike emoji): active, done, stopped, broken.
STATE_ICONS = {"running": "▶", "starting": "…", "completed": "✓", "stopped": "■", "failed": "✗", "crashed": "✗",
               "unknown": "?"}


def _describe(info: RunInfo) -> str:
    total = f"/{info.total_steps}" if info.total_steps else ""
    return f"{STATE_ICONS.get(info.state, '')} {loaders.run_label(info)} · {info.method or '?'} · step {info.step}{total}"


def find_run(runs: Sequence[RunInfo], wanted: str | None) -> str | None:
    """Path of the run named `wanted` (its name, `sample/<name>` label or path), None when absent."""
    if not wanted:
        return None
    for r in runs:
        if wanted in (r.name, loaders.run_label(r), str(r.path)):
            return str(r.path)
    return None


def consume_query_target(keys: Sequence[str] = ("run", "step", "sample", "reward")) -> dict[str, str]:
    """The given query parameters (from a link such as `credit?run=x&step=3`), removed from the URL once read,
    so that later choices on the page are not overridden by the link."""
    target = {k: st.query_params[k] for k in keys if k in st.query_params}
    for k in target:
        del st.query_params[k]
    return target


def _store_choice(widget_key: str, store_key: str) -> None:
    st.session_state[store_key] = st.session_state[widget_key]


def keep_choice(key: str, options: Sequence, default=None) -> None:
    """Before a keyed widget is drawn: make its state a valid option (`default`, else the first option)
    when it is missing or no longer offered. Widgets given a key this way take no index/default argument."""
    if st.session_state.get(key) not in options:
        st.session_state[key] = default if default in options else (options[0] if len(options) else None)


def pick_run(runs: Sequence[RunInfo], label: str = "Run", where=None, key: str = "run_picker") -> RunInfo | None:
    """A select box over `runs`; remembers the choice in session state; None when there are no runs."""
    where = where or st
    if not runs:
        return None
    by_path = {str(r.path): r for r in runs}
    paths = list(by_path)
    current = st.session_state.get(RUN_KEY)
    if current not in by_path:
        current = paths[0]
    st.session_state[key] = current  # the stored choice drives the widget (changed only by its callback)
    choice = where.selectbox(label, paths, key=key, format_func=lambda p: _describe(by_path[p]),
                             on_change=_store_choice, args=(key, RUN_KEY))
    st.session_state[RUN_KEY] = choice
    return by_path[choice]


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
    picked = where.multiselect(label, list(by_path), key=key, format_func=lambda p: _describe(by_path[p]),
                               on_change=_store_runs, args=(key,))
    st.session_state[RUNS_KEY] = list(picked)
    if len(picked) == 1:
        st.session_state[RUN_KEY] = picked[0]
    return [by_path[p] for p in picked]


def _store_runs(key: str) -> None:
    picked = list(st.session_state[key])
    st.session_state[RUNS_KEY] = picked
    st.session_state[RUNS_KEY + "_cleared"] = not picked  # an emptied selection stays empty


def show_warnings(label: str, warnings: Sequence[str]) -> None:
    """One compact warning box per run with problems (corrupt or half-written files)."""
    if warnings:
        st.warning(f"**{label}**: " + "; ".join(dict.fromkeys(warnings)))


def state_badge(state: str) -> str:
    return f"{STATE_ICONS.get(state, '')} {state}"


def no_runs_message() -> None:
    st.info("No runs yet. Start one on the **Launch** page, or run `mrtpo train` in a terminal "
            "(runs go to `$MRTPO_RUNS_DIR`, default `./runs`).")


def page_runs(with_credit: bool = False, mrtpo_first: bool = False, stop: bool = True) -> list[RunInfo]:
    """How an inspect page opens: follow runs this session is starting, list the runs it can show
    (`with_credit`: only runs with credit maps; `mrtpo_first`: MRTPO runs, which route credit, first), and
    with none say so and stop the page (`stop=False`: return [] instead, for a page with other tabs)."""
    follow_pending_launches()
    runs = loaders.all_runs()
    if with_credit:
        runs = [r for r in runs if loaders.credit_steps(r.path)]
    if mrtpo_first:
        runs = sorted(runs, key=lambda r: r.method != "mrtpo")
    if not runs:
        no_runs_message()
        if stop:
            st.stop()
    return runs


def pending_launches() -> list[str]:
    """Runs this session started whose trainer has not written its run folder yet (still loading)."""
    return [p for p in st.session_state.get(LAUNCHED_KEY, [])
            if not (Path(p) / "status.json").exists() and launcher.run_state(p).get("state") == "starting"]


def follow_pending_launches() -> None:
    """While a run started here is still loading, say so and poll every 2 s; rerun the page once it appears."""
    pending = pending_launches()
    if not pending:
        return

    @st.fragment(run_every=2.0)
    def waiting() -> None:
        still = pending_launches()
        if len(still) < len(pending):
            st.rerun()
        names = ", ".join(f"**{Path(p).name}**" for p in still)
        st.info(f"Starting {names}: the trainer is loading the model; this page updates when the first status "
                "arrives.")

    waiting()
