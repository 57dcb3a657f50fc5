"""A trainer's log, as the app and the tools read it: its tail as a terminal shows it, the error it ends with,
and the startup phase it announced last.

Torch-free; reads text only (the run store's `train.log`, or a launcher's staging log).
"""

from __future__ import annotations

import os
import re
from typing import Any


def read_tail(path: str | os.PathLike, lines: int = 30, max_bytes: int = 16384) -> str:
    """The last `lines` lines of a text file as a terminal shows them, reading at most its last `max_bytes`
    ("" when unreadable): a progress bar that redraws its line with carriage returns counts once, as drawn last."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - max_bytes))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    shown = [line.rstrip("\r").rsplit("\r", 1)[-1] for line in text.split("\n")]
    while shown and not shown[-1]:
        shown.pop()
    return "\n".join(shown[-lines:])


TRACEBACK_HEAD = "Traceback (most recent call last):"
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt)\b")  # "RuntimeError: ...", "KeyboardInterrupt"


def error_from_log(text: str) -> str:
    """What a trainer's log says went wrong: its last Python traceback (from its head line to the exception
    line), else its last line that names an error (`mrtpo train: error: ...`, `RuntimeError: ...`); "" when it
    says neither (a process killed by a signal, e.g. the out-of-memory killer, leaves no such line).

    >>> error_from_log("step 1/5\\nTraceback (most recent call last):\\n  File x\\nRuntimeError: boom\\nbye")
    'Traceback (most recent call last):\\n  File x\\nRuntimeError: boom'
    """
    lines = text.split("\n")
    heads = [i for i, line in enumerate(lines) if line.startswith(TRACEBACK_HEAD)]
    if heads:
        block = lines[heads[-1]:]
        end = next((j for j in range(1, len(block)) if block[j] and not block[j][0].isspace()), len(block) - 1)
        return "\n".join(block[: end + 1]).rstrip()
    named = [line for line in lines if re.search(r"\berror\b", line, re.IGNORECASE) or _EXCEPTION_LINE.match(line)]
    return named[-1].strip() if named else ""


# The trainer prints "phase: <what it is doing>" lines while it starts (importing torch, loading the model), so
# that a viewer of its log can say what the ~20 s before the first step are spent on.
PHASE_PREFIX = "phase: "


def phase_line(text: str) -> str:
    """The log line that announces a startup phase."""
    return PHASE_PREFIX + text


def last_phase(log: str) -> str:
    """The startup phase a trainer's log announced last ("" when none)."""
    for line in reversed(log.split("\n")):
        if line.startswith(PHASE_PREFIX):
            return line[len(PHASE_PREFIX):].strip()
    return ""


def crash_message(log: str, pid: Any = None) -> str:
    """The error to show for a trainer that died without a final status: the error in its log, else what is
    known (no traceback: it was killed)."""
    found = error_from_log(log)
    if found:
        return found
    who = f"the trainer (pid {pid})" if pid else "the trainer"
    return (f"{who} ended without a final status and without an error in its log: it was killed "
            "(kill -9, or the out-of-memory killer)")
