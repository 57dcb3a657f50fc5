"""Start, follow and stop training runs from the app, without ever training in the app's process; one topic per
module, used by the pages as `launcher.<name>`:

- `children`: the trainer processes this app started, a run's state and the tail of its output;
- `start`: form validation, starting a run (a detached `mrtpo train`, its log staged until the run folder exists),
  resuming one;
- `stop`: SIGTERM, then SIGKILL after a grace period, and settling a killed run at its last complete step;
- `archive`: archive, restore and delete finished runs.

Never imports torch: `core.config`, `core.run.store` and `core.tasks` are torch-free.
"""

from mrtpo_viz.launcher.archive import ARCHIVE_DIR, archive_run, archived_runs, delete_run, restore_run
from mrtpo_viz.launcher.children import (
    STAGING_DIR,
    WRITTEN_NOW,
    Launched,
    launch_id_file,
    launch_log,
    launched_config,
    launched_here,
    run_state,
    staging_log,
)
from mrtpo_viz.launcher.start import (
    FORM_ERROR,
    RESUMABLE_STATES,
    adopt_logs,
    attach_log,
    auto_run_name,
    can_resume,
    field_errors,
    resolve_runs_dir,
    resume_run,
    start_run,
    validate,
)
from mrtpo_viz.launcher.stop import (
    KILLED_BY,
    STOP_GRACE_MAX_S,
    STOP_GRACE_S,
    STOP_GRACE_STEPS,
    Stopping,
    kill_now,
    settle_killed,
    stop_grace_s,
    stop_run,
    stopping,
    wait_stopped,
)

__all__ = [
    "ARCHIVE_DIR", "FORM_ERROR", "KILLED_BY", "RESUMABLE_STATES", "STAGING_DIR", "STOP_GRACE_MAX_S", "STOP_GRACE_S",
    "STOP_GRACE_STEPS", "WRITTEN_NOW", "Launched", "Stopping",
    "adopt_logs", "archive_run", "archived_runs", "attach_log", "auto_run_name", "can_resume", "delete_run",
    "field_errors", "kill_now", "launch_id_file", "launch_log", "launched_config", "launched_here", "resolve_runs_dir",
    "restore_run", "resume_run",
    "run_state", "settle_killed", "start_run", "staging_log", "stop_grace_s", "stop_run", "stopping", "validate",
    "wait_stopped",
]
