"""`mrtpo train` as a process: clear errors for bad values, kill -9 / --resume, SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from core.run.store import RunStore

pytestmark = pytest.mark.subprocess  # every test runs `mrtpo train` in another process

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def train_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "core.cli", "train", *args]


def run_train(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run(train_cmd(*args), cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout)


def test_help_documents_every_field():
    import dataclasses

    from core.config import TrainConfig

    out = run_train("--help")
    assert out.returncode == 0
    for f in dataclasses.fields(TrainConfig):
        assert "--" + f.name.replace("_", "-") in out.stdout
    assert "--resume RUN_DIR" in out.stdout and "--config FILE" in out.stdout


@pytest.mark.parametrize(
    "args, words",
    [
        (["--group-size", "1"], "group_size: must be >= 2"),
        (["--lr", "0"], "lr: must be > 0"),
        (["--lam", "2"], "lam: must lie in [0, 1]"),
        (["--method", "ppo"], "invalid choice: 'ppo'"),
        (["--reward-weights", "keyword:existence=2"], "unknown reward name"),
        (["--prompt-set", "missing.jsonl"], "prompt_set: no such file"),
        (["--model", "no/such/folder"], "model: 'no/such/folder' is neither a preset"),
    ],
)
def test_invalid_values_exit_with_one_clear_line_and_no_run_folder(tmp_path, prompt_file, args, words):
    runs = tmp_path / "runs"
    base = ["--runs-dir", str(runs), "--prompt-set", str(prompt_file)]
    out = run_train(*base, *args)
    assert out.returncode == 2
    assert words in out.stderr
    assert "Traceback" not in out.stderr
    assert not runs.exists()


def test_bad_config_file_and_existing_run_name(tmp_path, prompt_file):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"prompt_set": str(prompt_file), "group_sise": 4}))
    out = run_train("--config", str(bad))
    assert out.returncode == 2 and "did you mean 'group_size'" in out.stderr
    (tmp_path / "runs" / "taken").mkdir(parents=True)
    out = run_train("--prompt-set", str(prompt_file), "--runs-dir", str(tmp_path / "runs"), "--run-name", "taken")
    assert out.returncode == 2 and "already exists" in out.stderr


def _start(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen(train_cmd(*args), cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def _wait_for_steps(run: Path, n: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    metrics = run / "metrics.jsonl"
    while time.time() < deadline:
        if metrics.exists() and metrics.read_text().count("\n") >= n:
            return
        if proc.poll() is not None:
            raise AssertionError(f"trainer exited early ({proc.returncode}):\n{proc.stdout.read()}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("timed out waiting for training steps")


def _run_args(micro_model, letters_setup, runs: Path, name: str, steps: int) -> list[str]:
    prompts, verifier = letters_setup
    return [
        "--model", str(micro_model), "--prompt-set", str(prompts), "--custom-verifiers", str(verifier),
        "--runs-dir", str(runs), "--run-name", name, "--steps", str(steps), "--group-size", "4",
        "--prompts-per-step", "2", "--max-new-tokens", "10", "--lr", "0.01", "--checkpoint-every", "1",
        "--device", "cpu", "--replay-chunk", "8",
    ]  # fmt: skip


def test_kill_9_leaves_completed_steps_readable_and_resume_continues(tmp_path, micro_model, letters_setup):
    runs = tmp_path / "runs"
    args = _run_args(micro_model, letters_setup, runs, "killed", steps=6)
    proc = _start(args)
    run = runs / "killed"
    _wait_for_steps(run, 2, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)

    store = RunStore(run)
    done = store.metrics()["step"].tolist()
    assert len(done) >= 2 and done == list(range(1, len(done) + 1))
    assert store.status()["state"] in ("crashed", "completed")
    for step in done:  # every completed step has its credit map
        assert len(store.credit(step)) > 0
    assert not [w for w in store.warnings if "credit" in w]

    out = run_train("--resume", str(run), "--lr", "0.1")
    assert out.returncode == 2 and "cannot change lr when resuming" in out.stderr
    out = run_train("--resume", str(run), "--steps", "7", timeout=300)  # resume and extend
    assert out.returncode == 0, out.stdout + out.stderr
    assert "resuming killed from step" in out.stdout
    store = RunStore(run)
    assert store.status()["state"] == "completed" and store.status()["total_steps"] == 7
    assert store.config()["steps"] == 7
    metrics = store.metrics()
    assert metrics["step"].tolist() == [1, 2, 3, 4, 5, 6, 7]
    assert (run / "metrics.jsonl").read_text().count("\n") == 7  # later steps were truncated, not duplicated
    assert store.credit_steps() == [1, 2, 3, 4, 5, 6, 7]

    # Model, optimizer and per-step seeds are restored: the resumed run matches an uninterrupted one.
    import torch

    from core.config import TrainConfig
    from core.run import lifecycle

    torch.set_num_threads(1)
    cfg = TrainConfig.from_dict(store.config(), runs_dir=str(tmp_path / "ref"), run_name="ref")
    ref = RunStore(lifecycle.train(cfg)).metrics()
    keep = [k for k in ref.columns if not k.startswith("time/")]
    pd.testing.assert_frame_equal(metrics[keep], ref[keep], check_dtype=False, atol=1e-5, rtol=1e-4)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the machine without a GPU")
def test_trl_processes_on_cuda_without_a_gpu_are_one_line_before_launching(tmp_path, capsys):
    """`--backend trl --nproc 2 --device cuda` without a GPU: exit 2 and one line, before torchrun starts the
    processes (it printed each process's error inside a 44-line ChildFailedError traceback after 22 s)."""
    from core.cli import main

    code = main(["train", "--backend", "trl", "--nproc", "2", "--device", "cuda", "--steps", "1",
                 "--runs-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.strip().splitlines() == [
        "mrtpo train: error: device: 'cuda' was requested but torch sees no CUDA device; use auto or cpu"]
    assert list(tmp_path.iterdir()) == []


def test_resume_from_a_refused_optimizer_pickle_is_one_line(tmp_path, micro_model, prompt_file, capsys):
    """A checkpoint whose optimizer.pt holds pickled code: torch.load(weights_only) refuses it, and `mrtpo train
    --resume` says so in one line (exit 2) instead of a 21-line UnpicklingError; the code never runs."""
    import pickle

    from core.cli import main

    assert main(["train", "--model", str(micro_model), "--prompt-set", str(prompt_file), "--steps", "1",
                 "--group-size", "2", "--prompts-per-step", "2", "--max-new-tokens", "4",
                 "--runs-dir", str(tmp_path), "--run-name", "r"]) == 0
    marker = tmp_path / "ran"

    class Planted:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    (ckpt,) = (tmp_path / "r" / "checkpoints").iterdir()
    (ckpt / "optimizer.pt").write_bytes(pickle.dumps(Planted()))
    capsys.readouterr()
    code = main(["train", "--resume", str(tmp_path / "r"), "--steps", "2"])
    err = [line for line in capsys.readouterr().err.splitlines() if line and not line.startswith("Loading weights")]
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"mrtpo train: error: {ckpt.name}/optimizer.pt cannot be loaded") and "older" in err[0]
    assert not marker.exists()


@pytest.mark.parametrize("rank, nproc, prints", [(None, 1, True), (None, 2, False), ("0", 2, True), ("1", 2, False)])
def test_the_disk_line_is_printed_once_by_the_process_that_writes_the_run(rank, nproc, prints, tmp_path, capsys,
                                                                         monkeypatch):
    """`mrtpo train --backend trl` prints the disk estimate as the builtin backend does: in one process, or in
    process 0 of several (started by `mrtpo train --nproc N` or by torchrun directly); the launcher and the other
    processes do not, so the log has it once."""
    from core.run import train_cli

    monkeypatch.setattr(train_cli, "_train_trl", lambda cfg, rank, resume=None: 0)  # the training is not under test
    monkeypatch.setattr(train_cli, "launch_processes", lambda cfg, resume=None: 0)
    for name in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    if rank is not None:
        monkeypatch.setenv("RANK", rank)
        monkeypatch.setenv("WORLD_SIZE", str(nproc))
    code = train_cli.main(["--backend", "trl", "--nproc", str(nproc), "--steps", "2", "--runs-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    lines = [line for line in out.splitlines() if line.startswith("disk: about ")]
    assert len(lines) == (1 if prints else 0), out
