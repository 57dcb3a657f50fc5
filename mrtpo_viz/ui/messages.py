"""Messages on the pages: text read from run stores and links shown as text (`plain`), warning boxes, state
badges, and what a page says when a link asks for something missing, there are no runs, or a run is starting.

Never imports torch.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import streamlit as st

from core.run.store import ACTIVE_STATES
from core.run.train_log import last_phase
from mrtpo_viz import launcher

# Plain symbols (present in every font, unlike emoji): active, done, stopped, broken.
STATE_ICONS = {"running": "▶", "starting": "…", "completed": "✓", "stopped": "■", "failed": "✗", "crashed": "✗",
               "unknown": "?"}

_PLAIN_WORDS = re.compile(r"[A-Za-z0-9 ]*")


def plain(text: object) -> str:
    """`text` for a Markdown element (st.markdown, st.warning, st.info, ...), shown as typed: letters, digits and
    spaces as they are, anything else as an inline code span, inside which neither Markdown, HTML, autolinks
    nor Streamlit's extensions (`:red[...]`, `$math$`) act (backslash escapes would not stop GFM's autolinks).
    The span's fence is one backtick longer than the longest run of backticks in the text. Everything read
    from a run store or a link goes through it; tests/test_browser.py checks it in Chromium.

    >>> plain("GDPO"), plain("a*b"), plain("x `y` z")
    ('GDPO', '`a*b`', '`` x `y` z ``')
    """
    text = str(text).replace("\r", " ").replace("\n", " ")
    if _PLAIN_WORDS.fullmatch(text):
        return text
    fence = "`" * (max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or "`" in text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


_MD_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")


def md_text(text: object) -> str:
    r"""This app's own text (never a run store's: that goes through `plain`) for a Markdown element, in the page's
    font: each Markdown punctuation character backslash-escaped, so `js_specific` or `(a)` stay as written.

    >>> md_text("logp_specific (token log-probs)")
    'logp\\_specific \\(token log\\-probs\\)'
    """
    return _MD_PUNCTUATION.sub(r"\\\1", str(text).replace("\n", " "))


def response_text(text: object) -> None:
    """A sample's response as it was generated: monospace, whitespace kept, long lines wrapped, the text escaped
    (`st.html` of a <pre>, not Markdown). Not `st.code`: its element module (Streamlit's syntax highlighter, 1.6 MB)
    was fetched and run on the first visit of Token credit just to show this text in a closed expander, and the page
    was shown ~0.3 s later cold (docs/results/app-speed.md)."""
    st.html('<pre data-mrtpo="response" style="white-space: pre-wrap; overflow-wrap: anywhere; margin: 0; '
            f'font-size: 0.875rem; line-height: 1.5">{html.escape(str(text))}</pre>')


def show_warnings(label: str, warnings: Sequence[str]) -> None:
    """One compact warning box per run with problems (corrupt or half-written files); their text (which quotes
    the run's files) is shown as text, never as Markdown."""
    if warnings:
        st.warning(f"**{plain(label)}**: " + "; ".join(plain(w) for w in dict.fromkeys(warnings)))


def state_badge(state: str) -> str:
    """A state for Markdown: its icon and the state as text (the reader lets only known states through, but
    the badge escapes whatever it is given)."""
    return f"{STATE_ICONS.get(state, '')} {state if state in STATE_ICONS else plain(state)}"


def no_runs_message() -> None:
    st.info("No runs yet. Start one on the **Launch** page, or run `mrtpo train` in a terminal "
            "(runs go to `$MRTPO_RUNS_DIR`, default `./runs`).")


def show_startup(path: str | Path, state: Mapping) -> None:
    """What a run that has not completed a step yet is doing: its announced phase and its log's last lines."""
    log = launcher.launch_log(path, 12)
    phase = last_phase(log)
    name = Path(path).name
    if state.get("state") in ACTIVE_STATES:
        st.info(f"**{plain(name)}** is starting: {plain(phase) if phase else 'the trainer is starting'}. The first "
                "step's curves appear here when it is written.")  # the phase line is read from train.log: text
    if log:
        st.code(log, language=None)


def link_warning(what: str, wanted: str, shown: object) -> None:
    """A link named a step / sample / reward that the run does not have."""
    st.warning(f"The link asks for {what} {plain(repr(wanted))}, which this run does not have; showing "
               f"{plain(shown)} instead.")
