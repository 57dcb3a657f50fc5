"""Streamlit helpers shared by the pages: the run lists, run pickers that remember the choice across pages,
shareable links (query parameters), live polling, warnings.

The chosen run lives in `st.session_state` under plain (non-widget) keys, so it survives page switches
(Streamlit drops the state of widgets that a page does not draw). It changes only by a user's action: a
picker, a row of the Runs table, a link, or Start on the Launch page; a page that cannot show the chosen
run shows another without forgetting the choice.

Links: every inspect page writes its state (run, step, sample, reward, ...) into the URL's query
parameters, so the address bar is a shareable link; a link opened later applies its parameters once, and
names a target that does not exist in a warning instead of falling back silently.

Runs this session started are listed before their trainer has written the run folder (state
`starting`), so a just-launched run is what the inspect pages show.

Never imports torch.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import streamlit as st

from core.run.store import ACTIVE_STATES, RunInfo
from core.run.train_log import last_phase
from mrtpo_viz import launcher, loaders

RUN_KEY = "mrtpo_run"  # path of the run chosen on single-run pages
RUNS_KEY = "mrtpo_runs"  # paths of the runs overlaid on multi-run pages
LAUNCHED_KEY = "launched_runs"  # paths of runs started from this session (Launch page), newest last
LINKS_KEY = "_links_written"  # page -> the query parameters the page wrote last (to tell a new link from its own)
REFRESH_S = 2.0  # polling period of live views
FIGURE_REFRESH_S = 10.0  # while a run is active, its curves are redrawn at most this often (they change every step)

# Plain symbols (present in every font, unlike emoji): active, done, stopped, broken.
STATE_ICONS = {"running": "▶", "starting": "…", "completed": "✓", "stopped": "■", "failed": "✗", "crashed": "✗",
               "unknown": "?"}


def describe(info: RunInfo) -> str:
    """A run in pickers: state icon, name, method; the step count only for finished runs (an active run's step
    changes after the picker is drawn, so it is shown by the page's live part instead)."""
    head = f"{STATE_ICONS.get(info.state, '')} {loaders.run_label(info)} · {info.method or '?'}"
    if info.state in ACTIVE_STATES:
        return f"{head} · in progress"
    total = f"/{info.total_steps}" if info.total_steps else ""
    return f"{head} · step {info.step}{total}"


def set_run(path: str) -> None:
    """Make `path` the chosen run of every page (single-run pages and the multi-run overlays)."""
    st.session_state[RUN_KEY] = str(path)
    st.session_state[RUNS_KEY] = [str(path)]
    st.session_state[RUNS_KEY + "_cleared"] = False


def find_run(runs: Sequence[RunInfo], wanted: str | None) -> str | None:
    """Path of the run named `wanted` (its name, `sample/<name>` label or path), None when absent."""
    if not wanted:
        return None
    for r in runs:
        if wanted in (r.name, loaders.run_label(r), str(r.path)):
            return str(r.path)
    return None


# ------------------------------------------------------------------------------------------ links


def link_target(page: str, keys: Sequence[str]) -> dict[str, list[str]]:
    """The query parameters among `keys` that came with a link (not the ones this page wrote itself), as
    lists (a parameter may repeat: `?run=a&run=b`); {} when the URL holds only the page's own state."""
    current = {k: st.query_params.get_all(k) for k in keys if st.query_params.get_all(k)}
    if not current or current == st.session_state.get(LINKS_KEY, {}).get(page):
        return {}
    return current


def write_link(page: str, params: Mapping[str, object]) -> None:
    """Put the page's state into the URL (values None or [] are left out), so the address is a shareable link."""
    clean: dict[str, list[str]] = {}
    for key, value in params.items():
        values = value if isinstance(value, (list, tuple)) else [value]
        values = [str(v) for v in values if v is not None and str(v) != ""]
        if values:
            clean[key] = values
    st.session_state.setdefault(LINKS_KEY, {})[page] = clean
    current = {k: st.query_params.get_all(k) for k in st.query_params}
    if current != clean:
        st.query_params.from_dict({k: v if len(v) > 1 else v[0] for k, v in clean.items()})


def apply_run_link(runs: Sequence[RunInfo], target: Mapping[str, list[str]], multi: bool = False) -> None:
    """Choose the run(s) a link names; warn about names that match no run (the page then shows its usual
    choice)."""
    wanted = target.get("run", [])
    found = [p for p in (find_run(runs, w) for w in wanted) if p]
    missing = [w for w in wanted if not find_run(runs, w)]
    if missing:
        st.warning("The link names " + ", ".join(plain(repr(m)) for m in missing)
                   + (", which is not among the runs" if len(missing) == 1 else ", which are not among the runs")
                   + "; showing " + ("the chosen runs" if multi else "the chosen run") + " instead.")
    if found:
        st.session_state[RUN_KEY] = found[0]
        if multi:
            st.session_state[RUNS_KEY] = found
            st.session_state[RUNS_KEY + "_cleared"] = False


def link_warning(what: str, wanted: str, shown: object) -> None:
    """A link named a step / sample / reward that the run does not have."""
    st.warning(f"The link asks for {what} {plain(repr(wanted))}, which this run does not have; showing "
               f"{plain(shown)} instead.")


# ------------------------------------------------------------------------------------------ curve style

STYLE_PARAMS = ("x", "smooth", "log")  # the link parameters of the curves' style
X_CHOICES = {"step": "step", "samples": "samples seen", "minutes": "training time"}


def _style_keys(page: str) -> tuple[str, str, str]:
    return f"{page}_x", f"{page}_smooth", f"{page}_log"


def curve_controls(page: str) -> dict:
    """The x axis, the smoothing and the log scale of a page's curves: {"x", "smooth", "log_y"}."""
    kx, ks, kl = _style_keys(page)
    keep_choice(kx, list(X_CHOICES), "step")
    st.session_state.setdefault(ks, 0.0)
    st.session_state.setdefault(kl, False)
    c1, c2, c3 = st.columns([2, 2, 1], vertical_alignment="bottom")
    x = c1.radio("X axis", list(X_CHOICES), key=kx, horizontal=True, format_func=X_CHOICES.get,
                 help="samples seen: responses (prompts per step × G); training time: the sum of step times "
                      "(evaluations and checkpoints not counted)")
    smooth = c2.slider("Smoothing (EMA weight)", 0.0, 0.99, step=0.01, key=ks,
                       help="exponential moving average with bias correction, as TensorBoard; the raw values stay "
                            "drawn, faint. 0: off")
    log_y = c3.checkbox("Log y axis", key=kl, help="for every panel except rates in [0, 1]; values ≤ 0 are not drawn")
    return {"x": x, "smooth": float(smooth), "log_y": bool(log_y)}


def style_params(style: Mapping) -> dict[str, object]:
    """The link parameters of a curve style (defaults left out)."""
    return {"x": None if style["x"] == "step" else style["x"],
            "smooth": f"{style['smooth']:g}" if style["smooth"] else None, "log": "1" if style["log_y"] else None}


def apply_style_link(target: Mapping[str, list[str]], page: str) -> None:
    """Set the curve style a link gives; warn about values that are not valid."""
    kx, ks, kl = _style_keys(page)
    if "x" in target:
        if target["x"][0] in X_CHOICES:
            st.session_state[kx] = target["x"][0]
        else:
            link_warning("x axis", target["x"][0], "step")
    if "smooth" in target:
        try:
            value = float(target["smooth"][0])
            if not 0.0 <= value <= 0.99:
                raise ValueError
            st.session_state[ks] = round(value, 2)
        except ValueError:
            link_warning("smoothing", target["smooth"][0], "no smoothing")
    if "log" in target:
        st.session_state[kl] = target["log"][0] in ("1", "true", "yes")


# ------------------------------------------------------------------------------------------ pickers


def _store_choice(widget_key: str, store_key: str) -> None:
    st.session_state[store_key] = st.session_state[widget_key]


def keep_choice(key: str, options: Sequence, default=None) -> None:
    """Before a keyed widget is drawn: make its state a valid option (`default`, else the first option)
    when it is missing or no longer offered. Widgets given a key this way take no index/default argument."""
    if st.session_state.get(key) not in options:
        st.session_state[key] = default if default in options else (options[0] if len(options) else None)


def pick_run(runs: Sequence[RunInfo], label: str = "Run", where=None, key: str = "run_picker") -> RunInfo | None:
    """A select box over `runs` showing the chosen run (the first one when the chosen run is not offered here,
    without forgetting the choice); a pick by the user becomes the choice. None when there are no runs."""
    where = where or st
    if not runs:
        return None
    by_path = {str(r.path): r for r in runs}
    paths = list(by_path)
    current = st.session_state.get(RUN_KEY)
    st.session_state[key] = current if current in by_path else paths[0]  # the choice drives the widget
    choice = where.selectbox(label, paths, key=key, format_func=lambda p: describe(by_path[p]),
                             on_change=_pick_single, args=(key,))
    return by_path[choice]


def _pick_single(key: str) -> None:
    set_run(st.session_state[key])


def pick_runs(runs: Sequence[RunInfo], label: str = "Runs", where=None, default_count: int = 1,
              key: str = "runs_picker") -> list[RunInfo]:
    """A multiselect over `runs` (overlaid on one figure); defaults to the single-run choice or the newest."""
    where = where or st
    if not runs:
        return []
    by_path = {str(r.path): r for r in runs}
    chosen = [p for p in st.session_state.get(RUNS_KEY, []) if p in by_path]
    if not chosen and not st.session_state.get(RUNS_KEY + "_cleared"):
        single = st.session_state.get(RUN_KEY)
        chosen = [single] if single in by_path else list(by_path)[:default_count]
    st.session_state[key] = chosen
    picked = where.multiselect(label, list(by_path), key=key, format_func=lambda p: describe(by_path[p]),
                               on_change=_store_runs, args=(key,))
    return [by_path[p] for p in picked]


def _store_runs(key: str) -> None:
    picked = list(st.session_state[key])
    st.session_state[RUNS_KEY] = picked
    st.session_state[RUNS_KEY + "_cleared"] = not picked  # an emptied selection stays empty
    if len(picked) == 1:
        st.session_state[RUN_KEY] = picked[0]


def sample_filter_values(page: str) -> tuple[str | None, str | None, str]:
    """(prompt key or None for any, reward, outcome) as chosen in `pick_sample`'s filters."""
    prompt_key = st.session_state.get(f"{page}_prompt", "any")
    return (None if prompt_key in (None, "any") else prompt_key, st.session_state.get(f"{page}_outcome_reward"),
            st.session_state.get(f"{page}_outcome", "any"))


def pick_sample(df, present: Sequence[str], page: str, target: Mapping[str, list[str]]) -> int | None:
    """Filters (prompt, outcome of a reward) and a sample select box whose entries carry one outcome mark per
    reward (✓/✗/·); the link's `sample` when valid. None (with a note) when no sample matches."""
    from mrtpo_viz import analysis

    f1, f2, f3, f4 = st.columns([1, 1.5, 1, 2.5])
    prompt_keys = ["any"] + sorted(df["prompt_key"].astype(str).unique().tolist())
    keep_choice(f"{page}_prompt", prompt_keys)
    keep_choice(f"{page}_outcome_reward", list(present))
    f1.selectbox("Prompt", prompt_keys, key=f"{page}_prompt")
    f2.selectbox("Outcome of reward", present, key=f"{page}_outcome_reward")
    f3.selectbox("Outcome", analysis.OUTCOMES, key=f"{page}_outcome")
    samples = analysis.filter_samples(df, *sample_filter_values(page))
    if not samples:
        st.info("No sample of this step matches the filters.")
        return None
    scores = analysis.sample_scores(df)
    prompt_of = dict(zip(df["sample"].tolist(), df["prompt_key"].astype(str).tolist(), strict=True))
    key = f"{page}_sample"
    if "sample" in target:
        wanted = target["sample"][0]
        if wanted.isdigit() and int(wanted) in samples:
            st.session_state[key] = int(wanted)
        else:
            link_warning("sample", wanted, f"sample {samples[0]}")
    keep_choice(key, samples)
    return f4.selectbox(
        "Sample (✓/✗/· per reward)", samples, key=key,
        format_func=lambda i: f"sample {i} · {prompt_of.get(i, '?')} · "
                              f"{analysis.outcome_marks(scores.get(i, {}), present)}",
        help="✓ satisfied, ✗ not satisfied, · not stated by the prompt (one mark per reward, in the order of the "
             "Outcome of reward list); ← / → : previous / next sample")


# ------------------------------------------------------------------------------------------ messages


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
        st.info(f"**{name}** is starting: {phase or 'the trainer is starting'}. The first step's curves appear "
                "here when it is written.")
    if log:
        st.code(log, language=None)


# ------------------------------------------------------------------------------------------ run lists


def pending_runs() -> list[RunInfo]:
    """Runs this session started whose trainer has not written its run folder yet (still loading), newest
    first, as run-list entries; one whose trainer died before writing it shows as crashed."""
    out = []
    for p in reversed(st.session_state.get(LAUNCHED_KEY, [])):
        if (Path(p) / "status.json").exists():
            continue
        state = launcher.run_state(p)
        cfg = launcher.launched_config(p)
        out.append(RunInfo(name=Path(p).name, path=Path(p), source="runs", state=str(state.get("state", "unknown")),
                           step=0, total_steps=cfg.get("steps"), method=cfg.get("method"), model=cfg.get("model"),
                           updated_at=None, warnings=[]))
    return out


def session_runs() -> list[RunInfo]:
    """Every run the app can show: this session's pending launches first, then the runs directory and the
    shipped samples (newest first)."""
    pending = pending_runs()
    listed = loaders.all_runs()
    known = {str(r.path) for r in listed}
    return [r for r in pending if str(r.path) not in known] + listed


def page_runs(with_credit: bool = False, mrtpo_first: bool = False, stop: bool = True,
              charts: bool = False) -> list[RunInfo]:
    """How an inspect page opens: list the runs it can show (`with_credit`: only runs with credit maps, plus the
    chosen run while it is active, whose first map is on its way; `mrtpo_first`: MRTPO runs, which route
    credit, first), and with none say so and stop the page (`stop=False`: return [] instead, for a page with
    other tabs). `charts`: the page draws Plotly charts (the browser starts loading their module at once)."""
    prefetch_charts(at_once=charts)
    runs = session_runs()
    if with_credit:
        chosen = st.session_state.get(RUN_KEY)
        runs = [r for r in runs if loaders.credit_steps(r.path)
                or (str(r.path) == chosen and r.state in ACTIVE_STATES)]
    if mrtpo_first:
        runs = sorted(runs, key=lambda r: r.method != "mrtpo")
    if not runs:
        no_runs_message()
        if stop:
            st.stop()
    return runs


def rerun_when(ready: Callable[[], bool], active: bool = True) -> None:
    """While `active`, check `ready()` every REFRESH_S seconds and rerun the page once it is true (e.g. a
    starting run wrote its first step). The check runs in a fragment: nothing else of the page is redrawn."""
    if not active:
        return

    @st.fragment(run_every=REFRESH_S)
    def watch() -> None:
        if ready():
            st.rerun()

    watch()


@st.cache_resource(show_spinner=False, max_entries=256)
def cached_figure(key: tuple, _build: Callable[[], object]):
    """`_build()` once per `key`, shared by every session of the server: a figure costs tens of milliseconds
    to build and is only read once built. `key` must name everything the figure depends on (the page's name
    for it, the run's path and `loaders.file_key` of the files it reads, the step, sample and options)."""
    return _build()


PREFETCHED_KEY = "_charts_prefetched"


@functools.cache
def chart_module() -> str | None:
    """The path (relative to the app's root URL) of the browser module Streamlit loads for its first Plotly
    chart (`static/js/PlotlyChart.<hash>.js`: ~4.7 MB of JavaScript that a browser takes seconds to compile
    and run), None when this Streamlit has no such file."""
    folder = Path(st.__file__).parent / "static" / "static" / "js"
    found = sorted(folder.glob("PlotlyChart.*.js"))
    return f"static/js/{found[0].name}" if found else None


# Browser code for prefetch_charts: `at_once` imports the module immediately; otherwise it waits until the page has
# settled (its script run finished and no file fetched for QUIET ms, or MAX ms passed), then for an idle moment.
_PREFETCH_JS = """<script data-prefetch="%(when)s">(() => {
  const load = () => import(new URL(%(module)s, document.baseURI).href).catch(() => {});
  if (%(at_once)s) return load();
  const t0 = performance.now();
  let last = t0;
  try { new PerformanceObserver(() => { last = performance.now(); }).observe({type: 'resource'}); } catch (e) {}
  const wait = () => {
    const app = document.querySelector('[data-testid="stApp"]');
    const done = app && app.getAttribute('data-test-script-state') === 'notRunning';
    const now = performance.now();
    if ((done && now - last >= %(quiet)d) || now - t0 >= %(max)d) (window.requestIdleCallback || setTimeout)(load);
    else setTimeout(wait, 100);
  };
  wait();
})();</script>"""
PREFETCH_QUIET_MS = 500  # a page counts as settled when no file was fetched for this long after its script ran
PREFETCH_MAX_MS = 8000


def prefetch_charts(at_once: bool = False) -> None:
    """Once per session (a browser tab): make the browser load the Plotly chart module, so that the first chart
    page the user opens from here does not wait for it. On a page that draws charts (`at_once`) the import starts
    at once, overlapping the page's script run, before its first chart arrives. On other pages it waits until the
    page has settled, then for an idle moment: the module (~4.7 MB, about a second of the browser's main thread to
    run) would otherwise compete with what that page itself loads and draws (the Runs table's grid, measured with
    `mrtpo bench app`). Streamlit imports the same URL later and gets the module already loaded; a browser that
    cannot load it just loads it when a chart needs it."""
    module = chart_module()
    if module is None or st.session_state.get(PREFETCHED_KEY):
        return
    st.session_state[PREFETCHED_KEY] = True
    st.sidebar.html(_PREFETCH_JS % {"module": repr(module), "at_once": "true" if at_once else "false",
                                    "when": "at-once" if at_once else "settled",
                                    "quiet": PREFETCH_QUIET_MS, "max": PREFETCH_MAX_MS},
                    unsafe_allow_javascript=True)


def relevance_switch(df, cfg: Mapping, rewards: Sequence[str], page: str, where=None):
    """A select box of the relevance variants recomputable from this step's stored d (`specificity.
    computable_variants`), the others listed with why not. Returns (the credit frame, recomputed under the
    chosen variant when it is not the run's own, with a `relevance` column; the chosen variant or None)."""
    from core.config import DEFAULT_RELEVANCE
    from mrtpo_viz import specificity
    ok, why = specificity.computable_variants(cfg)
    if not ok:
        return df, None
    own = str(cfg.get("relevance") or DEFAULT_RELEVANCE)
    key = f"{page}_relevance"
    keep_choice(key, ok, own)
    variant = (where or st).selectbox(
        "Relevance", ok, key=key, format_func=lambda v: f"{v} (trained)" if v == own else f"{v} (recomputed)",
        help="the variants this step's stored per-reward distances d allow: the same contrastive pass, another "
             "combine; routing weights use the run's lam, w_max and sharpen")
    if why:
        st.caption("Not computable from this step's stored values: "
                   + "; ".join(f"**{plain(v)}** {plain(r)}" for v, r in why.items()) + ".")
    if variant == own:
        return df, variant
    st.info(f"Routing weights, credit and the total advantage below are recomputed under **{plain(variant)}** from "
            f"the stored d; the run trained with {plain(own)}.")
    skipped = df.loc[df["js_skipped"].astype(bool), ["sample", "reward"]].drop_duplicates() if "js_skipped" in df \
        else df.iloc[:0]
    if len(skipped) and variant.endswith("_specific"):
        st.caption(f"{len(skipped)} (sample, reward) pairs of this step were not replayed (group advantage 0), so "
                   "their d is not stored: the specific mean runs over the replayed rewards of a sample only, where a "
                   f"run trained with {plain(variant)} would have replayed them all.")
    return specificity.recompute_variant(df, variant, cfg, rewards), variant


def specificity_panel(sample_df, rewards: Sequence[str]) -> None:
    """For one sample: the pairwise routing overlap of the rewards its prompt states, the sample's mean, and
    each reward's span metrics (`specificity.sample_overlap`, `specificity.sample_metrics`)."""
    from mrtpo_viz import analysis, specificity
    stated = analysis.stated_rewards(analysis.sample_scores(sample_df).get(int(sample_df["sample"].iloc[0]), {}),
                                     rewards)
    st.subheader("Reward specificity of this sample")
    if len(stated) >= 2:
        overlap, mean = specificity.sample_overlap(sample_df, stated)
        left, right = st.columns([3, 1])
        left.caption("Routing overlap of each pair of rewards, sum_t min(p_k(t), p_j(t)) of their routing-weight "
                     "shares: 1 = the same tokens, 0 = disjoint.")
        left.dataframe(overlap, width="stretch", column_config={c: st.column_config.NumberColumn(format="%.3f")
                                                                for c in overlap.columns})
        right.metric("Mean overlap (this sample)", "n/a" if mean != mean else f"{mean:.3f}")
    else:
        st.caption("One stated reward: no pairwise overlap.")
    table = specificity.sample_metrics(sample_df, stated)
    st.dataframe(table, hide_index=True, width="stretch",
                 column_config={c: st.column_config.NumberColumn(format="%.3f")
                                for c in ("mass_in", "lift", "lift_rotated", "mass_control", "retained", "auc")})
    st.caption("mass_in: share of the reward's routing weight inside its span; lift: that mass / the span's token "
               "share (1 = no preference); lift_rotated: the same with the reward labels rotated (a specific "
               "router's lift beats it); retained: the share of the reward's advantage mass its credit keeps; mass_control: the other rewards' mass on this span / its token share "
               "(low = specific); auc: the stored d telling span tokens from the rest of this response (counts "
               "towards auc_satisfied or auc_violated by the outcome). AUC vs the entropy baseline needs per-token "
               "entropies, which the credit map does not store. docs/METHOD.md, \"Specificity\".")
