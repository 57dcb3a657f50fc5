"""The Runs and Launch pages as a newcomer meets them (issue 46): the selected run's state after Resume, the Extend
button, the landing text and the table's missing values, Launch's disk estimate (Streamlit AppTest)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from mrtpo_viz.launcher import start
from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run

pytestmark = pytest.mark.app

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def runs_page(**session) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in session.items():
        at.session_state[k] = v
    at.run()
    assert not at.exception, at.exception
    return at


def with_checkpoint(path: Path, step: int) -> None:
    folder = path / "checkpoints" / f"step_{step:06d}"
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text(json.dumps({"step": step}))


@pytest.fixture
def sleeping_trainer(monkeypatch):
    """Resume starts a real child process that lives (and writes nothing) instead of `mrtpo train --resume`."""
    children = []

    def spawn(argv, log, env):
        children.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdout=log,
                                         stderr=subprocess.STDOUT))
        return children[-1]

    monkeypatch.setattr(start, "_spawn", spawn)
    yield children
    for proc in children:
        proc.kill()
        proc.wait()


def selected_line(at: AppTest) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("Selected:"))


def test_after_resume_the_selected_runs_state_is_current(tmp_path, monkeypatch, sleeping_trainer):
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(tmp_path))
    w = write_synthetic_run(tmp_path, "ux-b", steps=2, rewards=DEFAULT_REWARDS[:2], n_tokens=4, state="stopped")
    with_checkpoint(w.path, 2)
    at = runs_page(mrtpo_run=str(w.path))
    assert "stopped" in selected_line(at)
    next(b for b in at.button if b.label == "Resume").click()
    at.run()
    assert not at.exception and len(sleeping_trainer) == 1
    assert any(s.value.startswith("Resumed ux-b to ") for s in at.success), [e.value for e in at.error]
    line = selected_line(at)
    assert "stopped" not in line and "starting" in line, line
    # while the trainer starts, a second Resume is not offered
    assert next(b for b in at.button if b.label == "Resume").disabled


def test_a_completed_runs_button_says_extend(tmp_path, monkeypatch):
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(tmp_path))
    w = write_synthetic_run(tmp_path, "done", steps=2, rewards=DEFAULT_REWARDS[:2], n_tokens=4)
    with_checkpoint(w.path, 2)
    at = runs_page(mrtpo_run=str(w.path))
    assert at.number_input(key=f"resume_steps_{w.path}").label == "Extend to step"
    labels = [b.label for b in at.button]
    assert "Extend" in labels and "Resume" not in labels, labels


def launch_page() -> AppTest:
    at = runs_page()
    at.switch_page("mrtpo_viz/pages/launch.py").run()
    assert not at.exception, at.exception
    return at


def disk_caption(at: AppTest) -> str:
    return next(c.value for c in at.caption if c.value.startswith("Disk: about"))


def test_launch_disk_estimate_follows_the_form_as_it_stands(tmp_path, monkeypatch):
    """Issue 46 item 11: the estimate is for the values in the form now, not those of the last start."""
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(tmp_path))
    at = launch_page()
    default_tokens = at.number_input(key="lf_max_new_tokens").value
    assert f"up to {default_tokens} tokens" in disk_caption(at)
    at.number_input(key="lf_max_new_tokens").set_value(77)
    at.run()  # typed, not started
    assert "up to 77 tokens" in disk_caption(at), disk_caption(at)
    steps = at.number_input(key="lf_steps")
    steps.set_value(3).run()
    assert "(3 steps x" in disk_caption(at) or "(1 steps x" in disk_caption(at), disk_caption(at)
    assert "last start" not in disk_caption(at)


def test_the_landing_page_says_what_the_app_is_and_where_to_start(tmp_path, monkeypatch):
    """Issue 46 item 5 (text): the Runs page opens with a line on what the app is and a first step."""
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(tmp_path))
    write_synthetic_run(tmp_path, "demo", steps=1, rewards=DEFAULT_REWARDS[:2], n_tokens=4)
    text = " ".join(m.value for m in runs_page().markdown)
    assert "Start here" in text and "Launch" in text and "Token credit" in text, text


def test_the_runs_table_opens_with_method_and_seed_and_shows_a_dash_for_missing_values(tmp_path, monkeypatch):
    """Issue 46 item 5 (table): the runs table's first columns are the run, its method and seed, its state, progress
    and summary metrics (`ui.runs_table.KEY_COLUMNS`); a missing value (here the held-out rate of a run with no
    evaluation, and a GDPO run's routing) reads "–", not "None". The widths at 1,400 px: tests/test_browser_pages.py."""
    from mrtpo_viz.ui.runs_table import KEY_COLUMNS

    monkeypatch.setenv("MRTPO_RUNS_DIR", str(tmp_path))
    write_synthetic_run(tmp_path, "no-eval", steps=1, method="gdpo", rewards=DEFAULT_REWARDS[:2], n_tokens=4,
                        with_eval=False)
    at = runs_page()
    table = at.dataframe[0]
    assert list(table.value.columns[:len(KEY_COLUMNS)]) == list(KEY_COLUMNS), list(table.value.columns)
    row = table.value[table.value["run"] == "no-eval"].iloc[0]
    assert row["held-out (last)"] is None or row["held-out (last)"] != row["held-out (last)"]  # missing: None / NaN
    assert table.proto.placeholder == "–"
