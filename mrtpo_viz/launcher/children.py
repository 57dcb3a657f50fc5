"""The trainer processes this app started and what a run is doing: the children's table (pid, the config each
was started with, the stops in progress), how a trainer is started detached, a run's state (with `starting` and
`crashed` for a run whose trainer has not written its folder yet) and the tail of its output.

The trainer refuses a run folder that already exists, so the child's stdout/stderr first go to
`<runs_dir>/.launch/<name>.train.log` (hidden: the run list skips dot folders); `start.attach_log` links it
into the run folder once the trainer has created it.

Never imports torch: `core.config`, `core.run.store` and `core.tasks` are torch-free.
"""

from __future__ import annotations

import os
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.paths import REPO_ROOT
from core.run.store import ACTIVE_STATES, RunStore
from core.run.train_log import error_from_log, read_tail

# Children started by this app process: run path -> Popen (to tell "starting" from "died before writing status"),
# and the config each was started with (what the app lists for a run whose folder is not written yet).
_CHILDREN: dict[str, subprocess.Popen] = {}
_CONFIGS: dict[str, dict[str, Any]] = {}
_STOPPING: dict[str, Any] = {}  # run path -> stop.Stopping: the stops this app started (filled by stop.stop_run)
# Runs this app resumed: run path -> status.json's (mtime_ns, size) when Resume started the trainer. Until the trainer
# writes its status the file still says stopped (or completed); the run is `starting` meanwhile.
_RESUMED: dict[str, tuple[int, int]] = {}
_LOCK = threading.Lock()
STAGING_DIR = ".launch"
WRITTEN_NOW = "a trainer process holds the run's writer lock (it is being written now); stop it first"


@dataclass
class Launched:
    """A started run: its folder, name and the trainer's pid."""

    path: Path
    name: str
    pid: int
    argv: list[str]


def staging_log(root: Path, name: str) -> Path:
    """Where a run's trainer output goes until the trainer has created the run folder."""
    return Path(root) / STAGING_DIR / f"{name}.train.log"


def launch_id_file(root: Path, name: str) -> Path:
    """The launch id of the trainer writing the staging log (its `MRTPO_LAUNCH_ID`, recorded in the run's status
    by the trainer that creates the folder)."""
    return Path(root) / STAGING_DIR / f"{name}.id"


def _spawn(argv: list[str], log, env: dict[str, str] | None) -> subprocess.Popen:
    """Start a trainer detached from the app (its own session), output to the open file `log`."""
    child_env = dict(os.environ if env is None else env)
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    child_env.setdefault("OMP_NUM_THREADS", "1")
    return subprocess.Popen(  # an argument list, no shell: nothing from the form is interpreted
        argv, cwd=REPO_ROOT, env=child_env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True, close_fds=True,
    )



def launched_config(path: str | os.PathLike) -> dict[str, Any]:
    """The config a run was started with by this app process ({} for runs it did not start)."""
    with _LOCK:
        return dict(_CONFIGS.get(str(Path(path)), {}))


def launched_here() -> list[str]:
    """Paths of the runs this app process started (from any session, any browser tab), oldest first."""
    with _LOCK:
        return list(_CHILDREN)


def run_state(path: str | os.PathLike) -> dict[str, Any]:
    """The run's status (store status with crash detection); for a run this app just started whose trainer
    has not written status.json yet: `starting` while the child lives, `crashed` with the log tail after."""
    path = Path(path)
    store = RunStore(path)
    with _LOCK:
        proc = _CHILDREN.get(str(path))
        resumed_at = _RESUMED.get(str(path))
    if (path / "status.json").exists():
        status = store.status()
        if (resumed_at is not None and resumed_at == status_key(path) and proc is not None and proc.poll() is None
                and status.get("state") not in ACTIVE_STATES):  # resumed here; its trainer has not written yet
            return {**status, "state": "starting", "pid": proc.pid, "error": None}
        return status
    if proc is not None and proc.poll() is None:
        return {"state": "starting", "pid": proc.pid, "step": 0, "total_steps": None, "error": None}
    log = launch_log(path, 400)
    if proc is not None and str(path) in _STOPPING:  # stopped from the app before it created the run folder
        return {"state": "stopped", "pid": proc.pid, "step": 0, "total_steps": None, "error": None}
    if proc is not None:
        return {"state": "crashed", "pid": proc.pid, "step": 0, "total_steps": None,
                "error": error_from_log(log) or f"the trainer exited with code {proc.returncode} before starting"}
    return {**store.status(), **({"error": error_from_log(log) or log} if log else {})}


def status_key(path: Path) -> tuple[int, int]:
    """(mtime_ns, size) of the run's status.json, (0, -1) when it does not exist: it changes when the trainer writes."""
    try:
        st = (Path(path) / "status.json").stat()
    except OSError:
        return (0, -1)
    return (st.st_mtime_ns, st.st_size)


def launch_log(path: str | os.PathLike, lines: int = 30) -> str:
    """The tail of a run's trainer output: its train.log, or the staging log while the run folder does not
    exist yet (the trainer is still importing torch and loading the model)."""
    path = Path(path)
    return RunStore(path).log_tail(lines, max_bytes=65536) or read_tail(staging_log(path.parent, path.name), lines,
                                                                         max_bytes=65536)


def _looks_like_trainer(pid: int) -> bool:
    """True when /proc says pid runs `core.cli train` / `mrtpo train` (True where /proc is unavailable)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return not Path("/proc/self").exists()
    args = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
    return "train" in args and any(a.endswith(("core.cli", "mrtpo", "core.run.train_cli")) for a in args)
