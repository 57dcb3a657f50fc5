"""Start, follow and stop training runs from the app, without ever training in the app's process.

`validate(fields)` checks a form's values with `core.config.TrainConfig` (every field on its own,
so the form can show all problems at once next to their inputs, then the whole config and the
prompt set). `start_run(cfg)` picks the run name and starts
`[sys.executable, "-m", "core.cli", "train", --<field> <value> ...]` as an argument list (never a
shell) in a new session, so the run keeps going when the app stops; a thread waits on the child so
it never lingers as a zombie. `stop_run(path)` sends SIGTERM to the pid recorded in status.json
(the trainer then stops after its current step and marks the run stopped), after checking that the pid is a
trainer; a trainer still alive after a grace period (`stop_grace_s`) gets SIGKILL, and `settle_killed` then
marks the run stopped at its last complete step (see "Stop" below).

The trainer refuses a run folder that already exists, so the child's stdout/stderr first go to
`<runs_dir>/.launch/<name>.train.log` (hidden: the run list skips dot folders); once the trainer has
created the run folder, that file is hard-linked in as `<run>/train.log` (same inode: the trainer keeps
writing to it) and the staging name removed. `adopt_logs(runs_dir)` finishes that step for runs whose
app stopped in between.

Never imports torch: `core.config`, `core.run.store` and `core.tasks` are torch-free.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.config import ConfigError, TrainConfig, field_error, resume_argv, train_argv
from core.paths import REPO_ROOT
from core.run import names
from core.run.liveness import pid_alive, pid_start_time
from core.run.store import (
    ACTIVE_STATES,
    RunStore,
    RunStoreError,
    RunWriter,
    run_dir,
    writer_lock_held,
)
from core.run.train_log import error_from_log, read_tail

FORM_ERROR = "_form"  # key of errors that belong to no single field

# Children started by this app process: run path -> Popen (to tell "starting" from "died before writing status"),
# and the config each was started with (what the app lists for a run whose folder is not written yet).
_CHILDREN: dict[str, subprocess.Popen] = {}
_CONFIGS: dict[str, dict[str, Any]] = {}
_LOCK = threading.Lock()


@dataclass
class Launched:
    """A started run: its folder, name and the trainer's pid."""

    path: Path
    name: str
    pid: int
    argv: list[str]


def field_errors(fields: dict[str, Any]) -> dict[str, str]:
    """Check each field alone (its type and its own check; the rules between fields come after): field name ->
    message, for every bad field."""
    errors: dict[str, str] = {}
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    for name, value in fields.items():
        if name not in names:
            errors[FORM_ERROR] = f"unknown config field {name!r}"
            continue
        message = field_error(name, value)
        if message:
            errors[name] = message
    return errors


def validate(fields: dict[str, Any], check_prompts: bool = True) -> tuple[TrainConfig | None, dict[str, str]]:
    """(config, {}) when the form's values make a valid run, else (None, {field: message}).

    Checks every field, then the whole config (cross-field rules), then loads the prompt set and checks
    the reward weights against its rewards, and refuses a run name that is already taken.
    """
    errors = field_errors(fields)
    if errors:
        return None, errors
    try:
        cfg = TrainConfig(**fields)
        if check_prompts:
            cfg.load_prompts()
    except ConfigError as exc:
        return None, {exc.field or FORM_ERROR: exc.message}
    if cfg.run_name:
        try:
            run_dir(resolve_runs_dir(cfg), cfg.run_name)  # rejects names that could escape the runs dir
            if _taken(resolve_runs_dir(cfg), cfg.run_name):
                return None, {"run_name": f"a run named {cfg.run_name!r} already exists; pick another name"}
        except RunStoreError as exc:
            return None, {"run_name": str(exc)}
    return cfg, {}


def resolve_runs_dir(cfg: TrainConfig) -> Path:
    return Path(cfg.runs_dir).expanduser().resolve()


STAGING_DIR = ".launch"


def staging_log(root: Path, name: str) -> Path:
    """Where a run's trainer output goes until the trainer has created the run folder."""
    return Path(root) / STAGING_DIR / f"{name}.train.log"


def _taken(root: Path, name: str) -> bool:
    return (root / name).exists() or staging_log(root, name).exists()


def auto_run_name(cfg: TrainConfig) -> str:
    """<method>-<YYYYmmdd-HHMMSS>, with -2, -3, ... when that name is taken (a folder or a staging log)."""
    root = resolve_runs_dir(cfg)
    return names.auto_run_name(cfg.method, lambda name: _taken(root, name))


def attach_log(path: Path) -> bool:
    """Hard-link the staging log into the run folder as train.log once the folder exists; True when done."""
    path = Path(path)
    staging = staging_log(path.parent, path.name)
    if not staging.exists() or not path.is_dir():
        return False
    target = path / "train.log"
    if not target.exists():
        try:
            os.link(staging, target)
        except OSError:  # a filesystem without hard links: a symlink still shows the live log
            try:
                target.symlink_to(staging)
            except OSError:
                return False
            return True
    staging.unlink(missing_ok=True)
    return True


def adopt_logs(root: str | os.PathLike) -> None:
    """Attach staging logs of runs whose folders appeared while no app was following them."""
    folder = Path(root) / STAGING_DIR
    if not folder.is_dir():
        return
    for log in folder.glob("*.train.log"):
        run = Path(root) / log.name[: -len(".train.log")]
        if run.is_dir() and (run / "config.json").exists():
            attach_log(run)


def _follow(proc: subprocess.Popen, path: Path, poll_s: float = 0.2) -> None:
    """Attach the log as soon as the run folder exists, and reap the child when it exits."""
    try:
        while proc.poll() is None:
            if (path / "config.json").exists() and attach_log(path):
                break
            time.sleep(poll_s)
        proc.wait()
        attach_log(path)
    except Exception:  # noqa: BLE001 - a follower thread must never raise
        pass


def _spawn(argv: list[str], log, env: dict[str, str] | None) -> subprocess.Popen:
    """Start a trainer detached from the app (its own session), output to the open file `log`."""
    child_env = dict(os.environ if env is None else env)
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    child_env.setdefault("OMP_NUM_THREADS", "1")
    return subprocess.Popen(  # an argument list, no shell: nothing from the form is interpreted
        argv, cwd=REPO_ROOT, env=child_env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True, close_fds=True,
    )


def start_run(cfg: TrainConfig, env: dict[str, str] | None = None) -> Launched:
    """Pick the run name, open its staging log and start the trainer as a detached child process."""
    root = resolve_runs_dir(cfg)
    root.mkdir(parents=True, exist_ok=True)
    name = cfg.run_name or auto_run_name(cfg)
    path = run_dir(root, name)
    if path.exists():
        raise RunStoreError(f"a run named {name!r} already exists in {root}")
    staging = staging_log(root, name)
    staging.parent.mkdir(exist_ok=True)
    cfg = dataclasses.replace(cfg, run_name=name, runs_dir=str(root))
    argv = train_argv(cfg)
    with open(staging, "xb") as log:  # "x": two launches cannot take the same name
        proc = _spawn(argv, log, env)
    with _LOCK:
        _CHILDREN[str(path)] = proc
        _CONFIGS[str(path)] = cfg.to_dict()
    threading.Thread(target=_follow, args=(proc, path), daemon=True, name=f"follow-{proc.pid}").start()
    return Launched(path=path, name=name, pid=proc.pid, argv=argv)


def launched_config(path: str | os.PathLike) -> dict[str, Any]:
    """The config a run was started with by this app process ({} for runs it did not start)."""
    with _LOCK:
        return dict(_CONFIGS.get(str(Path(path)), {}))


def run_state(path: str | os.PathLike) -> dict[str, Any]:
    """The run's status (store status with crash detection); for a run this app just started whose trainer
    has not written status.json yet: `starting` while the child lives, `crashed` with the log tail after."""
    path = Path(path)
    store = RunStore(path)
    if (path / "status.json").exists():
        return store.status()
    with _LOCK:
        proc = _CHILDREN.get(str(path))
    if proc is not None and proc.poll() is None:
        return {"state": "starting", "pid": proc.pid, "step": 0, "total_steps": None, "error": None}
    log = launch_log(path, 400)
    if proc is not None and str(path) in _STOPPING:  # stopped from the app before it created the run folder
        return {"state": "stopped", "pid": proc.pid, "step": 0, "total_steps": None, "error": None}
    if proc is not None:
        return {"state": "crashed", "pid": proc.pid, "step": 0, "total_steps": None,
                "error": error_from_log(log) or f"the trainer exited with code {proc.returncode} before starting"}
    return {**store.status(), **({"error": error_from_log(log) or log} if log else {})}


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


# ---------------------------------------------------------------------------------------------- stop
# Stop: SIGTERM asks the trainer to stop after its current step (it saves a checkpoint and writes `stopped`). A
# trainer that does not (stuck in one huge step, or a SIGTERM handler that never runs) is killed with SIGKILL
# after a grace period, and the app then writes what the trainer could not (`settle_killed`).
STOP_GRACE_S = 30.0  # the least time a trainer gets between SIGTERM and SIGKILL
STOP_GRACE_STEPS = 3  # ... or this many of its recent steps (median time/step), when that is longer
STOP_GRACE_MAX_S = 600.0  # ... but never more
KILLED_BY = "SIGKILL"  # status.json `stopped_by` of a run the app killed


@dataclass
class Stopping:
    """A stop in progress: SIGTERM sent to `pid` at `sent_at` (time.monotonic()), SIGKILL at `deadline`."""

    pid: int
    started: str | None  # the process's start time (/proc/<pid>/stat), so a recycled pid is never killed
    sent_at: float
    deadline: float
    thread: threading.Thread | None = None
    outcome: str = ""  # "" while waiting; then "stopped" (it ended by itself) or "killed"
    kept_step: int | None = None  # after a kill: the last complete step kept


_STOPPING: dict[str, Stopping] = {}


def stop_grace_s(path: str | os.PathLike) -> float:
    """Seconds between SIGTERM and SIGKILL for this run: max(STOP_GRACE_S, STOP_GRACE_STEPS x the median
    `time/step` of its last 5 steps), at most STOP_GRACE_MAX_S. A step in progress gets to finish: the trainer
    honours SIGTERM only between a step's phases.

    A run at 12 s/step gets max(30, 3 x 12) = 36 s; a run without a finished step gets 30 s.
    """
    times = RunStore(Path(path)).metrics().get("time/step")
    recent = times.dropna().tail(5) if times is not None else None
    median = float(recent.median()) if recent is not None and len(recent) else 0.0
    return min(STOP_GRACE_MAX_S, max(STOP_GRACE_S, STOP_GRACE_STEPS * median))


def _same_process(stop: Stopping) -> bool:
    """True while the process that got the SIGTERM still runs (a pid recycled since is another process)."""
    return pid_alive(stop.pid) and (stop.started is None or pid_start_time(stop.pid) in (None, stop.started))


def stop_run(path: str | os.PathLike, grace_s: float | None = None) -> str:
    """Send SIGTERM to the run's trainer and start the escalation (SIGKILL after `grace_s`, by default
    `stop_grace_s(path)`, if it is still alive); returns what happened (for the page to show)."""
    path = Path(path)
    current = stopping(path)
    if current is not None:
        left = max(0.0, current.deadline - time.monotonic())
        return f"already stopping (pid {current.pid}); killed in {left:.0f} s unless it stops first"
    st = run_state(path)
    state, pid = st.get("state"), st.get("pid")
    if state not in ACTIVE_STATES:
        return f"the run is {state}; nothing to stop"
    if not isinstance(pid, int) or not pid_alive(pid):
        return "the trainer process is gone"
    if not _looks_like_trainer(pid):
        return f"pid {pid} is not a trainer process; not signalling it"
    grace = stop_grace_s(path) if grace_s is None else float(grace_s)
    started = pid_start_time(pid)
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return "the trainer process is gone"
    except PermissionError:
        return f"not allowed to signal pid {pid}"
    now = time.monotonic()
    stop = Stopping(pid=pid, started=started, sent_at=now, deadline=now + grace)
    stop.thread = threading.Thread(target=_escalate, args=(path, stop), daemon=True, name=f"stop-{pid}")
    with _LOCK:
        _STOPPING[str(path)] = stop
    stop.thread.start()
    return (f"sent SIGTERM to the trainer (pid {pid}); it stops after the current step, "
            f"or is killed (SIGKILL) in {grace:.0f} s")


def stopping(path: str | os.PathLike) -> Stopping | None:
    """The stop in progress for this run (SIGTERM sent, the trainer not ended yet), else None."""
    with _LOCK:
        stop = _STOPPING.get(str(Path(path)))
    return stop if stop is not None and not stop.outcome else None


def kill_now(path: str | os.PathLike) -> str:
    """Do not wait out the grace period of a stop in progress: SIGKILL at once."""
    stop = stopping(path)
    if stop is None:
        return "no stop in progress for this run; press Stop first"
    stop.deadline = time.monotonic()
    return f"killing the trainer (pid {stop.pid})"


def wait_stopped(path: str | os.PathLike, timeout: float | None = None) -> str:
    """Wait for the run's stop to end; its outcome ("stopped", "killed", or "" when still waiting)."""
    with _LOCK:
        stop = _STOPPING.get(str(Path(path)))
    if stop is None:
        return ""
    if stop.thread is not None:
        stop.thread.join(timeout)
    return stop.outcome


def _signal_group(pid: int, sig: int) -> None:
    """Send `sig` to the trainer's whole process group (the app starts a trainer in a new session, so the
    `torch.distributed.run` launcher and the other workers of `--nproc N` go too), or to the pid alone when it
    shares this app's group."""
    try:
        group = os.getpgid(pid)
        if group != os.getpgrp():
            os.killpg(group, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _escalate(path: Path, stop: Stopping, poll_s: float = 0.2) -> None:
    """Wait for the trainer to end; SIGKILL it at the deadline; then settle the run folder."""
    try:
        while _same_process(stop) and time.monotonic() < stop.deadline:
            time.sleep(poll_s)
        if not _same_process(stop):
            stop.outcome = "stopped"
            return
        _signal_group(stop.pid, signal.SIGKILL)
        end = time.monotonic() + 30
        while _same_process(stop) and time.monotonic() < end:
            time.sleep(poll_s)
        grace = stop.deadline - stop.sent_at
        stop.kept_step = settle_killed(path, f"did not stop within {grace:.0f} s of SIGTERM")
        stop.outcome = "killed"
    except Exception as exc:  # noqa: BLE001 - a stop thread must never raise; the outcome says what went wrong
        stop.outcome = f"error: {exc}"


def _take_writer_lock(path: Path, wait_s: float = 10.0, poll_s: float = 0.1) -> RunWriter:
    """The run's writer, with its lock; a killed trainer's lock can outlive its pid by a moment (the kernel
    releases it as it tears the process down), so this retries for up to `wait_s` before giving up."""
    end = time.monotonic() + wait_s
    while True:
        try:
            return RunWriter.open(path)
        except RunStoreError:
            if time.monotonic() >= end:
                raise
            time.sleep(poll_s)


def settle_killed(path: str | os.PathLike, why: str = "") -> int | None:
    """After the app killed a run's trainer: keep its completed steps (the metrics lines written whole), drop
    what a half-written step left (a credit map without its metrics line, a torn last metrics line, temp files,
    a half-saved checkpoint), and mark the run `stopped` at its last complete step with `stopped_by: SIGKILL`.
    Returns that step (None when the trainer had not created the run folder yet). Only for a trainer that is
    gone: this process takes the run's writer lock (RunStoreError while another process holds it) and releases
    it with the final status."""
    path = Path(path)
    if not (path / "status.json").exists():
        return None
    writer = _take_writer_lock(path)
    last = RunStore(path).last_step()
    writer.truncate_after(last)  # rewrites metrics.jsonl from its whole lines; deletes later credit maps
    writer.remove_leftovers()
    writer.set_status(state="stopped", step=last, error=None, stopped_by=KILLED_BY)
    try:
        with open(path / "train.log", "a", encoding="utf-8") as log:
            log.write(f"mrtpo app: the trainer {why or 'did not stop on SIGTERM'}; killed it ({KILLED_BY}). "
                      f"Kept its {last} completed steps; Resume continues from its newest checkpoint.\n")
    except OSError:
        pass
    return last


# ---------------------------------------------------------------------------------------------- run management
RESUMABLE_STATES = ("stopped", "failed", "crashed")
WRITTEN_NOW = "a trainer process holds the run's writer lock (it is being written now); stop it first"
ARCHIVE_DIR = ".archive"  # archived runs: <runs_dir>/.archive/<name> (dot folders are not listed as runs)


def can_resume(path: str | os.PathLike) -> str:
    """"" when the run can be resumed from the app, else why not."""
    path = Path(path)
    state = run_state(path).get("state")
    if state not in RESUMABLE_STATES:
        return f"the run is {state}; only a stopped, failed or crashed run is resumed"
    if writer_lock_held(path):
        return WRITTEN_NOW
    if not any((c / "trainer_state.json").exists() for c in RunStore(path).checkpoints()):
        return "the run has no complete checkpoint to resume from"
    return ""


def resume_run(path: str | os.PathLike, steps: int | None = None, env: dict[str, str] | None = None) -> Launched:
    """Continue a stopped (or failed, or crashed) run from its newest checkpoint as a detached trainer, its output
    appended to the run's train.log; `steps` raises the run's total. Raises RunStoreError when it cannot."""
    path = Path(path)
    why = can_resume(path)
    if why:
        raise RunStoreError(why)
    argv = resume_argv(path, **({"steps": int(steps)} if steps else {}))
    with open(path / "train.log", "ab") as log:
        proc = _spawn(argv, log, env)
    with _LOCK:
        _CHILDREN[str(path)] = proc
    threading.Thread(target=proc.wait, daemon=True, name=f"reap-{proc.pid}").start()
    return Launched(path=path, name=path.name, pid=proc.pid, argv=argv)


def _idle(path: Path) -> str:
    """"" when nothing writes the run any more, else why it cannot be moved or deleted."""
    state = run_state(path).get("state")
    if state in ACTIVE_STATES:
        return f"the run is {state}; stop it first"
    if writer_lock_held(path):
        return WRITTEN_NOW
    return ""


def archive_run(path: str | os.PathLike) -> Path:
    """Move a finished run into the runs directory's hidden archive folder (out of every list); returns where."""
    path = Path(path)
    why = _idle(path)
    if why:
        raise RunStoreError(why)
    target = path.parent / ARCHIVE_DIR / path.name
    if target.exists():
        raise RunStoreError(f"the archive already holds a run named {path.name!r}")
    target.parent.mkdir(exist_ok=True)
    os.replace(path, target)
    return target


def archived_runs(root: str | os.PathLike) -> list[Path]:
    folder = Path(root) / ARCHIVE_DIR
    return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def restore_run(path: str | os.PathLike) -> Path:
    """Move an archived run back into its runs directory."""
    path = Path(path)
    target = path.parent.parent / path.name
    if target.exists():
        raise RunStoreError(f"a run named {path.name!r} already exists; rename or delete it first")
    os.replace(path, target)
    return target


def delete_run(path: str | os.PathLike) -> None:
    """Delete a finished run's folder (config, metrics, credit maps, checkpoints, log) for good."""
    path = Path(path)
    why = _idle(path)
    if why:
        raise RunStoreError(why)
    if not (path / "config.json").exists() and not (path / "status.json").exists():
        raise RunStoreError(f"{str(path)!r} is not a run folder")
    shutil.rmtree(path)
