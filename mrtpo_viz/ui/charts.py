"""The pages' Plotly figures, drawn by a plotly.js bundle of the app's own traces instead of Streamlit's chart element.

Streamlit's `st.plotly_chart` draws with its own browser module, the whole of plotly.js (~4.7 MB: maps, 3-D,
WebGL...), which a browser fetches, compiles and runs on every first visit of a chart page: the largest part of a
cold chart page (docs/results/app-speed.md). The app's figures only use three cartesian traces (scatter, bar, box):
`make` builds plotly.js's core with those (`mrtpo_viz.tools.plotly_bundle`, 1.2 MB, the same plotly.js version as the
installed plotly package ships) into the virtual environment, `$VENV/share/mrtpo/plotly.min.js`; where it cannot
build it, it fetches plotly.js's ready-made cartesian bundle (npm `plotly.js-cartesian-dist-min`, 1.5 MB, whose code
runs ~0.19 s longer at a page's start) instead. Either is used (`bundle_header`).

`chart(fig, key)` mounts a small custom component (`st.components.v2`, no iframe) whose browser code draws the
figure's JSON with `Plotly.react` in the same element on every rerun: a live figure keeps the user's zoom
(`layout.uirevision`) and is not drawn anew. The bundle is served by the app's server (`mrtpo_viz.server.serve`,
`BUNDLE_ROUTE`), fetched with the chart page's own files and run as soon as the page's script starts. The figure
gets Streamlit's look, from the theme's CSS variables (`--st-text-color`, ...), in light and dark; the placeholder
colour `figures.FOREGROUND` (which `st.plotly_chart`'s theme also replaces) becomes the theme's text colour.

Without a bundle (npm missing at set-up, another plotly.js version, or `MRTPO_PLOTLY_JS=off`) the figures are
drawn by `st.plotly_chart`, as before. Never imports torch.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
from pathlib import Path

import streamlit as st

from mrtpo_viz.figures import FOREGROUND

BUNDLE_FILE = "plotly.min.js"
BUNDLE_ENV = "MRTPO_PLOTLY_JS"  # a bundle's path, or `off` for Streamlit's chart element
# The bundle's URL path under the app's root (served by `mrtpo_viz.server.serve.ChartPagePreload`); its kind and version are
# in it, so that a browser may keep the file for good.
BUNDLE_ROUTE = "_mrtpo/plotly-{kind}-{version}.min.js"
# A bundle's header comment: "plotly.js (<kind>...) v<version>", as plotly.js writes its cartesian bundle's ("cartesian
# - minified") and `mrtpo_viz.tools.plotly_bundle` the one it builds ("mrtpo: scatter, bar, box - minified").
_HEADER = re.compile(rb"plotly\.js \((cartesian|mrtpo)[^)]*\) v(\d+\.\d+\.\d+)")


def bundle_path() -> Path | None:
    """Where the bundle is looked for: `$MRTPO_PLOTLY_JS`, else `<sys.prefix>/share/mrtpo/` (the
    virtual environment `make` installs it in); None when `MRTPO_PLOTLY_JS=off`."""
    chosen = os.environ.get(BUNDLE_ENV, "").strip()
    if chosen.lower() == "off":
        return None
    return Path(chosen) if chosen else Path(sys.prefix) / "share" / "mrtpo" / BUNDLE_FILE


def bundle_header(path: Path) -> tuple[str, str] | None:
    """(kind, plotly.js version) a bundle file names in its header comment: kind "mrtpo" (built at set-up) or
    "cartesian" (plotly.js's own); None when the file is not one of these."""
    try:
        with path.open("rb") as f:
            head = f.read(400)
    except OSError:
        return None
    found = _HEADER.search(head)
    return (found.group(1).decode(), found.group(2).decode()) if found else None


@functools.cache
def bundle() -> tuple[Path, str] | None:
    """The bundle this process draws with, (file, URL path under the app's root), or None when the
    figures go to `st.plotly_chart`: no bundle file, or one of another plotly.js version than the installed plotly
    package writes its figures for (`plotly.offline.get_plotlyjs_version`). Read once per process."""
    path = bundle_path()
    if path is None or not path.is_file():
        return None
    from plotly.offline import get_plotlyjs_version

    kind, version = bundle_header(path) or ("", None)
    if version != get_plotlyjs_version():
        print(f"MRTPO workbench: {path} is plotly.js {version}, plotly writes figures for "
              f"{get_plotlyjs_version()}: charts are drawn by Streamlit's element (run `make` again)", file=sys.stderr)
        return None
    return path, BUNDLE_ROUTE.format(kind=kind, version=version)


_served: list[tuple[Path, str]] = []  # the bundle, once this process's server serves it (`serve_bundle`)


def serve_bundle() -> tuple[Path, str] | None:
    """Called by the server's middleware (`mrtpo_viz.server.serve.ChartPagePreload`), which serves the bundle at its URL
    path: from now on the pages draw with it. Returns `bundle()`. A process without that middleware (AppTest,
    `streamlit run app.py`) has no URL for the bundle and draws with `st.plotly_chart`."""
    found = bundle()
    if found is not None and not _served:
        _served.append(found)
    return found


def drawn_with_bundle() -> tuple[Path, str] | None:
    """The bundle the pages draw with (file, URL path), None when they use `st.plotly_chart`."""
    return _served[0] if _served else None


# Browser code that defines `window.__mrtpoLoadPlotly(src)`: load the bundle at `src` (a URL path under the app's
# root) once per browser tab, as a classic script (it sets `window.Plotly`), and return the promise of it. The chart
# page's <head> (`mrtpo_viz.server.serve`), the early load of `ui.prefetch` and the component all load it through this.
LOADER_JS = r"""window.__mrtpoLoadPlotly = window.__mrtpoLoadPlotly || ((src) => {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!window.__mrtpoPlotly) {
    window.__mrtpoPlotly = new Promise((resolve, reject) => {
      const s = document.createElement('script');
      s.src = new URL(src, document.baseURI).href;
      s.dataset.mrtpoPlotly = 'bundle';
      s.onload = () => resolve(window.Plotly);
      s.onerror = () => { window.__mrtpoPlotly = null; reject(new Error('plotly.js did not load: ' + s.src)); };
      document.head.appendChild(s);
    });
    window.__mrtpoPlotly.catch(() => {});
  }
  return window.__mrtpoPlotly;
});
"""

# The component's browser code (an ES module; `component.data` is {"figure": JSON text, "key": str, "bundle": URL
# path, "foreground": `figures.FOREGROUND`}). Each element keeps one plot div, which `Plotly.react` redraws in place.
_JS = LOADER_JS + r"""
const css = (el, name) => getComputedStyle(el).getPropertyValue(name).trim();
const textColor = (el) => css(el, '--st-text-color') || '#31333f';
const background = (el) => css(el, '--st-background-color') || 'white';

// Streamlit's look for a figure, from the theme's CSS variables: set in the template, so what a figure sets itself
// wins (as with st.plotly_chart's "streamlit" theme).
function themed(layout, el) {
  const text = textColor(el);
  const grid = css(el, '--st-border-color-light') || css(el, '--st-border-color') || 'rgba(128,128,128,0.25)';
  const font = css(el, '--st-font') || 'sans-serif';
  const axis = {gridcolor: grid, zerolinecolor: grid, tickcolor: grid, linecolor: grid, automargin: true,
                tickfont: {color: text, size: 12}, title: {font: {color: text, size: 14}}};
  const xaxis = {...axis, showgrid: false, zeroline: false};  // as Streamlit draws x axes
  const look = {
    font: {color: text, family: font, size: 12}, paper_bgcolor: 'rgba(0,0,0,0)', plot_bgcolor: 'rgba(0,0,0,0)',
    title: {font: {color: css(el, '--st-heading-color') || text, family: css(el, '--st-heading-font') || font,
                   size: 16}, x: 0, xanchor: 'left'},
    legend: {font: {color: text, size: 12}, title: {font: {color: text, size: 12}}, bgcolor: 'rgba(0,0,0,0)'},
    hoverlabel: {bgcolor: background(el), bordercolor: grid, font: {color: text, family: font, size: 12}},
    xaxis, yaxis: axis,
  };
  const template = layout.template || {};
  const base = template.layout || {};
  const merged = {...base, ...look};
  for (const name of Object.keys(base)) {  // every axis of the template (xaxis2...) gets the look too
    if (/^[xy]axis\d*$/.test(name)) merged[name] = {...base[name], ...(name[0] === 'x' ? xaxis : axis)};
  }
  const title = typeof layout.title === 'string' ? {text: layout.title} : layout.title;
  const bold = title && title.text ? {title: {...title, text: `<b>${title.text}</b>`}} : {};  // as Streamlit does
  return {...layout, ...bold, template: {...template, layout: merged}};
}

// The modebar's "Full screen" button (what st.plotly_chart's element toolbar offers): the plot fills the screen, on
// the theme's background, its height the screen's; again, or Esc, and it is back.
const FULL_SCREEN = {
  name: 'Full screen',
  icon: {width: 1000, height: 1000, path: 'M0 0H350V100H100V350H0ZM650 0H1000V350H900V100H650ZM0 650H100V900H350V1000H0Z'
                                          + 'M1000 650V1000H650V900H900V650Z'},
  click: (plot) => (document.fullscreenElement ? document.exitFullscreen() : plot.requestFullscreen()),
};

function onFullScreen(plot) {
  const full = document.fullscreenElement === plot;
  plot.style.background = full ? background(plot) : '';
  if (window.Plotly && plot._fullLayout) {  // width: null keeps it following the element's (`Plots.resize`)
    window.Plotly.relayout(plot, {height: full ? window.innerHeight : plot.__mrtpoHeight, width: null});
  }
}

// Hover to isolate (a figure whose layout.meta.isolate is set, e.g. Compare's): hovering a line dims every trace of
// the other runs (a trace's meta is [run, key, kind], `figures.metric_lines`) to a fifth of its opacity; leaving it
// gives every trace its own opacity back. The opacities are read when a hover starts, so a redraw is followed.
const DIM = 0.2;
function isolateOnHover(plot, Plotly) {
  if (plot.__mrtpoIsolate) return;
  plot.__mrtpoIsolate = true;
  const run = (t) => (Array.isArray(t.meta) ? t.meta[0] : t.name);
  plot.on('plotly_hover', (ev) => {
    const meta = plot.layout && plot.layout.meta;
    if (!meta || !meta.isolate || !ev || !ev.points || !ev.points.length) return;
    const hovered = run(plot.data[ev.points[0].curveNumber]);
    if (plot.__mrtpoIsolated === hovered) return;
    if (plot.__mrtpoIsolated == null) plot.__mrtpoOpacity = plot.data.map((t) => (t.opacity == null ? 1 : t.opacity));
    plot.__mrtpoIsolated = hovered;
    Plotly.restyle(plot, {opacity: plot.data.map((t, i) => plot.__mrtpoOpacity[i] * (run(t) === hovered ? 1 : DIM))});
  });
  plot.on('plotly_unhover', () => {
    if (plot.__mrtpoIsolated == null) return;
    plot.__mrtpoIsolated = null;
    Plotly.restyle(plot, {opacity: plot.__mrtpoOpacity});
  });
}

export default function (component) {
  const {data, parentElement} = component;
  let plot = parentElement.querySelector('.mrtpo-chart');
  if (!plot) {
    plot = document.createElement('div');
    plot.className = 'mrtpo-chart';
    plot.style.width = '100%';
    parentElement.appendChild(plot);
  }
  plot.dataset.key = data.key;
  plot.dataset.draws = String(Number(plot.dataset.draws || 0) + 1);  // each figure sent (tests count redraws)
  // the placeholder colour of text and of lines drawn in it (`figures.FOREGROUND`) becomes the theme's text colour
  const figure = JSON.parse(data.figure.split(JSON.stringify(data.foreground)).join(JSON.stringify(textColor(plot))));
  const layout = {uirevision: data.key, ...(figure.layout || {})};
  plot.__mrtpoHeight = layout.height || 450;
  plot.style.height = plot.__mrtpoHeight + 'px';
  if (document.fullscreenElement === plot) layout.height = window.innerHeight;
  const draw = () => window.__mrtpoLoadPlotly(data.bundle).then((Plotly) => {
    plot.__mrtpoIsolated = null;  // a new figure: nothing dimmed
    return Plotly.react(plot, figure.data || [], themed(layout, plot),
                        {displaylogo: false, modeBarButtonsToAdd: [FULL_SCREEN]}).then(() => isolateOnHover(plot, Plotly));
  });
  plot.__mrtpoDrawn = (plot.__mrtpoDrawn || Promise.resolve()).then(draw).catch((e) => {
    plot.textContent = 'This figure could not be drawn: ' + String(e);
  });
  if (!plot.__mrtpoResize) {  // the page's width changes (the window, the sidebar opened or closed): so does the plot's
    plot.__mrtpoResize = new ResizeObserver(() => {
      if (window.Plotly && plot._fullLayout) window.Plotly.Plots.resize(plot);
    });
    plot.__mrtpoResize.observe(plot);
    plot.addEventListener('fullscreenchange', () => onFullScreen(plot));
  }
  return () => {  // the element left the page
    plot.__mrtpoResize.disconnect();
    plot.__mrtpoResize = null;
    if (window.Plotly) window.Plotly.purge(plot);
  };
}
"""


@functools.cache
def _component():
    """The custom component (registered once per process; `isolate_styles=False`: plotly.js styles its plots with a
    style sheet in the page's <head>, which a shadow root would not see)."""
    return st.components.v2.component("mrtpo_chart", js=_JS, isolate_styles=False)


def chart(fig, key: str, where=None) -> None:
    """Draw a Plotly figure across the width of `where` (a Streamlit container, else the page) under `key`, with
    the plotly.js bundle when this process's server serves it (`drawn_with_bundle`), else with `st.plotly_chart`.
    The figure goes to the browser as `plotly.io.to_json(fig, validate=False)`, as `st.plotly_chart` sends it."""
    found = drawn_with_bundle()
    if found is None:
        (where or st).plotly_chart(fig, key=key)
        return
    import plotly.io as pio

    data = {"figure": pio.to_json(fig, validate=False), "key": key, "bundle": found[1], "foreground": FOREGROUND}
    with where if where is not None else contextlib.nullcontext():
        _component()(data=data, key=key)
