"""A child process that must not outlive the command that started it (`end_with_parent`). Imports nothing of the
project (the `mrtpo` entry, `mrtpo train` and torchrun's workers use it).
"""

from __future__ import annotations

import signal
import sys


def end_with_parent(sig: int = signal.SIGTERM) -> None:
    """Ask the kernel to send this process `sig` when its parent ends, even by SIGKILL (Linux's PR_SET_PDEATHSIG;
    elsewhere nothing). Used for the processes a command starts and must not outlive it: the app's server (`mrtpo
    app`) and torchrun under `mrtpo train --nproc N` (SIGTERM), and each of torchrun's workers (SIGHUP: torchrun
    itself first sends them SIGTERM, and a trainer takes a second SIGTERM as "stop now", see
    `core.run.lifecycle.SignalGuard`). Call it in the child (a `preexec_fn`, or first thing in the worker)."""
    if sys.platform != "linux":
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(sig))  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
