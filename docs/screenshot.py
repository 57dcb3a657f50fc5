"""Screenshots of the workbench: Runs, Token credit, Training curves, JS divergence and Compare runs.

Run from the repository root:

    .venv/bin/python docs/screenshot.py [--out docs/img] [--run smollm2-135m-mrtpo-demo] [--step N --sample I]
        [--theme light|dark] [--pages runs,credit,curves,js] [--compare-dir DIR] [--prefix NAME-]

Starts `python -m core.cli app --headless` on a free port with MRTPO_RUNS_DIR pointing to an empty
temporary folder (so only the shipped runs in sample_data/runs/ are listed; `--compare-dir` lists the
runs of DIR instead), drives headless Debian Chromium with Playwright and writes (with `runs` among the pages)
`<prefix>runs.png` (the landing page down to its runs table), `<prefix>token-credit.png`, (with `debugger`)
`<prefix>debugger.png` (the Verifier debugger's charts), `<prefix>training-curves.png`, `<prefix>js-divergence.png` and, with
`compare` among the pages, `<prefix>compare.png` (every run of DIR overlaid). `--theme dark` serves the
app with Streamlit's dark theme. The pages are reached the way a user does (a link that picks the run,
then the sidebar), so the script works on older versions of the app too (before/after pictures).
The server is stopped (its whole process group) at the end, also on failure.

Without --step/--sample the sample is chosen from the run's credit maps: one whose keyword reward
has an in-span token, preferring samples where the most rewards both carry credit and inspect tokens.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.run.store import RunStore  # noqa: E402  (needs the repo root on sys.path)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-sync"]
VIEWPORT = {"width": 1400, "height": 1000}
KEYWORD_REWARD = "keywords:existence"
TOP_CROP = 60  # Streamlit's header bar (Deploy button, menu): not part of the app


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pick_sample(store: RunStore) -> tuple[int, int]:
    """(step, sample) to show: the keyword reward has an in-span token; most rewards with both nonzero credit
    and in-span tokens first, then the most in-span tokens, then the later step."""
    best, best_key = None, None
    for step in store.credit_steps():
        df = store.credit(step)
        per = df.groupby(["sample", "reward"]).agg(ins=("in_span", "sum"), cmax=("credit", lambda c: c.abs().max()))
        for sample, rows in per.groupby(level="sample"):
            rows = rows.droplevel("sample")
            if KEYWORD_REWARD not in rows.index or rows.loc[KEYWORD_REWARD, "ins"] == 0:
                continue
            lively = int(((rows["ins"] > 0) & (rows["cmax"] > 0)).sum())
            key = (lively, int(rows["ins"].sum()), step)
            if best_key is None or key > best_key:
                best, best_key = (step, int(sample)), key
    if best is None:
        raise SystemExit(f"no sample of {store.path} has an in-span token for {KEYWORD_REWARD}")
    return best


def start_server(runs_dir: Path, log_path: Path, theme: str = "light") -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "MRTPO_RUNS_DIR": str(runs_dir), "OMP_NUM_THREADS": "1", "STREAMLIT_THEME_BASE": theme}
    log = open(log_path, "wb")
    proc = subprocess.Popen([sys.executable, "-m", "core.cli", "app", "--headless", "--port", str(port)],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        if proc.poll() is not None:
            break
        try:
            urllib.request.urlopen(url + "/_stcore/health", timeout=1)
            return proc, url
        except OSError:
            time.sleep(0.3)
    stop_server(proc)
    raise SystemExit(f"the app did not come up; its log:\n{log_path.read_text()[-3000:]}")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def stop_server(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (the cli and its streamlit child); wait until every member has
    exited, SIGKILL the group after 15 s."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.time() + 15
    while time.time() < deadline:
        proc.poll()  # reap the cli so it does not count as alive
        if not _group_alive(proc.pid):
            return
        time.sleep(0.2)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(5)


def wait_for_script(page, heading: str | None = None, timeout_ms: int = 120000) -> None:
    """Wait until the page (its `heading`, when given) is drawn and Streamlit's script run is over: the running
    indicator has stayed away for 1.5 s (it can appear late on a cold start)."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_ms)
    if heading:
        page.get_by_role("heading", name=heading).first.wait_for(timeout=timeout_ms)
    page.wait_for_function(
        """() => {
            const now = Date.now();
            if (document.querySelector('[data-testid="stStatusWidget"]')) { window.__mrtpoIdle = null; return false; }
            window.__mrtpoIdle = window.__mrtpoIdle || now;
            return now - window.__mrtpoIdle > 1500;
        }""", polling=200, timeout=timeout_ms)
    window_reset = "() => { window.__mrtpoIdle = null; }"
    page.evaluate(window_reset)


def choose(page, label: str, option: str) -> None:
    """Pick the option whose text starts with `option` in the select box whose label starts with `label`
    (Streamlit 1.67 draws it as a combo box whose input carries the label as aria-label)."""
    page.get_by_role("combobox", name=re.compile("^" + re.escape(label))).first.click()
    page.get_by_role("option").filter(has_text=re.compile("^" + re.escape(option))).first.click()
    wait_for_script(page)


def main_block_clip(page, last) -> dict:
    """From under Streamlit's top bar to the bottom of `last`, sidebar included (it shows the app's pages)."""
    box = last.bounding_box()
    bottom = box["y"] + box["height"] + page.evaluate("() => window.scrollY") + 16
    return {"x": 0, "y": TOP_CROP, "width": VIEWPORT["width"], "height": bottom - TOP_CROP}


def shoot(page, path: Path, clip: dict) -> None:
    """Save `clip` of the page as PNG, with no focus ring and no hover state (mouse parked on the sidebar)."""
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    page.mouse.move(5, VIEWPORT["height"] - 5)
    page.set_viewport_size({"width": VIEWPORT["width"], "height": max(VIEWPORT["height"], int(clip["y"] + clip["height"]) + 20)})
    page.wait_for_timeout(700)  # plotly relayouts on resize
    page.screenshot(path=str(path), clip=clip)
    print(f"{path} ({path.stat().st_size // 1024} KB, {int(clip['width'])}x{int(clip['height'])})")


def sidebar(page, title: str) -> None:
    """Open a page through the sidebar (the session, and so the chosen run, is kept)."""
    page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=title, exact=True).click()
    wait_for_script(page, title if title != "Compare runs" else None)


def pick_all(page, names: list[str]) -> None:
    """Make the page's first multiselect hold exactly the runs `names` (typed and picked one by one)."""
    box = page.locator('[data-testid="stMultiSelect"]').first
    clear = box.get_by_role("button", name="Clear all")
    if clear.count():
        clear.first.click()
        wait_for_script(page)
    for name in names:
        box.locator("input").first.click()
        box.locator("input").first.fill(name)
        page.get_by_role("option").filter(has_text=name).first.click()
        wait_for_script(page)
    page.keyboard.press("Escape")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "img"))
    parser.add_argument("--run", default="smollm2-135m-mrtpo-demo",
                        help="a run in sample_data/runs/ (or in --compare-dir)")
    parser.add_argument("--step", type=int, default=None)
    parser.add_argument("--sample", type=int, default=None)
    parser.add_argument("--theme", choices=("light", "dark"), default="light", help="Streamlit theme base")
    parser.add_argument("--pages", default="credit,curves,js",
                        help="comma-separated, in this order: runs, credit, curves, js, debugger, compare "
                        "(default: %(default)s)")
    parser.add_argument("--compare-dir", default=None,
                        help="runs directory the app lists (compare overlays all of its runs)")
    parser.add_argument("--prefix", default="", help="file name prefix, e.g. before-dark-")
    args = parser.parse_args(argv)
    pages = [p.strip() for p in args.pages.split(",") if p.strip()]
    unknown = set(pages) - {"runs", "credit", "curves", "js", "debugger", "compare"}
    if unknown or ("compare" in pages and not args.compare_dir):
        parser.error(f"unknown pages {sorted(unknown)}" if unknown else "compare needs --compare-dir")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shipped = ROOT / "sample_data" / "runs" / args.run
    listed = Path(args.compare_dir) / args.run if args.compare_dir else None
    store = RunStore(listed if listed is not None and listed.is_dir() else shipped)  # --run may be one of DIR's
    step, sample = (args.step, args.sample) if args.step is not None and args.sample is not None else pick_sample(store)
    print(f"run {args.run}, step {step}, sample {sample}, theme {args.theme}")
    compare_runs = sorted(p.name for p in Path(args.compare_dir).iterdir()
                          if (p / "metrics.jsonl").exists()) if args.compare_dir else []

    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="mrtpo-shots-") as tmp:
        runs_dir = Path(args.compare_dir).resolve() if args.compare_dir else Path(tmp) / "runs"
        runs_dir.mkdir(exist_ok=True)
        proc, url = start_server(runs_dir, Path(tmp) / "app.log", args.theme)
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
                try:
                    page = browser.new_page(viewport=VIEWPORT, device_scale_factor=1)
                    page.set_default_timeout(90000)

                    if "runs" in pages:  # the landing page: its first lines and the runs table
                        page.goto(url + "/")
                        wait_for_script(page, "Runs")
                        table = page.locator('[data-testid="stDataFrame"]').first
                        table.wait_for()
                        page.wait_for_timeout(1000)
                        shoot(page, out / f"{args.prefix}runs.png", main_block_clip(page, table))
                        page.set_viewport_size(VIEWPORT)

                    # Token credit, one row per reward (credit colours + each verifier's span bars); the link picks
                    # the run for the session, so the other pages (opened from the sidebar) show it too.
                    page.goto(url + "/credit?" + urlencode({"run": args.run, "step": step, "sample": sample}))
                    wait_for_script(page, "Token credit")
                    if "credit" in pages:
                        page.get_by_text("one row per reward", exact=True).click()
                        wait_for_script(page)
                        page.locator(".mrtpo-hm").first.wait_for()
                        caption = page.get_by_text("Hover a token for its credit", exact=False).first
                        shoot(page, out / f"{args.prefix}token-credit.png", main_block_clip(page, caption))

                    if "curves" in pages:  # every panel of the run's training curves
                        page.set_viewport_size(VIEWPORT)
                        sidebar(page, "Training curves")
                        plots = page.locator(".js-plotly-plot")
                        plots.last.wait_for()
                        page.wait_for_timeout(1500)
                        shoot(page, out / f"{args.prefix}training-curves.png", main_block_clip(page, plots.last))

                    if "js" in pages:  # JS divergence of the same sample, the verifiers' spans shaded
                        page.set_viewport_size(VIEWPORT)
                        sidebar(page, "JS divergence")
                        choose(page, "Step", str(step))
                        choose(page, "Sample", f"sample {sample} ")
                        fig = page.locator(".js-plotly-plot").first
                        fig.wait_for()
                        page.wait_for_timeout(1500)
                        shoot(page, out / f"{args.prefix}js-divergence.png", main_block_clip(page, fig))

                    if "debugger" in pages:  # the Verifier debugger's charts of the run (routing mass, span AUC)
                        page.set_viewport_size(VIEWPORT)
                        sidebar(page, "Verifier debugger")
                        plots = page.locator(".js-plotly-plot")
                        plots.last.wait_for()
                        page.wait_for_timeout(1500)
                        last = max((plots.nth(i) for i in range(plots.count())),
                                   key=lambda p: p.bounding_box()["y"] + p.bounding_box()["height"])
                        shoot(page, out / f"{args.prefix}debugger.png", main_block_clip(page, last))

                    if "compare" in pages:  # every run of --compare-dir overlaid, and the steps-to-target table
                        # tall enough that the table below the figure is drawn (Streamlit draws elements in view)
                        page.set_viewport_size({"width": VIEWPORT["width"], "height": 2 * VIEWPORT["height"]})
                        sidebar(page, "Compare runs")
                        pick_all(page, compare_runs)
                        table = page.locator('[data-testid="stDataFrame"]').last
                        try:
                            table.wait_for(timeout=20000)
                        except PlaywrightTimeout:  # no steps-to-target table: the picture ends at the figure
                            print("compare: no steps-to-target table shown; the picture ends at the figure")
                            table = page.locator(".js-plotly-plot").last
                        page.wait_for_timeout(1500)
                        shoot(page, out / f"{args.prefix}compare.png", main_block_clip(page, table))
                finally:
                    browser.close()
        finally:
            stop_server(proc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
