"""The Plotly chart module prefetch: once per browser tab, make the browser load the ~4.7 MB chart module
before the first chart page needs it (measured with `mrtpo bench app`; docs/results/app-speed.md).

Never imports torch.
"""

from __future__ import annotations

import functools
from pathlib import Path

import streamlit as st

PREFETCHED_KEY = "_charts_prefetched"


@functools.cache
def chart_module() -> str | None:
    """The path (relative to the app's root URL) of the browser module Streamlit loads for its first Plotly
    chart (`static/js/PlotlyChart.<hash>.js`: ~4.7 MB of JavaScript that a browser takes seconds to compile
    and run), None when this Streamlit has no such file."""
    folder = Path(st.__file__).parent / "static" / "static" / "js"
    found = sorted(folder.glob("PlotlyChart.*.js"))
    return f"static/js/{found[0].name}" if found else None


# Browser code for prefetch_charts: `at_once` imports the module immediately; otherwise it waits until the page has
# settled (its script run finished and no file fetched for QUIET ms, or MAX ms passed), then for an idle moment.
_PREFETCH_JS = """<script data-prefetch="%(when)s">(() => {
  const load = () => import(new URL(%(module)s, document.baseURI).href).catch(() => {});
  if (%(at_once)s) return load();
  const t0 = performance.now();
  let last = t0;
  try { new PerformanceObserver(() => { last = performance.now(); }).observe({type: 'resource'}); } catch (e) {}
  const wait = () => {
    const app = document.querySelector('[data-testid="stApp"]');
    const done = app && app.getAttribute('data-test-script-state') === 'notRunning';
    const now = performance.now();
    if ((done && now - last >= %(quiet)d) || now - t0 >= %(max)d) (window.requestIdleCallback || setTimeout)(load);
    else setTimeout(wait, 100);
  };
  wait();
})();</script>"""
PREFETCH_QUIET_MS = 500  # a page counts as settled when no file was fetched for this long after its script ran
PREFETCH_MAX_MS = 8000


def prefetch_charts(at_once: bool = False) -> None:
    """Once per session (a browser tab): make the browser load the Plotly chart module, so that the first chart
    page the user opens from here does not wait for it. On a page that draws charts (`at_once`) the import starts
    at once, overlapping the page's script run, before its first chart arrives. On other pages it waits until the
    page has settled, then for an idle moment: the module (~4.7 MB, about a second of the browser's main thread to
    run) would otherwise compete with what that page itself loads and draws (the Runs table's grid, measured with
    `mrtpo bench app`). Streamlit imports the same URL later and gets the module already loaded; a browser that
    cannot load it just loads it when a chart needs it."""
    module = chart_module()
    if module is None or st.session_state.get(PREFETCHED_KEY):
        return
    st.session_state[PREFETCHED_KEY] = True
    st.sidebar.html(_PREFETCH_JS % {"module": repr(module), "at_once": "true" if at_once else "false",
                                    "when": "at-once" if at_once else "settled",
                                    "quiet": PREFETCH_QUIET_MS, "max": PREFETCH_MAX_MS},
                    unsafe_allow_javascript=True)
