"""How an inspect page opens and stays live: the runs it can show (`ui.session`: this session's pending launches
first), the periodic check that reruns it when a run moves on, and the figure cache shared by all sessions.

Runs this app started (from any session or tab) are listed before their trainer has written the run folder
(state `starting`), and active runs come first, the most recently started first: a just-launched run is what the
inspect pages show, also in a tab opened after Start.

Never imports torch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import streamlit as st

from core.run.store import ACTIVE_STATES, RunInfo
from mrtpo_viz import launcher, loaders
from mrtpo_viz.ui.messages import no_runs_message, plain, show_startup, state_badge
from mrtpo_viz.ui.pickers import RUN_KEY
from mrtpo_viz.ui.prefetch import prefetch_charts
from mrtpo_viz.ui.session import session_runs

REFRESH_S = 2.0  # polling period of live views
# While a run is active, a live page's figures are redrawn at most this often (they change every step). 10 s let
# the figures trail the progress line by 13 steps on a 0.8 s/step run; 4 s keeps that near 5 (issue 26).
FIGURE_REFRESH_S = 4.0


def page_runs(with_credit: bool = False, mrtpo_first: bool = False, stop: bool = True,
              charts: bool = False) -> list[RunInfo]:
    """How an inspect page opens: list the runs it can show (`with_credit`: only runs with credit maps, plus the
    chosen run while it is active, whose first map is on its way; `mrtpo_first`: MRTPO runs, which route
    credit, first), and with none say so and stop the page (`stop=False`: return [] instead, for a page with
    other tabs). `charts`: the page draws Plotly charts (the browser starts loading their module at once)."""
    prefetch_charts(at_once=charts)
    runs = session_runs()
    if with_credit:
        chosen = st.session_state.get(RUN_KEY)
        runs = [r for r in runs if loaders.credit_steps(r.path)
                or (str(r.path) == chosen and r.state in ACTIVE_STATES)]
    if mrtpo_first:
        runs = sorted(runs, key=lambda r: r.method != "mrtpo")
    if not runs:
        no_runs_message()
        if stop:
            st.stop()
    return runs


def rerun_when(ready: Callable[[], bool], active: bool = True) -> None:
    """While `active`, check `ready()` every REFRESH_S seconds and rerun the page once it is true (e.g. a
    starting run wrote its first step). The check runs in a fragment: nothing else of the page is redrawn."""
    if not active:
        return

    @st.fragment(run_every=REFRESH_S)
    def watch() -> None:
        if ready():
            st.rerun()

    watch()


def follow_runs(paths: Sequence[str], labels: Mapping[str, str], page: str, extra: tuple = (),
                progress: bool = True) -> tuple:
    """Keep a page live while one of its runs is active, as Training curves, Compare runs and Runs are.

    Returns the page's `signature` now: each run's metrics file (`loaders.file_key`) and state, plus `extra` (the
    page's options); a page caches what it draws under it. While a run is active a fragment polls every REFRESH_S s
    and, with `progress`, shows each run's progress line (and its startup phase or crash); it asks for a run of the
    whole page when a run started or ended, or when the signature changed and the page was drawn
    FIGURE_REFRESH_S or more ago. Unchanged figures are never sent again, so watching takes little CPU from the
    trainer (`mrtpo bench live`)."""
    drawn_key = f"{page}_drawn"  # session state: (the signature drawn on the page, when it was drawn)

    def signature(states: Mapping[str, Mapping]) -> tuple:
        return (tuple((p, loaders.file_key(Path(p) / "metrics.jsonl"), states[p].get("state")) for p in paths),
                extra)

    states_now = {p: launcher.run_state(p) for p in paths}
    active_at_start = any(s.get("state") in ACTIVE_STATES for s in states_now.values())

    @st.fragment(run_every=REFRESH_S if active_at_start else None)
    def live() -> None:
        states = {p: launcher.run_state(p) for p in paths}
        active = any(s.get("state") in ACTIVE_STATES for s in states.values())
        if active != active_at_start:
            st.rerun()  # a run started or ended: redraw the page so polling starts or stops
        for p, s in states.items() if progress else ():
            step, total = s.get("step") or 0, s.get("total_steps")
            state = s.get("state", "unknown")
            if state in ACTIVE_STATES and total:
                st.progress(min(1.0, step / total), text=f"{labels[p]}: {state_badge(state)} · step {step}/{total}")
            if state in ACTIVE_STATES and not step:
                show_startup(p, s)
            elif state in ("crashed", "failed"):
                st.error(f"{plain(labels[p])}: {plain(state)}")
                st.code(str(s.get("error") or "no error text")[-4000:], language=None)
        if not active:
            return
        if progress:
            st.caption(f"Live: the progress is checked every {REFRESH_S:g} s; the figures are redrawn when a step "
                       f"has been written, at most every {FIGURE_REFRESH_S:g} s.")
        drawn_sig, drawn_at = st.session_state.get(drawn_key, (None, 0.0))
        if signature(states) != drawn_sig and time.monotonic() - drawn_at >= FIGURE_REFRESH_S:
            st.rerun()  # the whole page, so what it draws is drawn again

    # The signature is taken before the fragment's first run, so that run never asks for another.
    key = signature(states_now)
    st.session_state[drawn_key] = (key, time.monotonic())
    live()
    return key


@st.cache_resource(show_spinner=False, max_entries=256)
def cached_figure(key: tuple, _build: Callable[[], object]):
    """`_build()` once per `key`, shared by every session of the server: a figure costs tens of milliseconds
    to build and is only read once built. `key` must name everything the figure depends on (the page's name
    for it, the run's path and `loaders.file_key` of the files it reads, the step, sample and options)."""
    return _build()


def _norm(name: str) -> str:
    """A view name as a user may type it: case, spaces, dashes and the z of "optimization" do not matter."""
    return "".join(c for c in name.lower().replace("z", "s") if c.isalnum())


def resolve_view(wanted: str, views: Mapping[str, str], aliases: Mapping[str, str] | None = None) -> str | None:
    """The view id a link's `view=` value names: the id, the tab label, an alias (a word the page gives, e.g. a
    panel of the tab: `loss` -> `optimisation`), a word of one tab's label, or the start of one id; None when it
    names none (or more than one)."""
    key = _norm(wanted)
    if not key:
        return None
    for view, label in views.items():
        if key in (_norm(view), _norm(label)):
            return view
    named = {_norm(a): v for a, v in (aliases or {}).items()}
    if key in named:
        return named[key]
    words = {view: {_norm(w) for w in label.replace(",", " ").replace(":", " ").split()} for view, label in views.items()}
    for candidates in ([v for v, ws in words.items() if key in ws or key.rstrip("s") in ws or key + "s" in ws],
                       [v for v in views if _norm(v).startswith(key)]):
        if len(candidates) == 1:
            return candidates[0]
    return None


def view_tabs(page: str, views: Mapping[str, str], target: Mapping[str, list[str]],
              aliases: Mapping[str, str] | None = None) -> tuple[str, object]:
    """A page's views ({id: tab label}) as tabs of which only the open one runs: `st.tabs(on_change="rerun")`
    reruns the page on a tab switch and says which tab is open, so the page builds and sends the figures of
    that view alone (a closed tab's figures are neither built on the server nor drawn by Plotly in the browser,
    which is most of a page's time: docs/results/app-speed.md). A link's `view` parameter opens a view, named as
    `resolve_view` accepts (one it cannot tell: a warning listing the names, the first view). Returns (the open
    view's id, its tab, to draw into)."""
    key = f"{page}_view"
    labels = {label: view for view, label in views.items()}
    if "view" in target:
        wanted = target["view"][0]
        found = resolve_view(wanted, views, aliases)
        if found is not None:
            st.session_state[key] = views[found]
        else:
            names = ", ".join(f"{view} ({label})" for view, label in views.items())
            st.warning(f"The link asks for the view {plain(repr(wanted))}, which this page does not have; its views "
                       f"are {plain(names)} (`&view=` takes the name before the brackets). Showing "
                       f"{plain(next(iter(views.values())))} instead.")
    if st.session_state.get(key) not in labels:
        st.session_state.pop(key, None)
    tabs = st.tabs(list(views.values()), key=key, on_change="rerun")
    for tab, view in zip(tabs, views, strict=True):
        if tab.open:
            return view, tab
    return next(iter(views)), tabs[0]
