"""What the app shows of a trainer's log: the tail as a terminal shows it, and the real error of a crashed run
(its traceback, not the last progress-bar line)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from core.run.store import RunStore, RunWriter
from core.run.train_log import crash_message, error_from_log, read_tail

BAR = "Writing model shards:   0%|          | 0/1\rWriting model shards: 100%|##########| 1/1 [00:00<00:00]"


def test_read_tail_keeps_the_last_drawing_of_a_progress_bar(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(f"run r\n{BAR}\nstep 1/5 | all 0.2\n\n")
    assert read_tail(log, 2) == "Writing model shards: 100%|##########| 1/1 [00:00<00:00]\nstep 1/5 | all 0.2"
    assert read_tail(tmp_path / "missing.log") == ""


def test_error_from_log_finds_the_last_traceback():
    log = (f"step 1/5\n{BAR}\nTraceback (most recent call last):\n  File \"a.py\", line 3, in f\n    g()\n"
           "ValueError: first\n\nDuring handling of the above exception, another exception occurred:\n\n"
           "Traceback (most recent call last):\n  File \"b.py\", line 9, in h\nRuntimeError: boom in step 2\n"
           f"{BAR}\n")
    assert error_from_log(log) == ('Traceback (most recent call last):\n  File "b.py", line 9, in h\n'
                                   "RuntimeError: boom in step 2")
    assert error_from_log("loading\nmrtpo train: error: lr: must be > 0\n") == "mrtpo train: error: lr: must be > 0"
    assert error_from_log(f"step 1/5\n{BAR}\n") == ""


def test_a_killed_trainer_is_reported_as_killed_not_by_its_last_log_line():
    assert "killed" in crash_message(f"step 3/5\n{BAR}", pid=42) and "pid 42" in crash_message("", pid=42)
    assert crash_message("Traceback (most recent call last):\nMemoryError") == (
        "Traceback (most recent call last):\nMemoryError")


@pytest.mark.subprocess
def test_crashed_status_carries_the_traceback_from_train_log(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    w = RunWriter.create(tmp_path, "r", {"steps": 5})
    w.set_status(state="running", pid=dead.pid, step=2)
    (tmp_path / "r" / "train.log").write_text(
        f"step 2/5\nTraceback (most recent call last):\n  File \"x\"\nRuntimeError: boom\n{BAR}\n")
    status = RunStore(tmp_path / "r").status()
    assert status["state"] == "crashed"
    assert status["error"] == 'Traceback (most recent call last):\n  File "x"\nRuntimeError: boom'


def test_last_phase_is_the_newest_phase_line():
    from core.run.train_log import last_phase, phase_line

    log = "\n".join([phase_line("importing torch and transformers"), "some warning",
                     phase_line("loading the model (tiny-instruct) and the prompt set"), "run r: /x"])
    assert last_phase(log) == "loading the model (tiny-instruct) and the prompt set"
    assert last_phase("no phases here") == ""
