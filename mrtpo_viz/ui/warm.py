"""The server's caches warmed for the chart pages a user opens next (issue 26: every page quick).

When a browser's session has drawn a page, the server runs the other chart pages (`WARM_PAGES`: Training curves, JS
divergence, Verifier debugger) in sessions of its own that no browser is attached to, one after the other, for the
run that browser's session would open them on (its chosen run, else each page's default). The pages' own code fills
the caches every session shares (the run's metrics, the step's credit index, the built figures), so the user's first
visit of each page only draws (measured on the shipped tiny run and the 2,000-step run: a chart page's script run
after the Runs page took 128-275 ms of CPU from cold caches, 17-67 ms from warm ones; the browser's side is in
docs/results/app-speed.md). Nothing is computed that a visit would not compute; a warm session is an ordinary
Streamlit session (`Runtime.connect_session`; the page asked for as a browser asks, a `rerun_script` message with the
page's URL path and query) whose messages are dropped and which is closed once its script has finished.

A warm starts once the browser has drawn its page: the first page of a browser's session says so when it has settled
(`ui.prefetch` posts to SETTLED_PATH), and the warm waits for the modules that browser loads next (no HTTP request for
AFTER_WORD_S), or, should the word not come, once the server has had no HTTP request and no browser's script run
for FIRST_FALLBACK_S; without that word (a later page of the session), after FALLBACK_S. No warm page runs while a browser's script run is under way,
and one that starts meanwhile stops it (the page is warmed again later). Started when the page's script ended, the
warm made the page being opened slower: 0.1-0.25 s for cold Runs and Launch at once (its files came from a server
whose one Python thread the warm held), ~0.1 s for cold chart pages 0.3 s after (the warm's CPU against the
browser's drawing on two cores; `mrtpo bench app`).

Each (page, chosen run, state of the runs deciding what it draws) is warmed once per server. Nothing is warmed for a
run that trains (every step changes what the pages draw), nor, when the session has chosen no run, while any listed
run trains (the pages open on it), for a warm session itself, or without the app's ASGI entry (`mrtpo_viz/server/asgi.py`,
which hands over the server's event loop: `streamlit run app.py` and Streamlit's AppTest warm nothing).
`STREAMLIT_LOGGER_LEVEL=debug` logs each warm run (page, query, milliseconds, how it ended, errors).

Never imports torch.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from urllib.parse import urlencode

import streamlit as st
from streamlit.logger import get_logger
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from core.run.store import ACTIVE_STATES, RunInfo

WARM_PAGES = ("curves", "js", "debugger")  # URL paths (app.py), in the order a warm runs them
WAIT_S = 60.0  # the longest a warm session's script may take before it is closed unfinished
SETTLED_PATH = "_mrtpo/settled"  # a browser posts here (relative to the app's root URL) when its first page is drawn
AFTER_WORD_S = 0.3  # after that word, a warm starts once the server has had no request for this long
FALLBACK_S = 1.0  # without it, a warm starts once the server had no request and no browser's script run this long
# The first page of a session waits this long for the word before falling back: since the pages name the server's
# base (`server.serve.BACKEND_BASE_JS`), a browser makes no failing health requests, and a second without any HTTP
# request came while it still drew its page, so the 1 s fallback started the warm before the word (and slowed it).
FIRST_FALLBACK_S = 5.0
GIVE_UP_S = 60.0  # the pages not warmed after waiting this long for quiet are left cold
MAX_TRIES = 3  # runs of a warm page that a browser's script run may interrupt before it is left cold
_MAX_DONE = 512
_LOG = get_logger(__name__)
_loop: list[asyncio.AbstractEventLoop] = []  # the serving event loop, once `serving` was told it
_done: set[tuple] = set()  # (page, query, runs state) already warmed or under way
_ghosts: set[str] = set()  # the session ids of warm sessions
_running: dict = {}  # the warm session whose script runs now: {"sid", "interrupted"}
_lock = threading.Lock()
_one_warm = threading.Lock()
_busy = {"requests": 0, "scripts": 0, "since": 0.0}  # HTTP requests and browsers' script runs under way; last change
_settled = [0.0]  # when a browser last said its page is drawn (time.monotonic)
_FINISHED = {ForwardMsg.ScriptFinishedStatus.FINISHED_SUCCESSFULLY,
             ForwardMsg.ScriptFinishedStatus.FINISHED_WITH_COMPILE_ERROR}


def serving(loop: asyncio.AbstractEventLoop) -> None:
    """The event loop the Streamlit runtime serves on (`serve.ChartPagePreload` tells it on its first request):
    sessions are opened, asked and closed on it. The latest one counts; one that no longer runs warms nothing."""
    _loop[:] = [loop]


def _count(what: str, change: int) -> None:
    with _lock:
        _busy[what] += change
        _busy["since"] = time.monotonic()


@contextlib.asynccontextmanager
async def request():
    """Around each HTTP request the server answers (`serve.ChartPagePreload`): no warm page starts meanwhile."""
    _count("requests", 1)
    try:
        yield
    finally:
        _count("requests", -1)


@contextlib.contextmanager
def script_run():
    """Around a page's script run (app.py): no warm page starts while a browser's session runs one, and a warm page
    under way is stopped (`_interrupt`; it runs again after)."""
    ctx = get_script_run_ctx()
    mine = ctx is not None and ctx.session_id not in _ghosts
    if mine:
        _count("scripts", 1)
        _interrupt()
    try:
        yield
    finally:
        if mine:
            _count("scripts", -1)


def settled() -> None:
    """A browser has drawn its page and is idle (the POST to SETTLED_PATH)."""
    _settled[0] = time.monotonic()
    _LOG.debug("warm: a browser's page is drawn")


def quiet(since: float | None = None, quiet_s: float = FALLBACK_S, give_up_s: float = GIVE_UP_S) -> bool:
    """Wait until no browser's script run is under way and, with `since` (a time.monotonic), either a browser has
    said its page is drawn after `since` and the server has had no HTTP request for AFTER_WORD_S (the modules that
    browser loads next, `ui.prefetch`), or it has had no HTTP request and no script run for `quiet_s`. True, or
    False after `give_up_s`."""
    deadline = time.monotonic() + give_up_s
    while time.monotonic() < deadline:
        with _lock:
            idle = 0.0 if _busy["requests"] else time.monotonic() - _busy["since"]  # seconds without a request
            word = since is not None and _settled[0] > since
            ready = not _busy["scripts"] and (since is None or (word and idle >= AFTER_WORD_S) or idle >= quiet_s)
        if ready:
            return True
        time.sleep(0.05)
    return False


class _Client:
    """A Streamlit `SessionClient` without a browser: drops the session's messages, notes when its script run has
    finished (not when it stopped early for a rerun it asked for) and the exceptions the page showed."""

    def __init__(self) -> None:
        self.finished = threading.Event()
        self.errors: list[str] = []

    def write_forward_msg(self, msg: ForwardMsg) -> None:
        kind = msg.WhichOneof("type")
        if kind == "script_finished" and msg.script_finished in _FINISHED:
            self.finished.set()
        elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element" \
                and msg.delta.new_element.WhichOneof("type") == "exception":
            self.errors.append(msg.delta.new_element.exception.message)

    @property
    def client_context(self):
        return None


def _on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[], object]) -> object:
    """`fn()` run on the event loop (the runtime's session calls must be), its result here."""
    done: concurrent.futures.Future = concurrent.futures.Future()

    def call() -> None:
        try:
            done.set_result(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            done.set_exception(exc)

    loop.call_soon_threadsafe(call)
    return done.result(timeout=WAIT_S)


def run_page(loop: asyncio.AbstractEventLoop, page: str, query: str = "") -> tuple[str, list[str]]:
    """One script run of the app's page at URL path `page` with `query` (a link's query string) in a new session
    without a browser, closed afterwards: (how it ended: "finished", "interrupted" (a browser's script run started
    meanwhile: `script_run` stopped it) or "unfinished" (not within WAIT_S), the exceptions it showed)."""
    runtime = Runtime.instance()
    client = _Client()
    sid = str(_on_loop(loop, lambda: runtime.connect_session(client, user_info={})))
    _ghosts.add(sid)
    _running.update(sid=sid, interrupted=False)
    try:
        msg = BackMsg()
        msg.rerun_script.page_name = page
        msg.rerun_script.query_string = query
        _on_loop(loop, lambda: runtime.handle_backmsg(sid, msg))
        finished = client.finished.wait(WAIT_S)
        return ("interrupted" if _running.get("interrupted") else "finished" if finished else "unfinished",
                client.errors)
    finally:
        _running.clear()
        _on_loop(loop, lambda: runtime.close_session(sid))
        _ghosts.discard(sid)


def _interrupt() -> None:
    """Stop the warm session's script run, if one is under way, at its next Streamlit call (safe from any thread):
    a browser's script run has started, which must not share the server's one Python thread with it."""
    sid = _running.get("sid")
    if not sid:
        return
    try:
        session = Runtime.instance().get_app_session(sid) if Runtime.exists() else None
        if session is not None:
            _running["interrupted"] = True
            session.request_script_stop()
    except Exception as exc:  # noqa: BLE001 - the browser's own page run must go on whatever the warm's state
        _LOG.debug("warm: could not stop the warm page: %r", exc)


def _warm(loop: asyncio.AbstractEventLoop, pages: Sequence[str], query: str, since: float) -> None:
    with _one_warm:  # one warm at a time (two sessions' warms would share the CPU and `_running`)
        _warm_pages(loop, pages, query, since)


def _warm_pages(loop: asyncio.AbstractEventLoop, pages: Sequence[str], query: str, since: float) -> None:
    todo = [(page, 0) for page in pages]
    first = True
    while todo:
        page, tries = todo.pop(0)
        if not quiet(since, FIRST_FALLBACK_S) if first else not quiet(None):
            left = {page, *(p for p, _ in todo)}
            _LOG.debug("warm: the server was never quiet; %s left cold", ", ".join(sorted(left)))
            with _lock:  # a later page run may try again
                _done.difference_update({key for key in _done if key[0] in left and key[1] == query})
            return
        first = False
        t0 = time.perf_counter()
        try:
            ended, errors = run_page(loop, page, query)
        except Exception as exc:  # noqa: BLE001 - a warm that fails costs a cold visit, never the server
            _LOG.debug("warm %s?%s failed: %r", page, query, exc)
            continue
        _LOG.debug("warm %s?%s: %.0f ms, %s%s", page, query, (time.perf_counter() - t0) * 1e3, ended,
                   f", errors {errors}" if errors else "")
        if ended == "interrupted" and tries < MAX_TRIES - 1:
            todo.append((page, tries + 1))  # again once no browser's script run is under way


def warm_key(page: str, query: str, runs: Sequence[RunInfo]) -> tuple:
    """What a warm of `page` depends on: the link it was run with and the path, state, step and last update of the
    runs that decide what it opens on and draws (a new step or a changed status changes it)."""
    return page, query, tuple((str(r.path), r.state, r.step, r.updated_at) for r in runs)


def warm_target(runs: Sequence[RunInfo], chosen: RunInfo | None) -> tuple[str, list[RunInfo]] | None:
    """(the query string the warm sessions open the pages with, the runs their warm depends on) for a session whose
    chosen run is `chosen` among the listed `runs`; None when there is nothing to warm: the run the pages open on
    trains (what they draw changes every step), or there is no run. A chosen run is named in the query (`run=`);
    without one each page opens on its default, which every listed run's state decides, so none may train."""
    from mrtpo_viz import loaders

    if chosen is not None:
        return (None if chosen.state in ACTIVE_STATES else (urlencode({"run": loaders.run_label(chosen)}), [chosen]))
    if not runs or any(r.state in ACTIVE_STATES for r in runs):
        return None
    return "", list(runs)


def warm_other_pages(current: str) -> list[str]:
    """After a page (URL path `current`) was drawn in a browser's session: warm the WARM_PAGES other than it for
    the run this session opens them on (`warm_target`), in a thread of its own. Returns the pages it started
    warming."""
    from mrtpo_viz.ui.pickers import RUN_KEY
    from mrtpo_viz.ui.session import session_runs

    ctx = get_script_run_ctx()
    if not _loop or not _loop[0].is_running() or not Runtime.exists() or ctx is None or ctx.session_id in _ghosts:
        return []
    runs = session_runs()
    target = warm_target(runs, {str(r.path): r for r in runs}.get(st.session_state.get(RUN_KEY)))
    if target is None:
        return []
    query, deciding = target
    with _lock:
        if len(_done) > _MAX_DONE:
            _done.clear()
        todo = [p for p in WARM_PAGES if p != current and warm_key(p, query, deciding) not in _done]
        _done.update(warm_key(p, query, deciding) for p in todo)
    if todo:
        threading.Thread(target=_warm, args=(_loop[0], todo, query, time.monotonic()), name="mrtpo-warm",
                         daemon=True).start()
    return todo
