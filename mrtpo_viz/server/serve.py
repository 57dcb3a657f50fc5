"""The app's server process: warm it up, then run Streamlit (what `mrtpo app` and `make demo` start).

    python -m mrtpo_viz.server.serve run mrtpo_viz/server/asgi.py [streamlit options]

A fresh Streamlit server imports a page's modules on its first visit, and Plotly loads its property
validators on the first figure it builds: together most of a cold page's time (`mrtpo bench app`).
`warm_up()` pays for both before the server listens, so the first visitor of a new server gets a warm
page; its seconds are printed.

Streamlit serves the app (`app.py`) through `mrtpo_viz/server/asgi.py`, an `st.App` with one middleware of this module,
`ChartPagePreload`: it serves the plotly.js bundle that the pages draw their figures with
(`mrtpo_viz.ui.charts`), and the HTML page of a page that draws charts tells the browser to fetch that bundle
(or, without it, Streamlit's Plotly chart module) while it loads Streamlit's own files, and to run it as soon as
the page's script starts. Never imports torch.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import sys
import time
from pathlib import Path


def warm_up() -> float:
    """Import what the pages use and build one figure of each kind (loads Plotly's validators and
    serialisers); returns the seconds it took. Runs before Streamlit's runtime exists: each `st.cache_data` of the
    imported modules checks its parameters at decoration against a storage manager and, with no runtime, logged
    "No runtime found, using MemoryCacheStorageManager" (7 lines at every start). The check passes either way and
    the cached functions use the runtime's manager when they are called, so that warning is held back here."""
    import logging

    from streamlit.runtime.caching import cache_data_api  # its logger's level is set when it is imported

    t0 = time.perf_counter()
    quiet = cache_data_api._LOGGER
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        return _warm_up(t0)
    finally:
        quiet.setLevel(level)


def _warm_up(t0: float) -> float:
    import numpy as np
    import pandas as pd
    import PIL.Image
    import plotly.io as pio
    import pyarrow as pa
    import streamlit.components.v2.manifest_scanner  # noqa: F401  (a session's first run looks for components)
    import streamlit.material_icon_names  # noqa: F401  (the pages' :material/...: icons)

    import core.run.credit_choice  # noqa: F401  (Launch)
    import core.tasks  # noqa: F401  (the Verifier debugger)
    import core.verifiers  # noqa: F401  (the Verifier debugger's playground)
    from mrtpo_viz import analysis, figures, form, launcher, loaders, specificity, ui  # noqa: F401
    from mrtpo_viz.figures import panels  # noqa: F401

    PIL.Image.init()  # every image format's plugin: the page icon is read on a session's first run
    names = ["a", "b"]
    metrics = pd.DataFrame({"step": np.arange(1, 4), "reward/all_satisfied": [0.1, 0.2, 0.3],
                            "loss/policy": 0.0, "time/step": 1.0, "time/update": 0.5,
                            **{f"reward/{n}": [0.2, 0.4, 0.6] for n in names},
                            **{f"span/{n}/auc": [0.5, 0.6, 0.7] for n in names}})
    credit = pd.DataFrame({"sample": 0, "reward": np.repeat(names, 3), "t": np.tile(np.arange(3), 2),
                           "token": "x", "distance": 0.1, "distance_skipped": False, "weight": 1.0, "credit": 0.0,
                           "in_span": [True, False, False] * 2, "score": 1.0})
    built = [
        figures.reward_curves({"run": metrics}, names),
        figures.step_time_figure({"run": metrics}),
        figures.auc_figure({"run": metrics}, names),
        figures.js_positions_figure(credit, names),
        figures.js_in_out_figure(credit, names),
    ]
    for fig in built:
        pio.to_json(fig.to_dict(), validate=False)
    pa.Table.from_pandas(analysis.js_in_out_table(credit))
    from mrtpo_viz.ui.charts import bundle

    # the browser modules the first page of each session asks for (reads Streamlit's files), with the chart element
    # the pages will draw in: the middleware serves the bundle where there is one (`ui.charts.serve_bundle`)
    ui.prefetch.app_modules(bundled=bundle() is not None)
    return time.perf_counter() - t0


# The url paths (app.py) of the pages that draw Plotly charts: they call `ui.page_runs(charts=True)`.
CHART_PAGES = ("curves", "js", "debugger", "compare")

# Added to the <head> of every page: the app's root URL as the server's base for Streamlit's browser code. Without it
# that code takes the page's own URL for the base and tries `<page>/_stcore/health` and `<page>/_stcore/host-config`
# first (404 each, two console errors on every page but Runs), then the URL one level up. The root is where the page's
# own `./static/...` files resolve (`.` of the page's URL), so it holds under a base URL path or a proxy's prefix.
BACKEND_BASE_JS = ('<script data-backend-base>window.__streamlit = Object.assign({}, window.__streamlit, '
                   '{BACKEND_BASE_URL: new URL(".", window.location.href).href});</script>')


def is_page_path(path: str) -> bool:
    """Whether a request path may be a page's URL (Streamlit answers it with index.html): not a file (its last part
    has no dot) and nothing under `_stcore/` (the server's own endpoints)."""
    parts = path.strip("/").split("/")
    return "." not in parts[-1] and "_stcore" not in parts

# Added to the <head> of a chart page: run the chart code (`%(run)s`: Streamlit's chart module, or the plotly.js
# bundle) as soon as the page's script starts on the server. Not before: the code takes the browser's main thread
# (Streamlit's module ~0.7 s, the bundle ~0.3 s), and before that moment it would hold up Streamlit's own start and
# the websocket that asks the server to run the script. From then on the server runs the script (~0.3-0.6 s on a
# cold page) while the browser runs the chart code.
_RUN_AT_SCRIPT_START = """<script data-chart-module="%(name)s">(() => {
%(setup)s
  const start = () => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || app.getAttribute('data-test-script-state') !== 'running') return false;
    %(run)s;
    return true;
  };
  const watch = new MutationObserver(() => { if (start()) watch.disconnect(); });
  watch.observe(document, {subtree: true, childList: true, attributes: true,
                           attributeFilter: ['data-test-script-state']});
})();</script>"""


def chart_page_head(chart_module: str | None, modules: list[str]) -> str:
    """What `ChartPagePreload` adds to a chart page's <head> when the figures are drawn by Streamlit's chart element
    (no plotly.js bundle): a `modulepreload` link per module of `modules` (paths relative to the app's root URL:
    the chart module and what it imports, `ui.prefetch.chart_modules`), so that the browser fetches them while it
    loads Streamlit's own files and the server is idle, and the script that runs `chart_module` when the page's
    script starts. Before, the module (~4.7 MB) was fetched only once the script had sent the page's first elements,
    from the server process busy running that script: 0.5 s, then 0.7 s to run it, after the script had finished
    (measured in Chromium, docs/results/app-speed.md)."""
    if chart_module is None:
        return ""
    links = "".join(f'<link rel="modulepreload" crossorigin href="./{m}">' for m in modules)
    run = f"import(new URL({json.dumps(chart_module)}, document.baseURI).href).catch(() => {{}})"
    return links + _RUN_AT_SCRIPT_START % {"name": "at-start", "setup": "", "run": run}


def bundle_page_head(bundle: str, modules: list[str]) -> str:
    """What `ChartPagePreload` adds to a chart page's <head> when the figures are drawn by the plotly.js bundle at
    `bundle` (a URL path under the app's root, `ui.charts.bundle`): a `preload` link for it and a `modulepreload`
    link per module of `modules` (the chart component's, `ui.prefetch.chart_modules`), fetched while the browser
    loads Streamlit's own files, and the script that runs the bundle when the page's script starts."""
    from mrtpo_viz.ui.charts import LOADER_JS

    links = f'<link rel="preload" as="script" href="./{bundle}">'
    links += "".join(f'<link rel="modulepreload" crossorigin href="./{m}">' for m in modules)
    return links + _RUN_AT_SCRIPT_START % {"name": "bundle-at-start", "setup": LOADER_JS,
                                           "run": f"window.__mrtpoLoadPlotly({json.dumps(bundle)})"}


class ChartPagePreload:
    """ASGI middleware around Streamlit (`mrtpo_viz/server/asgi.py`): the HTML page of every page (the app's
    index.html, which Streamlit serves for every page path, `is_page_path`) gets `BACKEND_BASE_JS` before its
    `</head>`, and a chart page's (`CHART_PAGES`) `head` too; the request is passed on without Accept-Encoding, so
    that the page comes back uncompressed to edit (index.html is ~7 kB, sent once per visit). A GET of the plotly.js
    bundle's URL path (`ui.charts.bundle`) is answered here with the file (gzipped where the browser accepts it; the
    version is in the path, so the browser may keep it); its presence makes the pages draw with it (`ui.charts.serve_bundle`). A POST to `<root>/_mrtpo/settled`
    (`ui.warm.SETTLED_PATH`: a browser has drawn its first page, `ui.prefetch`) is answered here (204) and lets
    the warm sessions start (`ui.warm`); every other request (the websocket, static files, other pages) passes
    untouched, counted while it is answered (`ui.warm.request`)."""

    def __init__(self, app, head: str | None = None, bundle: tuple[Path, str] | None = None):
        """`head` and `bundle` (the file and URL path of the plotly.js bundle) are found here when `head` is None
        (`ui.charts.serve_bundle`): given, for tests."""
        self.app = app
        self.bundle = bundle
        if head is None:
            from mrtpo_viz.ui.charts import serve_bundle
            from mrtpo_viz.ui.prefetch import chart_module, chart_modules

            self.bundle = serve_bundle()
            if self.bundle is not None:
                head = bundle_page_head(self.bundle[1], list(chart_modules()))
            else:
                head = chart_page_head(chart_module(), list(chart_modules()))
        self.head = head.encode()
        self.paths = {f"/{p}" for p in CHART_PAGES} | {f"/{p}/" for p in CHART_PAGES}
        self.bundle_bytes: dict[bool, bytes] = {}  # the bundle's file as sent, plain (False) and gzipped (True)
        if self.bundle is not None:  # read once, when the server starts (gzip: ~0.05 s)
            plain = self.bundle[0].read_bytes()
            self.bundle_bytes = {False: plain, True: gzip.compress(plain, 6)}
        self.loop_told = False

    async def __call__(self, scope, receive, send):
        from mrtpo_viz.ui import warm

        if not self.loop_told:  # the loop the runtime serves on, for the warm sessions (`ui.warm`)
            warm.serving(asyncio.get_running_loop())
            self.loop_told = True
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["path"].endswith("/" + warm.SETTLED_PATH) and scope.get("method") == "POST":
            warm.settled()  # a browser has drawn its first page (`ui.prefetch`): the warm sessions may run
            await send({"type": "http.response.start", "status": 204, "headers": []})
            return await send({"type": "http.response.body", "body": b""})
        if self.bundle is not None and scope["path"].endswith("/" + self.bundle[1]):
            return await self.send_bundle(scope, send)
        async with warm.request():  # no warm session starts while the server answers a request
            return await self.edited(scope, receive, send)

    async def send_bundle(self, scope, send):
        """The plotly.js bundle's file (gzipped where the request accepts it)."""
        accepts = b"gzip" in dict((k.lower(), v) for k, v in scope.get("headers", [])).get(b"accept-encoding", b"")
        body = self.bundle_bytes[accepts]
        headers = [(b"content-type", b"text/javascript; charset=utf-8"), (b"content-length", str(len(body)).encode()),
                   (b"cache-control", b"public, max-age=31536000, immutable"), (b"vary", b"Accept-Encoding")]
        if accepts:
            headers.append((b"content-encoding", b"gzip"))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if scope.get("method") == "HEAD" else body})

    async def edited(self, scope, receive, send):
        """An HTTP request: a page's HTML edited, anything else passed on."""
        if scope.get("method") != "GET" or not is_page_path(scope["path"]):
            return await self.app(scope, receive, send)
        head = BACKEND_BASE_JS.encode() + (self.head if scope["path"] in self.paths else b"")
        scope = {**scope, "headers": [(k, v) for k, v in scope["headers"] if k.lower() != b"accept-encoding"]}
        start: dict = {}
        body: list[bytes] = []

        async def edit(message):
            if message["type"] == "http.response.start":
                start.update(message)  # sent with the whole body, once its length is known
                return
            if message["type"] != "http.response.body":
                return await send(message)
            body.append(message.get("body", b""))
            if message.get("more_body"):
                return
            page = b"".join(body)
            headers = list(start.get("headers", []))
            html = dict(headers).get(b"content-type", b"").startswith(b"text/html")
            if start.get("status") == 200 and html and b"</head>" in page:
                page = page.replace(b"</head>", head + b"</head>", 1)
            headers = [(k, v) for k, v in headers if k.lower() != b"content-length"]
            await send({**start, "headers": headers + [(b"content-length", str(len(page)).encode())]})
            await send({"type": "http.response.body", "body": page})

        return await self.app(scope, receive, edit)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    print(f"MRTPO workbench: warmed up in {warm_up():.1f} s (imports and plotting libraries)", flush=True)
    from streamlit.web import cli as streamlit_cli

    sys.argv = ["streamlit", *argv]
    return streamlit_cli.main(prog_name="streamlit")


if __name__ == "__main__":
    sys.exit(main())
