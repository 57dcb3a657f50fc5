"""The Verifier debugger's span AUC as a newcomer reads it (issue 46, item 8; Streamlit AppTest): one panel per
reward, smoothed on a long run with the window in the title, a caption with what one point is computed over, and
the table's N said to be the table's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run

pytestmark = pytest.mark.app

APP = str(Path(__file__).resolve().parent.parent / "app.py")
REWARDS = tuple(DEFAULT_REWARDS[:3])


def debugger(runs: Path, run: Path) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["mrtpo_run"] = str(run)
    at.run()
    at.switch_page("mrtpo_viz/pages/debugger.py").run()
    assert not at.exception, at.exception
    return at


def auc_spec(at: AppTest) -> dict:
    return json.loads(next(c for c in at.get("plotly_chart") if c.key == "fig_dbg_auc").proto.spec)


def test_the_span_auc_has_a_panel_per_reward_a_smoothing_window_and_says_what_a_point_scans(tmp_path, monkeypatch):
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(tmp_path))
    w = write_synthetic_run(tmp_path, "long", steps=24, rewards=REWARDS, n_tokens=4,
                            config={"prompts_per_step": 2, "group_size": 4, "max_new_tokens": 16})
    at = debugger(tmp_path, w.path)
    spec = auc_spec(at)
    panels = {tr.get("yaxis", "y") for tr in spec["data"]}
    assert len(panels) == len(REWARDS), panels  # one panel per reward
    assert "rolling mean over 5 steps" in spec["layout"]["title"]["text"]  # a 24-step run opens smoothed
    assert {tr["meta"][2] for tr in spec["data"]} == {"raw", "smoothed"}
    captions = " ".join(c.value for c in at.caption)
    assert "one training step" in captions and "up to 8 samples (2 prompts x G = 4)" in captions, captions
    assert "16 response tokens" in captions
    assert any(n.label.startswith("Table: scan the last N steps") for n in at.number_input)
    assert "the last 5 of the run's 24 steps with credit maps" in captions

    at.select_slider(key="dbg_auc_window").set_value(1).run()  # smoothing off: the raw lines only
    spec = auc_spec(at)
    assert "rolling mean" not in spec["layout"]["title"]["text"]
    assert {tr["meta"][2] for tr in spec["data"]} == {"raw"}
