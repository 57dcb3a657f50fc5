"""Bad input to `mrtpo` (through the installed entry point): every bad `mrtpo train` input gets one clear line on
stderr and exit status 2, no traceback, no run folder, before the model loads; a second writer on a run is
refused; `mrtpo app` refuses an address other than loopback (issue 16, "Tracebacks and silent acceptance on the
command line")."""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess  # every test runs `mrtpo` or a lock holder in another process

ROOT = Path(__file__).resolve().parent.parent
MRTPO = shutil.which("mrtpo", path=str(Path(sys.executable).parent)) or "mrtpo"
# A small, quick run: if a bad value slips through, the case still ends in seconds (and fails).
SMALL = ["--model", "tiny-instruct", "--steps", "1", "--group-size", "2", "--prompts-per-step", "1",
         "--max-new-tokens", "4"]
GOOD_PROMPT = {"key": "p", "task": "What is 3 plus 4?", "constraints": [
    {"family": "task:arithmetic", "kwargs": {"answer": 7}}, {"family": "punctuation:no_comma", "kwargs": {}}]}


def mrtpo_train(*args: str, cwd: Path, timeout: int = 240) -> subprocess.CompletedProcess:
    return subprocess.run([MRTPO, "train", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def prompts(tmp: Path, name: str, record: dict | str) -> str:
    path = tmp / f"{name}.jsonl"
    path.write_text((record if isinstance(record, str) else json.dumps(record)) + "\n")
    return str(path)


def resumable_run(tmp: Path, trainer_state: str | None, state: str = "stopped", step: int = 1) -> Path:
    """A `state` run folder at `step` (its metrics lines written) with one checkpoint there whose
    trainer_state.json holds `trainer_state` (None: no checkpoint)."""
    from core.config import TrainConfig
    from core.run.store import RunWriter

    cfg = TrainConfig(model="tiny-instruct", steps=2, group_size=2, prompts_per_step=1, max_new_tokens=4,
                      runs_dir=str(tmp / "runs"), run_name="r")
    w = RunWriter.create(tmp / "runs", "r", {**cfg.to_dict(), "reward_names": ["task:arithmetic"]})
    for s in range(1, step + 1):
        w.append_metrics({"step": s})
    w.set_status(state=state, step=step)
    if trainer_state is not None:
        ckpt = w.checkpoint_dir(step)
        ckpt.mkdir(parents=True)
        (ckpt / "trainer_state.json").write_text(trainer_state)
    return w.path


def bad_inputs(tmp: Path) -> dict[str, list[str]]:
    """case -> arguments of `mrtpo train` (after `train`)."""
    afile = tmp / "a-file"
    afile.write_text("not a folder")
    return {
        "seed-2^70": ["--seed", str(2**70)],
        "temperature-1e-45": ["--temperature", "1e-45"],
        "temperature-1e300": ["--temperature", "1e300"],
        "lr-1e30": ["--lr", "1e30"],
        "max-new-tokens-1e9": ["--max-new-tokens", "1000000000"],
        "group-size-1e8-beyond-memory": ["--group-size", "100000000", "--prompts-per-step", "4",
                                         "--max-new-tokens", "48"],
        "prompts-per-step-beyond-the-set": ["--prompts-per-step", "1000"],
        "steps-1e20-in-config": ["--config", _config(tmp, {"steps": 1e20})],
        "prompt-without-constraints": ["--prompt-set", prompts(tmp, "none", {"key": "p", "task": "Hi.",
                                                                              "constraints": []})],
        "arithmetic-answer-10^400": ["--prompt-set", prompts(tmp, "huge", {**GOOD_PROMPT, "constraints": [
            {"family": "task:arithmetic", "kwargs": {"answer": 10**400}}]})],
        "empty-task": ["--prompt-set", prompts(tmp, "empty", {**GOOD_PROMPT, "task": "  "})],
        "runs-dir-is-a-file": ["--runs-dir", str(afile)],
        "runs-dir-under-a-file": ["--runs-dir", str(afile / "runs")],
        "runs-dir-unwritable": ["--runs-dir", "/proc/mrtpo-runs"],
        "resume-corrupt-trainer-state": ["--resume", str(resumable_run(tmp / "corrupt", "{not json"))],
        "resume-trainer-state-no-step": ["--resume", str(resumable_run(tmp / "nostep", '{"seed": 0}'))],
        # issue 45: nothing to resume from (it restarted at step 0, dropping the recorded step); a completed run cut
        "resume-no-checkpoint": ["--resume", str(resumable_run(tmp / "nockpt", None))],
        "resume-completed-to-fewer-steps": ["--resume", str(resumable_run(
            tmp / "fewer", '{"step": 2, "seed": 0}', "completed", 2)), "--steps", "1"],
        "resume-completed-to-as-many-steps": ["--resume", str(resumable_run(
            tmp / "same", '{"step": 2, "seed": 0}', "completed", 2)), "--steps", "2"],
    }


def _config(tmp: Path, fields: dict) -> str:
    path = tmp / "cfg.json"
    path.write_text(json.dumps(fields))
    return str(path)


CASES = ["seed-2^70", "temperature-1e-45", "temperature-1e300", "lr-1e30", "max-new-tokens-1e9",
         "group-size-1e8-beyond-memory", "prompts-per-step-beyond-the-set",
         "steps-1e20-in-config", "prompt-without-constraints", "arithmetic-answer-10^400", "empty-task",
         "runs-dir-is-a-file", "runs-dir-under-a-file", "runs-dir-unwritable", "resume-corrupt-trainer-state",
         "resume-trainer-state-no-step", "resume-no-checkpoint", "resume-completed-to-fewer-steps",
         "resume-completed-to-as-many-steps"]
# what the one line must say (the cases above that name it)
SAYS = {"resume-no-checkpoint": "no complete checkpoint to resume from (resuming would start again at step 0 and "
                                "drop its 1 recorded steps)",
        "resume-completed-to-fewer-steps": "steps: the run completed its 2 steps; extend it",
        "resume-completed-to-as-many-steps": "steps: the run completed its 2 steps; extend it"}


def assert_one_line_exit_2(out: subprocess.CompletedProcess, elapsed: float) -> None:
    assert "Traceback" not in out.stderr + out.stdout, out.stderr[-2000:]
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 2, (out.returncode, out.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("mrtpo train: error: "), lines
    assert "loading the model" not in out.stdout, "refused only after loading the model"


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_line_and_exit_2(case, tmp_path):
    args = bad_inputs(tmp_path)[case]
    small = [a for i, a in enumerate(SMALL) if "--steps" not in SMALL[max(i - 1, 0):i + 1]] \
        if case == "steps-1e20-in-config" else SMALL  # a --steps flag would override the file's value
    extra = [] if case.startswith("resume") else [*small, *(["--runs-dir", str(tmp_path / "runs")]
                                                           if "--runs-dir" not in args else [])]
    start = time.monotonic()
    out = mrtpo_train(*extra, *args, cwd=tmp_path)
    assert_one_line_exit_2(out, time.monotonic() - start)
    assert SAYS.get(case, "") in out.stderr
    if not case.startswith("resume") and "--runs-dir" not in args:
        runs = tmp_path / "runs"
        assert not runs.exists() or not any(runs.iterdir()), "a refused run left a folder"


def _hold_lock(path: Path) -> subprocess.Popen:
    """Another process holding the run's writer lock (as a live trainer does)."""
    code = ("import fcntl, sys, time; fh = open(sys.argv[1], 'a'); fcntl.flock(fh, fcntl.LOCK_EX); "
            "print('locked', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_second_writer_on_a_run_is_refused(tmp_path):
    from core.run.store import WRITER_LOCK

    run = resumable_run(tmp_path, json.dumps({"step": 1, "seed": 0}))
    holder = _hold_lock(run / WRITER_LOCK)
    try:
        start = time.monotonic()
        out = mrtpo_train("--resume", str(run), cwd=tmp_path)
        assert_one_line_exit_2(out, time.monotonic() - start)
        assert "another process" in out.stderr
    finally:
        holder.kill()
        holder.wait()


def test_writer_lock_is_exclusive_and_released_with_the_process(tmp_path):
    from core.run.store import WRITER_LOCK, RunStoreError, RunWriter

    w = RunWriter.create(tmp_path, "one", {"steps": 1})
    with pytest.raises(RunStoreError, match="already exists"):
        RunWriter.create(tmp_path, "one", {"steps": 1})
    code = ("import sys; from core.run.store import RunWriter, RunStoreError\n"
            "try:\n    RunWriter.open(sys.argv[1])\nexcept RunStoreError as e:\n    print(e); sys.exit(2)\n")
    out = subprocess.run([sys.executable, "-c", code, str(w.path)], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2 and "another process" in out.stdout
    w.close()
    out = subprocess.run([sys.executable, "-c", code, str(w.path)], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    with open(w.path / WRITER_LOCK) as fh:  # the child ended: the OS released its lock
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_app_address_other_than_loopback_is_refused(tmp_path):
    import os
    import signal
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([MRTPO, "app", "--address", "0.0.0.0", "--headless", "--port", str(port)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:  # it serves: end the server it started
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("mrtpo app served on 0.0.0.0 without --expose")
    assert proc.returncode == 2 and "--expose" in err and "Traceback" not in err
    from core.cli import app_address_problem

    for address in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):  # loopback needs no flag
        assert app_address_problem(address, expose=False) == ""
    assert app_address_problem("0.0.0.0", expose=True) == ""
    assert "--expose" in app_address_problem("192.168.1.5", expose=False)
