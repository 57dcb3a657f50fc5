"""Token credit and JS divergence: which reward a sample view opens on, and the user's reward kept across runs
(Streamlit AppTest on synthetic runs written for the test)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import open_page
from streamlit.testing.v1 import AppTest

from mrtpo_viz import analysis, loaders, opening
from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run

pytestmark = pytest.mark.app

KEPT = DEFAULT_REWARDS[-1]  # the reward a user chooses; the synthetic frames' last reward is NaN on samples 0, 1
ORDER = [KEPT, *DEFAULT_REWARDS[:-1]]


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    # `has-it`: KEPT is the frames' first reward, stated by every sample; `half`: KEPT is the frames' last reward,
    # not stated by samples 0 and 1; `lacks-it`: no KEPT at all. The config lists KEPT first (the page's order).
    write_synthetic_run(root, "has-it", steps=2, rewards=tuple(ORDER), n_tokens=8, config={"reward_names": ORDER})
    write_synthetic_run(root, "half", steps=2, rewards=DEFAULT_REWARDS, n_tokens=8, seed=0,
                        config={"reward_names": ORDER})
    write_synthetic_run(root, "lacks-it", steps=2, rewards=DEFAULT_REWARDS[:2], n_tokens=8, seed=5)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MRTPO_RUNS_DIR", str(root))
        yield root


def zero_first_sample(runs_dir: Path) -> tuple[int, str, str]:
    """A sample of `half`'s step 2 whose first stated reward (page order) has zero credit while another reward
    acted on it and failed; (sample, that zero reward, the first acted failed reward)."""
    index, _ = loaders.credit_index(str(runs_dir / "half"), 2)
    scores = analysis.sample_scores(index)
    for s in sorted(scores):
        stated = analysis.stated_rewards(scores[s], ORDER)
        zero = opening.zero_credit_notes(index, s, stated)
        failed = [r for r in stated if r not in zero and scores[s][r] < 1]
        if stated and stated[0] in zero and failed:
            return s, stated[0], failed[0]
    raise AssertionError("the fixture has no sample whose first reward has zero credit")


def test_credit_opens_on_a_failed_reward_that_acted_and_says_why_a_credit_is_zero(runs_dir):
    # regression: the page opened on the first stated reward, whose credit on the sample was 0 (a blank heatmap)
    sample, zero, failed = zero_first_sample(runs_dir)
    at = open_page("credit", {"run": "half", "step": "2", "sample": str(sample)})
    assert at.selectbox(key="credit_color").value == failed
    index, _ = loaders.credit_index(str(runs_dir / "half"), 2)
    stated = analysis.stated_rewards(analysis.sample_scores(index)[sample], ORDER)
    # the Outcome filter's reward is one the sample's prompt states (the one the view opens on)
    assert at.selectbox(key="credit_outcome_reward").value == failed in stated
    assert not any("is zero" in i.value for i in at.info)
    at.selectbox(key="credit_color").set_value(zero).run()
    notes = [i.value for i in at.info if "is zero" in i.value]
    assert notes and "group advantage is 0" in notes[0] and "scored the same" in notes[0]


def test_js_opens_with_the_acted_rewards_on_top_and_the_filter_on_a_stated_reward(runs_dir):
    sample, zero, failed = zero_first_sample(runs_dir)
    at = open_page("js", {"run": "half", "step": "2", "sample": str(sample)})
    assert at.selectbox(key="js_outcome_reward").value == failed
    fig = at.get("plotly_chart")[0].proto.spec if at.get("plotly_chart") else ""
    assert fig.index(f'"text":"{failed}"') < fig.index(f'"text":"{zero}"')  # the panel titles, top first
    assert any("is zero" in c.value and zero in c.value for c in at.caption)


def test_credit_keeps_the_users_reward_across_a_run_switch(runs_dir):
    # regression: switching to a run whose shown sample did not state the chosen reward changed "Colour by" by
    # itself and dropped `reward=` from the URL
    at = open_page("credit", {"run": "has-it", "step": "2", "sample": "0", "reward": KEPT})
    assert at.selectbox(key="credit_color").value == KEPT and at.query_params["reward"] == KEPT
    at.selectbox[0].set_value(str(runs_dir / "half")).run()
    assert not at.exception
    assert at.selectbox(key="credit_color").value == KEPT and at.query_params["reward"] == KEPT
    assert at.selectbox(key="credit_sample").value not in (0, 1)  # a sample whose prompt states it
    # a run without the reward says so, and the choice comes back on a run that has it
    at.selectbox[0].set_value(str(runs_dir / "lacks-it")).run()
    assert any("has no reward" in i.value and KEPT in i.value for i in at.info)
    at.selectbox[0].set_value(str(runs_dir / "has-it")).run()
    assert at.selectbox(key="credit_color").value == KEPT and at.query_params["reward"] == KEPT
    # a sample the user picks that does not state it: said, and the URL keeps the user's reward
    at.selectbox[0].set_value(str(runs_dir / "half")).run()
    at.selectbox(key="credit_sample").set_value(0).run()
    assert at.selectbox(key="credit_color").value != KEPT and at.query_params["reward"] == KEPT
    assert any("does not state" in i.value and KEPT in i.value for i in at.info)


OTHER_WORDS = ("not satisfied", "unsatisfied", "not applicable")  # the outcome vocabulary is satisfied / violated


def page_text(at: AppTest) -> str:
    """Every string the page shows: element bodies, labels, options, help texts, table cells (the protos' text)."""
    out, todo = [], [at._tree]
    while todo:
        node = todo.pop()
        todo.extend(getattr(node, "children", {}).values())
        if getattr(node, "proto", None) is not None:
            out.append(str(node.proto))
    return "\n".join(out)


@pytest.mark.parametrize("name", ["credit", "js", "debugger", "curves", "compare", "runs"])
def test_every_page_says_satisfied_violated_not_stated_and_nothing_else(runs_dir, name):
    # regression: the Outcome filter said "not satisfied / not applicable", the specificity table "violated"
    at = open_page(name, {"run": "half", "step": "2", "sample": "2"})
    text = page_text(at).lower()
    assert not [w for w in OTHER_WORDS if w in text], [w for w in OTHER_WORDS if w in text]
    if name in ("credit", "js"):
        assert "violated" in text and "not stated" in text
        options = at.selectbox(key=f"{name}_outcome").options
        assert options == ["any", "satisfied", "violated", "not stated"]
