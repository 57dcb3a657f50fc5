"""The `mrtpo` command line and the server `make demo` starts."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess  # every test runs `mrtpo` in another process

ROOT = Path(__file__).resolve().parent.parent


def mrtpo(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "core.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_help_lists_every_subcommand():
    out = mrtpo("--help")
    assert out.returncode == 0
    for sub in ("train", "app", "bootstrap", "bench"):
        assert f"  {sub} " in out.stdout


def test_console_script_is_installed():
    exe = shutil.which("mrtpo", path=str(Path(sys.executable).parent))
    assert exe, "the mrtpo console script is missing: reinstall with `make venv`"
    out = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "bootstrap" in out.stdout


def test_unknown_subcommand_fails_clearly():
    out = mrtpo("frobnicate")
    assert out.returncode != 0 and "invalid choice" in out.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_app_serves_on_localhost(tmp_path):
    port = free_port()
    env = {**os.environ, "MRTPO_RUNS_DIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "core.cli", "app", "--headless", "--port", str(port)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 60
        body = ""
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as resp:
                    body = resp.read().decode()
                    break
            except OSError:
                time.sleep(0.3)
        assert "<title>" in body and "streamlit" in body.lower()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=5) as resp:
            assert resp.read().decode().strip() == "ok"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)


def _gone(pid: int, within: float) -> bool:
    deadline = time.time() + within
    while True:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except OSError:
            return True
        if time.time() > deadline:
            return False
        time.sleep(0.2)


def _descendants(pid: int) -> list[int]:
    """Every process under `pid` (children first), read from pgrep."""
    out, todo = [], [pid]
    while todo:
        kids = [int(k) for k in subprocess.run(["pgrep", "-P", str(todo.pop())], capture_output=True, text=True
                                               ).stdout.split()]
        out += kids
        todo += kids
    return out


def _server_of(pid: int) -> int | None:
    """The Streamlit server (`python -m mrtpo_viz.server.serve run ...`) somewhere under `pid`."""
    for kid in _descendants(pid):
        with contextlib.suppress(OSError):
            if b"mrtpo_viz.server.serve" in Path(f"/proc/{kid}/cmdline").read_bytes():
                return kid
    return None


def _app_command(entry: str, port: int) -> list[str]:
    args = ["app", "--headless", "--port", str(port)]
    if entry == "module":
        return [sys.executable, "-m", "core.cli", *args]
    if entry == "console":
        return [shutil.which("mrtpo", path=str(Path(sys.executable).parent)), *args]
    # `make demo` as a user runs it, with the installed environment taken as made (-o: never rebuilt here)
    return ["make", "-s", "-o", ".venv/.installed", "-o", ".venv/.bytecode", "demo", f"PY={sys.executable}",
            f"APP_ARGS={' '.join(args[1:])}"]


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc; the parent-death signal is Linux's")
@pytest.mark.parametrize("entry,sig", [("module", signal.SIGTERM), ("module", signal.SIGKILL),
                                       ("console", signal.SIGTERM), ("make", signal.SIGTERM)])
def test_stopping_mrtpo_app_stops_its_server(tmp_path, entry, sig):
    """SIGTERM (what `make` forwards when `make demo` is stopped, and what a service manager sends) or even SIGKILL
    to `mrtpo app`, and SIGTERM to `make demo` itself, end the Streamlit server it started: it ran on under PID 1,
    holding the port, and the next `make demo` failed with "Port 8501 is not available"."""
    if entry == "make" and shutil.which("make") is None:
        pytest.skip("no make on this machine")
    port = free_port()
    proc = subprocess.Popen(_app_command(entry, port), cwd=ROOT,
                            env={**os.environ, "MRTPO_RUNS_DIR": str(tmp_path)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    server = None
    try:
        deadline = time.time() + 90
        while time.time() < deadline and server is None:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1)
                server = _server_of(proc.pid)
            except OSError:
                time.sleep(0.3)
        assert server is not None, "the app did not come up"
        os.kill(proc.pid, sig)
        proc.wait(timeout=30)
        assert _gone(server, 20), "the server outlived the command that started it"
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as a server binds it (TIME_WAIT is no owner)
            s.bind(("127.0.0.1", port))  # the port is free again
    finally:
        left = _descendants(proc.pid) if proc.poll() is None else []
        os.killpg(proc.pid, signal.SIGKILL) if proc.poll() is None else None
        for pid in [*left, *([server] if server is not None else [])]:
            if not _gone(pid, 0):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def test_bench_overhead_refuses_a_folder_that_is_not_a_checkpoint(tmp_path):
    out = mrtpo("bench", "overhead", "--checkpoint", str(tmp_path))
    assert out.returncode == 2 and "is not a checkpoint folder" in out.stderr and "Traceback" not in out.stderr


def test_bench_overhead_from_a_checkpoint(micro_model, prompt_file, tmp_path):
    """Starts from a run's checkpoint and times the batches that run would draw next."""
    from core.config import TrainConfig
    from core.run import lifecycle

    run = lifecycle.train(TrainConfig(model=str(micro_model), prompt_set=str(prompt_file), runs_dir=str(tmp_path),
                                      group_size=2, prompts_per_step=2, max_new_tokens=6, steps=1, device="cpu"),
                          out=open(os.devnull, "w"))
    # model, prompt set, max_new_tokens and relevance come from the checkpoint's run
    out = mrtpo("bench", "overhead", "--checkpoint", str(run / "checkpoints" / "step_000001"), "--prompts", "2",
                "--group-size", "2", "--repeats", "1", "--min-rewards", "1", timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "batches of steps 2.." in out.stdout and "MRTPO / GDPO step time" in out.stdout
    assert f"model {micro_model} " in out.stdout and "max_new_tokens 6," in out.stdout
    assert "contrastive passes run" in out.stdout
