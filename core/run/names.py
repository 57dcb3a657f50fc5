"""Run names: the automatic name, and (from `core.paths`, where it lives) the one rule for what a run folder may be
called.

Never imports anything heavy (the config, the store, the launcher and the trainer use it).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable

from core.paths import RUN_NAME_RE, RUN_NAME_RULE, is_run_name  # noqa: F401  (the rule's old import path)


def auto_run_name(method: str, taken: Callable[[str], bool], now: _dt.datetime | None = None) -> str:
    """`<method>-<YYYYmmdd-HHMMSS>`, with -2, -3, ... appended while `taken(name)` says the name is used."""
    now = now or _dt.datetime.now()
    base = f"{method}-{now:%Y%m%d-%H%M%S}"
    name, n = base, 2
    while taken(name):
        name, n = f"{base}-{n}", n + 1
    return name
