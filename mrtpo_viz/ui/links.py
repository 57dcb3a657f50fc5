"""Shareable links (query parameters): every inspect page writes its state (run, step, sample, reward, ...)
into the URL, so the address bar is a shareable link; a link opened later applies its parameters once, and
names a target that does not exist in a warning instead of falling back silently.

Never imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import streamlit as st

from core.run.store import RunInfo
from mrtpo_viz import loaders
from mrtpo_viz.ui.messages import plain
from mrtpo_viz.ui.pickers import RUN_KEY, RUNS_KEY

LINKS_KEY = "_links_written"  # page -> the query parameters the page wrote last (to tell a new link from its own)


def find_run(runs: Sequence[RunInfo], wanted: str | None) -> str | None:
    """Path of the run named `wanted` (its name, `sample/<name>` label or path), None when absent."""
    if not wanted:
        return None
    for r in runs:
        if wanted in (r.name, loaders.run_label(r), str(r.path)):
            return str(r.path)
    return None


def link_target(page: str, keys: Sequence[str]) -> dict[str, list[str]]:
    """The query parameters among `keys` that came with a link (not the ones this page wrote itself), as
    lists (a parameter may repeat: `?run=a&run=b`); {} when the URL holds only the page's own state."""
    current = {k: st.query_params.get_all(k) for k in keys if st.query_params.get_all(k)}
    if not current or current == st.session_state.get(LINKS_KEY, {}).get(page):
        return {}
    return current


def write_link(page: str, params: Mapping[str, object]) -> None:
    """Put the page's state into the URL (values None or [] are left out), so the address is a shareable link."""
    clean: dict[str, list[str]] = {}
    for key, value in params.items():
        values = value if isinstance(value, (list, tuple)) else [value]
        values = [str(v) for v in values if v is not None and str(v) != ""]
        if values:
            clean[key] = values
    st.session_state.setdefault(LINKS_KEY, {})[page] = clean
    current = {k: st.query_params.get_all(k) for k in st.query_params}
    if current != clean:
        st.query_params.from_dict({k: v if len(v) > 1 else v[0] for k, v in clean.items()})


def apply_run_link(runs: Sequence[RunInfo], target: Mapping[str, list[str]], multi: bool = False) -> None:
    """Choose the run(s) a link names; warn about names that match no run (the page then shows its usual
    choice)."""
    wanted = target.get("run", [])
    found = [p for p in (find_run(runs, w) for w in wanted) if p]
    missing = [w for w in wanted if not find_run(runs, w)]
    if missing:
        st.warning("The link names " + ", ".join(plain(repr(m)) for m in missing)
                   + (", which is not among the runs" if len(missing) == 1 else ", which are not among the runs")
                   + "; showing " + ("the chosen runs" if multi else "the chosen run") + " instead.")
    if found:
        st.session_state[RUN_KEY] = found[0]
        if multi:
            st.session_state[RUNS_KEY] = found
            st.session_state[RUNS_KEY + "_cleared"] = False
