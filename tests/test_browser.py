"""Real browser: Debian Chromium driven by Playwright against `mrtpo app`.

The flow a user follows: launch a training run of a micro model from the Launch page (the model folder
typed into the form), open Training curves right after Start (the new run is the one shown, with its
startup phase until its first step), watch its live curves reach 2 steps, stop it from the Launch page
(it ends as stopped with its completed steps), then inspect a sample in Token credit (tokens, span bars,
copyable hover details, keyboard, CSV). A second test checks colours and legends on the light and the
dark theme. Screenshots go to test-artifacts/ (gitignored).

In CI (CI=true) this test must run: a missing Chromium or Playwright fails it. Locally it is skipped
when Chromium is absent.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import pytest
from helpers import require as require_tool

from core.run.liveness import pid_alive
from core.run.store import RunStore

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-sync"]


def chromium_path() -> str | None:
    for candidate in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def require(condition: bool, why: str) -> None:
    require_tool(condition, why, "install it, e.g. apt-get install chromium, and make test for playwright")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(cwd: Path, runs: Path, log_path: Path, theme: str = "light",
              env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """`mrtpo app` (as a user starts it, here from outside the repo), on a free port, with `theme` as Streamlit's
    theme base and `env` added to its environment; returns the process (its own session) and the URL once the
    server answers."""
    port = free_port()
    env = {**os.environ, "MRTPO_RUNS_DIR": str(runs), "OMP_NUM_THREADS": "1", "STREAMLIT_THEME_BASE": theme,
           **(env or {})}
    log = open(log_path, "wb")
    proc = subprocess.Popen([sys.executable, "-m", "core.cli", "app", "--headless", "--port", str(port)],
                            cwd=cwd, env={**env, "PYTHONPATH": str(ROOT)}, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    log.close()
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url + "/_stcore/health", timeout=1)
            return proc, url
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.3)
    stop_app(proc)
    pytest.fail(f"the app did not come up within 90 s:\n{log_path.read_text()[-3000:]}")


def stop_app(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(20)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


@pytest.fixture()
def server(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    proc, url = start_app(tmp_path, runs, tmp_path / "streamlit.log")
    yield url, runs
    stop_app(proc)
    for run in runs.iterdir():  # never leave a trainer behind
        pid = RunStore(run).status().get("pid") if run.is_dir() else None
        if pid and pid_alive(pid) and RunStore(run).status().get("state") in ("starting", "running"):
            os.kill(int(pid), signal.SIGKILL)


@pytest.fixture()
def live_run(tmp_path):
    """Makes the live run the live-page tests watch: `live_run(steps, total_steps)` writes run "live" in
    tmp_path/runs (2 rewards, 8 tokens a response, `steps` of `total_steps` written, state running, its pid a
    sleeping process) and returns (the runs folder, the run's writer, its rewards); the process is ended after the
    test."""
    from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run

    trainers: list[subprocess.Popen] = []

    def make(steps: int, total_steps: int):
        runs = tmp_path / "runs"
        runs.mkdir()
        trainers.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"]))  # its live pid
        rewards = tuple(DEFAULT_REWARDS[:2])
        w = write_synthetic_run(runs, "live", steps=steps, rewards=rewards, n_tokens=8, state="running",
                                pid=trainers[-1].pid)
        w.set_status(total_steps=total_steps)
        return runs, w, rewards

    yield make
    for trainer in trainers:
        trainer.kill()
        trainer.wait()


def wait_for_script(page, timeout_ms: int = 60000) -> None:
    """Wait until the page's script run has finished (Streamlit's running indicator is gone)."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_ms)
    page.wait_for_timeout(300)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout_ms)


def open_browser(pw):
    path = chromium_path()
    return pw.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_ARGS)


def sidebar(page, title: str) -> None:
    page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=title, exact=True).click()
    wait_for_script(page)


# The trace named "all satisfied" in the first figure: how many steps it has, and the colour its line is drawn in.
STEPS_JS = ("() => { const p = document.querySelector('.js-plotly-plot');"
            " const t = p && p._fullData && p._fullData.find(d => d.name === 'all satisfied');"
            " return t ? t.x.length : 0; }")
LINE_COLOR_JS = """(name) => {
    const p = document.querySelector('.js-plotly-plot');
    const i = p._fullData.findIndex(d => d.name === name);
    const line = p.querySelectorAll('.scatterlayer .trace')[i].querySelector('.js-line');
    return getComputedStyle(line).stroke; }"""
BACKGROUND_JS = "() => getComputedStyle(document.querySelector('[data-testid=\"stApp\"]')).backgroundColor"
# For every figure on the page: do its legend and its x axis titles / tick labels overlap?
OVERLAPS_JS = """() => {
    const out = [];
    for (const plot of document.querySelectorAll('.js-plotly-plot')) {
        const legend = plot.querySelector('.legend');
        if (!legend) continue;
        const l = legend.getBoundingClientRect();
        const others = plot.querySelectorAll('[class*="xtitle"], .xaxislayer-above text, [class*="xtick"] text');
        for (const e of others) {
            const b = e.getBoundingClientRect();
            if (!b.width || !b.height) continue;
            const h = Math.min(l.right, b.right) - Math.max(l.left, b.left);
            const v = Math.min(l.bottom, b.bottom) - Math.max(l.top, b.top);
            if (h > 1 && v > 1) out.push((plot.querySelector('.gtitle') || {}).textContent + ': ' + e.textContent);
        }
    }
    return out; }"""


def rgb(css: str) -> tuple[float, float, float]:
    r, g, b = (float(x) for x in re.findall(r"[\d.]+", css)[:3])
    return r, g, b


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two CSS rgb() colours."""
    def lum(c):
        ch = [x / 255 for x in rgb(c)]
        ch = [x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4 for x in ch]
        return 0.2126 * ch[0] + 0.7152 * ch[1] + 0.0722 * ch[2]
    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_launch_watch_stop_and_inspect_in_a_real_browser(server, micro_model):
    require(chromium_path() is not None, "Chromium is not installed (looked for /usr/bin/chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require(False, "playwright is not installed in this environment")
    url, runs = server
    ARTIFACTS.mkdir(exist_ok=True)
    t0 = time.time()
    with sync_playwright() as pw:
        browser = open_browser(pw)
        page = browser.new_page(viewport={"width": 1400, "height": 1100}, accept_downloads=True)
        page.set_default_timeout(60000)
        try:
            # --- First page (Runs): time from navigation to its rendered title (printed, not asserted: speed is
            # checked by `mrtpo bench app`); the header has no Deploy button
            t_first = time.time()
            page.goto(url + "/")
            page.get_by_role("heading", name="Runs").first.wait_for()
            first_page_s = round(time.time() - t_first, 2)
            wait_for_script(page)
            assert page.locator('[data-testid="stAppDeployButton"]').count() == 0
            assert page.get_by_role("button", name="Deploy").count() == 0

            # --- Launch: the micro model typed into the model-folder field, a run long enough to be stopped
            page.goto(url + "/launch")
            wait_for_script(page)
            page.get_by_label("Local model folder (a save_pretrained folder; overrides the preset)").fill(
                str(micro_model))
            for label, value in (("Steps", "400"), ("G (responses per prompt)", "2"), ("Prompts per step", "2"),
                                 ("Max new tokens", "8")):
                page.get_by_label(label, exact=True).fill(value)
            page.get_by_role("button", name="Start training").click()
            started = page.get_by_text("Started run")
            started.wait_for(timeout=60000)
            name = re.search(r"Started run (\S+) \(pid", started.inner_text()).group(1)

            # --- Training curves in a new tab right after Start (a new session): the new run, not the previous one
            tab = browser.new_page(viewport={"width": 1400, "height": 1000})
            tab.goto(url + "/curves")
            wait_for_script(tab)
            assert name in tab.locator('[data-testid="stMultiSelect"]').first.inner_text()
            tab.close()

            # --- Training curves right after Start: the new run is the one shown (not the shipped sample runs),
            # with what its trainer is doing until its first step, then its live curves
            sidebar(page, "Training curves")
            picker = page.locator('[data-testid="stMultiSelect"]').first
            assert name in picker.inner_text(), picker.inner_text()
            page.screenshot(path=str(ARTIFACTS / "browser_curves_starting.png"), full_page=True)
            page.wait_for_function(f"() => ({STEPS_JS})() >= 2", timeout=180000)
            assert name in page.locator('[data-testid="stMultiSelect"]').first.inner_text()
            page.screenshot(path=str(ARTIFACTS / "browser_curves.png"), full_page=True)
            assert f"run={name}" in page.url  # the page's state is its URL

            # --- the Runs page's "Selected" line names it too
            sidebar(page, "Runs")
            page.get_by_text(f"Selected: {name}").wait_for()

            # --- Stop it from the Launch page: the run ends as stopped, its completed steps kept
            sidebar(page, "Launch")
            page.locator('[data-testid="stButton"]').get_by_role("button", name="Stop").first.click()
            page.get_by_text("Stopped; its completed steps are kept").wait_for(timeout=120000)
            run = runs / name
            status = RunStore(run).status()
            assert status["state"] == "stopped" and 2 <= status["step"] < 400, status
            assert len(RunStore(run).metrics()) == status["step"]
            page.screenshot(path=str(ARTIFACTS / "browser_stopped.png"), full_page=True)

            # --- Token credit: a sample whose verifiers inspected tokens, opened by a link
            store = RunStore(run)
            step = store.credit_steps()[-1]
            credit = store.credit(step)
            with_spans = credit.groupby("sample")["in_span"].sum()
            sample = int(with_spans.idxmax())
            n_tokens = int((credit["sample"] == sample).sum() // credit["reward"].nunique())
            assert with_spans.max() > 0
            page.goto(url + "/credit?" + urlencode({"run": run.name, "step": step, "sample": sample}))
            wait_for_script(page)
            tokens = page.locator(".mrtpo-hm .tok")
            tokens.first.wait_for()
            assert tokens.count() == n_tokens
            filled_bars = page.locator('.mrtpo-hm i.b[style*="background"]')
            assert filled_bars.count() > 0, "no span overlay drawn"
            assert filled_bars.first.is_visible()
            # hover details: shown on click and kept open, as text that can be selected
            tip = tokens.first.locator(".tip")
            assert not tip.is_visible()
            tokens.first.click()
            assert tip.is_visible()
            text = tip.inner_text()
            assert "credit" in text and "JS" in text and "weight" in text and "span" in text
            assert page.evaluate("(e) => getComputedStyle(e).userSelect", tip.element_handle()) == "text"
            page.screenshot(path=str(ARTIFACTS / "browser_token_credit.png"), full_page=True)

            # --- the sample's credit map downloads as CSV (the button builds it on click)
            with page.expect_download() as info:
                page.get_by_role("button", name="Sample credit CSV").click()
            import pandas as pd

            downloaded = pd.read_csv(info.value.path(), keep_default_na=False)
            assert list(downloaded.columns[:4]) == ["step", "sample", "group", "prompt_key"]
            assert len(downloaded) == n_tokens * credit["reward"].nunique()
            assert set(downloaded["sample"]) == {sample}

            # --- keyboard: the right arrow opens the next sample (when the focus is not in an input)
            samples = sorted(credit["sample"].unique().tolist())
            if sample != samples[-1]:
                page.locator("h1").first.click()
                page.keyboard.press("ArrowRight")
                page.wait_for_function(f"() => location.search.includes('sample={samples[samples.index(sample) + 1]}')")
            (ARTIFACTS / "browser_run.json").write_text(json.dumps(
                {"run": run.name, "step": step, "sample": sample, "tokens": n_tokens, "stopped_at": status["step"],
                 "span_bars": filled_bars.count(), "first_page_s": first_page_s,
                 "seconds": round(time.time() - t0, 1)}))
        except BaseException:
            page.screenshot(path=str(ARTIFACTS / "browser_failure.png"), full_page=True)
            raise
        finally:
            browser.close()


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_colours_and_legends_on_both_themes(tmp_path, theme):
    """Lines and heatmap text that must contrast with the page do so on Streamlit's light and dark themes
    (regression: the black all-satisfied line and the heatmap legend vanished on dark), and no legend overlaps an
    x axis title or tick labels (regression: JS box plot labels, multi-run legends over the x title)."""
    from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run

    runs = tmp_path / "runs"
    names = ["grpo-a", "gdpo-b", "mrtpo-c", "mrtpo-d"]
    for i, n in enumerate(names):  # four runs to compare
        write_synthetic_run(runs, n, steps=12, method=n.split("-")[0], rewards=DEFAULT_REWARDS, seed=i)
    with app_in_browser(tmp_path, theme, runs=runs, theme=theme) as (url, page):
        page.goto(url + "/curves?run=sample/tiny-instruct-mrtpo-demo")
        wait_for_script(page)
        page.locator(".js-plotly-plot").last.wait_for()
        page.wait_for_timeout(1000)
        background = page.evaluate(BACKGROUND_JS)
        line = page.evaluate(LINE_COLOR_JS, "all satisfied")
        assert contrast(line, background) >= 3, (theme, line, background)
        assert page.evaluate(OVERLAPS_JS) == []
        page.screenshot(path=str(ARTIFACTS / f"browser_{theme}_curves.png"), full_page=True)

        page.goto(url + "/credit?run=sample/smollm2-135m-mrtpo-demo")
        wait_for_script(page)
        legend = page.locator(".mrtpo-hm .legend").first
        legend.wait_for()
        color = page.evaluate("(e) => getComputedStyle(e).color", legend.element_handle())
        assert contrast(color, background) >= 4.5, (theme, color, background)
        page.screenshot(path=str(ARTIFACTS / f"browser_{theme}_token_credit.png"), full_page=True)

        page.goto(url + "/js?run=sample/smollm2-135m-mrtpo-demo")
        wait_for_script(page)
        page.locator(".js-plotly-plot").first.wait_for()
        page.wait_for_timeout(1000)
        assert page.evaluate(OVERLAPS_JS) == []
        page.screenshot(path=str(ARTIFACTS / f"browser_{theme}_js.png"), full_page=True)
        page.get_by_role("tab", name="This step: in vs out of spans").click()  # the box plots: only now drawn
        page.wait_for_url("**view=step**")
        wait_for_script(page)
        page.locator(".js-plotly-plot").first.wait_for()
        page.wait_for_timeout(1000)
        assert page.evaluate(OVERLAPS_JS) == []
        page.screenshot(path=str(ARTIFACTS / f"browser_{theme}_js_step.png"), full_page=True)

        page.goto(url + "/compare?" + urlencode([("run", n) for n in names]))
        wait_for_script(page)
        page.locator(".js-plotly-plot").first.wait_for()
        page.wait_for_timeout(1000)
        assert page.evaluate(OVERLAPS_JS) == []
        drawn = page.evaluate("() => document.querySelector('.js-plotly-plot')._fullData.map(d => d.name)")
        assert drawn == names
        page.screenshot(path=str(ARTIFACTS / f"browser_{theme}_compare.png"), full_page=True)


def test_run_store_text_is_shown_as_text_never_markdown(tmp_path):
    """A shared run folder whose status.state, status.error and config.schema_version hold a Markdown image of a
    tracking pixel: no page requests the pixel or draws an image or a link for it, and the runs page shows the
    text as typed (issue 16, "Run-store text rendered as Markdown")."""
    require(chromium_path() is not None, "Chromium is not installed (looked for /usr/bin/chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require(False, "playwright is not installed in this environment")
    import http.server
    import threading

    from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run

    hits: list[str] = []

    class Pixel(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 -- the name http.server calls
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.end_headers()

        def log_message(self, *args):
            pass

    pixel_server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pixel)
    threading.Thread(target=pixel_server.serve_forever, daemon=True).start()
    bait = f"![x](http://127.0.0.1:{pixel_server.server_address[1]}/pixel.png)"
    runs = tmp_path / "runs"
    for name, state in (("inject-state", bait), ("inject-failed", "failed")):
        w = write_synthetic_run(runs, name, steps=2, rewards=DEFAULT_REWARDS[:2], n_tokens=6)
        status = json.loads((w.path / "status.json").read_text())
        (w.path / "status.json").write_text(json.dumps({**status, "state": state, "error": f"boom {bait} **bold**"}))
        config = json.loads((w.path / "config.json").read_text())
        (w.path / "config.json").write_text(json.dumps({**config, "schema_version": bait}))
    proc, url = start_app(tmp_path, runs, tmp_path / "streamlit.log")
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        with sync_playwright() as pw:
            browser, page = browser_page(pw)
            try:
                texts = {}
                for path in ("/?run=inject-state", "/curves?run=inject-failed", "/launch", "/credit?run=inject-state",
                             "/js?run=inject-failed", "/debugger?run=inject-state",
                             "/compare?" + urlencode([("run", "inject-state"), ("run", "inject-failed")])):
                    page.goto(url + path)
                    wait_for_script(page)
                    page.wait_for_timeout(1500)
                    if path.startswith("/curves"):  # on a loaded machine the run's error can take longer to show
                        page.get_by_text(f"boom {bait} **bold**").first.wait_for(timeout=30000)
                    texts[path] = page.inner_text("body")
                    drawn = page.evaluate("() => [...document.querySelectorAll('img, a')].filter(e => (e.src || e.href "
                                          "|| '').includes('pixel')).map(e => e.closest('[data-testid]')"
                                          "?.getAttribute('data-testid') + ': ' + e.parentElement.innerText)")
                    assert drawn == [], (path, drawn)
                page.screenshot(path=str(ARTIFACTS / "browser_injection.png"), full_page=True)
                assert hits == [], f"the pixel was requested: {hits}"
                assert bait in texts["/?run=inject-state"]  # shown literally (in the reader's warnings)
                assert f"boom {bait} **bold**" in texts["/curves?run=inject-failed"]  # the error, as text
            except BaseException:
                page.screenshot(path=str(ARTIFACTS / "browser_injection_failure.png"), full_page=True)
                raise
            finally:
                browser.close()
    finally:
        stop_app(proc)
        pixel_server.shutdown()


# Counts DOM changes inside the page's Plotly charts from now on (a re-sent figure is re-rendered: its SVG changes;
# in `ui.charts`' component, its plot's data-draws too).
COUNT_CHART_CHANGES_JS = """() => {
    window.__chartChanges = 0;
    const main = document.querySelector('[data-testid="stMain"]');
    new MutationObserver(records => {
        for (const r of records) {
            const el = r.target.nodeType === 1 ? r.target : r.target.parentElement;
            if (el && el.closest('[data-testid="stPlotlyChart"], .mrtpo-chart')) window.__chartChanges += 1;
        }
    }).observe(main, {subtree: true, childList: true, attributes: true, characterData: true});
}"""
# Counts the changes of the first figure's step count from now on (each is one redraw of the figures).
COUNT_REDRAWS_JS = """() => {
    const steps = STEPS;
    window.__redraws = 0;
    let last = steps();
    setInterval(() => { const n = steps(); if (n !== last) { window.__redraws += 1; last = n; } }, 100);
}"""


@contextlib.contextmanager
def live_curves_page(tmp_path: Path, live_run, steps: int, total_steps: int):
    """`mrtpo app` on a runs folder with one live run (the `live_run` fixture's), its Training curves open in
    Chromium until the figures show the `steps` steps: yields (the page, the run's writer, its rewards); closes and
    stops the app after."""
    from playwright.sync_api import sync_playwright

    runs, w, rewards = live_run(steps, total_steps)
    proc, url = start_app(tmp_path, runs, tmp_path / "streamlit.log")
    try:
        with sync_playwright() as pw:
            browser = open_browser(pw)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{url}/curves?run=live")
            wait_for_script(page)
            page.wait_for_function(f"() => ({STEPS_JS})() >= {steps}", timeout=60000)
            yield page, w, rewards
            browser.close()
    finally:
        stop_app(proc)


def test_live_curves_send_the_progress_line_and_redraw_the_figures_at_most_every_few_seconds(tmp_path, live_run):
    """Watching a live run (issue 15: "live watching must not slow training"): the progress line follows every
    step within a poll; the figures are not re-rendered while no step is written, and while steps arrive every
    second they are redrawn at most once per FIGURE_REFRESH_S (before: on every 2 s poll), catching up after."""
    pytest.importorskip("playwright.sync_api")
    require(chromium_path() is not None, "no Chromium")
    import numpy as np

    from mrtpo_viz.tools.synthetic import synthetic_metrics
    from mrtpo_viz.ui import FIGURE_REFRESH_S

    with live_curves_page(tmp_path, live_run, steps=3, total_steps=30) as (page, w, rewards):
        page.get_by_text("step 3/30").first.wait_for(timeout=10000)
        page.wait_for_timeout(1500)  # the charts' own first-draw work settles
        page.evaluate(COUNT_CHART_CHANGES_JS)
        page.wait_for_timeout(3 * 2000 + 1000)  # three polls of the progress fragment, no new step
        assert page.evaluate("() => window.__chartChanges") == 0, "unchanged figures were drawn again"
        page.evaluate(COUNT_REDRAWS_JS.replace("STEPS", STEPS_JS))
        started = time.monotonic()
        for step in range(4, 16):  # a step a second: 12 s, longer on a loaded machine
            w.append_metrics(synthetic_metrics(step, rewards, np.random.default_rng(step)))
            w.set_status(step=step)
            page.wait_for_timeout(1000)
        page.get_by_text("step 15/30").first.wait_for(timeout=6000)  # the progress line keeps up
        redraws = page.evaluate("() => window.__redraws")
        elapsed = time.monotonic() - started
        # at most once per FIGURE_REFRESH_S: one at once, then one per full period that passed
        assert 1 <= redraws <= 1 + int(elapsed // FIGURE_REFRESH_S), f"{redraws} redraws of the figures in {elapsed:.1f} s"
        page.wait_for_function(f"() => ({STEPS_JS})() >= 15", timeout=(FIGURE_REFRESH_S + 8) * 1000)


def drag_across(page, plot: str, start: float, end: float) -> None:
    """A mouse drag across the first drag area of `plot` (a CSS selector), from `start` to `end` of its width at half
    its height: Plotly's zoom to that stretch of the x axis."""
    box = page.locator(f"{plot} .nsewdrag").first.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * start, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * (start + end) / 2, y, steps=8)
    page.mouse.move(box["x"] + box["width"] * end, y, steps=8)
    page.mouse.up()


def test_charts_draw_with_the_plotly_bundle_and_a_live_redraw_keeps_the_users_zoom(tmp_path, live_run):
    """`ui.charts`: the chart pages draw with the plotly.js bundle built at set-up (fetched once, Streamlit's 4.7 MB Plotly
    module never), in place: a live figure redrawn with new steps keeps the x range the user zoomed to; the
    modebar's Full screen button fills the screen and back; the plot follows its element's width."""
    pytest.importorskip("playwright.sync_api")
    require(chromium_path() is not None, "no Chromium")
    import numpy as np
    from plotly.offline import get_plotlyjs_version

    from mrtpo_viz.tools.plotly_bundle import TRACES
    from mrtpo_viz.tools.synthetic import synthetic_metrics
    from mrtpo_viz.ui.charts import bundle

    require_tool(bundle() is not None, "the plotly.js bundle is not in .venv/share/mrtpo",
                 "`make` installs it with npm")
    x_range = "() => document.querySelector('.mrtpo-chart')._fullLayout.xaxis.range.map(v => Math.round(v * 10) / 10)"
    draws = "() => Number(document.querySelector('.mrtpo-chart').dataset.draws)"
    with live_curves_page(tmp_path, live_run, steps=12, total_steps=40) as (page, w, rewards):
        assert page.evaluate("() => window.Plotly.version") == get_plotlyjs_version()
        # the bundle `make` wrote holds every trace the app draws
        traces = page.evaluate("() => Object.keys(window.Plotly.PlotSchema.get().traces)")
        assert set(TRACES) <= set(traces), traces
        fetched = page.evaluate("() => performance.getEntriesByType('resource').map(e => e.name)")
        assert [f for f in fetched if bundle()[1] in f] and not [f for f in fetched if "/PlotlyChart." in f]
        assert page.locator(".mrtpo-chart.js-plotly-plot").count() >= 1
        before, first_draws = page.evaluate(x_range), page.evaluate(draws)
        drag_across(page, ".mrtpo-chart", 0.2, 0.5)
        page.wait_for_timeout(500)
        zoomed = page.evaluate(x_range)
        assert zoomed != before and zoomed[1] < 12, (before, zoomed)
        for step in range(13, 17):
            w.append_metrics(synthetic_metrics(step, rewards, np.random.default_rng(step)))
        w.set_status(step=16)
        page.wait_for_function(f"() => ({STEPS_JS})() >= 16", timeout=30000)
        assert page.evaluate(draws) > first_draws  # redrawn with the new steps, in the same element
        assert page.evaluate(x_range) == zoomed  # the user's zoom kept
        # the modebar's Full screen button: the plot fills the screen, then is back at its height
        height = "() => document.querySelector('.mrtpo-chart')._fullLayout.height"
        own = page.evaluate(height)
        button = page.locator('.mrtpo-chart .modebar-btn[data-title="Full screen"]').first
        page.locator(".mrtpo-chart").first.hover()
        button.click()
        page.wait_for_function("() => document.fullscreenElement?.classList.contains('mrtpo-chart')")
        page.wait_for_function(f"() => ({height})() === window.innerHeight && window.innerHeight > {own}")
        page.locator(".mrtpo-chart").first.hover()
        button.click()
        page.wait_for_function(f"() => !document.fullscreenElement && ({height})() === {own}")
        width = "() => document.querySelector('.mrtpo-chart')._fullLayout.width"
        wide = page.evaluate(width)
        page.set_viewport_size({"width": 700, "height": 1000})  # a narrower window: the plot follows
        page.wait_for_function(f"() => ({width})() < {wide} - 100", timeout=10000)


def test_compare_targets_survive_clearing_and_picking_runs_again(tmp_path):
    """Regression: after "Clear all" runs and picking runs again, the Targets box came back empty (the browser
    sent the vanished widget's last value) and the steps-to-target table was gone."""
    require(chromium_path() is not None, "Chromium is not installed (looked for /usr/bin/chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require(False, "playwright is not installed in this environment")
    from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run

    runs = tmp_path / "runs"
    for i, n in enumerate(["gdpo-a", "mrtpo-b"]):
        write_synthetic_run(runs, n, steps=12, method=n.split("-")[0], rewards=DEFAULT_REWARDS, seed=i)
    proc, url = start_app(tmp_path, runs, tmp_path / "streamlit.log")
    try:
        with sync_playwright() as pw:
            browser, page = browser_page(pw)
            try:
                page.goto(url + "/compare?" + urlencode([("run", "gdpo-a"), ("run", "mrtpo-b")]))
                wait_for_script(page)
                box = page.get_by_label("Targets (comma-separated rates in [0, 1])")
                box.fill("0.2, 0.6")
                box.press("Enter")
                wait_for_script(page)
                runs_box = page.locator('[data-testid="stMultiSelect"]').first
                runs_box.get_by_role("button", name="Clear all").first.click()
                wait_for_script(page)
                page.get_by_text("Pick runs to compare.").wait_for()
                for name in ("gdpo-a", "mrtpo-b"):
                    runs_box.locator("input").first.click()
                    runs_box.locator("input").first.fill(name)
                    page.get_by_role("option").filter(has_text=name).first.click()
                    wait_for_script(page)
                page.keyboard.press("Escape")
                wait_for_script(page)
                page.wait_for_timeout(1500)
                assert box.input_value() == "0.2, 0.6"  # the user's targets, kept
                page.get_by_text("Steps to reach an all-satisfied rate").wait_for()
                assert page.locator('table[data-mrtpo="table"]').count() >= 1, "the steps-to-target table is gone"
            finally:
                browser.close()
    finally:
        stop_app(proc)


# From page start: when the Runs table first appeared in the page (ms since navigation start).
MARK_TABLE_JS = """
window.__tableAt = null;
new MutationObserver(() => {
    if (window.__tableAt === null && document.querySelector('[data-testid="stDataFrame"]'))
        window.__tableAt = performance.now();
}).observe(document, {subtree: true, childList: true});
"""


def chart_code() -> str:
    """A part of the URL of what the app's server has the browser draw the figures with: the plotly.js
    bundle where this environment has it (`ui.charts.bundle`: the server, started from it, serves it), else
    Streamlit's Plotly chart module."""
    from mrtpo_viz.ui.charts import bundle

    found = bundle()
    return "/" + found[1] if found else "/static/js/PlotlyChart."


# When (ms since navigation start) each request for the chart code started.
CHART_CODE_JS = "(part) => performance.getEntriesByType('resource').filter(e => e.name.includes(part)).map(e => e.startTime)"
DRAWN_JS = "() => document.querySelectorAll('.js-plotly-plot .main-svg').length > 0"


def playwright_or_skip():
    """Playwright's sync_playwright, after checking that Chromium and Playwright are there (see `require`)."""
    require(chromium_path() is not None, "Chromium is not installed (looked for /usr/bin/chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require(False, "playwright is not installed in this environment")
    return sync_playwright


def browser_page(pw, width: int = 1400, height: int = 1000):
    """Chromium and a new page in it (width x height, 90 s timeouts): (browser, page)."""
    browser = open_browser(pw)
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(90000)
    return browser, page


def test_the_runs_page_loads_the_chart_module_after_its_table_and_a_chart_page_reuses_it(tmp_path):
    """The first page (Runs, no charts) asks for the chart code (the plotly.js bundle, or Streamlit's ~4.7 MB
    Plotly module without it: `chart_code`) only once its own table is on the page, so that it does not compete
    with it; the first chart page opened from there reuses that code (one request in all) and draws its charts
    (issue 14, the app's first page fast)."""
    sync_playwright = playwright_or_skip()
    from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run

    runs = tmp_path / "runs"
    write_synthetic_run(runs, "demo", steps=3, rewards=DEFAULT_REWARDS[:2], n_tokens=6)
    proc, url = start_app(tmp_path, runs, tmp_path / "streamlit.log")
    try:
        with sync_playwright() as pw:
            browser, page = browser_page(pw)
            page.add_init_script(MARK_TABLE_JS)
            try:
                page.goto(url + "/")
                wait_for_script(page)
                code = chart_code()
                page.wait_for_function(f"() => ({CHART_CODE_JS})({json.dumps(code)}).length > 0", timeout=30000)
                requested = page.evaluate(CHART_CODE_JS, code)
                table_at = page.evaluate("() => window.__tableAt")
                assert table_at is not None and len(requested) == 1 and requested[0] >= table_at, (table_at, requested)
                sidebar(page, "Training curves")
                page.wait_for_function(DRAWN_JS)
                assert len(page.evaluate(CHART_CODE_JS, code)) == 1
            except BaseException:
                ARTIFACTS.mkdir(exist_ok=True)
                page.screenshot(path=str(ARTIFACTS / "browser_chart_module_failure.png"), full_page=True)
                raise
            finally:
                browser.close()
    finally:
        stop_app(proc)


# When (ms since navigation start) the page's script state first became "running" on the page.
MARK_RUNNING_JS = """
window.__runningAt = null;
new MutationObserver(() => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (window.__runningAt === null && app && app.getAttribute('data-test-script-state') === 'running')
        window.__runningAt = performance.now();
}).observe(document, {subtree: true, childList: true, attributes: true});
"""


def test_a_chart_page_opened_cold_has_plotly_fetched_before_its_script_runs(tmp_path):
    """The server's middleware (mrtpo_viz/server/asgi.py, `serve.ChartPagePreload`) puts the chart code's preload (the
    plotly.js bundle's, or Streamlit's chart module's: `chart_code`) in a chart page's HTML: opened cold, the browser
    has fetched it before the page's script starts, while the server is idle (it was fetched after the script's
    first elements, from the server busy running the script), and the charts draw. Other pages' HTML is Streamlit's
    own; a gzip-asking client gets the edited page whole."""
    from mrtpo_viz.server.serve import CHART_PAGES
    from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run

    runs = tmp_path / "runs"
    write_synthetic_run(runs, "demo", steps=3, rewards=DEFAULT_REWARDS[:2], n_tokens=6)
    code = chart_code()
    with app_in_browser(tmp_path, "chart_preload", runs) as (url, page):
        for path in ("", "launch", "credit", *CHART_PAGES):
            request = urllib.request.Request(f"{url}/{path}", headers={"Accept-Encoding": "gzip"})
            with urllib.request.urlopen(request, timeout=30) as answer:
                data = answer.read()
                gzipped = answer.headers.get("Content-Encoding") == "gzip"
            assert not (gzipped and path in CHART_PAGES), path  # the chart pages' HTML is edited, sent whole
            html = (gzip.decompress(data) if gzipped else data).decode()
            preload = re.findall(r'<link rel="(?:module)?preload"[^>]* href="\.(/[^"]+)"', html)
            assert any(code in p for p in preload) == (path in CHART_PAGES), path
            assert html.rstrip().endswith("</html>") and html.count("</head>") == 1, path
        page.add_init_script(MARK_RUNNING_JS)
        page.goto(url + "/curves")
        wait_for_script(page)
        page.wait_for_function(DRAWN_JS)
        fetched = page.evaluate("(part) => performance.getEntriesByType('resource')"
                                ".filter(e => e.name.includes(part)).map(e => e.responseEnd)", code)
        running_at = page.evaluate("() => window.__runningAt")
        assert len(fetched) == 1 and running_at is not None and fetched[0] < running_at, (fetched, running_at)


# The browser modules (`static/js/*.js`) fetched since navigation start, by file name.
JS_MODULES_JS = ("() => performance.getEntriesByType('resource').map(e => new URL(e.name).pathname)"
                 ".filter(p => p.startsWith('/static/js/')).map(p => p.split('/').pop())")


def test_after_the_first_page_has_settled_no_page_waits_for_a_module(tmp_path):
    """Once the first page of a session has settled, the browser loads the module of every element the app's pages
    draw (`ui.app_modules`, the chart element's among them): each page opened from there through the sidebar then draws with
    modules already loaded and fetches none. Before, each page fetched its widgets' modules (Multiselect, Slider,
    Radio, ...) from the server while it ran the page's script, 0.1-0.45 s each on a fresh server. A module a page
    fetches here is one APP_ELEMENTS lacks."""
    from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run
    from mrtpo_viz.ui.charts import bundle
    from mrtpo_viz.ui.prefetch import app_modules

    runs = tmp_path / "runs"
    write_synthetic_run(runs, "demo", steps=3, rewards=DEFAULT_REWARDS[:2], n_tokens=6)
    with app_in_browser(tmp_path, "app_modules", runs) as (url, page):
        page.goto(url + "/")
        wait_for_script(page)
        page.wait_for_function("() => document.documentElement.getAttribute('data-mrtpo-prefetched') === 'done'",
                               timeout=60000)
        loaded = set(page.evaluate(JS_MODULES_JS))
        assert {m.split("/")[-1] for m in app_modules(bundled=bundle() is not None)} <= loaded  # as the server's
        late = {}
        for title in ("Launch", "Training curves", "Token credit", "JS divergence", "Verifier debugger",
                      "Compare runs", "Runs"):
            sidebar(page, title)
            page.wait_for_timeout(800)
            now = set(page.evaluate(JS_MODULES_JS))
            if now - loaded:
                late[title] = sorted(now - loaded)
            loaded |= now
        assert not late, f"pages fetched modules the prefetch did not load: {late}"


# Start times (ms since navigation) of the fetches of an element's module (by name) and of the page's "settled" word.
MODULE_FETCHES_JS = """(name) => {
    const entries = performance.getEntriesByType('resource');
    return [entries.filter(e => new RegExp('/' + name + '\\\\.[^/]*\\\\.js$').test(e.name)).map(e => e.startTime),
            entries.filter(e => e.name.endsWith('/_mrtpo/settled')).map(e => e.startTime)];
}"""


def test_the_sample_pages_show_their_text_and_tables_without_the_highlighter_or_the_data_frame_module(tmp_path):
    """Token credit and JS divergence show a sample's response (escaped, whitespace kept) without `st.code`, whose
    element module, Streamlit's syntax highlighter (1.6 MB), was fetched and run on every cold visit of Token credit
    for a closed expander: the page was shown ~0.3 s later; and the sample's small tables as HTML (`ui.html_table`)
    without `st.dataframe` / `st.table`, whose module (1.7 MB with Apache Arrow) made a cold visit ~0.3 s longer
    (docs/results/app-speed.md). The modules may still come with the idle prefetch of every element's module
    (`ui.prefetch`), which starts after the page has settled."""
    from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run

    runs = tmp_path / "runs"
    writer = write_synthetic_run(runs, "demo", steps=2, rewards=DEFAULT_REWARDS[:2], n_tokens=6)
    response = RunStore(writer.path).credit(2).query("sample == 0")["response"].iloc[0]
    with app_in_browser(tmp_path, "response_text", runs) as (url, page):
        for path in ("credit", "js"):
            page.goto(f"{url}/{path}?run=demo&step=2&sample=0")  # a first page: nothing prefetched yet
            wait_for_script(page)
            page.get_by_text("Response text", exact=False).first.click()
            shown = page.locator('pre[data-mrtpo="response"]').first
            shown.wait_for(state="visible")
            assert shown.inner_text() == response
            metrics = page.locator('table[data-mrtpo="table"]').filter(has_text="mass_control").first
            metrics.wait_for(state="visible")
            assert metrics.locator("tbody tr").count() >= 1
            page.wait_for_function("() => performance.getEntriesByType('resource')"
                                   ".some(e => e.name.endsWith('/_mrtpo/settled'))", timeout=30000)
            for module in ("StreamlitSyntaxHighlighter", "DataFrame"):
                fetched, settled = page.evaluate(MODULE_FETCHES_JS, module)
                assert all(t >= settled[0] for t in fetched), (path, module, fetched, settled)


def test_the_debugger_selects_a_disagreement_row_without_the_data_frame_module(tmp_path):
    """The Verifier debugger's disagreement table is an HTML table whose rows are selected (`ui.pick_table`), not
    `st.dataframe` (its 1.7 MB module made the page's cold visit ~0.3 s longer, docs/results/app-speed.md): a click
    on a row, or Enter on a focused row, selects it (marked, and named by the "Open ..." button), the button opens
    that sample in Token credit; each row's link is to the same sample, in a new tab; and the DataFrame module is not
    fetched before the page has settled."""
    from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run

    runs = tmp_path / "runs"
    write_synthetic_run(runs, "demo", steps=3, rewards=DEFAULT_REWARDS, n_tokens=8)
    with app_in_browser(tmp_path, "debugger_rows", runs) as (url, page):
        page.goto(f"{url}/debugger?run=demo")
        wait_for_script(page)
        rows = page.locator('.mrtpo-pick table[data-mrtpo="table"] tbody tr')
        rows.first.wait_for(state="visible")
        assert rows.count() >= 3
        page.wait_for_function("() => performance.getEntriesByType('resource')"
                               ".some(e => e.name.endsWith('/_mrtpo/settled'))", timeout=30000)
        fetched, settled = page.evaluate(MODULE_FETCHES_JS, "DataFrame")
        assert all(t >= settled[0] for t in fetched), (fetched, settled)
        # the table counts as drawn for the "settled" check (`ui.prefetch`), or the page settles only at its time-out
        from mrtpo_viz.ui.prefetch import CHART_SELECTOR, DRAWN_SELECTOR

        assert page.evaluate("([a, b]) => [...document.querySelectorAll(a)].map((c) => !!c.querySelector(b))",
                             [CHART_SELECTOR, DRAWN_SELECTOR]) == [True, True, True]
        head = [h.strip() for h in page.locator('.mrtpo-pick thead th').all_inner_texts()]

        def row_text(i: int) -> dict[str, str]:
            return dict(zip(head, [c.strip() for c in rows.nth(i).locator("td").all_inner_texts()], strict=True))

        def button_names(i: int) -> None:
            row = row_text(i)
            page.get_by_role("button", name=f"Open step {row['step']} sample {row['sample']} ").wait_for()
            assert rows.nth(i).get_attribute("aria-selected") == "true"
            assert [r.get_attribute("aria-selected") for r in rows.all()].count("true") == 1

        button_names(0)  # the first row until one is selected
        assert float(row_text(0)["mass_in"]) <= float(row_text(2)["mass_in"])  # the most disagreeing first
        width = re.search(r"width: ([\d.]+)%", rows.nth(0).locator(".bar > span").get_attribute("style"))
        assert abs(float(width.group(1)) - 100 * float(row_text(0)["mass_in"])) <= 0.5  # the bar of mass_in
        rows.nth(2).locator("td").nth(1).click()
        button_names(2)
        rows.nth(1).focus()
        page.keyboard.press("Enter")
        button_names(1)
        chosen = row_text(1)
        link = rows.nth(1).locator("a")
        assert link.get_attribute("target") == "_blank"
        assert f"step={chosen['step']}&sample={chosen['sample']}" in link.get_attribute("href")
        page.get_by_role("button", name=f"Open step {chosen['step']} sample {chosen['sample']} ").click()
        page.get_by_role("heading", name="Token credit").wait_for()
        wait_for_script(page)
        page.wait_for_function(f"() => ({SELECT_TEXTS_JS})()['Step'] === '{chosen['step']}'")


def test_the_js_step_views_table_shows_every_column(tmp_path):
    """JS divergence's "This step" in / out table (an HTML table, `ui.html_table`) is not cut: in half of the page,
    beside its figure, its six columns were cut at the third (the table scrolled sideways)."""
    from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run

    runs = tmp_path / "runs"
    write_synthetic_run(runs, "demo", steps=2, rewards=DEFAULT_REWARDS, n_tokens=8)
    with app_in_browser(tmp_path, "js_step_table", runs) as (url, page):
        page.goto(f"{url}/js?run=demo&view=step")
        wait_for_script(page)
        table = page.locator('table[data-mrtpo="table"]').filter(has_text="js_out")
        table.wait_for(state="visible")
        assert table.locator("thead th").count() == 6
        wrap = table.locator("xpath=..")
        assert wrap.evaluate("(w) => w.scrollWidth <= w.clientWidth"), wrap.evaluate("(w) => [w.scrollWidth, w.clientWidth]")


# A warm session's log line (`ui.warm`, with STREAMLIT_LOGGER_LEVEL=debug): page, query, ms, how it ended.
WARM_LINE = re.compile(r"warm (\w+)\?(\S*): \d+ ms, (.*)")


def warm_lines(log: Path) -> list[tuple[str, str, str]]:
    return WARM_LINE.findall(log.read_text(errors="replace"))


def test_after_a_page_the_server_fills_its_caches_by_running_the_other_chart_pages(tmp_path):
    """`ui.warm`: once the Runs page is drawn, the server runs Training curves, JS divergence and the Verifier
    debugger for the run this session opens them on, each in a session without a browser, to its end and without
    an exception (the user's first visit of each then draws from the caches); each is warmed once for the same runs;
    nothing is warmed for the pages' default run while a run trains, and a chosen run is warmed by name."""
    from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run

    runs = tmp_path / "runs"
    write_synthetic_run(runs, "demo", steps=3, rewards=DEFAULT_REWARDS[:2], n_tokens=6)
    log = tmp_path / "streamlit.log"
    with app_in_browser(tmp_path, "warm", runs, env={"STREAMLIT_LOGGER_LEVEL": "debug"}) as (url, page):
        page.goto(url + "/")
        wait_for_script(page)
        deadline = time.time() + 60
        while len(warm_lines(log)) < 3 and time.time() < deadline:
            time.sleep(0.3)
        assert sorted(warm_lines(log)) == [("curves", "", "finished"), ("debugger", "", "finished"),
                                           ("js", "", "finished")], warm_lines(log)
        text = log.read_text(errors="replace")  # started by the browser's word that its first page is drawn
        assert -1 < text.find("warm: a browser's page is drawn") < text.find("warm curves?")
        sidebar(page, "Training curves")  # warmed: nothing of the same runs is warmed again
        page.wait_for_timeout(1500)
        assert len(warm_lines(log)) == 3
        assert "Traceback" not in log.read_text(errors="replace")
        write_synthetic_run(runs, "live", steps=1, rewards=DEFAULT_REWARDS[:2], n_tokens=6, state="running",
                            pid=os.getpid())
        sidebar(page, "Runs")
        page.wait_for_timeout(2000)
        assert len(warm_lines(log)) == 3  # a run trains and no run is chosen: the pages would open on it
        page.goto(url + "/credit?run=demo")  # a chosen run that does not train: warmed, named in the link
        wait_for_script(page)
        deadline = time.time() + 60
        while len(warm_lines(log)) < 6 and time.time() < deadline:
            time.sleep(0.3)
        assert sorted(warm_lines(log)[3:]) == [("curves", "run=demo", "finished"), ("debugger", "run=demo", "finished"),
                                               ("js", "run=demo", "finished")], warm_lines(log)


def test_no_page_sends_a_request_outside_the_app(tmp_path):
    """Every page, opened cold and through the sidebar, requests nothing but the app's own server: a page's
    ":material/...:" icon became the tab's favicon, fetched from an outside font host (the app must work offline
    and leak nothing); the favicon is the app's own file."""
    sync_playwright = playwright_or_skip()
    from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run

    runs = tmp_path / "runs"
    write_synthetic_run(runs, "demo", steps=3, rewards=DEFAULT_REWARDS[:2], n_tokens=6)
    proc, url = start_app(tmp_path, runs, tmp_path / "streamlit.log")
    outside: list[str] = []
    try:
        with sync_playwright() as pw:
            browser, page = browser_page(pw)
            page.on("request", lambda r: None if r.url.startswith((url, "data:", "blob:")) else outside.append(r.url))
            try:
                page.goto(url + "/credit")
                wait_for_script(page)
                for title in ("Runs", "Launch", "Training curves", "Token credit", "JS divergence", "Verifier debugger",
                              "Compare runs"):
                    sidebar(page, title)
                    page.wait_for_timeout(500)
                icon = page.evaluate("() => document.querySelector('link[rel~=\"icon\"]').href")
            finally:
                browser.close()
    finally:
        stop_app(proc)
    assert outside == []
    assert icon.startswith(url)


@contextlib.contextmanager
def app_in_browser(tmp_path: Path, shot: str, runs: Path | None = None, width: int = 1400, height: int = 1000,
                   theme: str = "light", env: dict[str, str] | None = None):
    """`mrtpo app` on `runs` (an empty runs folder by default: the shipped runs only) with `theme` (and `env` in its
    environment; its log is tmp_path/streamlit.log) and a Chromium page: yields (url, page); a failure leaves a
    screenshot `browser_<shot>_failure.png` in test-artifacts/."""
    sync_playwright = playwright_or_skip()
    runs = runs or tmp_path / "runs"
    runs.mkdir(exist_ok=True)
    proc, url = start_app(tmp_path, runs, tmp_path / "streamlit.log", theme, env)
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        with sync_playwright() as pw:
            browser, page = browser_page(pw, width, height)
            try:
                yield url, page
            except BaseException:
                page.screenshot(path=str(ARTIFACTS / f"browser_{shot}_failure.png"), full_page=True)
                raise
            finally:
                browser.close()
    finally:
        stop_app(proc)


# The text each select box of the page shows, by its label.
SELECT_TEXTS_JS = """() => Object.fromEntries([...document.querySelectorAll('[data-testid="stSelectbox"] input')].map(
    i => [i.getAttribute('aria-label'), i.value]))"""


@pytest.mark.parametrize("page_name", ["credit", "js"])
def test_switching_the_run_shows_the_new_runs_relevance_and_sample_labels(tmp_path, page_name):
    """Issue 26 bug 3: after switching from a run trained with `swap` to one trained with `swap_specific`, the
    Relevance box still read "swap (trained)" and the sample box the previous run's label, over the new run's
    recomputed tokens. After the switch every select box shows what a fresh visit of the same link shows."""
    with app_in_browser(tmp_path, f"{page_name}_run_switch") as (url, page):
        page.goto(f"{url}/{page_name}?run=sample/study-v2-mrtpo-swap-s0&step=145&sample=5")
        wait_for_script(page)
        page.wait_for_function(f"() => ({SELECT_TEXTS_JS})()['Relevance'] === 'swap (trained)'")
        box = page.locator('[data-testid="stSelectbox"] input').first
        for attempt in range(3):  # a rerun still under way on a loaded machine can close the list before the click
            box.click()
            box.fill("swap-specific")
            page.get_by_role("option").filter(has_text="study-v2-mrtpo-swap-specific-s0").first.click()
            wait_for_script(page)
            try:
                page.wait_for_function("() => location.search.includes('swap-specific')", timeout=20000)
                break
            except Exception:
                if attempt == 2:
                    raise
        wait_for_script(page)
        page.wait_for_timeout(1000)
        switched = page.evaluate(SELECT_TEXTS_JS)
        page.screenshot(path=str(ARTIFACTS / f"browser_{page_name}_run_switch.png"), full_page=True)
        assert switched["Relevance"] == "swap_specific (trained)", switched
        assert page.get_by_text("recomputed under").count() == 0  # no recomputation: its own variant
        link = page.url
        page.goto(link)
        wait_for_script(page)
        page.wait_for_function(f"() => ({SELECT_TEXTS_JS})()['Relevance'] !== undefined")
        page.wait_for_timeout(1000)
        assert page.evaluate(SELECT_TEXTS_JS) == switched, (link, switched)


# {run: its row} of the Runs table (the table's accessible cells), each row as {column: text}.
RUN_ROWS_JS = """() => {
    const t = document.querySelector('[data-testid="stDataFrame"] table');
    if (!t) return {};
    const head = [...t.querySelectorAll('th')].map(h => h.innerText.trim());
    const out = {};
    for (const tr of t.querySelectorAll('tbody tr')) {
        const cells = [...tr.querySelectorAll('td')].map(c => c.innerText.trim());
        const row = Object.fromEntries(head.slice(head.length - cells.length).map((h, i) => [h, cells[i]]));
        out[row.run] = row;
    }
    return out; }"""
# How many steps the first figure's trace named NAME has.
TRACE_STEPS_JS = """(name) => { const p = document.querySelector('.js-plotly-plot');
    const t = p && p._fullData && p._fullData.find(d => d.name === name); return t ? t.x.length : 0; }"""


def test_runs_and_compare_follow_a_training_run_and_figures_keep_up(tmp_path, live_run):
    """Issue 26 bug 5: Runs said "running 7/60" for 20 s while the trainer was at step 42, Compare did not move at
    all, and live figures trailed the progress line by up to 13 steps on a 0.8 s/step run. Now both pages follow a
    run that writes a step a second without a reload, and a figure trails the written steps by at most
    FIGURE_REFRESH_S + 2 polls."""
    playwright_or_skip()
    import numpy as np

    from mrtpo_viz.tools.synthetic import synthetic_metrics
    from mrtpo_viz.ui import FIGURE_REFRESH_S, REFRESH_S

    runs, w, rewards = live_run(3, 40)
    step = 3

    def write_step():
        nonlocal step
        step += 1
        w.append_metrics(synthetic_metrics(step, rewards, np.random.default_rng(step)))
        w.set_status(step=step)

    with app_in_browser(tmp_path, "live_runs", runs) as (url, page):
        page.goto(url + "/")
        wait_for_script(page)
        page.wait_for_function(f"() => ({RUN_ROWS_JS})()['live']?.step === '3'")
        for _ in range(3):
            write_step()
            page.wait_for_timeout(1000)
        # the table follows without a reload
        page.wait_for_function(f"() => ({RUN_ROWS_JS})()['live']?.step === '{step}'",
                               timeout=(FIGURE_REFRESH_S + 2 * REFRESH_S + 5) * 1000)

        page.goto(url + "/compare?run=live")
        wait_for_script(page)
        page.wait_for_function(f"() => ({TRACE_STEPS_JS})('live') >= {step}")
        lags = []
        for _ in range(12):  # a step a second; the figure's lag behind the written steps, once a second
            write_step()
            page.wait_for_timeout(1000)
            lags.append(step - page.evaluate(TRACE_STEPS_JS, "live"))
        page.wait_for_function(f"() => ({TRACE_STEPS_JS})('live') >= {step}",
                               timeout=(FIGURE_REFRESH_S + 2 * REFRESH_S + 5) * 1000)
        assert max(lags) <= FIGURE_REFRESH_S + 2 * REFRESH_S + 1, lags


# For every filled span bar of the heatmap: [its distance below its own token's text, its distance above the next
# line of tokens] (bars of the last line, with no line below, are left out).
BAR_DISTANCES_JS = """() => {
    const texts = [...document.querySelectorAll('.mrtpo-hm .row .tok-text')].map(e => e.getBoundingClientRect());
    const out = [];
    for (const b of document.querySelectorAll('.mrtpo-hm .row i.b[style*="background"]')) {
        const r = b.getBoundingClientRect();
        const own = b.parentElement.querySelector('.tok-text').getBoundingClientRect();
        const below = texts.filter(t => t.top >= r.bottom).map(t => t.top);
        if (below.length) out.push([r.top - own.bottom, Math.min(...below) - r.bottom]);
    }
    return out; }"""


# Tokens a byte-level vocabulary holds that draw no glyph of their own: a lone combining mark, several, a
# variation selector, a zero-width joiner and an unassigned code point.
NO_GLYPH_TOKENS = ["\u0352", "\u0301\u0302", "\ufe0f", "\u200d", "\U000e0100", "\u0378", "ok"]


def test_every_token_cell_and_span_bar_has_a_width_in_a_real_browser():
    """CI, stop 56: a span bar under the token "\u0352" (a combining mark alone) had no width, so the token and its
    bar were not drawn. Every token of the heatmap, and every bar under one, now has a width."""
    require(chromium_path() is not None, "Chromium is not installed (looked for /usr/bin/chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require(False, "playwright is not installed in this environment")
    import pandas as pd

    from mrtpo_viz.heatmap import token_heatmap_html

    rows = [dict(step=1, sample=0, prompt="p", response="".join(NO_GLYPH_TOKENS), reward=r, score=1.0, t=t,
                 token=tok, distance=0.1, weight=1.0, credit=0.5 * t, in_span=True, token_adv=1.0)
            for r in ("a", "b") for t, tok in enumerate(NO_GLYPH_TOKENS)]
    page_html = token_heatmap_html(pd.DataFrame(rows), "a", reward_names=["a", "b"])
    with sync_playwright() as pw:
        browser = open_browser(pw)
        page = browser.new_page()
        page.set_content(f"<html><body>{page_html}</body></html>")
        widths = page.evaluate("() => [...document.querySelectorAll('.mrtpo-hm .tok')].map("
                               "e => e.getBoundingClientRect().width)")
        assert len(widths) == len(NO_GLYPH_TOKENS) and min(widths) > 0, widths
        bars = page.locator('.mrtpo-hm i.b[style*="background"]')
        assert bars.count() == 2 * len(NO_GLYPH_TOKENS)
        assert all(bars.nth(i).is_visible() for i in range(bars.count()))
        browser.close()


def test_span_bars_sit_under_their_own_line_of_tokens(tmp_path):
    """Issue 26 bug 7: with 10 rewards each token had 10 bar slots under it (40 px) and wrapped lines were 4 px apart,
    so a bar in a late slot sat nearer the next line's tokens than its own. Every bar is now nearer its own line."""
    with app_in_browser(tmp_path, "span_bars", width=900) as (url, page):  # narrow: the response wraps
        page.goto(url + "/credit?run=sample/study-v2-mrtpo-swap-s0&step=145&sample=5")
        wait_for_script(page)
        page.locator(".mrtpo-hm .tok").first.wait_for()
        distances = page.evaluate(BAR_DISTANCES_JS)
        assert distances, "no bar above a wrapped line"
        assert all(own < below for own, below in distances), distances


# Every figure whose legend does not fit (plotly scrolls it inside the figure, cutting entries): [title, needed px,
# shown px].
CUT_LEGENDS_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(p => [
    (p.querySelector('.gtitle') || {}).textContent, p._fullLayout.legend._height, p._fullLayout.legend._effHeight])
    .filter(([, need, shown]) => need > shown + 1)"""
# {trace name: line colour} of the first figure's lines (a gap's markers are drawn without a line: issue 46).
FIRST_FIGURE_COLOURS_JS = """() => Object.fromEntries(document.querySelector('.js-plotly-plot')._fullData
    .filter(d => (d.mode || '').includes('lines')).map(d => [d.name, d.line && d.line.color]))"""
# The x range of every x axis of the first figure (its small multiples), and how many there are.
X_RANGES_JS = """() => { const l = document.querySelector('.js-plotly-plot')._fullLayout;
    return Object.keys(l).filter(k => /^xaxis\\d*$/.test(k)).map(k => l[k].range.map(v => Math.round(v))); }"""
STUDY_RUNS = ("sample/study-v2-mrtpo-swap-s0", "sample/study-v2-mrtpo-swap-specific-s0", "sample/study-v2-mrtpo-replay-s0")


def test_a_ten_reward_run_has_ten_colours_and_no_legend_is_cut(tmp_path):
    """Issue 26 bugs 2 and 7 in Chromium: the shipped 10-reward run's curves draw ten rewards in ten colours; with
    its three study runs overlaid, no legend scrolls inside its figure (half-width per-reward panels were cut)."""
    with app_in_browser(tmp_path, "ten_rewards") as (url, page):
        console: list[str] = []
        page.on("console", lambda m: console.append(m.text) if "matches" in m.text else None)
        page.goto(f"{url}/curves?run={STUDY_RUNS[0]}")
        wait_for_script(page)
        page.locator(".js-plotly-plot").first.wait_for()
        colours = page.evaluate(FIRST_FIGURE_COLOURS_JS)
        rewards = {n: c for n, c in colours.items() if n != "all satisfied"}
        assert len(rewards) == 10 and len(set(rewards.values())) == 10, colours
        page.screenshot(path=str(ARTIFACTS / "browser_curves_ten_rewards.png"), full_page=True)
        # one small panel per reward, zoomed together: a drag across the first panel zooms all eleven
        ranges = page.evaluate(X_RANGES_JS)
        assert len(ranges) == 11 and len({tuple(r) for r in ranges}) == 1, ranges
        drag_across(page, ".js-plotly-plot", 0.3, 0.6)
        page.wait_for_timeout(800)
        zoomed = page.evaluate(X_RANGES_JS)
        assert zoomed[0] != ranges[0] and len({tuple(r) for r in zoomed}) == 1, (ranges, zoomed)
        assert console == []  # Plotly warned "ignored xaxis.matches" when the first axis matched itself
        page.goto(f"{url}/curves?" + urlencode([("run", r) for r in STUDY_RUNS]))
        wait_for_script(page)
        page.locator(".js-plotly-plot").first.wait_for()
        page.wait_for_timeout(1500)
        assert page.evaluate(CUT_LEGENDS_JS) == []
        assert page.evaluate(OVERLAPS_JS) == []
        # the half-width per-reward panels are in their own tab, drawn when it is opened, as one figure of two
        # panels (issue 26: every page quick, zoom shared)
        page.get_by_role("tab", name="Credit routing: JS and spans").click()
        page.wait_for_url("**view=routing**")
        wait_for_script(page)
        shown = page.locator(".js-plotly-plot:visible")
        shown.first.wait_for()
        page.wait_for_timeout(1500)
        panels = shown.first.evaluate("(p) => [...p.querySelectorAll('.annotation-text')].map(e => e.textContent)")
        assert shown.count() == 1 and panels[0].startswith("Mean JS distance"), panels
        assert page.evaluate(CUT_LEGENDS_JS) == []
        assert page.evaluate(OVERLAPS_JS) == []


# The first figure's legend entries (text) and how many filled band paths it draws.
LEGEND_AND_BANDS_JS = """() => { const p = document.querySelector('.js-plotly-plot');
    return [[...p.querySelectorAll('.legend .traces .legendtext')].map(e => e.textContent),
            [...p.querySelectorAll('.scatterlayer .js-fill')].filter(e => (e.getAttribute('d') || '').length > 10
              && getComputedStyle(e).fill !== 'none').length]; }"""


def test_a_study_compared_by_seed_groups(tmp_path):
    """Issue 26 "seed groups": three methods x three seeds on Compare, grouped: one line per method with a filled
    band and the seed count in the legend, the same link reopens it, and "each run" gives the nine runs back."""
    from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run

    runs = tmp_path / "runs"
    names = [f"study-{m}-s{i}" for m in ("grpo", "gdpo", "mrtpo") for i in range(3)]
    for n in names:
        write_synthetic_run(runs, n, steps=10, method=n.split("-")[1], rewards=DEFAULT_REWARDS[:2], n_tokens=4,
                            seed=int(n[-1]), with_eval=False)
    with app_in_browser(tmp_path, "seed_groups", runs) as (url, page):
        page.goto(f"{url}/compare?" + urlencode([*(("run", n) for n in names), ("group", "std")]))
        wait_for_script(page)
        page.locator(".js-plotly-plot").first.wait_for()
        page.wait_for_timeout(1000)
        legend, bands = page.evaluate(LEGEND_AND_BANDS_JS)
        assert legend == ["study-grpo (3 seeds)", "study-gdpo (3 seeds)", "study-mrtpo (3 seeds)"], legend
        assert bands == 3
        page.screenshot(path=str(ARTIFACTS / "browser_compare_seed_groups.png"), full_page=True)
        page.locator('[data-testid="stSelectbox"] input[aria-label="Runs"]').click()
        page.get_by_role("option", name="each run").click()
        wait_for_script(page)
        page.wait_for_timeout(1000)
        legend, bands = page.evaluate(LEGEND_AND_BANDS_JS)
        assert legend == names and bands == 0, legend


def test_zero_credit_tokens_take_the_dark_pages_colour(tmp_path):
    """Issue 46: on the dark theme zero-credit tokens were bright white boxes. A reward whose credit on the sample
    is zero (its group advantage is 0) leaves every cell the page's own colour, with the page's text colour."""
    query = urlencode({"run": "sample/tiny-instruct-mrtpo-demo", "step": 150, "sample": 0,
                       "reward": "punctuation:no_comma"})
    with app_in_browser(tmp_path, "dark_zero", theme="dark") as (url, page):
        page.goto(url + "/credit?" + query)
        wait_for_script(page)
        page.locator(".mrtpo-hm .tok-text").first.wait_for()
        background = page.evaluate(BACKGROUND_JS)
        assert max(rgb(background)) < 100, background  # the dark theme
        cells = page.evaluate("""() => [...document.querySelectorAll('.mrtpo-hm .tok-text')].map(
            e => [getComputedStyle(e).backgroundColor, getComputedStyle(e).color])""")
        assert cells and all(bg == "rgba(0, 0, 0, 0)" for bg, _ in cells), cells[:3]
        assert all(contrast(fg, background) >= 4.5 for _, fg in cells), cells[:3]
        page.screenshot(path=str(ARTIFACTS / "browser_dark_zero_credit.png"))


OPACITIES_JS = """() => { const p = document.querySelector('.js-plotly-plot');
    return p.data.map(t => [Array.isArray(t.meta) ? t.meta[0] : t.name, t.opacity == null ? 1 : t.opacity]); }"""


def test_compare_hovering_a_line_dims_the_other_runs(tmp_path):
    """Issue 46 item 6: with several runs on Compare one line hides another; hovering a line dims every other run's
    traces and leaving it brings them back (the real plotly.js hover events, in Chromium)."""
    from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run

    runs = tmp_path / "runs"
    names = ["hover-a", "hover-b", "hover-c"]
    for i, n in enumerate(names):
        write_synthetic_run(runs, n, steps=6, method="mrtpo", rewards=DEFAULT_REWARDS[:1], n_tokens=4, seed=i,
                            with_eval=False)
    with app_in_browser(tmp_path, "hover_isolate", runs) as (url, page):
        page.goto(f"{url}/compare?" + urlencode([("run", n) for n in names]))
        wait_for_script(page)
        page.locator(".js-plotly-plot").first.wait_for()
        page.wait_for_timeout(1000)
        before = page.evaluate(OPACITIES_JS)
        assert {run for run, _ in before} == set(names) and all(o == 1 for _, o in before), before
        point = page.locator(".js-plotly-plot .scatterlayer .trace").last.locator(".points path").nth(2)
        box = point.bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.wait_for_timeout(500)
        during = page.evaluate(OPACITIES_JS)
        bright = {run for run, o in during if o == 1}
        assert len(bright) == 1 and all(o == pytest.approx(0.2) for run, o in during if run not in bright), during
        page.mouse.move(5, 5)
        page.wait_for_timeout(500)
        assert page.evaluate(OPACITIES_JS) == before
