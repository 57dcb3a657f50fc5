"""Where the repository's own files are: the one place that knows the repo root; where runs go and the one rule for
what a run folder may be called.

Never imports anything heavy (the app, the CLI and the trainer all use it).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLE_DATA = REPO_ROOT / "sample_data"
PROMPTS_DIR = SAMPLE_DATA / "prompts"
MODELS_DIR = SAMPLE_DATA / "models"
SAMPLE_RUNS_DIR = SAMPLE_DATA / "runs"
TINY_INSTRUCT_DIR = MODELS_DIR / "tiny-instruct"
TINY_MULTI_DIR = MODELS_DIR / "tiny-multi"
APP_FILE = REPO_ROOT / "app.py"
ASGI_FILE = REPO_ROOT / "mrtpo_viz" / "server" / "asgi.py"  # app.py as the server runs it (an st.App with a middleware)


def resolve_path(path: str | os.PathLike) -> Path:
    """A path as given when it exists (relative to the working directory), else relative to the repo root.

    Lets `sample_data/prompts/default.jsonl` work from any working directory.
    """
    p = Path(path).expanduser()
    if p.is_absolute() or p.exists():
        return p
    alt = REPO_ROOT / p
    return alt if alt.exists() else p


def runs_dir() -> Path:
    """The runs directory new runs go to by default: `$MRTPO_RUNS_DIR`, else `./runs`."""
    return Path(os.environ.get("MRTPO_RUNS_DIR") or "runs").resolve()


RUN_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
RUN_NAME_RULE = "1-64 characters from A-Z a-z 0-9 . _ - starting with a letter or digit"


def is_run_name(name: object) -> bool:
    """True when `name` is a valid run folder name (it cannot escape its runs directory).

    >>> is_run_name("mrtpo-seed0"), is_run_name("../x"), is_run_name(".hidden")
    (True, False, False)
    """
    return isinstance(name, str) and RUN_NAME_RE.fullmatch(name) is not None
