"""mrtpo_viz.server.serve.ChartPagePreload, the middleware of mrtpo_viz/server/asgi.py: every page's HTML names the app's
root as the server's base, a chart page's gets the chart module's preload and start script in its <head> too;
nothing else changes. Driven here with ASGI messages of a
hand-written inner app (the real Streamlit server is in tests/test_browser.py)."""

from __future__ import annotations

import asyncio

import pytest

from mrtpo_viz.server import serve

HEAD = "<link rel=x><script>go()</script>"
PAGE = b"<html><head><title>Streamlit</title></head><body></body></html>"


def run(path: str, chunks: list[bytes] = (PAGE,), content_type: bytes = b"text/html", status: int = 200,
        kind: str = "http", method: str = "GET", bundle=None, encoding: bytes = b"gzip, br"):
    """Call the middleware around an inner app that answers with `chunks`: (the headers the inner app was asked
    with, the messages sent back)."""
    seen: dict = {"headers": None}
    sent: list[dict] = []

    async def inner(scope, receive, send):
        seen["headers"] = dict(scope["headers"])
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", content_type), (b"content-length", str(sum(map(len, chunks))).encode()),
                                (b"cache-control", b"no-cache")]})
        for i, chunk in enumerate(chunks):
            await send({"type": "http.response.body", "body": chunk, "more_body": i < len(chunks) - 1})

    async def receive():
        return {"type": "http.request"}

    async def send(message):
        sent.append(message)

    scope = {"type": kind, "method": method, "path": path,
             "headers": [(b"host", b"x"), (b"accept-encoding", encoding)]}
    asyncio.run(serve.ChartPagePreload(inner, head=HEAD, bundle=bundle)(scope, receive, send))
    return seen["headers"], sent


def body(sent: list[dict]) -> bytes:
    return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def test_a_chart_page_gets_the_head_uncompressed_with_its_new_length():
    for page in serve.CHART_PAGES:
        for path in (f"/{page}", f"/{page}/"):
            asked, sent = run(path, chunks=[PAGE[:20], PAGE[20:]])
            assert b"accept-encoding" not in asked and asked[b"host"] == b"x"
            expected = PAGE.replace(b"</head>", serve.BACKEND_BASE_JS.encode() + HEAD.encode() + b"</head>")
            assert body(sent) == expected
            headers = dict(sent[0]["headers"])
            assert sent[0]["status"] == 200 and headers[b"content-length"] == str(len(expected)).encode()
            assert headers[b"cache-control"] == b"no-cache"
            assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]


def test_every_page_names_the_apps_root_as_the_servers_base_and_only_chart_pages_get_the_chart_head():
    """Streamlit's browser code tried `<page>/_stcore/health` and `<page>/_stcore/host-config` (404s) before the
    app's root unless the page names the base (issue 46, item 12; in a browser: tests/test_browser_pages.py)."""
    for path in ("/", "/credit", "/launch", "/curvesx", "/app/"):
        asked, sent = run(path, chunks=[PAGE[:20], PAGE[20:]])
        assert b"accept-encoding" not in asked, path
        assert body(sent) == PAGE.replace(b"</head>", serve.BACKEND_BASE_JS.encode() + b"</head>"), path
        assert dict(sent[0]["headers"])[b"content-length"] == str(len(body(sent))).encode()
    assert "BACKEND_BASE_URL" in serve.BACKEND_BASE_JS and 'new URL(".", window.location.href)' in serve.BACKEND_BASE_JS


def test_files_endpoints_the_websocket_and_other_answers_pass_untouched():
    for path, kind, method in (("/static/js/index.js", "http", "GET"), ("/_stcore/stream", "websocket", "GET"),
                               ("/_stcore/health", "http", "GET"), ("/curves/_stcore/host-config", "http", "GET"),
                               ("/favicon.png", "http", "GET"), ("/curves", "http", "HEAD")):
        asked, sent = run(path, chunks=[PAGE[:20], PAGE[20:]], kind=kind, method=method)
        assert asked[b"accept-encoding"] == b"gzip, br" and body(sent) == PAGE, path
        assert len(sent) == 3  # the inner app's messages as they were
    for status, content_type in ((404, b"text/html"), (200, b"application/json")):
        asked, sent = run("/js", status=status, content_type=content_type)
        assert body(sent) == PAGE and dict(sent[0]["headers"])[b"content-length"] == str(len(PAGE)).encode()


def test_the_head_preloads_each_module_and_starts_the_chart_module_when_the_script_runs():
    head = serve.chart_page_head("static/js/PlotlyChart.h.js", ["static/js/PlotlyChart.h.js", "static/js/dep.d.js"])
    assert head.count('rel="modulepreload"') == 2 and 'href="./static/js/dep.d.js"' in head
    assert '"static/js/PlotlyChart.h.js"' in head and "'running'" in head
    assert serve.chart_page_head(None, []) == ""
    assert serve.ChartPagePreload(None, head="").head == b""


def test_the_bundle_is_served_gzipped_where_accepted_and_kept_by_the_browser(tmp_path):
    """The cartesian bundle's URL path (`ui.charts.bundle`, under any root path) is answered with the file, gzipped
    when the request accepts gzip, never passed to Streamlit; other `_mrtpo/` paths pass on."""
    import gzip

    code = b"/* plotly.js (cartesian - minified) v9.9.9 */ window.Plotly = {};" * 50
    (tmp_path / "p.js").write_bytes(code)
    bundle = (tmp_path / "p.js", "_mrtpo/plotly-cartesian-9.9.9.min.js")
    for path in ("/_mrtpo/plotly-cartesian-9.9.9.min.js", "/root/_mrtpo/plotly-cartesian-9.9.9.min.js"):
        for encoding, zipped in ((b"gzip, br", True), (b"identity", False)):
            asked, sent = run(path, bundle=bundle, encoding=encoding)
            assert asked is None  # Streamlit was not asked
            headers = dict(sent[0]["headers"])
            assert sent[0]["status"] == 200 and headers[b"content-type"].startswith(b"text/javascript")
            assert b"immutable" in headers[b"cache-control"] and headers[b"vary"] == b"Accept-Encoding"
            assert (headers.get(b"content-encoding") == b"gzip") is zipped
            got = body(sent)
            assert headers[b"content-length"] == str(len(got)).encode()
            assert (gzip.decompress(got) if zipped else got) == code
    asked, sent = run("/_mrtpo/plotly-cartesian-1.0.0.min.js", bundle=bundle)
    assert asked is not None and body(sent) == PAGE
    asked, sent = run("/_mrtpo/plotly-cartesian-9.9.9.min.js")  # no bundle: Streamlit answers
    assert asked is not None


def test_a_bundle_page_head_preloads_the_bundle_and_the_component_modules_and_runs_the_bundle_at_start():
    head = serve.bundle_page_head("_mrtpo/plotly-cartesian-9.9.9.min.js", ["static/js/Bidi.h.js", "static/js/d.js"])
    assert head.startswith('<link rel="preload" as="script" href="./_mrtpo/plotly-cartesian-9.9.9.min.js">')
    assert head.count('rel="modulepreload"') == 2 and 'href="./static/js/d.js"' in head
    assert 'window.__mrtpoLoadPlotly("_mrtpo/plotly-cartesian-9.9.9.min.js")' in head and "'running'" in head


def test_the_middleware_tells_the_warm_the_loop_it_serves_on(monkeypatch):
    from mrtpo_viz.ui import warm

    told = []
    monkeypatch.setattr(warm, "serving", told.append)
    run("/credit")
    run("/")
    assert len(told) == 2 and all(isinstance(loop, asyncio.AbstractEventLoop) for loop in told)  # each on its first call


def test_a_warm_starts_when_a_browser_says_its_page_is_drawn_or_the_server_is_quiet():
    """`ui.warm.quiet`: the middleware counts every HTTP request while it is answered; a warm starts once a browser
    posts that its page is drawn (`ui.prefetch`, answered here with 204), or after FALLBACK_S without a request;
    a server never quiet gives up."""
    import time

    from mrtpo_viz.ui import warm

    seen = []

    async def inner(scope, receive, send):
        seen.append(dict(warm._busy))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"x"})

    async def nothing(*_):
        return {"type": "http.request"}

    def call(path: str, method: str = "GET") -> list[dict]:
        sent = []

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "method": method, "path": path, "headers": []}
        asyncio.run(serve.ChartPagePreload(inner, head=HEAD)(scope, nothing, send))
        return sent

    since = time.monotonic()
    call("/static/js/a.js")
    assert seen[0]["requests"] == 1 and warm._busy["requests"] == 0  # counted while answered
    assert not warm.quiet(since, quiet_s=10.0, give_up_s=0.2)  # a request just now, no word from a browser
    assert warm.quiet(since, quiet_s=0.05, give_up_s=2.0)  # quiet long enough
    answer = call("/app/" + warm.SETTLED_PATH, "POST")  # under a base URL path too
    assert answer[0]["status"] == 204 and len(seen) == 1  # answered by the middleware, not passed on
    assert warm.quiet(since, quiet_s=10.0, give_up_s=2.0)  # the browser's word (and no request for AFTER_WORD_S)
    assert not warm.quiet(time.monotonic(), quiet_s=10.0, give_up_s=0.2)  # a word from before does not count
    with warm.script_run():  # outside a script run (no session): nothing to count
        assert warm._busy["scripts"] == 0


@pytest.mark.subprocess
def test_warm_up_logs_no_missing_runtime_warnings():
    """Issue 46 item 12: the server's log began with 7 lines of "No runtime found, using MemoryCacheStorageManager"
    (the pages' st.cache_data decorators, imported by warm_up before Streamlit's runtime exists)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", "from mrtpo_viz.server import serve; serve.warm_up()"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "No runtime found" not in out.stderr + out.stdout
