"""Real browser (Debian Chromium through Playwright, as tests/test_browser.py, whose helpers it uses): every page
opened from its own URL logs no console error and no failed request (issue 46, item 12); the runs table's key
columns are in view at 1,400 px (item 5)."""

from __future__ import annotations

import pytest
from test_browser import app_in_browser, wait_for_script

pytestmark = pytest.mark.browser

# Every page of app.py by its URL path ("" is Runs).
PAGES = ("", "launch", "curves", "credit", "js", "debugger", "compare")


def watch_errors(page) -> list[str]:
    """The page's console errors and its failed requests (no answer, or a status of 400 or more), as they come."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: errors.append(f"failed: {r.url} ({r.failure})"))
    page.on("response", lambda r: errors.append(f"{r.status}: {r.url}") if r.status >= 400 else None)
    return errors


def test_every_page_opened_from_its_url_logs_no_console_error_or_failed_request(tmp_path):
    """A page other than Runs, opened from its URL, asked for `/<page>/_stcore/health` and `/<page>/_stcore/host-config`
    (404 each, logged as console errors) before the app's root: Streamlit's browser code takes the page's URL as the
    server's base unless the page names it (`serve.BACKEND_BASE_JS`). Each page here, opened cold in a new tab,
    connects at once and logs nothing."""
    from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run

    runs = tmp_path / "runs"
    write_synthetic_run(runs, "demo", steps=3, rewards=DEFAULT_REWARDS[:2], n_tokens=6)
    with app_in_browser(tmp_path, "console_errors", runs) as (url, page):
        found = {}
        for path in PAGES:
            tab = page.context.browser.new_page(viewport={"width": 1400, "height": 1000})
            tab.set_default_timeout(90000)
            errors = watch_errors(tab)
            tab.goto(f"{url}/{path}?run=demo")
            wait_for_script(tab)
            tab.wait_for_timeout(1000)  # late requests (the chart code, the settled word) included
            if errors:
                found[path or "runs"] = errors
            tab.close()
        assert not found, found


# The headers the runs table draws (its grid draws the columns in view, and names them in an accessible table).
HEADERS_JS = """() => [...document.querySelectorAll('[data-testid="stDataFrame"] [role=columnheader]')]
    .map(e => e.textContent)"""


def test_at_1400_px_the_runs_tables_key_columns_are_in_view_without_scrolling(tmp_path):
    """Issue 46 item 5 (table): at 1,400 px (sidebar open) the runs table was cut after "held-out (last)" (its
    method and seed far to the right, reached by scrolling). Now the key columns (`ui.runs_table.KEY_COLUMNS`:
    the run, method, seed, state, progress, summary metrics) come first, and the column after them is drawn too,
    so each of them is in view whole."""
    from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run
    from mrtpo_viz.ui.runs_table import KEY_COLUMNS, LABELS

    runs = tmp_path / "runs"
    write_synthetic_run(runs, "demo", steps=3, rewards=DEFAULT_REWARDS[:2], n_tokens=6)
    key = [LABELS.get(c, (c,))[0] for c in KEY_COLUMNS]
    with app_in_browser(tmp_path, "runs_table_1400", runs, width=1400) as (url, page):
        page.goto(url + "/")
        wait_for_script(page)
        page.locator('[data-testid="stDataFrame"]').first.wait_for()
        page.wait_for_function(f"() => ({HEADERS_JS})().length > 1")
        page.wait_for_timeout(1000)
        headers = page.evaluate(HEADERS_JS)
        assert headers[:len(key)] == key and len(headers) > len(key), headers


# The page's background and the colour of every span bar and legend swatch Token credit draws, as the browser drew them.
SPAN_COLOURS_JS = """() => [getComputedStyle(document.querySelector('[data-testid="stApp"]')).backgroundColor,
    [...new Set([...document.querySelectorAll('.mrtpo-hm i.b[style], .mrtpo-hm .swatch')]
        .map(e => getComputedStyle(e).backgroundColor))]]"""


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_token_credits_span_bars_have_3_to_1_contrast_with_the_page_on_both_themes(tmp_path, theme):
    """Issue 46: the yellow no_comma span bar (1.3:1 on white) was faint on the light theme. Every span bar and
    swatch Token credit draws (`heatmap.span_css`: `light-dark()`, resolved by the color-scheme Streamlit sets) has
    WCAG's 3:1 non-text contrast with the page, whose background is the one `colours.PAGE_BACKGROUNDS` names."""
    from test_browser import contrast

    from mrtpo_viz import colours
    from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run

    runs = tmp_path / "runs"
    write_synthetic_run(runs, "demo", steps=2, rewards=tuple(DEFAULT_REWARDS), n_tokens=24)
    with app_in_browser(tmp_path, f"span_colours_{theme}", runs, theme=theme) as (url, page):
        page.goto(url + "/credit?run=demo")
        wait_for_script(page)
        page.locator(".mrtpo-hm i.b[style]").first.wait_for()
        background, drawn = page.evaluate(SPAN_COLOURS_JS)
        assert background == "rgb({}, {}, {})".format(*colours.PAGE_BACKGROUNDS[theme]), background
        assert len(drawn) >= 3, drawn
        low = {c: round(contrast(c, background), 2) for c in drawn
               if contrast(c, background) < colours.NON_TEXT_CONTRAST}
        assert not low, (theme, low)
