"""Start, follow and stop training runs from the app, without ever training in the app's process.

`validate(fields)` checks a form's values with `core.config.TrainConfig` (every field on its own,
so the form can show all problems at once next to their inputs, then the whole config and the
prompt set). `start_run(cfg)` reserves the run folder, opens its `train.log`, and starts
`[sys.executable, "-m", "core.cli", "train", --<field> <value> ...]` as an argument list (never a
shell) in a new session, so the run keeps going when the app stops; a thread waits on the child so
it never lingers as a zombie. `stop_run(path)` sends SIGTERM to the pid recorded in status.json
(the trainer then marks the run stopped), after checking that the pid is a trainer.

Never imports torch: `core.config`, `core.store` and `core.tasks` are torch-free.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.config import ConfigError, TrainConfig, resolve_path
from core.store import ACTIVE_STATES, RunStore, RunStoreError, pid_alive, run_dir

REPO_ROOT = Path(__file__).resolve().parent.parent
FORM_ERROR = "_form"  # key of errors that belong to no single field

# Children started by this app process: run path -> Popen (to tell "starting" from "died before writing status").
_CHILDREN: dict[str, subprocess.Popen] = {}
_LOCK = threading.Lock()


@dataclass
class Launched:
    """A started run: its folder, name and the trainer's pid."""

    path: Path
    name: str
    pid: int
    argv: list[str]


def field_errors(fields: dict[str, Any]) -> dict[str, str]:
    """Check each field alone (all others at their defaults): field name -> message, for every bad field."""
    errors: dict[str, str] = {}
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    for name, value in fields.items():
        if name not in names:
            errors[FORM_ERROR] = f"unknown config field {name!r}"
            continue
        try:
            TrainConfig(**{name: value})
        except ConfigError as exc:
            errors[exc.field or name] = exc.message
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
            if run_dir(resolve_runs_dir(cfg), cfg.run_name).exists():
                return None, {"run_name": f"a run named {cfg.run_name!r} already exists; pick another name"}
        except RunStoreError as exc:
            return None, {"run_name": str(exc)}
    return cfg, {}


def resolve_runs_dir(cfg: TrainConfig) -> Path:
    return Path(cfg.runs_dir).expanduser().resolve()


def auto_run_name(cfg: TrainConfig, now: _dt.datetime | None = None) -> str:
    """<method>-<YYYYmmdd-HHMMSS>, with -2, -3, ... when that folder exists."""
    now = now or _dt.datetime.now()
    base = f"{cfg.method}-{now:%Y%m%d-%H%M%S}"
    root = resolve_runs_dir(cfg)
    name, n = base, 2
    while (root / name).exists():
        name, n = f"{base}-{n}", n + 1
    return name


def _arg_value(value: Any) -> str:
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


def train_argv(cfg: TrainConfig) -> list[str]:
    """`python -m core.cli train --<field> <value> ...` for every set field (paths made absolute)."""
    argv = [sys.executable, "-m", "core.cli", "train"]
    values = cfg.to_dict()
    for key in ("prompt_set", "eval_prompt_set", "custom_verifiers"):
        v = values.get(key)
        if v and (key != "custom_verifiers" or str(v).endswith(".py")):
            values[key] = str(resolve_path(v).resolve())
    if values["model"] not in ("tiny-instruct", "smollm2-135m"):
        values["model"] = str(resolve_path(values["model"]).resolve())
    values["runs_dir"] = str(resolve_runs_dir(cfg))
    for key, value in values.items():
        if value is None:
            continue
        argv += ["--" + key.replace("_", "-"), _arg_value(value)]
    return argv


def _reap(proc: subprocess.Popen) -> None:
    try:
        proc.wait()
    except Exception:  # noqa: BLE001 - a reaper thread must never raise
        pass


def start_run(cfg: TrainConfig, env: dict[str, str] | None = None) -> Launched:
    """Reserve the run folder, open train.log and start the trainer as a detached child process."""
    root = resolve_runs_dir(cfg)
    root.mkdir(parents=True, exist_ok=True)
    name = cfg.run_name or auto_run_name(cfg)
    path = run_dir(root, name)
    path.mkdir(exist_ok=False)  # reserves the name; the trainer fills the folder
    cfg = dataclasses.replace(cfg, run_name=name, runs_dir=str(root))
    argv = train_argv(cfg)
    child_env = dict(os.environ if env is None else env)
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    child_env.setdefault("OMP_NUM_THREADS", "1")
    with open(path / "train.log", "ab") as log:
        proc = subprocess.Popen(  # an argument list, no shell: nothing from the form is interpreted
            argv, cwd=REPO_ROOT, env=child_env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True,
        )
    with _LOCK:
        _CHILDREN[str(path)] = proc
    threading.Thread(target=_reap, args=(proc,), daemon=True, name=f"reap-{proc.pid}").start()
    return Launched(path=path, name=name, pid=proc.pid, argv=argv)


def run_state(path: str | os.PathLike) -> dict[str, Any]:
    """The run's status (store status with crash detection); for a run this app just started whose trainer
    has not written status.json yet: `starting` while the child lives, `crashed` with the log tail after."""
    store = RunStore(Path(path))
    if (Path(path) / "status.json").exists():
        return store.status()
    with _LOCK:
        proc = _CHILDREN.get(str(Path(path)))
    if proc is not None and proc.poll() is None:
        return {"state": "starting", "pid": proc.pid, "step": 0, "total_steps": None, "error": None}
    if proc is not None:
        return {"state": "crashed", "pid": proc.pid, "step": 0, "total_steps": None,
                "error": store.log_tail() or f"the trainer exited with code {proc.returncode} before starting"}
    return store.status()


def _looks_like_trainer(pid: int) -> bool:
    """True when /proc says pid runs `core.cli train` / `mrtpo train` (True where /proc is unavailable)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return not Path("/proc/self").exists()
    args = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
    return "train" in args and any(a.endswith(("core.cli", "mrtpo", "core.train_cli")) for a in args)


def stop_run(path: str | os.PathLike) -> str:
    """Send SIGTERM to the run's trainer; returns what happened (for the page to show)."""
    st = run_state(path)
    state, pid = st.get("state"), st.get("pid")
    if state not in ACTIVE_STATES:
        return f"the run is {state}; nothing to stop"
    if not isinstance(pid, int) or not pid_alive(pid):
        return "the trainer process is gone"
    if not _looks_like_trainer(pid):
        return f"pid {pid} is not a trainer process; not signalling it"
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return "the trainer process is gone"
    except PermissionError:
        return f"not allowed to signal pid {pid}"
    return f"sent SIGTERM to the trainer (pid {pid}); it stops after the current step"
