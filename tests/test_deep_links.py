"""Deep links that a user types or shares (issue 46 item 9): `&view=` names a tab by its name, its label or a word
a user would type (a panel of the tab); an unknown one warns and lists the names; the verifier playground's case
(family, arguments, text) is in its link (Streamlit AppTest)."""

from __future__ import annotations

import json
from pathlib import Path

import helpers
import pytest
from streamlit.testing.v1 import AppTest

from mrtpo_viz import ui
from mrtpo_viz.figures import panels
from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run

pytestmark = pytest.mark.app

CURVES = {view: label for view, (label, _) in panels.CURVE_VIEWS.items()}
ALIASES = {group: view for view, (_, groups) in panels.CURVE_VIEWS.items() for group in groups}


@pytest.fixture(scope="module")
def one_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    write_synthetic_run(root, "demo", steps=3, rewards=DEFAULT_REWARDS[:2], n_tokens=6)
    return root


def open_page(name: str, runs_dir: Path, monkeypatch, query: dict) -> AppTest:
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(runs_dir))
    return helpers.open_page(name, query)


@pytest.mark.parametrize(("typed", "view"), [("loss", "optimisation"), ("Optimization", "optimisation"),
                                             ("optimisation", "optimisation"), ("KL", "optimisation"),
                                             ("held-out", "eval"), ("Held-out eval", "eval"), ("reward", "rewards"),
                                             ("js", "routing"), ("spans", "routing"), ("speed", "speed"),
                                             ("time", "speed"), ("more", "more")])
def test_a_view_is_found_by_what_a_user_would_type(typed, view):
    assert ui.resolve_view(typed, CURVES, ALIASES) == view


@pytest.mark.parametrize("typed", ["nope", "", "lossy"])
def test_a_view_that_names_no_tab_is_none(typed):
    assert ui.resolve_view(typed, CURVES, ALIASES) is None


def test_curves_link_with_view_loss_opens_the_loss_tab(one_run, monkeypatch):
    at = open_page("curves", one_run, monkeypatch, {"view": "loss"})
    assert not at.warning, [w.value for w in at.warning]
    assert at.session_state["curves_view"] == CURVES["optimisation"]
    assert "fig_optimisation" in [c.key for c in at.get("plotly_chart")]
    assert at.query_params["view"] == "optimisation"  # the link is rewritten with the tab's own name


def test_an_unknown_view_warns_and_lists_the_names(one_run, monkeypatch):
    at = open_page("curves", one_run, monkeypatch, {"view": "bogus"})
    warning = " ".join(w.value for w in at.warning)
    assert "'bogus'" in warning and all(view in warning for view in CURVES), warning
    assert "optimisation (Loss, KL, entropy)" in warning


def test_readme_lists_the_view_names_of_every_page():
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    for view in [*CURVES, "sample", "step", "training", "run", "playground"]:
        assert f"`{view}`" in readme, view


def test_the_playground_case_is_in_its_link_and_a_link_opens_it(one_run, monkeypatch):
    case = {"view": "playground", "family": "punctuation:no_comma", "args": "{}", "text": "one, two"}
    at = open_page("debugger", one_run, monkeypatch, case)
    assert at.selectbox(key="play_family").value == "punctuation:no_comma"
    assert at.text_area(key="play_text").value == "one, two"
    assert next(m for m in at.metric if m.label == "Score").value == "0"
    at.text_area(key="play_text").set_value("one two").run()
    assert next(m for m in at.metric if m.label == "Score").value == "1"
    assert at.query_params["text"] == "one two" and at.query_params["family"] == "punctuation:no_comma"
    at.selectbox(key="play_family").set_value("keywords:existence").run()
    at.text_area(key="play_args_keywords:existence").set_value(json.dumps({"keywords": ["two"]})).run()
    assert at.query_params["family"] == "keywords:existence"
    assert json.loads(at.query_params["args"]) == {"keywords": ["two"]}
    shared = {k: at.query_params[k] for k in ("view", "family", "args", "text")}
    again = open_page("debugger", one_run, monkeypatch, shared)  # a new session opens the same case
    assert again.selectbox(key="play_family").value == "keywords:existence"
    assert json.loads(again.text_area(key="play_args_keywords:existence").value) == {"keywords": ["two"]}
    assert next(m for m in again.metric if m.label == "Score").value == "1"


def test_a_playground_link_to_a_missing_family_warns(one_run, monkeypatch):
    at = open_page("debugger", one_run, monkeypatch, {"view": "playground", "family": "no:such"})
    assert any("'no:such'" in w.value for w in at.warning), [w.value for w in at.warning]
