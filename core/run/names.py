"""Run names: the one rule for what a run folder may be called, and the automatic name.

Never imports anything heavy (the config, the store, the launcher and the trainer use it).
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable

RUN_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
RUN_NAME_RULE = "1-64 characters from A-Z a-z 0-9 . _ - starting with a letter or digit"


def is_run_name(name: object) -> bool:
    """True when `name` is a valid run folder name (it cannot escape its runs directory).

    >>> is_run_name("mrtpo-seed0"), is_run_name("../x"), is_run_name(".hidden")
    (True, False, False)
    """
    return isinstance(name, str) and RUN_NAME_RE.fullmatch(name) is not None


def auto_run_name(method: str, taken: Callable[[str], bool], now: _dt.datetime | None = None) -> str:
    """`<method>-<YYYYmmdd-HHMMSS>`, with -2, -3, ... appended while `taken(name)` says the name is used."""
    now = now or _dt.datetime.now()
    base = f"{method}-{now:%Y%m%d-%H%M%S}"
    name, n = base, 2
    while taken(name):
        name, n = f"{base}-{n}", n + 1
    return name
