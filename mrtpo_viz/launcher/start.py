"""Start a run from the form, or resume one, without ever training in the app's process.

`validate(fields)` checks a form's values with `core.config.TrainConfig` (every field on its own, so the form
can show all problems at once next to their inputs, then the whole config and the prompt set). `start_run(cfg)`
picks the run name and starts `[sys.executable, "-m", "core.cli", "train", --<field> <value> ...]` as an argument
list (never a shell) in a new session, so the run keeps going when the app stops; a thread waits on the child so
it never lingers as a zombie.

The trainer's output goes to a staging log first (`children.staging_log`); once the trainer has created the run
folder, that file is hard-linked in as `<run>/train.log` (same inode: the trainer keeps writing to it) and the
staging name removed. `adopt_logs(runs_dir)` finishes that step for runs whose app stopped in between. The log is
linked only into a folder the app's own trainer created: each Start gives the trainer a random `MRTPO_LAUNCH_ID`,
which the trainer records in status.json; a folder another process made first (a command-line run of the same name
still loading when Start was pressed) keeps its own log, and the losing launch's log is kept as
`.launch/<name>.lost-<id>.log` (docs/CONTRACTS.md, status.json).

Never imports torch: `core.config`, `core.run.store` and `core.tasks` are torch-free.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from core.config import ConfigError, TrainConfig, field_error, resume_argv, train_argv
from core.prompt_sets import load_prompts
from core.run import names
from core.run.store import LAUNCH_ID_ENV, RunStore, RunStoreError, run_dir, writer_lock_held
from mrtpo_viz.launcher.children import (
    _CHILDREN,
    _CONFIGS,
    _LOCK,
    _RESUMED,
    STAGING_DIR,
    WRITTEN_NOW,
    Launched,
    _spawn,
    launch_id_file,
    run_state,
    staging_log,
    status_key,
)

FORM_ERROR = "_form"  # key of errors that belong to no single field
# A stopped, failed or crashed run continues to its total (or a new one); a completed run is extended: it continues
# from its last checkpoint (always written at the last step) to a larger total (issue 26).
RESUMABLE_STATES = ("stopped", "failed", "crashed", "completed")


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
            load_prompts(cfg)
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


def _taken(root: Path, name: str) -> bool:
    return (root / name).exists() or staging_log(root, name).exists()


def auto_run_name(cfg: TrainConfig) -> str:
    """<method>-<YYYYmmdd-HHMMSS>, with -2, -3, ... when that name is taken (a folder or a staging log)."""
    root = resolve_runs_dir(cfg)
    return names.auto_run_name(cfg.method, lambda name: _taken(root, name))


def attach_log(path: Path) -> bool:
    """Hard-link the staging log into the run folder as train.log once the folder exists and its status says this
    launch's trainer created it; True when the staging log is dealt with (linked, or kept aside as a lost launch's)."""
    path = Path(path)
    staging = staging_log(path.parent, path.name)
    if not staging.exists() or not path.is_dir():
        return False
    id_file = launch_id_file(path.parent, path.name)
    try:
        ours = id_file.read_text().strip()
    except OSError:
        ours = ""  # a staging log of an app from before launch ids: linked as before
    if ours:
        if not (path / "status.json").exists():
            return False  # the folder is being created: its status says by whom in a moment
        if RunStore(path).status().get("launch_id") != ours:
            # another process created this run first: its train.log (or none) stays; this launch's log is kept aside
            staging.replace(staging.parent / f"{path.name}.lost-{ours}.log")
            id_file.unlink(missing_ok=True)
            return True
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
    id_file.unlink(missing_ok=True)
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
    launch_id = secrets.token_hex(8)
    child_env = {**(os.environ if env is None else env), LAUNCH_ID_ENV: launch_id}
    with open(staging, "xb") as log:  # "x": two launches cannot take the same name
        launch_id_file(root, name).write_text(launch_id)
        proc = _spawn(argv, log, child_env)
    with _LOCK:
        _CHILDREN[str(path)] = proc
        _CONFIGS[str(path)] = cfg.to_dict()
    threading.Thread(target=_follow, args=(proc, path), daemon=True, name=f"follow-{proc.pid}").start()
    return Launched(path=path, name=name, pid=proc.pid, argv=argv)


def can_resume(path: str | os.PathLike) -> str:
    """"" when the run can be resumed from the app (a completed one: extended with more steps), else why not."""
    path = Path(path)
    state = run_state(path).get("state")
    if state not in RESUMABLE_STATES:
        return f"the run is {state}; only a stopped, failed, crashed or completed run is resumed"
    if state == "completed" and (RunStore(path).config().get("backend") or "builtin") != "builtin":
        return ("a completed run is extended with the built-in trainer only; this run used the "
                f"{RunStore(path).config().get('backend')} backend")
    if writer_lock_held(path):
        return WRITTEN_NOW
    if not any((c / "trainer_state.json").exists() for c in RunStore(path).checkpoints()):
        return "the run has no complete checkpoint to resume from"
    return ""


def resume_run(path: str | os.PathLike, steps: int | None = None, env: dict[str, str] | None = None) -> Launched:
    """Continue a stopped (or failed, or crashed) run from its newest checkpoint as a detached trainer, its output
    appended to the run's train.log; `steps` raises the run's total. A completed run is extended: `steps` must
    exceed the steps it has. Raises RunStoreError when it cannot."""
    path = Path(path)
    why = can_resume(path)
    if why:
        raise RunStoreError(why)
    state = run_state(path)
    if state.get("state") == "completed" and not (steps and int(steps) > int(state.get("step") or 0)):
        raise RunStoreError(f"the run completed its {state.get('step')} steps; extend it to more steps than that")
    argv = resume_argv(path, **({"steps": int(steps)} if steps else {}))
    before = status_key(path)
    with open(path / "train.log", "ab") as log:
        proc = _spawn(argv, log, env)
    with _LOCK:
        _CHILDREN[str(path)] = proc
        _RESUMED[str(path)] = before
    threading.Thread(target=proc.wait, daemon=True, name=f"reap-{proc.pid}").start()
    return Launched(path=path, name=path.name, pid=proc.pid, argv=argv)
