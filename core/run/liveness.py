"""Is a run's trainer alive? Process checks on the pid that status.json records (Linux /proc).

A pid is recorded with its process's start time (`pid_start_time`), so a pid the OS recycled for another
process is not taken for the run's writer (`pid_is_writer`). Torch-free.
"""

from __future__ import annotations

import os
from typing import Any

from core.processes import end_with_parent  # noqa: F401  (its old import path)


def pid_alive(pid: Any) -> bool:
    """True when a process with this pid exists (a zombie counts as dead)."""
    try:
        pid = int(pid)
    except (TypeError, ValueError):
        return False
    if pid <= 0 or pid > 2**22:  # beyond Linux's pid_max: not a process (and os.kill would overflow)
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped) is not a running trainer
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def pid_start_time(pid: Any) -> str | None:
    """The start time of process `pid` (field 22 of /proc/<pid>/stat, clock ticks since boot), None when
    unknown: with the pid it names one process, since a recycled pid starts at another time."""
    try:
        with open(f"/proc/{int(pid)}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, ValueError, IndexError, OverflowError, TypeError):
        return None


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


TRAINER_MARKS = ("core.cli", "mrtpo", "core.run", "pytest")  # a legacy status's pid must run one of these


def pid_is_writer(status: dict[str, Any]) -> bool:
    """True when the process status.json names is alive and is the one that wrote it: same start time as
    recorded (`pid_started`), or, for a status written before start times were recorded, a command line
    that runs the trainer. A pid the OS recycled for another process is not the run's writer."""
    pid = status.get("pid")
    if not pid_alive(pid):
        return False
    recorded = status.get("pid_started")
    if recorded is not None:
        now = pid_start_time(pid)
        return now is None or str(recorded) == now
    cmd = _cmdline(int(pid))
    return not cmd or any(mark in cmd for mark in TRAINER_MARKS)
