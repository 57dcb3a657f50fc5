"""The runs a session can show: this session's pending launches first (runs this app started, from any session or
tab, are listed before their trainer has written the run folder: state `starting`), then the active runs, the most
recently started first, then the others. Used by the pages (`ui.page_runs`) and by the warm sessions (`ui.warm`).

Never imports torch.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from core.run.store import ACTIVE_STATES, RunInfo
from mrtpo_viz import launcher, loaders

LAUNCHED_KEY = "launched_runs"  # paths of runs started from this session (Launch page), newest last


def pending_runs() -> list[RunInfo]:
    """Runs whose trainer has not written its run folder yet (still loading), newest first, as run-list entries:
    those this session started (one whose trainer died before writing it shows as crashed) and those another
    session of this app started that are still starting (a tab opened right after Start)."""
    out = []
    mine = st.session_state.get(LAUNCHED_KEY, [])
    here = launcher.launched_here()  # every launch of this app process, in the order they were started
    ordered = [p for p in here if p in mine or launcher.run_state(p).get("state") == "starting"]
    for p in reversed([p for p in mine if p not in here] + ordered):
        if (Path(p) / "status.json").exists():
            continue
        state = launcher.run_state(p)
        cfg = launcher.launched_config(p)
        out.append(RunInfo(name=Path(p).name, path=Path(p), source="runs", state=str(state.get("state", "unknown")),
                           step=0, total_steps=cfg.get("steps"), method=cfg.get("method"), model=cfg.get("model"),
                           updated_at=None, warnings=[]))
    return out


def session_runs() -> list[RunInfo]:
    """Every run the app can show: pending launches first, then the active runs of the runs directory, the most
    recently started first (a run that has not finished its first step is not pushed down by an older run that
    writes a step every second), then the others, the last updated first. A page that has no chosen run opens
    on the first."""
    pending = pending_runs()
    listed = loaders.all_runs()
    known = {str(r.path) for r in listed}
    active = sorted((r for r in listed if r.state in ACTIVE_STATES),
                    key=lambda r: str(loaders.status(r.path).get("started_at") or ""), reverse=True)
    return [r for r in pending if str(r.path) not in known] + active + [r for r in listed
                                                                         if r.state not in ACTIVE_STATES]
