"""Stop a run from the app: SIGTERM asks the trainer to stop after its current step (it saves a checkpoint and
writes `stopped`). `stop_run(path)` sends it to the pid recorded in status.json, after checking that the pid is a
trainer; a trainer that does not stop (stuck in one huge step, or a SIGTERM handler that never runs) gets SIGKILL
after a grace period (`stop_grace_s`), and `settle_killed` then writes what the trainer could not: the run stopped
at its last complete step, with what a half-written step left removed.

Never imports torch: `core.config`, `core.run.store` and `core.tasks` are torch-free.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from core.run.liveness import pid_alive, pid_start_time
from core.run.store import (
    ACTIVE_STATES,
    RunStore,
    RunStoreError,
    RunWriter,
)
from mrtpo_viz.launcher.children import _LOCK, _STOPPING, _looks_like_trainer, run_state

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
