"""`mrtpo bench app`'s browser side: the targets and pages, a fresh `mrtpo app` server (`Server`), a visit of a
page timed until it is shown (cold, landing, warm, the floor), and a script file's run time in Chromium
(`script_run_ms`). Imported by `mrtpo_viz.tools.bench_app` and `bench_live`. Never imports torch.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

# Issue 26's targets, on an idle machine: a page opened cold is shown within COLD_OVER_FLOOR_S of the one-line
# Streamlit page (the floor, measured the same way), and a page opened inside the app (its sidebar link: `landing`,
# the first time, and `warm`) within IN_APP_TARGET_S.
COLD_OVER_FLOOR_S = 1.0
IN_APP_TARGET_S = 0.5
IN_APP_KINDS = ("landing", "warm")
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-sync"]
# page name -> URL path (app.py's url_path of each page; "" is the default page)
PAGES = {"runs": "", "launch": "launch", "curves": "curves", "credit": "credit", "js": "js", "debugger": "debugger",
         "compare": "compare"}
TITLES = {"runs": "Runs", "launch": "Launch a training run", "curves": "Training curves", "credit": "Token credit",
          "js": "JS divergence", "debugger": "Verifier debugger", "compare": "Compare runs"}
KINDS = ("cold", "landing", "warm", "reload")
OVER = "over"  # with --paired-floor: each cold visit's seconds over the floor visit made right before it
READ_S = 2.0  # seconds a user spends on the first page before opening another (the `landing` visit)
RUNS = {"tiny": "tiny-instruct-mrtpo-demo", "smollm2": "smollm2-135m-mrtpo-demo", "synthetic": None}
STABLE_MS = 300

# A chart on a page, in Streamlit's element or the app's component (`ui.charts`), or the app's selectable table
# (`ui.pick_table`, a component too); shown once Plotly's <svg>, or the table, is in it. The app's "settled" check
# uses the same two selectors (`ui.prefetch.CHART_SELECTOR`, `DRAWN_SELECTOR`; a test keeps them equal): written
# here too, so that the bench does not import the app's UI package (1 s) to measure it.
_CHARTS = json.dumps('[data-testid="stPlotlyChart"], [data-testid^="stBidiComponent"]')
_DRAWN = json.dumps(".main-svg, .mrtpo-pick table")

# Resolves with the time (ms since navigation start) at which the page became shown and stayed so for
# STABLE_MS; rejects after the timeout.
_SHOWN = """
([stableMs, timeoutMs]) => new Promise((resolve, reject) => {
  const shown = () => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    if (!document.querySelector('[data-testid="stMain"] h1')) return false;
    if (document.querySelector('[data-testid="stSkeleton"], [data-testid="stAppSkeleton"]')) return false;
    if (document.querySelector('[data-testid="stStatusWidget"]')) return false;
    for (const c of document.querySelectorAll(CHARTS)) {
      if (!c.querySelector(DRAWN)) return false;
    }
    return true;
  };
  let since = null;
  const tick = () => {
    const now = performance.now();
    if (shown()) {
      if (since === null) since = now;
      if (now - since >= stableMs) return resolve(since);
    } else {
      since = null;
    }
    if (now > timeoutMs) return reject(new Error('page not shown after ' + timeoutMs + ' ms'));
    setTimeout(tick, 10);
  };
  tick();
})
""".replace("CHARTS", _CHARTS).replace("DRAWN", _DRAWN)


# Clicks the sidebar link to `path` and resolves with the ms from the click until the page titled `title` is
# shown (SHOWN's conditions, after the script has run for it) and has stayed so for stableMs.
_NAVIGATE = """
([path, title, stableMs, timeoutMs]) => new Promise((resolve, reject) => {
  const links = [...document.querySelectorAll('[data-testid="stSidebarNavLink"]')];
  const link = links.find(a => new URL(a.href).pathname.replace(/\\/$/, '') === '/' + path
                               || (path === '' && new URL(a.href).pathname === '/'));
  if (!link) return reject(new Error('no sidebar link to /' + path));
  const shown = () => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    const h1 = document.querySelector('[data-testid="stMain"] h1');
    if (!h1 || h1.textContent.trim() !== title) return false;
    if (document.querySelector('[data-testid="stSkeleton"], [data-testid="stAppSkeleton"]')) return false;
    if (document.querySelector('[data-testid="stStatusWidget"]')) return false;
    for (const c of document.querySelectorAll(CHARTS)) {
      if (!c.querySelector(DRAWN)) return false;
    }
    return true;
  };
  const t0 = performance.now();
  link.click();
  let since = null;
  const tick = () => {
    const now = performance.now();
    if (shown()) {
      if (since === null) since = now;
      if (now - since >= stableMs) return resolve(since - t0);
    } else {
      since = null;
    }
    if (now - t0 > timeoutMs) return reject(new Error('page not shown after ' + timeoutMs + ' ms'));
    setTimeout(tick, 10);
  };
  setTimeout(tick, 10);
})
""".replace("CHARTS", _CHARTS).replace("DRAWN", _DRAWN)


@dataclass
class Visit:
    page: str
    seconds: float | None
    error: str = ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


FLOOR_PAGE = "floor"
FLOOR_SCRIPT = 'import streamlit as st\n\nst.title("Floor")\n'


class Server:
    """A fresh `mrtpo app` server on a free port, serving `app_root` with `runs_dir` (or, with `script`, a
    plain `streamlit run script` from `app_root`); `startup_s`: seconds until it answered healthy."""

    def __init__(self, app_root: Path, runs_dir: Path, log: Path, script: Path | None = None):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(log, "ab")
        env = {**os.environ, "MRTPO_RUNS_DIR": str(runs_dir), "OMP_NUM_THREADS": "1"}
        cmd = [sys.executable, "-m", "core.cli", "app", "--port", str(self.port), "--headless"]
        if script is not None:
            cmd = [sys.executable, "-m", "streamlit", "run", str(script), "--server.port", str(self.port),
                   "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats",
                   "false"]
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(cmd, cwd=app_root, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the app server exited (see {log})")
            try:
                urllib.request.urlopen(self.url + "/_stcore/health", timeout=1)
                self.startup_s = time.perf_counter() - t0
                return
            except OSError:
                time.sleep(0.1)
        self.close()
        raise RuntimeError(f"the app server did not come up within 120 s (see {log})")

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


def _visit(context, url: str, timeout_s: float, keep_open: bool = False):
    """Open `url` in a new tab: (seconds until shown, the tab when `keep_open`, else None)."""
    page = context.new_page()
    try:
        page.goto(url, wait_until="commit", timeout=timeout_s * 1000)
        shown_ms = page.evaluate(_SHOWN, [STABLE_MS, timeout_s * 1000])
    except BaseException:
        page.close()
        raise
    if not keep_open:
        page.close()
        return shown_ms / 1000.0, None
    return shown_ms / 1000.0, page


def _floor_visit(browser, app_root: Path, runs_dir: Path, logs: Path, floor: Path, timeout_s: float) -> float | None:
    """One cold visit of the floor page (a fresh one-line Streamlit server and browser context): its seconds, None
    when it was not shown."""
    from playwright.sync_api import Error as PlaywrightError

    server = Server(app_root, runs_dir, logs / "server.log", script=floor)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        return _visit(context, server.url + "/", timeout_s)[0]
    except PlaywrightError:
        return None
    finally:
        context.close()
        server.close()


def paired_over(cold: float | None, floor: float | None) -> float | None:
    """A cold visit's seconds over the floor visit made right before it (`--paired-floor`): cold - floor; None when
    either was not shown."""
    return None if cold is None or floor is None else cold - floor


def _landing(browser, app_root: Path, runs_dir: Path, logs: Path, page: str, timeout_s: float) -> float | None:
    """A fresh server and browser context: open the first page, stay READ_S s, click `page`'s sidebar link;
    seconds from the click until it is shown (None for the first page itself and the floor)."""
    if page not in PAGES or page == "runs":
        return None
    server = Server(app_root, runs_dir, logs / "server.log")
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        _, tab = _visit(context, server.url + "/", timeout_s, keep_open=True)
        tab.wait_for_timeout(READ_S * 1000)
        return _navigate(tab, page, timeout_s)
    finally:
        context.close()
        server.close()


def _navigate(tab, page: str, timeout_s: float) -> float:
    """Seconds from clicking `page`'s sidebar link in `tab` until it is shown."""
    return tab.evaluate(_NAVIGATE, [PAGES[page], TITLES[page], STABLE_MS, timeout_s * 1000]) / 1000.0


# Browser code for script_run_ms: load the script at `src` into the page and resolve, once it has run, to the
# milliseconds from the end of its download to the end of its run (its `load` event comes after the script's run).
_SCRIPT_RUN_JS = """(src) => new Promise((resolve, reject) => {
  const s = document.createElement('script');
  s.onload = () => {
    const e = performance.getEntriesByType('resource').find(r => r.name.endsWith(src));
    resolve(performance.now() - e.responseEnd);
  };
  s.onerror = () => reject(new Error('could not load ' + src));
  s.src = src; document.head.appendChild(s);
})"""


def script_run_ms(paths: list[Path], repeat: int) -> dict[Path, list[float]]:
    """{file: [ms, ...]}: how long headless Chromium takes to run each script file, from the end of its download
    to the end of its run (compile and top-level code), `repeat` times each, the files taking turns; each run in a
    fresh browser context (empty HTTP and code caches) that fetched it from a local HTTP server."""
    import http.server
    import threading

    from playwright.sync_api import sync_playwright

    files = {f"/{i}.js": Path(p).read_bytes() for i, p in enumerate(paths)}

    class Files(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            body = files.get(self.path, b"<!doctype html><title>script run</title>")
            self.send_response(200)
            self.send_header("Content-Type", "text/javascript" if self.path in files else "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Files)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    times: dict[Path, list[float]] = {Path(p): [] for p in paths}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            for _ in range(repeat):
                for i, path in enumerate(paths):
                    context = browser.new_context()
                    page = context.new_page()
                    page.goto(url + "/")
                    times[Path(path)].append(page.evaluate(_SCRIPT_RUN_JS, f"/{i}.js"))
                    context.close()
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    return times
