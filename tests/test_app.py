"""Every page of the app on a run-store fixture (Streamlit AppTest): no exception, the key elements present.

The fixture writes synthetic runs through core.run.store's writer (an MRTPO and a GDPO run), a corrupt run
folder, a crashed run and a "running" run whose pid is this test process (alive, but not a trainer).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from helpers import html_tables, numeric, pick_tables, start_stand_in
from streamlit.testing.v1 import AppTest

from core.run.store import RunStore, RunStoreError, read_notes
from mrtpo_viz import figures, launcher, loaders, opening, ui
from mrtpo_viz.server import serve
from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run

pytestmark = pytest.mark.app  # every test runs app pages through Streamlit AppTest

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
N_TOKENS = 24


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    write_synthetic_run(root, "mrtpo-demo", steps=3, rewards=DEFAULT_REWARDS, n_tokens=N_TOKENS)
    write_synthetic_run(root, "gdpo-demo", steps=3, method="gdpo", rewards=DEFAULT_REWARDS, n_tokens=N_TOKENS,
                        seed=1)
    # corrupt: unreadable config, a torn metrics line in the middle, a garbage credit file, no status
    broken = root / "broken"
    (broken / "credit").mkdir(parents=True)
    (broken / "config.json").write_text("{not json")
    (broken / "metrics.jsonl").write_text('{"step": 1, "reward/all_satisfied": 0.5}\n{"step": 2, "rew\n'
                                          '{"step": 3, "reward/all_satisfied": 0.7}\n')
    (broken / "credit" / "step_000001.parquet").write_bytes(b"PAR1 not really")
    # crashed: says running, its process is gone
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    w = write_synthetic_run(root, "crashed", steps=1, rewards=DEFAULT_REWARDS[:2], n_tokens=8, state="running",
                            pid=dead.pid)
    (w.path / "train.log").write_text("step 1/5\nTraceback (most recent call last):\nRuntimeError: boom in step 2\n")
    # live: running, pid alive (this process), so the pages poll and show a Stop button
    write_synthetic_run(root, "live", steps=2, rewards=DEFAULT_REWARDS[:2], n_tokens=8, state="running",
                        pid=os.getpid())
    # a run with a reference model and 2 update passes (its KL and clip fraction are real), and one without eval
    write_synthetic_run(root, "kl-two-passes", steps=3, rewards=DEFAULT_REWARDS[:2], n_tokens=8,
                        config={"kl_beta": 0.05, "inner_epochs": 2}, seed=2)
    write_synthetic_run(root, "no-eval", steps=3, method="gdpo", rewards=DEFAULT_REWARDS, n_tokens=8, seed=3,
                        with_eval=False)
    # the run's first reward is one that the first samples' prompts do not state (their score is NaN)
    write_synthetic_run(root, "unstated-first", steps=1, rewards=DEFAULT_REWARDS, n_tokens=8, seed=4,
                        config={"reward_names": [DEFAULT_REWARDS[-1], *DEFAULT_REWARDS[:-1]]})
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MRTPO_RUNS_DIR", str(root))
        yield root


def page(name: str, runs_dir: Path, query: dict | None = None, **session) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in session.items():
        at.session_state[k] = v
    at.run()
    assert not at.exception, at.exception
    if name != "runs":
        if query:
            at.query_params.update(query)
        at.switch_page(f"mrtpo_viz/pages/{name}.py").run()
        assert not at.exception, at.exception
    return at


def charts(at: AppTest) -> list:
    return at.get("plotly_chart")


def shared_zoom(fig: dict) -> int:
    """How many x axes a figure of panels (`figures.small_multiples`, as JSON) has, after checking that every axis
    follows the first (`matches="x"`) and the first follows none (Plotly ignores an axis matching itself, with a
    warning in the browser's console)."""
    axes = [k for k in fig["layout"] if k.startswith("xaxis")]
    assert "matches" not in fig["layout"]["xaxis"], fig["layout"]["xaxis"]
    assert all(fig["layout"][a].get("matches") == "x" for a in axes if a != "xaxis"), axes
    return len(axes)


def html_of(at: AppTest) -> str:
    return "".join(h.proto.body for h in at.get("html"))


def run_path(runs_dir: Path, name: str) -> str:
    return str(runs_dir / name)


def test_runs_page_lists_runs_and_flags_broken_ones(runs_dir):
    at = page("runs", runs_dir)
    table = at.dataframe[0].value
    assert {"mrtpo-demo", "gdpo-demo", "broken", "crashed", "live"} <= set(table["run"])
    states = dict(zip(table["run"], table["state"], strict=True))
    assert "crashed" in states["crashed"] and "running" in states["live"] and "completed" in states["mrtpo-demo"]
    warnings = " ".join(w.value for w in at.warning)
    assert "broken" in warnings and "config.json is unreadable" in warnings
    assert any("crashed" in e.label for e in at.expander)
    assert any("boom in step 2" in c.value for c in at.code)


def test_runs_page_shows_each_runs_settings_and_filters_and_groups_by_them(runs_dir):
    at = page("runs", runs_dir)
    table = at.dataframe[0].value
    for column in ("method", "routing", "relevance", "lr", "G", "seed", "of", "state", "training time (min)", "tags"):
        assert column in table.columns, column
    row = table.set_index("run").loc["kl-two-passes"]
    assert row["method"] == "mrtpo" and row["routing"] == "replay" and row["G"] == 4 and row["seed"] == 2
    assert pd.isna(table.set_index("run").loc["gdpo-demo", "routing"])  # GDPO does not route
    at.multiselect(key="runs_filter_by").set_value(["method"]).run()
    at.multiselect(key="runs_f_method").set_value(["gdpo"]).run()
    assert set(at.dataframe[0].value["run"]) == {"gdpo-demo", "no-eval"}
    at.multiselect(key="runs_filter_by").set_value([]).run()
    at.selectbox(key="runs_group_by").set_value("method").run()
    groups = [t.value for t in at.get("text") if t.value.startswith("method = ")]
    assert any(g.startswith("method = mrtpo") for g in groups) and any(g.startswith("method = gdpo") for g in groups)
    assert len(at.dataframe) >= 2 and not at.exception


def test_runs_page_tags_and_notes_archive_and_delete_with_confirmation(tmp_path, monkeypatch):
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(tmp_path))
    for name in ("keep-me", "old-run"):
        write_synthetic_run(tmp_path, name, steps=1, rewards=DEFAULT_REWARDS[:2], n_tokens=4)
    at = page("runs", tmp_path, mrtpo_run=str(tmp_path / "old-run"))
    assert any("Selected" in m.value and "old-run" in m.value for m in at.markdown)
    at.text_input[1].set_value("baseline, seed0")  # tags (after the search box)
    at.text_area[0].set_value("lr too high?\nsecond line")
    next(b for b in at.button if b.label == "Save").click()
    at.run()
    assert read_notes(tmp_path / "old-run") == {"tags": ["baseline", "seed0"], "notes": "lr too high?\nsecond line"}
    row = at.dataframe[0].value.set_index("run").loc["old-run"]
    assert row["tags"] == "baseline, seed0" and row["notes"] == "lr too high?"
    # archive: asks first, then moves the run out of the list; restore brings it back
    next(b for b in at.button if b.label == "Archive…").click()
    at.run()
    assert (tmp_path / "old-run").is_dir() and any("Archive" in w.value for w in at.warning)
    next(b for b in at.button if b.label == "Archive").click()
    at.run()
    assert not (tmp_path / "old-run").exists() and (tmp_path / ".archive" / "old-run").is_dir()
    assert "old-run" not in set(at.dataframe[0].value["run"])
    next(b for b in at.button if b.label == "Restore").click()
    at.run()
    assert (tmp_path / "old-run").is_dir() and "old-run" in set(at.dataframe[0].value["run"])
    # delete: only once the run's name is typed
    at.session_state[ui.RUN_KEY] = str(tmp_path / "old-run")
    at.run()
    next(b for b in at.button if b.label == "Delete…").click()
    at.run()
    delete = next(b for b in at.button if b.label == "Delete")
    assert delete.disabled
    at.text_input(key=f"confirm_name_{tmp_path / 'old-run'}").set_value("old-run").run()
    next(b for b in at.button if b.label == "Delete").click()
    at.run()
    assert not (tmp_path / "old-run").exists() and (tmp_path / "keep-me").is_dir() and not at.exception


def test_resume_is_offered_only_for_a_stopped_run_with_a_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(tmp_path))
    write_synthetic_run(tmp_path, "stopped", steps=2, rewards=DEFAULT_REWARDS[:2], n_tokens=4, state="stopped")
    at = page("runs", tmp_path, mrtpo_run=str(tmp_path / "stopped"))
    resume = next(b for b in at.button if b.label == "Resume")
    assert resume.disabled and "no complete checkpoint" in resume.help
    write_synthetic_run(tmp_path, "done", steps=2, rewards=DEFAULT_REWARDS[:2], n_tokens=4)
    at = page("runs", tmp_path, mrtpo_run=str(tmp_path / "done"))
    assert "no complete checkpoint" in next(b for b in at.button if b.label == "Extend").help
    write_synthetic_run(tmp_path, "live", steps=2, rewards=DEFAULT_REWARDS[:2], n_tokens=4, state="running",
                        pid=os.getpid())
    at = page("runs", tmp_path, mrtpo_run=str(tmp_path / "live"))
    assert "only a stopped, failed, crashed or completed run" in next(
        b for b in at.button if b.label == "Resume").help


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.train
def test_a_completed_run_is_extended_with_more_steps_from_the_runs_page(tmp_path, monkeypatch, micro_model,
                                                                         prompt_file):
    """Issue 26: a completed run can be extended (Resume with more steps). A real 1-step run of the built-in
    trainer, then Resume on the Runs page up to step 2: a trainer child process continues it from its last
    checkpoint and the run completes 2 steps, its first step kept."""
    from core.config import TrainConfig
    from core.run import lifecycle

    monkeypatch.setenv("MRTPO_RUNS_DIR", str(tmp_path))
    path = lifecycle.train(TrainConfig(model=str(micro_model), prompt_set=str(prompt_file), runs_dir=str(tmp_path),
                                       run_name="short", group_size=2, prompts_per_step=2, max_new_tokens=6, steps=1,
                                       device="cpu"), out=open(os.devnull, "w"))
    first = RunStore(path).metrics().iloc[0].to_dict()
    at = page("runs", tmp_path, mrtpo_run=str(path))
    box = at.number_input(key=f"resume_steps_{path}")
    assert box.label == "Extend to step" and box.value == 2 and box.min == 2 and not box.disabled
    with pytest.raises(RunStoreError, match="more steps than that"):
        launcher.resume_run(path, steps=1)
    next(b for b in at.button if b.label == "Extend").click()
    at.run()
    assert any(s.value.startswith("Extended short to 2 steps") for s in at.success), [e.value for e in at.error]
    deadline = time.time() + 240
    while time.time() < deadline and launcher.run_state(path)["state"] in ("completed", "starting", "running"):
        st = launcher.run_state(path)
        if st["state"] == "completed" and st["step"] == 2:
            break
        time.sleep(0.5)
    st = launcher.run_state(path)
    assert st["state"] == "completed" and st["step"] == 2 and st["total_steps"] == 2, st
    metrics = RunStore(path).metrics()
    assert metrics["step"].tolist() == [1, 2] and metrics.iloc[0]["loss/total"] == first["loss/total"]
    assert "resuming short from step 1" in RunStore(path).log_tail(400)


def test_launch_form_shows_errors_next_to_fields_and_starts_nothing(runs_dir):
    before = sorted(p.name for p in runs_dir.iterdir())
    at = page("launch", runs_dir)
    assert at.number_input(key="lf_group_size").value == 8
    at.number_input(key="lf_group_size").set_value(1)
    at.number_input(key="lf_lr").set_value(-1.0)
    at.text_input(key="lf_model_folder").set_value(str(runs_dir / "no-such-model"))
    next(b for b in at.button if b.label == "Start training").click()
    at.run()
    assert not at.exception
    errors = [e.value for e in at.error]
    # each field's own message (as TrainConfig words it) is on the page
    _, expected = launcher.validate({"group_size": 1, "lr": -1.0, "model": str(runs_dir / "no-such-model")})
    assert set(expected) == {"group_size", "lr", "model"}
    for message in expected.values():
        assert message in errors
    assert any("Nothing was started" in e for e in errors)
    assert sorted(p.name for p in runs_dir.iterdir()) == before  # no run folder, no staging log


@pytest.mark.parametrize("key,value,words", [
    ("lf_group_size", 100_000_000, "this run would need about"),
    ("lf_prompts_per_step", 1000, "a step would repeat prompts. Use at most 200"),
])
def test_launch_form_refuses_a_run_the_model_prompt_set_or_memory_cannot_take(runs_dir, key, value, words):
    # regression: G = 100000 (memory grew without bound) and prompts per step beyond the set were accepted
    before = sorted(p.name for p in runs_dir.iterdir())
    at = page("launch", runs_dir)
    at.number_input(key=key).set_value(value)
    next(b for b in at.button if b.label == "Start training").click()
    at.run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert any(words in e for e in errors), errors
    assert any("Nothing was started" in e for e in errors)
    assert sorted(p.name for p in runs_dir.iterdir()) == before


def test_launch_lists_active_runs_and_stop_checks_the_pid(runs_dir):
    at = page("launch", runs_dir)
    stop = at.button(key="stop_live")
    stop.click()
    at.run()
    assert not at.exception
    assert any("not a trainer process" in i.value for i in at.info)  # this test process is never signalled


def test_stop_escalates_to_kill_now_and_the_killed_run_is_marked_stopped(tmp_path, monkeypatch):
    # regression: Stop sent one SIGTERM; a trainer that did not honour it was never stopped
    proc, path = start_stand_in(tmp_path, "stubborn")
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(path.parent))
    try:
        at = page("launch", path.parent, launched_runs=[str(path)])
        at.button(key="stop_r").click()
        at.run()
        assert any("killed (SIGKILL) in 30 s" in i.value for i in at.info), [i.value for i in at.info]
        at.run()
        assert any(w.value.startswith("Stopping: SIGTERM sent") for w in at.warning)
        assert proc.poll() is None  # it ignores SIGTERM
        at.button(key="kill_r").click()
        at.run()
        assert launcher.wait_stopped(path, timeout=30) == "killed" and proc.wait(timeout=10) == -9
        at.run()
        assert not at.exception
        assert any(w.value.startswith("Killed (SIGKILL)") for w in at.warning), [w.value for w in at.warning]
        assert any(m.value.startswith("**r**") and "step 3" in m.value for m in at.markdown)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_launch_lists_only_active_runs_in_progress_and_shows_the_real_error_of_a_crash(runs_dir):
    # regression: "Runs in progress" listed finished runs; a crash showed the log's last progress-bar line
    at = page("launch", runs_dir, launched_runs=[run_path(runs_dir, "crashed"), run_path(runs_dir, "mrtpo-demo")])
    headers = [m.value for m in at.markdown if m.value.startswith("**")]
    where = {name: [i for i, h in enumerate(headers) if h.startswith(f"**{name}**")] for name in
             ("live", "mrtpo-demo", "crashed")}
    # the active run is in progress; the finished and the crashed one only under "Started or stopped here, now ended"
    assert len(where["live"]) == len(where["mrtpo-demo"]) == len(where["crashed"]) == 1
    assert where["live"][0] < min(where["mrtpo-demo"][0], where["crashed"][0])
    assert [h.value for h in at.subheader] == ["Runs in progress", "Started or stopped here, now ended"]
    codes = [c.value for c in at.code]
    assert any(c.startswith("Traceback (most recent call last):") and c.endswith("RuntimeError: boom in step 2")
               for c in codes)
    assert any("Completed" in s.value for s in at.success)


def test_a_just_launched_run_is_what_the_inspect_pages_show(tmp_path, monkeypatch, micro_model):
    # regression: opening Training curves right after Start kept the previous run (or the shipped sample)
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(tmp_path))
    older = write_synthetic_run(tmp_path, "older", steps=2, rewards=DEFAULT_REWARDS[:2], n_tokens=4).path
    at = page("curves", tmp_path, mrtpo_run=str(older), mrtpo_runs=[str(older)])
    assert at.multiselect[0].value == [str(older)]
    at.switch_page("mrtpo_viz/pages/launch.py").run()
    at.text_input(key="lf_model_folder").set_value(str(micro_model))
    for key, value in (("lf_steps", 2), ("lf_group_size", 2), ("lf_prompts_per_step", 1), ("lf_max_new_tokens", 4)):
        at.number_input(key=key).set_value(value)
    next(b for b in at.button if b.label == "Start training").click()
    at.run()
    assert not at.exception and any("Started run" in s.value for s in at.success), [e.value for e in at.error]
    launched = at.session_state["launched_runs"][-1]
    try:
        at.switch_page("mrtpo_viz/pages/runs.py").run()
        at.switch_page("mrtpo_viz/pages/launch.py").run()  # the form keeps the last launch's values
        assert at.number_input(key="lf_steps").value == 2 and at.text_input(key="lf_model_folder").value == str(
            micro_model)
        at.switch_page("mrtpo_viz/pages/curves.py").run()
        assert at.multiselect[0].value == [launched]
        assert any("is starting" in i.value for i in at.info) or charts(at)
        at.switch_page("mrtpo_viz/pages/runs.py").run()
        assert any(m.value.startswith(f"Selected: **{Path(launched).name}**") for m in at.markdown)
        at.switch_page("mrtpo_viz/pages/credit.py").run()
        assert at.selectbox[0].value == launched and not at.exception
    finally:
        proc = launcher.children._CHILDREN.get(launched)
        if proc is not None:
            proc.kill()
            proc.wait(30)


def test_launch_reward_weights_follow_the_prompt_set(runs_dir, prompt_file):
    at = page("launch", runs_dir)
    at.selectbox[0].set_value("other file…").run()
    at.text_input(key="lf_prompt_other").set_value(str(prompt_file)).run()
    assert not at.exception
    weight_keys = {n.key for n in at.number_input if n.key and n.key.startswith("lfw_")}
    assert weight_keys == {"lfw_keywords:existence", "lfw_punctuation:no_comma",
                           "lfw_change_case:english_lowercase", "lfw_task:arithmetic"}
    at.text_input(key="lf_prompt_other").set_value(str(runs_dir / "missing.jsonl")).run()
    assert any("Prompt set" in e.value for e in at.error)


def chart_keys(at: AppTest) -> list[str]:
    return [c.key for c in charts(at)]


def open_view(at: AppTest, page_name: str, label: str) -> AppTest:
    """Click the tab `label` of a page's view tabs (`ui.view_tabs`)."""
    at.session_state[f"{page_name}_view"] = label
    return at.run()


def panel_titles(at: AppTest, key: str) -> list[str]:
    """The panel titles of the figure `key` (a figure of small panels: `figures.small_multiples`)."""
    fig = next(json.loads(c.proto.spec) for c in charts(at) if c.key == key)
    return [a["text"] for a in fig["layout"].get("annotations", [])]


def test_curves_page_draws_the_active_panels_and_says_why_others_are_hidden(runs_dir):
    # regression: the KL panel plotted ~1e-9 rounding noise and the clip fraction a flat 0
    at = page("curves", runs_dir, mrtpo_run=run_path(runs_dir, "mrtpo-demo"))
    assert chart_keys(at) == ["fig_rewards"]  # the open tab's figures only (issue 26: every page quick)
    assert [t.label for t in at.tabs] == ["Rewards", "Held-out eval", "Loss, KL, entropy",
                                          "Credit routing: JS and spans", "Step time and length", "More panels"]
    # the held-out eval has its own tab (it was drawn below the rewards, off screen, on every first view)
    assert open_view(at, "curves", "Held-out eval") and chart_keys(at) == ["fig_eval"]
    assert at.query_params["view"] == "eval"
    eval_fig = next(json.loads(c.proto.spec) for c in charts(at) if c.key == "fig_eval")
    assert eval_fig["layout"]["title"]["text"].startswith("Held-out eval")
    no_eval = page("curves", runs_dir, mrtpo_run=run_path(runs_dir, "no-eval"), query={"view": "eval"})
    assert chart_keys(no_eval) == [] and any("no chosen run has logged one yet" in c.value for c in no_eval.caption)
    # a tab's half-width panels: one figure of small panels sharing one x axis (issue 26: zoom shared)
    assert open_view(at, "curves", "Loss, KL, entropy") and chart_keys(at) == ["fig_optimisation"]
    assert panel_titles(at, "fig_optimisation") == ["Loss parts", "Entropy"]
    assert at.query_params["view"] == "optimisation"
    captions = " ".join(c.value for c in at.caption)
    assert "kl_beta = 0" in captions and "inner_epochs = 1" in captions
    open_view(at, "curves", "Credit routing: JS and spans")
    assert panel_titles(at, "fig_routing") == ["Mean JS distance per reward",
                                               "Span agreement: routing mass inside verifier spans"]
    open_view(at, "curves", "Step time and length")
    assert panel_titles(at, "fig_speed") == ["Step time split", "Response length"]
    assert at.multiselect[0].value == [run_path(runs_dir, "mrtpo-demo")]
    at.multiselect[0].set_value([run_path(runs_dir, "mrtpo-demo"), run_path(runs_dir, "gdpo-demo")]).run()
    assert not at.exception and chart_keys(at) == ["fig_speed"]
    at = page("curves", runs_dir, mrtpo_run=run_path(runs_dir, "kl-two-passes"), query={"view": "optimisation"})
    assert panel_titles(at, "fig_optimisation") == ["Loss parts", "KL", "Entropy", "Clip fraction"]  # a link
    bad = page("curves", runs_dir, query={"view": "nope"})
    assert chart_keys(bad) == ["fig_rewards"] and any("view `'nope'`" in w.value for w in bad.warning), [
        w.value for w in bad.warning]
    fig = next(json.loads(c.proto.spec) for c in charts(at) if c.key == "fig_optimisation")
    assert shared_zoom(fig) == 4


def test_curves_controls_smooth_change_the_x_axis_and_export_the_series(runs_dir):
    at = page("curves", runs_dir, mrtpo_run=run_path(runs_dir, "mrtpo-demo"))
    at.slider(key="curves_smooth").set_value(0.6).run()
    at.radio(key="curves_x").set_value("samples").run()
    at.checkbox(key="curves_log").check().run()
    assert not at.exception
    assert at.query_params["x"] == "samples" and at.query_params["smooth"] == "0.6" and at.query_params["log"] == "1"
    assert any(b.label == "Plotted series (CSV)" for b in at.get("download_button"))


def test_curves_picker_labels_of_active_runs_carry_no_stale_step(runs_dir):
    # regression: "step 1/30" in the picker while the run was at step 8
    at = page("curves", runs_dir, mrtpo_run=run_path(runs_dir, "live"))
    label = at.multiselect[0].format_func(run_path(runs_dir, "live"))
    assert "in progress" in label and "step" not in label
    assert "step 3/3" in at.multiselect[0].format_func(run_path(runs_dir, "mrtpo-demo"))
    assert any("live: ▶ running · step 2/2" in p.proto.text for p in at.get("progress"))


def test_curves_page_survives_a_corrupt_run_and_shows_crashes(runs_dir):
    at = page("curves", runs_dir, mrtpo_runs=[run_path(runs_dir, "broken"), run_path(runs_dir, "crashed")])
    assert any("metrics.jsonl line 2" in w.value for w in at.warning)
    assert any("crashed" in e.value for e in at.error) and any("boom" in c.value for c in at.code)


def test_token_credit_opens_coloured_by_a_reward_the_sample_states(runs_dir):
    # regression: the page opened on an all-white heatmap, coloured by a reward the prompt does not state
    first = DEFAULT_REWARDS[-1]  # the run's first reward
    df = RunStore(runs_dir / "unstated-first").credit(1)
    per = df.drop_duplicates(["sample", "reward"])
    sample = int(per[(per["reward"] == first) & per["score"].isna()]["sample"].iloc[0])
    at = page("credit", runs_dir, query={"run": "unstated-first", "step": "1", "sample": str(sample)})
    color = at.selectbox(key="credit_color")
    opens_on = opening.opening_order(loaders.credit_index(str(runs_dir / "unstated-first"), 1)[0], sample,
                                     DEFAULT_REWARDS)[0]  # a stated reward that acted (issue 46: a failed one first)
    assert first not in color.options and color.value == opens_on
    assert f"credit of {opens_on}" in html_of(at)
    # a link asking for the unstated reward says so
    at = page("credit", runs_dir, query={"run": "unstated-first", "step": "1", "sample": str(sample),
                                         "reward": first})
    assert any("does not state" in w.value for w in at.warning) and at.selectbox(key="credit_color").value != first


def test_token_credit_switching_runs_opens_the_latest_step(runs_dir):
    # regression: switching runs kept the old run's step
    at = page("credit", runs_dir, query={"run": "mrtpo-demo", "step": "1"})
    assert at.selectbox(key="credit_step").value == 1
    at.selectbox[0].set_value(run_path(runs_dir, "kl-two-passes")).run()
    assert at.selectbox(key="credit_step").value == 3 and not at.exception


def test_token_credit_keyboard_buttons_move_through_samples_and_steps(runs_dir):
    at = page("credit", runs_dir, query={"run": "mrtpo-demo", "step": "2", "sample": "0"})
    next_sample = at.button(key="next_sample")
    assert next_sample.proto.shortcut == "right" and at.button(key="prev_step").proto.shortcut == "shift+left"
    next_sample.click().run()
    assert at.selectbox(key="credit_sample").value == 1
    at.button(key="prev_step").click().run()
    assert at.selectbox(key="credit_step").value == 1 and at.query_params["step"] == "1"


def test_inspect_pages_write_their_state_to_the_url_and_warn_on_a_bad_link(runs_dir):
    # regression: the app stripped ?run=&step=&sample=&reward= and fell back silently on a bad target
    at = page("credit", runs_dir, query={"run": "mrtpo-demo", "step": "2", "sample": "3"})
    assert at.query_params["run"] == "mrtpo-demo" and at.query_params["step"] == "2"
    assert at.query_params["sample"] == "3" and not at.warning
    at.selectbox(key="credit_sample").set_value(4).run()
    assert at.query_params["sample"] == "4"  # the URL follows the choice (a shareable link)
    bad = page("credit", runs_dir, query={"run": "mrtpo-demo", "step": "99", "sample": "1"})
    assert any("step `'99'`" in w.value and "`step 3 (the latest)`" in w.value for w in bad.warning)
    bad = page("curves", runs_dir, query={"run": "no-such-run"})
    assert any("`'no-such-run'`, which is not among the runs" in w.value for w in bad.warning)
    js = page("js", runs_dir, query={"run": "mrtpo-demo", "step": "2", "sample": "5"})
    assert js.selectbox(key="js_step").value == 2 and js.selectbox(key="js_sample").value == 5
    assert js.query_params["sample"] == "5"
    cmp = page("compare", runs_dir, query={"run": ["mrtpo-demo", "gdpo-demo"], "metric": "entropy"})
    assert cmp.multiselect[0].value == [run_path(runs_dir, "mrtpo-demo"), run_path(runs_dir, "gdpo-demo")]
    assert cmp.selectbox(key="compare_metric").value == "entropy"
    assert cmp.query_params["run"] == ["mrtpo-demo", "gdpo-demo"]


def test_token_credit_page_renders_tokens_spans_and_tables(runs_dir):
    at = page("credit", runs_dir, mrtpo_run=run_path(runs_dir, "mrtpo-demo"))
    html = html_of(at)
    assert html.count('<span class="tok" ') == N_TOKENS
    assert '<i class="b" style="background:' in html  # span overlays
    assert "Prompt" in html and "credit of keywords:existence" in html
    rewards = numeric(html_tables(at)[0])
    assert rewards["reward"].tolist() == list(DEFAULT_REWARDS)
    assert {b.label for b in at.get("download_button")} >= {"Step credit CSV", "Step credit Parquet",
                                                            "Sample credit CSV", "Sample credit Parquet"}
    at.radio[0].set_value("one row per reward").run()
    html = html_of(at)
    stated = int(rewards["score"].notna().sum())  # a reward the prompt does not state gets no row
    assert 0 < stated <= len(DEFAULT_REWARDS)
    assert not at.exception and html.count('<span class="tok" ') == N_TOKENS * (stated + 1)
    assert 'data-row="total advantage"' in html


def test_token_credit_filters_by_outcome(runs_dir):
    at = page("credit", runs_dir, mrtpo_run=run_path(runs_dir, "mrtpo-demo"))
    at.selectbox(key="credit_outcome_reward").set_value("keywords:existence")
    at.selectbox(key="credit_outcome").set_value("satisfied").run()
    assert not at.exception
    for opt in at.selectbox(key="credit_sample").options:  # every sample listed satisfies the keyword reward
        assert opt.split(" · ")[2][0] == "✓"


def test_token_credit_opens_the_target_of_another_page(runs_dir):
    df = RunStore(runs_dir / "mrtpo-demo").credit(2)
    per = df[(df["reward"] == "punctuation:no_comma")].drop_duplicates("sample")
    sample = int(per[per["score"].notna()]["sample"].iloc[0])
    target = {"run": run_path(runs_dir, "mrtpo-demo"), "step": 2, "sample": sample, "reward": "punctuation:no_comma"}
    at = page("credit", runs_dir, credit_target=target)
    assert at.selectbox(key="credit_step").value == 2 and at.selectbox(key="credit_sample").value == sample
    assert at.selectbox(key="credit_color").value == "punctuation:no_comma"
    assert "credit of punctuation:no_comma" in html_of(at)


def test_token_credit_escapes_a_script_token(runs_dir):
    df = RunStore(runs_dir / "mrtpo-demo").credit(3)
    sample = int(df.loc[df["token"].str.contains("<script>"), "sample"].iloc[0])
    at = page("credit", runs_dir, credit_target={"run": run_path(runs_dir, "mrtpo-demo"), "step": 3,
                                                 "sample": sample})
    html = html_of(at)
    assert "&lt;script&gt;" in html and "<script>" not in html


def test_token_credit_warns_on_a_corrupt_credit_map(runs_dir):
    at = page("credit", runs_dir, mrtpo_run=run_path(runs_dir, "broken"))
    assert any("unreadable" in w.value for w in at.warning)


def test_js_page(runs_dir):
    at = page("js", runs_dir, mrtpo_run=run_path(runs_dir, "mrtpo-demo"))
    assert chart_keys(at) == ["fig_js_positions"]  # per position; in/out of spans and over training in other tabs
    assert any("was not computed" in c.value and "group advantage of 0" in c.value for c in at.caption)
    assert chart_keys(open_view(at, "js", "Over training")) == ["fig_js_training"]
    assert chart_keys(open_view(at, "js", "This step: in vs out of spans")) == ["fig_js_inout"]
    assert not at.dataframe  # an HTML table (`ui.html_table`)
    table = numeric(next(t for t in html_tables(at) if "js_in" in t.columns))
    assert table["reward"].tolist() == list(DEFAULT_REWARDS)
    both = table.dropna(subset=["js_in", "js_out"])  # the lowercase verifier inspects every token: no "out"
    assert len(both) == 3 and (both["js_in"] > both["js_out"]).all()  # the synthetic JS peaks inside spans
    at = page("js", runs_dir, mrtpo_run=run_path(runs_dir, "gdpo-demo"))
    assert any("no JS distances" in i.value for i in at.info) and not charts(at)


def test_debugger_ranks_disagreement_and_opens_token_credit(runs_dir):
    """The disagreement table (`ui.pick_table`, no `st.dataframe`): most disagreeing first, a link per row to its
    sample; the first row is selected until the user selects another, and the button opens the selected one."""
    at = page("debugger", runs_dir, mrtpo_run=run_path(runs_dir, "mrtpo-demo"))
    assert len(charts(at)) == 2 and not at.dataframe
    table, selected, links = pick_tables(at)["dbg_table"]
    table = numeric(table)
    assert len(table) > 2 and (table["disagreement"].diff().dropna() <= 1e-9).all() and selected == 0
    assert len(links) == len(table) and set(table["open"]) == {"Token credit ↗"}
    for link, row in zip(links, table.itertuples(), strict=True):
        assert link.startswith(f"credit?run=mrtpo-demo&step={int(row.step)}&sample={int(row.sample)}&reward=")
    assert next(b for b in at.button if b.label.startswith("Open step")).label.startswith(
        f"Open step {int(table['step'][0])} sample {int(table['sample'][0])} ")
    at.session_state["dbg_table"] = {"row": len(table) + 3}  # past the end (the table got shorter): the first
    at.run()
    assert pick_tables(at)["dbg_table"][1] == 0
    at.session_state["dbg_table"] = {"row": 2}  # what a click on the third row sends
    at.run()
    assert pick_tables(at)["dbg_table"][1] == 2
    chosen = table.iloc[2]
    next(b for b in at.button if b.label.startswith("Open step")).click()
    at.run()
    assert not at.exception
    assert at.title[0].value == "Token credit"
    assert at.selectbox(key="credit_step").value == chosen["step"]
    assert at.selectbox(key="credit_sample").value == chosen["sample"]


def test_verifier_playground(runs_dir):
    at = page("debugger", runs_dir)
    assert charts(at) and not at.text_area  # the run tab is open: the playground does not run (issue 26)
    open_view(at, "debugger", "Verifier playground")
    assert not charts(at) and at.query_params["view"] == "playground"  # the run tab's figures are not sent
    assert page("debugger", runs_dir, query={"view": "playground"}).text_area  # the link opens the playground
    args = at.text_area(key="play_args_keywords:existence")
    args.set_value('{"keywords": ["river"]}')
    at.text_area(key="play_text").set_value("The river, the River.").run()
    assert not at.exception
    assert at.metric[0].value == "1" and at.metric[1].value == "2"
    assert html_of(at).count('class="vspan"') == 2
    at.text_area(key="play_args_keywords:existence").set_value("{bad json").run()
    assert not at.exception and any("not valid JSON" in e.value for e in at.error)
    at.text_area(key="play_args_keywords:existence").set_value('{"keyword": "x"}').run()
    assert not at.exception and any("unknown argument" in e.value for e in at.error)
    at.selectbox(key="play_family").set_value("punctuation:no_comma").run()
    assert not at.exception and at.metric[0].value == "0"


def test_compare_page(runs_dir):
    at = page("compare", runs_dir, mrtpo_runs=[run_path(runs_dir, "mrtpo-demo"), run_path(runs_dir, "gdpo-demo")])
    assert len(charts(at)) == 1
    table = html_tables(at)[0]
    assert table["run"].tolist() == ["mrtpo-demo", "gdpo-demo"] and table["method"].tolist() == ["mrtpo", "gdpo"]
    assert {"≥ 0.25", "≥ 0.5", "≥ 0.75"} <= set(table.columns)
    at.radio(key="compare_source").set_value("eval").run()
    assert not at.exception and numeric(html_tables(at)[0])["steps logged"].tolist() == [3, 3]
    next(t for t in at.text_input if t.label.startswith("Targets")).set_value("0.5, banana").run()
    assert not at.exception and any("Targets" in e.value for e in at.error)


def test_compare_names_runs_without_eval_data(runs_dir):
    # regression: on the held-out eval a run without eval data was dropped silently, the table said "never reached"
    runs = [run_path(runs_dir, "mrtpo-demo"), run_path(runs_dir, "no-eval")]
    at = page("compare", runs_dir, mrtpo_runs=runs)
    at.radio(key="compare_source").set_value("eval").run()
    assert any("no eval data" in w.value and "no-eval" in w.value for w in at.warning)
    table = html_tables(at)[0].set_index("run")
    assert (table.loc["no-eval", ["≥ 0.25", "≥ 0.5", "≥ 0.75", "best"]] == "no eval data").all()
    assert "no eval data" not in set(table.loc["mrtpo-demo"])


def test_compare_any_quantity_one_colour_per_run(runs_dir):
    runs = [run_path(runs_dir, n) for n in ("mrtpo-demo", "gdpo-demo", "kl-two-passes", "no-eval")]
    at = page("compare", runs_dir, mrtpo_runs=runs)
    fig = json.loads(charts(at)[0].proto.spec)
    assert [t["name"] for t in fig["data"]] == ["mrtpo-demo", "gdpo-demo", "kl-two-passes", "no-eval"]
    assert len({t["line"]["color"] for t in fig["data"]}) == 4  # all satisfied only: one colour per run
    at.selectbox(key="compare_metric").set_value("reward (one panel per reward)").run()
    # one panel per reward, in one figure whose panels zoom together (issue 26: zoom shared)
    assert chart_keys(at) == ["fig_compare_panels"]
    assert panel_titles(at, "fig_compare_panels") == list(DEFAULT_REWARDS)
    fig = json.loads(charts(at)[0].proto.spec)
    assert shared_zoom(fig) == len(DEFAULT_REWARDS)
    assert [t["name"] for t in fig["data"] if t.get("showlegend", True)] == [
        "mrtpo-demo", "gdpo-demo", "kl-two-passes", "no-eval"]  # each run once in the legend
    for quantity in ("entropy", "KL to the rollout policy", "response length",
                     "span overlap: routing mass in spans (per reward)"):
        at.selectbox(key="compare_metric").set_value(quantity).run()
        assert not at.exception and charts(at), quantity


def test_app_modules_never_import_torch():
    code = ("import mrtpo_viz.analysis, mrtpo_viz.figures, mrtpo_viz.heatmap, mrtpo_viz.launcher, "
            "mrtpo_viz.loaders, mrtpo_viz.ui, mrtpo_viz.tools.synthetic, mrtpo_viz.tools.bench_app, mrtpo_viz.paths\n"
            "import sys; assert 'torch' not in sys.modules and 'transformers' not in sys.modules")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_the_first_page_of_a_session_asks_the_browser_for_the_chart_module_once(runs_dir):
    """Once per session the sidebar carries a script that imports Plotly's chart module: at once on a page that
    draws charts, after the page has settled on one that does not (the module would compete with its own)."""
    module = ui.chart_module()
    assert module and module.startswith("static/js/PlotlyChart.")
    at = page("runs", runs_dir)
    assert 'data-prefetch="settled"' in html_of(at) and all(m in html_of(at) for m in ui.app_modules())
    at.switch_page("mrtpo_viz/pages/curves.py").run()
    assert not at.exception and "data-prefetch" not in html_of(at)  # once per session
    for name in serve.CHART_PAGES:  # the pages whose HTML the server's middleware edits (mrtpo_viz/server/asgi.py)
        fresh = AppTest.from_file(APP, default_timeout=60)
        fresh.switch_page(f"mrtpo_viz/pages/{name}.py").run()
        assert not fresh.exception, fresh.exception
        assert 'data-prefetch="at-once"' in html_of(fresh) and module in html_of(fresh), name
    fresh = AppTest.from_file(APP, default_timeout=60)
    fresh.switch_page("mrtpo_viz/pages/credit.py").run()
    assert 'data-prefetch="settled"' in html_of(fresh)


def test_element_modules_follow_imports_once_and_leave_out_what_index_html_preloads(tmp_path):
    """A hand-made static folder: Slider imports a dependency and a module index.html preloads; Radio imports the
    same dependency, which imports Slider back (a cycle); Missing has no module."""
    js = tmp_path / "static" / "static" / "js"
    js.mkdir(parents=True)
    (tmp_path / "static" / "index.html").write_text('<link rel="modulepreload" href="./static/js/runtime.r1.js">')
    files = {"Slider.s1.js": 'import{o as e}from"./runtime.r1.js";import{a}from"./dep.d1.js";import"./css.c1.js";',
             "dep.d1.js": 'import{b}from"./Slider.s1.js";export const a=1;',
             "css.c1.js": "", "runtime.r1.js": "", "Radio.q1.js": 'import{a}from"./dep.d1.js";',
             "Sliderish.z1.js": ""}
    for name, text in files.items():
        (js / name).write_text(text)
    assert ui.prefetch.element_modules(js, ["Slider", "Radio", "Missing"]) == [
        "Slider.s1.js", "dep.d1.js", "css.c1.js", "Radio.q1.js"]
    assert ui.prefetch.element_modules(js, []) == []


def test_the_app_modules_are_this_streamlits_files_the_chart_module_first():
    modules = ui.app_modules()
    assert modules[0] == ui.chart_module()
    folder = ui.prefetch.JS_FOLDER
    assert len(set(modules)) == len(modules) and all((folder / m.split("/")[-1]).is_file() for m in modules)
    for name in ui.prefetch.APP_ELEMENTS:
        assert any(m.split("/")[-1].startswith(name + ".") for m in modules), name


# The three step shapes of `mrtpo bench store` (64x512x5, 512x1024x5, 128x4096x6: samples x tokens x rewards) scaled
# down, with row groups of 256 rows, so that each step spans many row groups as the real sizes do.
STORE_SHAPES = {"64x512x5": (64, 24, 5), "512x1024x5": (96, 32, 5), "128x4096x6": (12, 96, 6)}
ALL_PAGES = ["runs", "launch", "curves", "credit", "js", "debugger", "compare"]


@pytest.mark.parametrize("shape", list(STORE_SHAPES))
@pytest.mark.parametrize("name", ALL_PAGES)
def test_pages_read_the_index_and_the_shown_sample_only(name, shape, tmp_path, monkeypatch):
    """On a store of each benchmark shape (a run of 3 steps whose steps span many row groups), every page opens
    without reading a whole step: Token credit, JS divergence and the Verifier debugger draw their selectors,
    scales and step summaries from the index and read at most the shown sample's row group; a whole-step read (or
    one of more than two row groups) fails the test."""
    import pyarrow.parquet as pq

    from core.run import credit_write
    from core.run.store import RunWriter
    from mrtpo_viz.tools.synthetic import synthetic_credit_frame

    n_samples, n_tokens, n_rewards = STORE_SHAPES[shape]
    rewards = (*DEFAULT_REWARDS, "task:arithmetic", "detectable_format:title")[:n_rewards]
    monkeypatch.setattr(credit_write, "ROW_GROUP_ROWS", 256)  # the writer's row groups
    w = RunWriter.create(tmp_path, "big", {"method": "mrtpo", "steps": 3, "reward_names": list(rewards)})
    for step in (1, 2, 3):
        w.write_credit(step, synthetic_credit_frame(step, n_samples, n_tokens, rewards, 4, seed=5))
        w.append_metrics({"step": step, **{f"reward/{r}": 0.5 for r in rewards}})
    w.set_status(state="completed", step=3, total_steps=3)
    groups = pq.ParquetFile(tmp_path / "big" / "credit" / "step_000003.parquet").metadata.num_row_groups
    assert groups >= 4
    real = pq.ParquetFile.read_row_groups
    reads: list[int] = []

    def read_row_groups(self, row_groups, *args, **kwargs):
        reads.append(len(list(row_groups)))
        assert reads[-1] <= 2, "a page read more than the shown sample's row group"
        return real(self, row_groups, *args, **kwargs)

    def whole(*args, **kwargs):
        pytest.fail("a page read a whole step")

    monkeypatch.setattr(pq.ParquetFile, "read", whole)
    monkeypatch.setattr(pq, "read_table", whole)
    monkeypatch.setattr(pd, "read_parquet", whole)
    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", read_row_groups)
    monkeypatch.setattr(pq.ParquetFile, "read_row_group", lambda self, i, *a, **k: read_row_groups(self, [i], *a, **k))
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(tmp_path))
    sample = n_samples // 2 + 1
    at = page(name, tmp_path, query={"run": "big", "step": "3", "sample": str(sample)}, **{ui.RUN_KEY: str(w.path)})
    assert not at.exception
    if name == "credit":
        assert at.selectbox(key="credit_sample").value == sample
        assert len(at.selectbox(key="credit_sample").options) == n_samples
        assert html_of(at).count('<span class="tok" ') == n_tokens
        at.checkbox[0].set_value(True).run()  # a step-wide colour scale: from the index
        assert not at.exception
    elif name == "js":
        assert at.selectbox(key="js_sample").value == sample
        assert chart_keys(at) == ["fig_js_positions"]  # the open tab's figure only
        assert chart_keys(open_view(at, "js", "This step: in vs out of spans")) == ["fig_js_inout"]
        assert at.query_params["view"] == "step" and at.query_params["sample"] == str(sample)
    elif name == "debugger":
        table = numeric(pick_tables(at)["dbg_table"][0])  # the disagreement table, from the steps' indexes
        assert len(table) and set(table["step"]) <= {1, 2, 3}
    if name in ("credit", "js"):
        assert reads, "the page read no token rows at all (the patch would prove nothing)"


@pytest.mark.parametrize("name", ["credit", "js"])
def test_the_not_replayed_caption_counts_the_steps_pairs(name, tmp_path, monkeypatch):
    """Under a recomputed `_specific` variant the caption counts the step's skipped (sample, reward) pairs (from
    its index), not those of the shown sample."""
    w = write_synthetic_run(tmp_path, "skips", steps=1, rewards=DEFAULT_REWARDS, n_samples=16, n_tokens=8)
    pairs = RunStore(w.path).credit(1).drop_duplicates(["sample", "reward"])
    step_skipped = int(pairs["distance_skipped"].sum())
    per_sample = pairs.groupby("sample")["distance_skipped"].sum()
    sample = int(per_sample[per_sample > 0].index[0])
    assert 0 < per_sample[sample] < step_skipped
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(tmp_path))
    at = page(name, tmp_path, query={"run": "skips", "step": "1", "sample": str(sample)})
    assert not [c for c in at.caption if "not replayed" in c.value]  # the trained variant: no caption
    at.selectbox(key=f"{name}_relevance").set_value("js_specific").run()
    assert not at.exception, at.exception
    captions = [c.value for c in at.caption if "not replayed" in c.value]
    assert len(captions) == 1 and captions[0].startswith(f"{step_skipped} (sample, reward) pairs of this step ")


@pytest.mark.parametrize("name", ["credit", "js", "debugger", "curves", "compare"])
def test_a_schema_1_store_opens_on_every_page(name, tmp_path, monkeypatch):
    """The shipped demo run was written in schema 1 (one long row per (sample, reward, token)): the pages read it
    as it is."""
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(tmp_path))  # an empty runs folder: the shipped runs only
    at = page(name, tmp_path, query={"run": "sample/tiny-instruct-mrtpo-demo"})
    assert not at.exception
    if name == "credit":
        assert html_of(at).count('<span class="tok" ') > 0
    if name in ("credit", "js"):
        assert not at.warning or all("schema" not in w.value for w in at.warning)


def test_launch_shows_a_prompt_set_error_as_text_never_markdown(runs_dir, tmp_path):
    """The prompt-set error quotes the file's own text (here a family name that is a Markdown image pointing at a
    local tracker): it is shown as text, so the browser fetches nothing (issue 29, item 3)."""
    evil = "![r](http://127.0.0.1:9/x.png)"
    bad = tmp_path / "evil.jsonl"
    bad.write_text(json.dumps({"key": "1", "task": "Say hi.", "constraints": [{"family": evil, "kwargs": {}}]}) + "\n")
    at = page("launch", runs_dir)
    at.selectbox[0].set_value("other file…").run()
    at.text_input(key="lf_prompt_other").set_value(str(bad)).run()
    errors = [e.value for e in at.error if "Prompt set" in e.value]
    # the whole quoted text is one inline code span, inside which Markdown does not act
    assert errors and all(e.startswith("Prompt set: `") and e.endswith("`") and evil in e
                          and e.count("`") == 2 for e in errors), errors


def test_a_starting_runs_phase_line_is_shown_as_text(runs_dir):
    """Training curves of a run that has not written a step shows the phase its train.log announced last; the
    line comes from the log, so Markdown in it is shown as text (issue 29, item 3)."""
    from core.run.store import RunWriter
    from core.run.train_log import phase_line

    w = RunWriter.create(runs_dir, "starting-run", {"steps": 3, "method": "mrtpo"})
    w.set_status(state="running", pid=os.getpid())
    (w.path / "train.log").write_text(phase_line("loading ![t](http://127.0.0.1:9/t.png)") + "\n")
    at = page("curves", runs_dir, mrtpo_run=str(w.path))
    infos = [i.value for i in at.info if "is starting" in i.value]
    assert infos and "`loading ![t](http://127.0.0.1:9/t.png)`" in infos[0], infos


@pytest.mark.parametrize("name", ALL_PAGES)
def test_no_page_shows_the_value_of_a_bare_expression(runs_dir, name):
    """Streamlit's magic writes the value of a page script's bare expressions: the Verifier debugger's
    `run_view(link) if view == "run" else playground()` put "`None`" under both of its views. The line is a
    statement now and magic is off (.streamlit/config.toml)."""
    for query in ({}, {"view": "playground"}, {"view": "routing"}):
        at = page(name, runs_dir, query=query, mrtpo_run=run_path(runs_dir, "mrtpo-demo"))
        stray = [m.value for m in at.markdown if m.value.strip("` \n") in ("None", "")]
        assert not stray, (name, query, stray)


def test_the_debuggers_open_button_shows_a_reward_name_as_text(runs_dir):
    """The reward name in the "Open step ... in Token credit" button comes from the credit map; a button label is
    Markdown, so a name that is a Markdown image must be shown as text (issue 29, item 3)."""
    from mrtpo_viz.tools.synthetic import write_synthetic_run

    evil = "![r](http://127.0.0.1:9/x.png)"
    w = write_synthetic_run(runs_dir, "evil-names", steps=2, rewards=(evil,), n_samples=8, n_tokens=6)
    at = page("debugger", runs_dir, mrtpo_run=str(w.path))
    labels = [b.label for b in at.button if b.label.startswith("Open step")]
    assert labels and all(f"(`{evil}`)" in label for label in labels), labels


TEN_REWARDS = ("task:arithmetic", "change_case:english_lowercase", "startend:end_checker", "keywords:existence",
               "keywords:forbidden_words", "punctuation:no_comma", "detectable_content:postscript",
               "length_constraints:number_words", "detectable_format:title", "startend:start_checker")


def reward_line_colours(at: AppTest, rewards) -> dict[str, set[str]]:
    """{reward: the colours its lines are drawn in} over every chart of the page (traces named by the reward)."""
    out: dict[str, set[str]] = {}
    for chart in charts(at):
        for tr in json.loads(chart.proto.spec)["data"]:
            name = str(tr.get("name", "")).removesuffix(" control")
            if name in rewards and "line" in tr and "color" in tr["line"]:
                out.setdefault(name, set()).add(tr["line"]["color"])
    return out


def test_ten_rewards_have_ten_colours_and_each_the_same_on_every_page(tmp_path, monkeypatch):
    # regression (issue 26 bug 2): task:arithmetic and detectable_format:title were both #2ca02c on Training curves,
    # JS and Debugger, english_lowercase and start_checker both #9467bd
    write_synthetic_run(tmp_path, "ten", steps=2, rewards=TEN_REWARDS, n_tokens=12)
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(tmp_path))
    seen = {}
    for name in ("curves", "js", "debugger"):
        at = page(name, tmp_path, query={"run": "ten", **({"view": "training"} if name == "js" else {})})
        colours = reward_line_colours(at, TEN_REWARDS)
        assert set(colours) == set(TEN_REWARDS), (name, colours)
        assert all(len(c) == 1 for c in colours.values()), (name, colours)  # one colour per reward on a page
        assert len({next(iter(c)) for c in colours.values()}) == 10, (name, colours)  # ten rewards, ten colours
        seen[name] = {r: next(iter(c)) for r, c in colours.items()}
    assert seen["curves"] == seen["js"] == seen["debugger"]


def test_ten_rewards_are_small_multiples_sharing_one_x_axis(tmp_path, monkeypatch):
    # issue 26: a readable 10-reward curves panel (ten lines in [0, 1] in one panel crossed everywhere): one small
    # panel per reward, the all-satisfied rate first, zoomed together; several runs: one colour per run
    write_synthetic_run(tmp_path, "ten", steps=3, rewards=TEN_REWARDS, n_tokens=4)
    write_synthetic_run(tmp_path, "ten-b", steps=3, rewards=TEN_REWARDS, n_tokens=4, seed=1)
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(tmp_path))
    at = page("curves", tmp_path, query={"run": "ten"})
    fig = next(json.loads(c.proto.spec) for c in charts(at) if c.key == "fig_rewards")
    panels = [a["text"] for a in fig["layout"]["annotations"]]
    assert panels == ["all satisfied", *TEN_REWARDS]
    assert shared_zoom(fig) >= 11
    assert not any(t.get("showlegend", True) for t in fig["data"])  # each panel's title names its line
    at = page("curves", tmp_path, query={"run": ["ten", "ten-b"]})
    fig = next(json.loads(c.proto.spec) for c in charts(at) if c.key == "fig_rewards")
    legend = [t["name"] for t in fig["data"] if t.get("showlegend", True)]
    assert legend == ["ten", "ten-b"]  # one entry per run, toggling it in every panel
    run_colour = {t["name"]: t["line"]["color"] for t in fig["data"]}
    assert run_colour == figures.run_colors(["ten", "ten-b"])


def test_a_new_tab_opened_right_after_start_shows_the_new_run(tmp_path, monkeypatch):
    # regression (issue 26 bug 4): Training curves opened in a new tab (a new session) 1.5-13 s after Start showed the
    # previous run, still at 25 s: the starting run was known to the launching session only, and the runs were
    # ordered by their last update, where an older run writing a step a second stays on top
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(tmp_path))
    older = write_synthetic_run(tmp_path, "older", steps=2, rewards=DEFAULT_REWARDS[:2], n_tokens=4, state="running",
                                pid=os.getpid()).path
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    new = str(tmp_path / "new-run")  # its trainer is still loading: no run folder yet
    with launcher.children._LOCK:
        launcher.children._CHILDREN[new] = child
        launcher.children._CONFIGS[new] = {"steps": 5, "method": "mrtpo", "model": "m"}
    try:
        at = page("curves", tmp_path)  # a fresh session, as a new tab
        assert at.multiselect[0].value == [new]
        assert any("new-run" in p.proto.text for p in at.get("progress")) or any("starting" in i.value for i in at.info)
        # the trainer wrote its folder; the older run has written a step since (its status is the newer one)
        write_synthetic_run(tmp_path, "new-run", steps=1, rewards=DEFAULT_REWARDS[:2], n_tokens=4, state="running",
                            pid=os.getpid())
        for path, started, updated in ((new, "2026-12-04T10:00:20+00:00", "2026-12-04T10:00:21+00:00"),
                                       (older, "2026-12-04T09:00:00+00:00", "2026-12-04T10:00:30+00:00")):
            status_file = Path(path) / "status.json"
            status_file.write_text(json.dumps({**json.loads(status_file.read_text()), "started_at": started,
                                               "updated_at": updated}))
        for name in ("curves", "credit"):
            at = page(name, tmp_path)
            picked = at.multiselect[0].value if name == "curves" else [at.selectbox[0].value]
            assert picked == [new], (name, picked)
    finally:
        child.kill()
        child.wait()
        with launcher.children._LOCK:
            launcher.children._CHILDREN.pop(new, None)
            launcher.children._CONFIGS.pop(new, None)


def test_compare_warns_on_different_evaluations_names_relevance_and_offers_no_rounding_noise(tmp_path, monkeypatch):
    # regression (issue 26 bug 6): held-out rates of runs evaluated on different prompt sets and models were overlaid
    # without a word; the steps-to-reach table named method and routing but not relevance; "KL to the rollout
    # policy" (1e-9 rounding noise with one update pass) was offered on a nano-scaled axis
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(tmp_path))
    for name, cfg in (("js-run", {"relevance": "js", "eval_prompt_set": "a.jsonl"}),
                      ("swap-run", {"relevance": "swap", "eval_prompt_set": "b.jsonl", "model": "bigger"})):
        write_synthetic_run(tmp_path, name, steps=3, rewards=DEFAULT_REWARDS[:2], n_tokens=6, config=cfg)
    at = page("compare", tmp_path, mrtpo_runs=[str(tmp_path / "js-run"), str(tmp_path / "swap-run")])
    assert "KL to the rollout policy" not in at.selectbox(key="compare_metric").options
    assert any("KL to the rollout policy" in c.value and "inner\\_epochs = 1" in c.value and "`" not in c.value
               for c in at.caption)
    table = html_tables(at)[0]
    assert table.set_index("run")["relevance"].to_dict() == {"js-run": "js", "swap-run": "swap"}
    assert not any("different evaluations" in w.value for w in at.warning)  # training samples: no warning
    at.radio(key="compare_source").set_value("eval").run()
    warning = next(w.value for w in at.warning if "different evaluations" in w.value)
    assert "evaluation prompt set: a.jsonl (js-run) vs b.jsonl (swap-run)" in warning and "model:" in warning


def test_overlap_table_shows_every_pair_and_the_variants_note_is_plain_text(tmp_path, monkeypatch):
    # regression (issue 26 bug 7): the pairwise-overlap table was cut to 3 of 5 columns (a scrolling data frame in a
    # three-quarter column) with "None" on its diagonal; "Not computable..." mixed code spans and plain text
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(tmp_path))
    at = page("credit", tmp_path, query={"run": "sample/study-v2-mrtpo-swap-s0", "step": "145", "sample": "5"})
    table = next(t for t in html_tables(at) if not isinstance(t.index, pd.RangeIndex))  # the one with row labels
    assert list(table.columns) == list(table.index) and len(table.columns) >= 3
    for name in table.index:
        assert table.loc[name, name] == "—"
    cells = set(table.to_numpy().ravel())
    assert not any(c in ("None", "nan", "NaN") for c in cells)
    assert all(c in ("—", "n/a") or 0 <= float(c) <= 1 for c in cells)
    note = next(c.value for c in at.caption if c.value.startswith("Not computable"))
    assert "`" not in note and "**js\\_specific**" in note


def test_runs_training_time_leaves_out_the_idle_gap_between_stop_and_resume(tmp_path, monkeypatch):
    # regression (issue 26 bug 7): "wall time" on Runs was status.json's start-to-last-update span, which counts the
    # hours a stopped run waited before Resume
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(tmp_path))
    w = write_synthetic_run(tmp_path, "resumed", steps=3, rewards=DEFAULT_REWARDS[:2], n_tokens=4)
    status_file = w.path / "status.json"
    status_file.write_text(json.dumps({**json.loads(status_file.read_text()), "started_at": "2026-12-04T08:00:00+00:00",
                                       "updated_at": "2026-12-04T12:00:00+00:00"}))  # stopped at 8:01, resumed at 12
    steps = pd.read_json(w.path / "metrics.jsonl", lines=True)["time/step"]
    at = page("runs", tmp_path)
    row = at.dataframe[0].value.set_index("run").loc["resumed"]
    assert row["training time (min)"] == round(steps.sum() / 60, 1) < 1  # not 240


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_a_stop_or_kill_from_another_session_is_confirmed(tmp_path, monkeypatch, how):
    # regression (issue 26 bug 7): Stop or Kill now on a run another session (or an earlier app) started said nothing
    # once the run had ended: only this session's own launches were listed as ended
    mode = "cooperative" if how == "stop" else "stubborn"
    proc, path = start_stand_in(tmp_path, mode)
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(path.parent))
    try:
        at = page("launch", path.parent)  # a session that did not start it
        at.button(key="stop_r").click()
        at.run()
        if how == "kill":
            at.run()  # the stopping run now offers Kill now
            at.button(key="kill_r").click()
            at.run()
        assert launcher.wait_stopped(path, timeout=30) in ("stopped", "killed")
        proc.wait(timeout=10)
        at.run()
        assert not at.exception
        assert "Started or stopped here, now ended" in [h.value for h in at.subheader]
        assert any(m.value.startswith("**r**") and "stopped" in m.value for m in at.markdown)
        said = [w.value for w in at.warning] + [i.value for i in at.info]
        expected = "Killed (SIGKILL)" if how == "kill" else "Stopped; its completed steps are kept"
        assert any(s.startswith(expected) for s in said), said
    finally:
        if proc.poll() is None:
            proc.kill()


def seed_study(runs: Path, monkeypatch) -> list[str]:
    """Two methods x three seeds of synthetic runs in `runs` (the app's runs directory): their names."""
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(runs))
    names = [f"study-{m}-s{i}" for m in ("gdpo", "mrtpo") for i in range(3)]
    for n in names:
        write_synthetic_run(runs, n, steps=4, method=n.split("-")[1], rewards=DEFAULT_REWARDS[:2], n_tokens=4,
                            seed=int(n[-1]))
    return names


def test_curves_and_compare_draw_seed_groups_as_one_line_with_a_band(tmp_path, monkeypatch):
    # issue 26: runs grouped by everything but the seed, mean and band, seed count in the legend
    names = seed_study(tmp_path, monkeypatch)
    query = {"run": names, "group": "std"}
    at = page("compare", tmp_path, query=query)
    fig = json.loads(charts(at)[0].proto.spec)
    lines = [t["name"] for t in fig["data"] if t.get("showlegend", True) is not False]
    assert lines == ["study-gdpo (3 seeds)", "study-mrtpo (3 seeds)"]
    assert sum(t.get("fill") == "tonexty" for t in fig["data"]) == 2
    assert at.query_params["group"] == "std"
    at = page("curves", tmp_path, query=query)
    rewards = json.loads(charts(at)[0].proto.spec)
    assert "study-mrtpo (3 seeds) · all satisfied" in [t.get("name") for t in rewards["data"]]
    at.selectbox(key="curves_group").set_value("none").run()
    assert "study-mrtpo-s2 · all satisfied" in [t.get("name") for t in json.loads(charts(at)[0].proto.spec)["data"]]


def test_any_logged_metric_by_name_or_pattern_on_curves_and_compare(runs_dir):
    # issue 26: any logged metric plotted by name or pattern, not 12 fixed ones
    runs = [run_path(runs_dir, "mrtpo-demo"), run_path(runs_dir, "gdpo-demo")]
    at = page("compare", runs_dir, mrtpo_runs=runs, query={"metric": "any logged metric (name or pattern)",
                                                          "pattern": "span/*/auc, time/replay"})
    titles = panel_titles(at, "fig_compare_panels")
    assert sorted(titles) == sorted([f"span/{r}/auc" for r in DEFAULT_REWARDS] + ["time/replay"])
    assert at.query_params["pattern"] == "span/*/auc, time/replay"
    at.text_input(key="compare_pattern").set_value("no/such/*").run()
    assert not charts(at) and any("No logged metric" in i.value for i in at.info)
    at = page("curves", runs_dir, mrtpo_run=run_path(runs_dir, "mrtpo-demo"),
              query={"metrics": "js/*/max, nothing/*"})
    assert panel_titles(at, "fig_more") == ["js/*/max"]
    fig = next(json.loads(c.proto.spec) for c in charts(at) if c.key == "fig_more")
    assert sorted(t["name"] for t in fig["data"]) == sorted(f"js/{r}/max" for r in DEFAULT_REWARDS)
    assert any("nothing/*" in c.value and "no logged metric" in c.value for c in at.caption)


def test_runs_table_shows_summary_metrics_backend_and_processes(tmp_path, monkeypatch):
    # issue 26: the Runs table with summary metrics (last and best all-satisfied, held-out rate, s/step), the backend
    # and the process count
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(tmp_path))
    w = write_synthetic_run(tmp_path, "summ", steps=4, rewards=DEFAULT_REWARDS[:2], n_tokens=4,
                            config={"backend": "trl", "nproc": 2})
    m = pd.read_json(w.path / "metrics.jsonl", lines=True)
    at = page("runs", tmp_path)
    row = at.dataframe[0].value.set_index("run").loc["summ"]
    assert row["all satisfied (last)"] == pytest.approx(m["reward/all_satisfied"].iloc[-1])
    assert row["all satisfied (best)"] == pytest.approx(m["reward/all_satisfied"].max())
    assert row["held-out (last)"] == pytest.approx(m["eval/all_satisfied"].dropna().iloc[-1])
    assert row["s/step"] == pytest.approx(m["time/step"].median())
    assert row["backend"] == "trl" and row["processes"] == 2
    shipped = at.dataframe[0].value.set_index("run").loc["sample/study-v2-mrtpo-swap-s0"]
    assert shipped["backend"] == "builtin" and shipped["processes"] == 1


def test_long_runs_are_drawn_with_their_lines_thinned_and_exported_whole(tmp_path, monkeypatch):
    """A 1,500-step run: the lines each page draws keep at most DISPLAY_POINTS (+2) points (min-max decimation,
    `figures.for_display`: a browser draws them sooner), while the Training curves CSV keeps every step."""
    import numpy as np

    from core.run.store import RunWriter
    from mrtpo_viz.tools.synthetic import synthetic_metrics

    monkeypatch.setenv("MRTPO_RUNS_DIR", str(tmp_path))
    w = write_synthetic_run(tmp_path, "long", steps=2, rewards=DEFAULT_REWARDS[:3], n_tokens=8, with_eval=False)
    w = RunWriter.open(w.path)
    rng = np.random.default_rng(0)
    for step in range(3, 1501):
        w.append_metrics(synthetic_metrics(step, DEFAULT_REWARDS[:3], rng))
    w.set_status(step=1500, total_steps=1500)
    most = figures.DISPLAY_POINTS + 2

    def points(trace: dict) -> int:  # Plotly sends numeric arrays as {"dtype", "bdata"} (base64), others as lists
        x = trace["x"]
        return len(base64.b64decode(x["bdata"])) // np.dtype(x["dtype"]).itemsize if isinstance(x, dict) else len(x)

    def lines(at: AppTest, key: str) -> list[int]:
        spec = json.loads(next(c for c in charts(at) if c.key == key).proto.spec)
        return [points(tr) for tr in spec["data"] if tr.get("mode", "").startswith("lines")]

    for name, key, query in (("curves", "fig_rewards", None), ("debugger", "fig_dbg_mass", None),
                             ("debugger", "fig_dbg_auc", None), ("js", "fig_js_training", {"view": "training"})):
        drawn = lines(page(name, tmp_path, query, mrtpo_run=str(w.path)), key)
        # thinned, not emptied
        assert drawn and max(drawn) <= most and min(drawn) >= figures.DISPLAY_POINTS // 2, (name, key, drawn)
    whole = figures.metric_lines({"long": RunStore(w.path).metrics()}, ["reward/all_satisfied"], "t")
    assert points(json.loads(whole.to_json())["data"][0]) == 1500  # the figure itself (the CSV's source) is whole


def test_compare_with_seed_groups_lists_the_groups_in_steps_to_reach(tmp_path, monkeypatch):
    # issue 46, item 7: with seed groups on, "Steps to reach" lists the groups (mean and spread), not the runs
    names = seed_study(tmp_path, monkeypatch)
    at = page("compare", tmp_path, query={"run": names, "group": "std", "targets": "0, 0.99"})
    tables = [h.proto.body for h in at.get("html") if "≥ 0.99" in h.proto.body]
    assert len(tables) == 1
    body = tables[0]
    assert "study-gdpo (3 seeds)" in body and "study-mrtpo (3 seeds)" in body and "study-gdpo-s1" not in body
    assert "1.0 ± 0.0" in body and "not reached (0 of 3)" in body  # every run is at rate >= 0 at step 1
    assert any("over the group's runs that reached it" in c.value for c in at.caption)
    at.selectbox(key="compare_group").set_value("none").run()
    body = next(h.proto.body for h in at.get("html") if "≥ 0.99" in h.proto.body)
    assert "study-gdpo-s1" in body and "(3 seeds)" not in body


def test_compare_names_each_runs_control_in_steps_to_reach(tmp_path, monkeypatch):
    # issue 42: a js+shuffle run and a scale-matched GDPO run are told from js and GDPO in Compare's table
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(tmp_path))
    runs = {"js-s0": ("mrtpo", {}), "sh-s0": ("mrtpo", {"routing_shuffle": "on", "routing_shuffle_seed": 4}),
            "sc-s0": ("gdpo", {"reward_scales": {DEFAULT_REWARDS[0]: 0.5}})}
    for name, (method, cfg) in runs.items():
        write_synthetic_run(tmp_path, name, steps=3, method=method, rewards=DEFAULT_REWARDS[:2], n_tokens=4, config=cfg)
    at = page("compare", tmp_path, query={"run": list(runs), "targets": "0.5"})
    body = next(h.proto.body for h in at.get("html") if "≥ 0.5" in h.proto.body)
    assert "control" in body and "shuffle (seed 4)" in body and f"reward scales {DEFAULT_REWARDS[0]}=0.5" in body


def test_launch_takes_reward_scales_for_scale_matched_gdpo(runs_dir, prompt_file):
    # issue 42: the scale-matched GDPO control is on the Launch form (one factor per reward, under Advanced)
    from mrtpo_viz.pages import launch as launch_page

    at = page("launch", runs_dir)
    at.selectbox[0].set_value("other file…").run()
    at.text_input(key="lf_prompt_other").set_value(str(prompt_file)).run()
    scale_keys = {n.key for n in at.number_input if n.key and n.key.startswith("lfs_")}
    assert scale_keys == {"lfs_keywords:existence", "lfs_punctuation:no_comma",
                          "lfs_change_case:english_lowercase", "lfs_task:arithmetic"}
    at.number_input(key="lfs_task:arithmetic").set_value(0.5)
    next(b for b in at.button if b.label == "Start training").click()
    at.run()  # mrtpo (the default method) refuses reward scales: the error is shown, nothing starts
    assert any("reward_scales" in e.value or "gdpo" in e.value for e in at.error), [e.value for e in at.error]
    values = launch_page.form_values({"lf_method": "gdpo", "lfs_task:arithmetic": 0.5, "lfs_keywords:existence": 1.0},
                                     ["task:arithmetic", "keywords:existence"])
    assert values["reward_scales"] == {"task:arithmetic": 0.5} and values["method"] == "gdpo"
