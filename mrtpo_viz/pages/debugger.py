"""Verifier debugger: does each reward's credit land where its verifier looks?

Per reward over steps: routing mass inside the verifier's spans and the span ROC AUC of JS with its
control (one panel per reward, optionally smoothed, and what one point is computed over); the samples
where routing and spans disagree most (each opens in Token credit); and a playground that runs a
verifier on text the user types. The two are tabs of which only the open one runs (`ui.view_tabs`; link
parameter view=playground).
"""

from __future__ import annotations

import json
from urllib.parse import urlencode

import streamlit as st

from core.tasks import json_error_text
from core.verifiers import VerifierSpecError, build, families, family_class
from mrtpo_viz import analysis, figures, heatmap, loaders, ui

CREDIT_PAGE = "mrtpo_viz/pages/credit.py"
# Example arguments per parameter name, to prefill the playground's JSON.
EXAMPLE_ARGS = {"keywords": ["river"], "forbidden_words": ["bad"], "keyword": "river", "frequency": 2,
                "relation": "at least", "num_sentences": 2, "num_words": 10, "num_placeholders": 1,
                "postscript_marker": "P.S.", "num_bullets": 3, "num_highlights": 2,
                "end_phrase": "Is there anything else?", "start_phrase": "Hello", "answer": 7,
                "letter": "r", "let_frequency": 3, "let_relation": "at least", "capital_frequency": 2,
                "capital_relation": "at least", "language": "en", "num_paragraphs": 2, "nth_paragraph": 1,
                "first_word": "the", "section_spliter": "SECTION", "num_sections": 2,
                "prompt_to_repeat": "Describe a river."}

PAGE = "debugger"
SMOOTH_WINDOWS = (1, 3, 5, 10, 20)  # the span AUC's rolling-mean windows in steps (1: off)
SMOOTH_FROM = 20  # a run with this many logged steps opens with the AUC smoothed over 5
VIEWS = {"run": "Credit vs spans in a run", "playground": "Verifier playground"}


def run_view(target: dict) -> None:
    """Routing mass in spans and span AUC over steps, and the samples where routing and spans disagree most."""
    runs = ui.page_runs(mrtpo_first=True, stop=False, charts=True)
    if not runs:
        ui.write_link(PAGE, {})
        return
    if target:
        ui.apply_run_link(runs, target)
    c1, c2 = st.columns([3, 1])
    run = ui.pick_run(runs, where=c1)
    path = str(run.path)
    ui.write_link(PAGE, {"run": loaders.run_label(run)})
    rewards = loaders.reward_names(path)
    if run.method in ("grpo", "gdpo"):
        st.info(f"{ui.plain(str(run.method).upper())} routes every reward uniformly over the response, so its mass inside "
                "spans equals the spans' share of tokens. Pick an MRTPO run to see where routing puts credit.")
    no_spans = set(loaders.rewards_without_spans(path))
    if no_spans:
        st.info(f"No spans reported by {', '.join(r for r in rewards if r in no_spans)}: their reward functions do "
                "not say which part of the response they read, so they are left out here.")
        rewards = [r for r in rewards if r not in no_spans]
        if not rewards:
            return
    metrics, warnings = loaders.metrics(path)
    ui.show_warnings(loaders.run_label(run), warnings)
    mm = {loaders.run_label(run): metrics}
    key = (path, loaders.run_label(run), loaders.file_key(run.path / "metrics.jsonl"), tuple(rewards))
    ui.chart(ui.cached_figure(("dbg_mass", *key), lambda: figures.for_display(figures.per_reward_lines(
        mm, rewards, "span/{name}/mass_in", "Routing mass inside the verifier's spans", "share"))),
        key="fig_dbg_mass")
    window = st.select_slider("Smooth the span AUC: rolling mean over", SMOOTH_WINDOWS, key="dbg_auc_window",
                              value=1 if len(metrics) < SMOOTH_FROM else 5,
                              format_func=lambda w: "off" if w == 1 else f"{w} steps",
                              help="the trailing mean of the last w logged steps; the raw values stay drawn, faint")
    ui.chart(ui.cached_figure(("dbg_auc", window, *key),
                              lambda: figures.for_display(figures.auc_figure(mm, rewards, window=window))),
             key="fig_dbg_auc")
    st.caption(figures.auc_scope(loaders.config(path)[0]))

    steps = loaders.credit_steps(path)
    if not steps:
        st.info("This run has no credit maps yet.")
    else:
        last_n = c2.number_input("Table: scan the last N steps", 1, len(steps), min(5, len(steps)),
                                 help="how many of the newest steps with credit maps the table of disagreements below "
                                      "ranks; the charts show every step")
        indexes = {}  # per (sample, reward) routing mass and span size, from each step's footer
        for s in steps[-int(last_n):]:
            ix, w = loaders.credit_index(path, s)
            ui.show_warnings(f"{loaders.run_label(run)} step {s}", w)
            indexes[s] = ix
        table = analysis.disagreement_from_index(indexes, top=25)
        st.subheader("Where routing and spans disagree most")
        st.caption(f"Over the samples of the last {int(last_n)} of the run's {len(steps)} steps with credit maps "
                   "(the field \"Table: scan the last N steps\" above). mass_in: share of the reward's routing weight "
                   "on tokens its verifier inspected; span_share: what uniform routing would put there. Select a row, "
                   "or follow its link, to open the sample.")
        if table.empty:
            st.info("No sample with verifier spans in these steps.")
        else:
            table["open"] = [
                "credit?" + urlencode({"run": loaders.run_label(run), "step": r.step, "sample": r.sample,
                                       "reward": r.reward})
                for r in table.itertuples()
            ]
            row = ui.pick_table(table, key="dbg_table", bars={"mass_in": (0.0, 1.0)}, links={"open": "Token credit ↗"},
                                formats={"score": ".3g", "mass_in": ".2f", "span_share": ".2f", "disagreement": ".2f",
                                         "group_adv": "+.2f"})
            chosen = table.iloc[row]
            # the reward name comes from the credit map: shown as text, never as Markdown (a button label is)
            label = (f"Open step {chosen['step']} sample {chosen['sample']} ({ui.plain(chosen['reward'])}) in "
                     "Token credit")
            if st.button(label, type="primary"):
                st.session_state["credit_target"] = {"run": path, "step": int(chosen["step"]),
                                                     "sample": int(chosen["sample"]),
                                                     "reward": str(chosen["reward"])}
                st.switch_page(CREDIT_PAGE)

PLAY_PARAMS = ("family", "args", "text")  # the playground's case in its link: family, arguments (JSON), response
DEFAULT_TEXT = "The river runs steady, and the light falls on the water."


def apply_playground_link(link: dict, fams: list[str]) -> None:
    """Open the case a link gives (`&family=...&args=<JSON>&text=...`); a family that does not exist: a warning."""
    family = (link.get("family") or [None])[0]
    if family is not None and family not in fams:
        st.warning(f"The link names the constraint family {ui.plain(repr(family))}, which does not exist; showing "
                   "the default family instead.")
        family = None
    if family is not None:
        st.session_state["play_family"] = family
    family = st.session_state.get("play_family") or family
    if "args" in link and family:
        st.session_state[f"play_args_{family}"] = link["args"][0]
    if "text" in link:
        st.session_state["play_text"] = link["text"][0]


def playground(link: dict) -> None:
    """A verifier run on typed text: its score and the character spans it inspected. The family, its arguments and
    the text go into the page's link, so that a case can be shared."""
    st.caption("Type a response, pick a constraint family and its arguments: the verifier's score and the "
               "character spans it inspected. The link in the address bar opens this case.")
    fams = families()
    if any(k in link for k in PLAY_PARAMS):
        apply_playground_link(link, fams)
    default_family = fams.index("keywords:existence") if "keywords:existence" in fams else 0
    p1, p2 = st.columns([1, 1])
    family = p1.selectbox("Constraint family", fams, key="play_family",
                          **({} if "play_family" in st.session_state else {"index": default_family}))
    params = family_class(family).params
    template = {name: EXAMPLE_ARGS.get(name, p.default if p.default is not None else "") for name, p in params.items()}
    args_key = f"play_args_{family}"
    args_text = p2.text_area("Arguments (JSON object)", key=args_key, height=80,
                             **({} if args_key in st.session_state else {"value": json.dumps(template)}))
    if params:
        p2.caption(" · ".join(f"`{n}`: {p.help or 'required'}" + (f" ({', '.join(map(str, p.choices))})"
                                                                   if p.choices else "") for n, p in params.items()))
    text = st.text_area("Response", key="play_text", height=120,
                        **({} if "play_text" in st.session_state else {"value": DEFAULT_TEXT}))
    ui.write_link(PAGE, {"view": "playground", "family": family, "args": args_text, "text": text})
    try:
        kwargs = json.loads(args_text) if args_text.strip() else {}
        if not isinstance(kwargs, dict):
            raise ValueError("the arguments must be a JSON object, e.g. {\"keywords\": [\"river\"]}")
        verifier = build(family, **kwargs)
    except json.JSONDecodeError as exc:
        st.error(f"Arguments are not valid JSON: {json_error_text(exc)}")
    except (VerifierSpecError, ValueError, TypeError) as exc:
        st.error(str(exc))
    else:
        result = verifier.verify(text)
        m1, m2, m3 = st.columns([1, 1, 3])
        m1.metric("Score", f"{result.score:.3g}")
        m2.metric("Spans", len(result.spans))
        if verifier.sentence():
            m3.caption(f"Constraint sentence: *{verifier.sentence()}*")
        st.html(heatmap.spans_html(text, result.spans))
        if result.spans:
            st.caption("Spans (character ranges): " + ", ".join(f"[{a}, {b})" for a, b in result.spans))


st.title("Verifier debugger")
link = ui.link_target(PAGE, ("run", "view", *PLAY_PARAMS))
view, tab = ui.view_tabs(PAGE, VIEWS, link)  # only the open tab runs
with tab:
    if view == "run":
        run_view(link)
    else:
        playground(link)
