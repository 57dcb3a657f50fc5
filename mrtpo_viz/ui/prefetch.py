"""The browser's early load of the code the app's pages draw with: once per browser tab, what draws the figures
(the plotly.js bundle, `ui.charts`, or without it Streamlit's Plotly chart module, ~4.7 MB) and the module
of every other Streamlit element the pages use, loaded before the page that needs them is opened (measured with
`mrtpo bench app`; docs/results/app-speed.md).

Never imports torch.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from pathlib import Path

import streamlit as st

from mrtpo_viz.ui.charts import LOADER_JS, drawn_with_bundle
from mrtpo_viz.ui.warm import SETTLED_PATH

PREFETCHED_KEY = "_charts_prefetched"
JS_FOLDER = Path(st.__file__).parent / "static" / "static" / "js"
# The Streamlit elements the app's pages draw, by the first part of their browser module's file name in JS_FOLDER
# (`Multiselect.<hash>.js`). Streamlit loads an element's module the first time a page draws that element; an
# element missing here still works, it is only loaded late (tests/test_browser.py checks that no page of the app
# loads a module this list left out). Where the figures are drawn by the plotly.js bundle, the chart element is the
# bundle's custom component (`BidiComponent`) instead of `PlotlyChart`; the debugger's selectable table
# (`ui.pick_table`) is a custom component in either case.
APP_ELEMENTS = ("PlotlyChart", "BidiComponent", "Button", "Checkbox", "DataFrame", "DownloadButton", "Html", "Metric",
                "Multiselect", "NumberInput", "Radio", "Selectbox", "Slider", "StreamlitSyntaxHighlighter", "TextInput")
_IMPORT = re.compile(r'(?:from|import)\s*"\./([^"]+\.js)"')


@functools.cache
def chart_module() -> str | None:
    """The path (relative to the app's root URL) of the browser module Streamlit loads for its first Plotly
    chart (`static/js/PlotlyChart.<hash>.js`: ~4.7 MB of JavaScript that a browser takes seconds to compile
    and run), None when this Streamlit has no such file."""
    found = sorted(JS_FOLDER.glob("PlotlyChart.*.js"))
    return f"static/js/{found[0].name}" if found else None


def element_modules(folder: Path, elements: Sequence[str]) -> list[str]:
    """The file names in `folder` of the browser modules of `elements` (by name: `Slider` is `Slider.<hash>.js`)
    and of every module they import, transitively (the `from"./x.js"` and `import"./x.js"` of a built module),
    leaving out what `folder`'s `../../index.html` already preloads; each once, elements in their order, each
    followed by what it imports first. An element without a module in `folder` is left out."""
    index = folder.parent.parent / "index.html"
    preloaded = set(re.findall(r'static/js/([^"]+\.js)"', index.read_text())) if index.exists() else set()
    found: list[str] = []
    seen: set[str] = set()
    for name in elements:
        todo = [p.name for p in sorted(folder.glob(f"{name}.*.js"))[:1]]
        while todo:
            file = todo.pop(0)
            if file in seen or file in preloaded or not (folder / file).is_file():
                continue
            seen.add(file)
            found.append(file)
            todo += _imports(folder / file)
    return found


@functools.cache
def _imports(path: Path) -> tuple[str, ...]:
    """The modules a built module imports (`from"./x.js"`, `import"./x.js"`), read once per process: the chart
    module alone is 4.7 MB, and the server lists its imports for the chart pages and for `app_modules`."""
    return tuple(_IMPORT.findall(path.read_text(encoding="utf-8", errors="replace")))


def _urls(files: Sequence[str]) -> tuple[str, ...]:
    """Module file names of JS_FOLDER as paths relative to the app's root URL."""
    return tuple(f"static/js/{f}" for f in files)


def chart_element(bundled: bool | None = None) -> str:
    """The Streamlit element the figures are drawn in: the custom component of `ui.charts` where the plotly.js
    bundle draws them (`bundled`; by default, where this process's server serves it), else `PlotlyChart`."""
    if bundled is None:
        bundled = drawn_with_bundle() is not None
    return "BidiComponent" if bundled else "PlotlyChart"


def chart_modules(bundled: bool | None = None) -> tuple[str, ...]:
    """The chart element's module (`chart_element`) and every module it imports (`element_modules`), as paths
    relative to the app's root URL, the element's module first; () when this Streamlit has none."""
    return _element_urls((chart_element(bundled),))


def app_modules(bundled: bool | None = None) -> tuple[str, ...]:
    """The modules of APP_ELEMENTS in this Streamlit (`element_modules`, the chart element as `chart_element`
    says), as paths relative to the app's root URL, the chart element's module first."""
    element = chart_element(bundled)
    return _element_urls(tuple(element if e == "PlotlyChart" else e for e in APP_ELEMENTS))


@functools.cache
def _element_urls(elements: tuple[str, ...]) -> tuple[str, ...]:
    return _urls(element_modules(JS_FOLDER, elements))


# Browser code for prefetch_charts: `at_once` starts loading what draws the figures immediately (the plotly.js bundle,
# `ui.charts.LOADER_JS`, else Streamlit's chart module); then, once the page has settled (its script run finished,
# every chart drawn, and checks 100 ms apart found no file fetched and nothing added to or removed from the page for
# QUIET ms: a long task, such as running the chart code, counts as one check; or MAX ms passed), it tells the server
# so (a POST to SETTLED_PATH: `ui.warm` starts) and, at an idle moment, loads the bundle and imports every module of
# the list (the chart code, already loaded or on its way, among them). When all are loaded, <html> gets
# data-mrtpo-prefetched="done".
_PREFETCH_JS = """<script data-prefetch="%(when)s">(() => {
  %(loader)s
  const modules = %(modules)s, bundle = %(bundle)s, module = %(chart)s;
  const load = (m) => import(new URL(m, document.baseURI).href).catch(() => {});
  const loadCharts = () => bundle ? window.__mrtpoLoadPlotly(bundle).catch(() => {}) : module ? load(module) : null;
  if (%(at_once)s) loadCharts();
  const all = () => Promise.all([loadCharts(), ...modules.map(load)]).then(() => {
    document.documentElement.setAttribute('data-mrtpo-prefetched', 'done'); });
  const t0 = performance.now();
  let changed = true, calm = 0;  // calm: checks in a row, 100 ms apart, that found nothing fetched or drawn since
  try { new PerformanceObserver(() => { changed = true; }).observe({type: 'resource'}); } catch (e) {}
  new MutationObserver(() => { changed = true; }).observe(document.body, {childList: true, subtree: true});
  const wait = () => {
    const app = document.querySelector('[data-testid="stApp"]');
    const done = app && app.getAttribute('data-test-script-state') === 'notRunning';
    const drawn = [...document.querySelectorAll(%(chart_selector)s)].every((c) => c.querySelector(%(drawn_selector)s));
    calm = done && !changed && drawn ? calm + 1 : 0;
    changed = false;
    if (calm * 100 >= %(quiet)d || performance.now() - t0 >= %(max)d) {
      // the page is drawn: the server may now run its warm sessions (`ui.warm`) without slowing it
      fetch(new URL(%(settled)s, document.baseURI).href, {method: 'POST', keepalive: true}).catch(() => {});
      (window.requestIdleCallback || setTimeout)(all);
    } else setTimeout(wait, 100);
  };
  wait();
})();</script>"""
# A chart on a page, in either element, or the app's other custom component (`ui.pick_table`); each is drawn once it
# holds what DRAWN_SELECTOR finds (Plotly's <svg class="main-svg">, or the table).
CHART_SELECTOR = '[data-testid="stPlotlyChart"], [data-testid^="stBidiComponent"]'
DRAWN_SELECTOR = ".main-svg, .mrtpo-pick table"  # looked for inside each element of CHART_SELECTOR
PREFETCH_QUIET_MS = 500  # a page counts as settled when no file was fetched and nothing drawn for this long after its
# script ran
PREFETCH_MAX_MS = 8000


def prefetch_charts(at_once: bool = False) -> None:
    """Once per session (a browser tab): make the browser load the modules of every element the app's pages draw
    (`app_modules`), so that the next page the user opens only draws. Streamlit loads an element's module when a
    page first draws it, from the same Python process that is running that page's script: on a fresh server a
    page waited 0.1-0.45 s for each of them (`mrtpo bench app`, docs/results/app-speed.md). On a page that draws
    charts (`at_once`) the load of the chart code (the plotly.js bundle, `ui.charts`, or Streamlit's chart module)
    starts at once, overlapping the page's script run, before its first chart arrives. The rest waits until the
    page has settled, then for an idle moment: the chart code (Streamlit's module: ~4.7 MB, about a second of the
    browser's main thread to run) would otherwise compete with what the page itself loads and draws (the Runs
    table's grid). Streamlit imports the same URLs later and gets the modules already
    loaded; a browser that cannot load one loads it when the page needs it."""
    modules = app_modules()
    if not modules or st.session_state.get(PREFETCHED_KEY):
        return
    st.session_state[PREFETCHED_KEY] = True
    bundle = drawn_with_bundle()
    st.sidebar.html(_PREFETCH_JS % {
        "loader": LOADER_JS if bundle else "", "modules": json.dumps(list(modules)),
        "bundle": json.dumps(bundle[1] if bundle else None), "chart": json.dumps(None if bundle else chart_module()),
        "at_once": "true" if at_once else "false", "settled": json.dumps(SETTLED_PATH),
        "when": "at-once" if at_once else "settled", "chart_selector": json.dumps(CHART_SELECTOR),
        "drawn_selector": json.dumps(DRAWN_SELECTOR), "quiet": PREFETCH_QUIET_MS, "max": PREFETCH_MAX_MS},
        unsafe_allow_javascript=True)
