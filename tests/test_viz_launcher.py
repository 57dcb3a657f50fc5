"""The app's launcher: form validation, the trainer's argument list, log staging, stop safety, and a real
launch + stop of a micro run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from helpers import start_stand_in

from core.config import train_argv
from core.run.store import LAUNCH_ID_ENV, RunStore, RunStoreError, RunWriter
from mrtpo_viz import launcher


def test_every_bad_field_is_reported_at_once(tmp_path):
    cfg, errors = launcher.validate({"group_size": 1, "lr": -1.0, "lam": 2.0, "method": "ppo",
                                     "runs_dir": str(tmp_path)})
    assert cfg is None
    assert set(errors) == {"group_size", "lr", "lam", "method"}
    assert "2 or more" in errors["group_size"] and "grpo" in errors["method"]
    assert not any(tmp_path.iterdir())  # nothing started, nothing written


def test_reward_weights_are_checked_against_the_prompt_set(tmp_path, prompt_file):
    cfg, errors = launcher.validate({"prompt_set": str(prompt_file), "reward_weights": {"nope": 2.0},
                                     "runs_dir": str(tmp_path)})
    assert cfg is None and "nope" in errors["reward_weights"]
    cfg, errors = launcher.validate({"prompt_set": str(prompt_file), "runs_dir": str(tmp_path),
                                     "reward_weights": {"keywords:existence": 2.0}})
    assert errors == {} and cfg.reward_weight("keywords:existence") == 2.0


@pytest.mark.parametrize("name", ["../escape", "a/b", ".hidden", "x" * 65])
def test_run_names_cannot_escape_the_runs_dir(tmp_path, name):
    cfg, errors = launcher.validate({"run_name": name, "runs_dir": str(tmp_path)})
    assert cfg is None and "run_name" in errors


def test_taken_run_name_is_refused(tmp_path):
    RunWriter.create(tmp_path, "taken", {"steps": 1})
    _, errors = launcher.validate({"run_name": "taken", "runs_dir": str(tmp_path)})
    assert "already exists" in errors["run_name"]
    (tmp_path / launcher.STAGING_DIR).mkdir()
    launcher.staging_log(tmp_path, "pending").write_text("")  # a launch in progress holds its name too
    _, errors = launcher.validate({"run_name": "pending", "runs_dir": str(tmp_path)})
    assert "already exists" in errors["run_name"]


def test_train_argv_is_an_argument_list_for_core_cli(tmp_path, prompt_file):
    cfg, errors = launcher.validate({"prompt_set": str(prompt_file), "runs_dir": str(tmp_path), "run_name": "r1",
                                     "reward_weights": {"task:arithmetic": 0.5}, "steps": 3})
    assert not errors
    argv = train_argv(cfg)
    assert argv[:4] == [sys.executable, "-m", "core.cli", "train"]
    opts = dict(zip(argv[4::2], argv[5::2], strict=True))
    assert opts["--run-name"] == "r1" and opts["--steps"] == "3"
    assert json.loads(opts["--reward-weights"]) == {"task:arithmetic": 0.5}
    assert opts["--runs-dir"] == str(tmp_path.resolve()) and os.path.isabs(opts["--prompt-set"])
    # the trainer's own parser accepts exactly this list
    from core.config import config_from_args
    from core.run.train_cli import build_parser

    parsed = config_from_args(build_parser().parse_args(argv[4:])).to_dict()
    want = cfg.to_dict()
    for path_field in ("prompt_set", "runs_dir"):  # made absolute for the child, same files
        assert os.path.samefile(parsed.pop(path_field), want.pop(path_field))
    assert parsed == want


def test_staging_log_is_attached_once_the_run_folder_exists(tmp_path):
    (tmp_path / launcher.STAGING_DIR).mkdir()
    staging = launcher.staging_log(tmp_path, "r")
    staging.write_text("loading...\n")
    assert launcher.attach_log(tmp_path / "r") is False  # no folder yet
    RunWriter.create(tmp_path, "r", {"steps": 1})
    launcher.adopt_logs(tmp_path)
    log = tmp_path / "r" / "train.log"
    assert log.read_text() == "loading...\n" and not staging.exists()
    assert RunStore(tmp_path / "r").log_tail() == "loading..."


def test_staging_log_goes_only_into_the_run_its_own_trainer_created(tmp_path, monkeypatch):
    """Issue 29 item 10: of two launches of one name, the losing trainer's log was hard-linked into the winning run
    as its train.log. The app's trainer records its launch id in status.json; a folder without it keeps its log."""
    (tmp_path / launcher.STAGING_DIR).mkdir()
    launcher.staging_log(tmp_path, "won").write_text("run 'won' already exists\n")
    launcher.launch_id_file(tmp_path, "won").write_text("aaaa")
    RunWriter.create(tmp_path, "won", {"steps": 1})  # another process (a command-line run) created it first
    assert launcher.attach_log(tmp_path / "won") is True
    assert not (tmp_path / "won" / "train.log").exists()
    lost = tmp_path / launcher.STAGING_DIR / "won.lost-aaaa.log"
    assert lost.read_text() == "run 'won' already exists\n" and not launcher.staging_log(tmp_path, "won").exists()
    # the app's own trainer created the folder: the log is linked in
    launcher.staging_log(tmp_path, "ours").write_text("loading...\n")
    launcher.launch_id_file(tmp_path, "ours").write_text("bbbb")
    monkeypatch.setenv(LAUNCH_ID_ENV, "bbbb")
    RunWriter.create(tmp_path, "ours", {"steps": 1})
    assert RunStore(tmp_path / "ours").status()["launch_id"] == "bbbb"
    launcher.adopt_logs(tmp_path)
    assert (tmp_path / "ours" / "train.log").read_text() == "loading...\n"
    assert not launcher.launch_id_file(tmp_path, "ours").exists()


@pytest.mark.subprocess
def test_a_launch_that_loses_its_name_leaves_the_winning_run_alone(tmp_path, micro_model, prompt_file):
    """A real trainer started from the app while another process creates the run folder of the same name first:
    the trainer refuses the name, and its log does not become the other run's train.log."""
    cfg, errors = launcher.validate({"model": str(micro_model), "prompt_set": str(prompt_file), "steps": 2,
                                     "group_size": 2, "prompts_per_step": 2, "max_new_tokens": 8, "device": "cpu",
                                     "runs_dir": str(tmp_path), "run_name": "race"})
    assert not errors
    launched = launcher.start_run(cfg)
    # wins: the trainer is still importing torch. A command-line run writes no train.log (its output is the terminal)
    RunWriter.create(tmp_path, "race", {"steps": 2})
    launcher.children._CHILDREN[str(launched.path)].wait(timeout=120)
    deadline = time.time() + 10
    lost = []
    while time.time() < deadline and not lost:  # the follower thread sets the lost log aside after the exit
        lost = list((tmp_path / launcher.STAGING_DIR).glob("race.lost-*.log"))
        time.sleep(0.1)
    assert not (tmp_path / "race" / "train.log").exists()
    assert len(lost) == 1 and "already exists" in lost[0].read_text()


def test_stop_refuses_a_pid_that_is_not_a_trainer(tmp_path):
    w = RunWriter.create(tmp_path, "r", {"steps": 5})
    w.set_status(state="running", pid=os.getpid())  # this pytest process: alive, but not a trainer
    assert "not a trainer" in launcher.stop_run(tmp_path / "r")
    w.set_status(state="completed")
    assert "nothing to stop" in launcher.stop_run(tmp_path / "r")


def test_active_runs_are_not_archived_or_deleted_and_archive_round_trips(tmp_path):
    w = RunWriter.create(tmp_path, "r", {"steps": 5})
    w.set_status(state="running", pid=os.getpid())
    for action in (launcher.archive_run, launcher.delete_run):
        with pytest.raises(RunStoreError, match="stop it first"):
            action(tmp_path / "r")
    assert "only a stopped" in launcher.can_resume(tmp_path / "r")
    w.set_status(state="completed")
    archived = launcher.archive_run(tmp_path / "r")
    assert archived == tmp_path / ".archive" / "r" and launcher.archived_runs(tmp_path) == [archived]
    assert launcher.restore_run(archived) == tmp_path / "r" and (tmp_path / "r" / "config.json").exists()
    launcher.delete_run(tmp_path / "r")
    assert not (tmp_path / "r").exists()
    with pytest.raises(RunStoreError, match="not a run folder"):
        launcher.delete_run(tmp_path)


@pytest.mark.subprocess
def test_dead_trainer_shows_as_crashed_with_the_log_tail(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    w = RunWriter.create(tmp_path, "r", {"steps": 5})
    w.set_status(state="running", pid=dead.pid, step=2)
    (tmp_path / "r" / "train.log").write_text("step 2/5\nTraceback (most recent call last):\nRuntimeError: boom\n")
    st = launcher.run_state(tmp_path / "r")
    assert st["state"] == "crashed" and "RuntimeError: boom" in st["error"]


@pytest.mark.subprocess
@pytest.mark.slow
def test_launch_a_micro_run_and_stop_it(tmp_path, micro_model, prompt_file):
    cfg, errors = launcher.validate({"model": str(micro_model), "prompt_set": str(prompt_file), "steps": 500,
                                     "group_size": 2, "prompts_per_step": 2, "max_new_tokens": 8, "device": "cpu",
                                     "runs_dir": str(tmp_path / "runs")})
    assert not errors
    launched = launcher.start_run(cfg)
    try:
        assert launcher.run_state(launched.path)["state"] in ("starting", "running")
        deadline = time.time() + 150
        while time.time() < deadline:
            st = launcher.run_state(launched.path)
            if (st.get("step") or 0) >= 1 or st["state"] not in ("starting", "running"):
                break
            time.sleep(0.5)
        assert st["state"] == "running" and st["pid"] == launched.pid, st
        assert "sent SIGTERM" in launcher.stop_run(launched.path)
        while time.time() < deadline and launcher.run_state(launched.path)["state"] == "running":
            time.sleep(0.3)
        st = launcher.run_state(launched.path)
        assert st["state"] == "stopped" and 1 <= st["step"] < 500
        store = RunStore(launched.path)
        assert len(store.metrics()) == st["step"] and store.credit_steps()
        assert "run " + launched.name in store.log_tail(200)  # the trainer's output reached train.log
        assert not launcher.staging_log(launched.path.parent, launched.name).exists()
        # Resume from the app: the stopped run continues from its checkpoint to its new total and completes
        stopped_at = st["step"]
        assert launcher.can_resume(launched.path) == ""
        resumed = launcher.resume_run(launched.path, steps=stopped_at + 2)
        while time.time() < deadline + 150 and launcher.run_state(launched.path)["state"] != "completed":
            time.sleep(0.5)
        st = launcher.run_state(launched.path)
        assert st["state"] == "completed" and st["step"] == stopped_at + 2 and resumed.pid != launched.pid, st
        assert f"resuming {launched.name} from step {stopped_at}" in store.log_tail(400)
        assert len(store.metrics()) == stopped_at + 2
    finally:
        try:
            os.kill(launched.pid, 9)
        except ProcessLookupError:
            pass


@pytest.mark.subprocess
def test_stop_kills_a_trainer_that_ignores_sigterm_and_keeps_its_completed_steps(tmp_path):
    proc, path = start_stand_in(tmp_path, "stubborn")
    try:
        assert launcher.stop_run(path, grace_s=1.5).endswith("killed (SIGKILL) in 2 s")
        time.sleep(0.8)
        assert proc.poll() is None and launcher.stopping(path) is not None  # SIGTERM ignored: still running
        assert launcher.stop_run(path).startswith("already stopping")
        assert launcher.wait_stopped(path, timeout=30) == "killed"
        assert proc.wait(timeout=10) == -9
        st = launcher.run_state(path)
        assert (st["state"], st["step"], st["stopped_by"], st["error"]) == ("stopped", 3, "SIGKILL", None)
        store = RunStore(path)
        assert store.metrics()["step"].tolist() == [1, 2, 3] and not store.warnings
        assert (path / "metrics.jsonl").read_text().count("\n") == 3  # the torn line is gone, the file ends whole
        assert store.credit_steps() == [1, 2, 3]  # the half-written step's credit map is dropped
        assert [c.name for c in (path / "checkpoints").iterdir()] == ["step_000002"]  # half-saved one removed
        assert "killed it (SIGKILL)" in store.log_tail()
        assert launcher.can_resume(path) == ""  # Resume is offered (from the step-2 checkpoint)
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.subprocess
def test_stop_of_a_trainer_that_honours_sigterm_is_not_escalated(tmp_path):
    proc, path = start_stand_in(tmp_path, "cooperative")
    try:
        launcher.stop_run(path, grace_s=60)
        assert launcher.wait_stopped(path, timeout=30) == "stopped"
        assert proc.wait(timeout=10) == 0  # it ended by itself, no SIGKILL
        st = launcher.run_state(path)
        assert st["state"] == "stopped" and st["step"] == 3 and "stopped_by" not in st
        assert launcher.stopping(path) is None
    finally:
        if proc.poll() is None:
            proc.kill()


def test_stop_grace_is_three_recent_steps_but_at_least_thirty_seconds(tmp_path):
    w = RunWriter.create(tmp_path, "r", {"steps": 9})
    assert launcher.stop_grace_s(w.path) == 30.0  # no step yet
    for step, t in enumerate([100.0, 2.0, 10.0, 12.0, 14.0, 11.0], start=1):
        w.append_metrics({"step": step, "time/step": t})
    assert launcher.stop_grace_s(w.path) == 33.0  # 3 x median(2, 10, 12, 14, 11) = 3 x 11; step 1's 100 s is old
    for step in range(7, 12):
        w.append_metrics({"step": step, "time/step": 300.0})
    assert launcher.stop_grace_s(w.path) == 600.0  # 3 x 300 = 900, capped


def test_a_completed_run_is_extended_only_with_more_steps_and_the_built_in_trainer(tmp_path):
    w = RunWriter.create(tmp_path, "trl-run", {"steps": 2, "backend": "trl"})
    w.set_status(state="completed", step=2)
    assert "built-in trainer only" in launcher.can_resume(tmp_path / "trl-run")
    w = RunWriter.create(tmp_path, "plain", {"steps": 2})
    w.set_status(state="completed", step=2)
    assert "no complete checkpoint" in launcher.can_resume(tmp_path / "plain")  # offered once it has one
