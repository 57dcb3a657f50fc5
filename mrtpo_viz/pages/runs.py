"""First page: every run (the runs directory, the shipped samples, and runs this session just started) with its
state, progress, summary metrics (last and best all-satisfied rate, held-out rate, s/step) and the settings that
tell runs apart (backend and process count included); filter and group by any of them; select a run to open
it on the other pages, tag it, add notes, resume it when stopped (or extend a completed run with more steps),
archive or delete it (with confirmation).
Corrupt or half-written runs show a warning; crashed ones their error. Live while a run trains (`ui.follow_runs`)."""

from __future__ import annotations

import dataclasses
import functools

import pandas as pd
import streamlit as st

from core.run.store import ACTIVE_STATES, RunStoreError, read_notes, write_notes
from mrtpo_viz import analysis, launcher, loaders, ui
from mrtpo_viz.paths import run_sources
from mrtpo_viz.ui import runs_table

INSPECT_PAGES = (("mrtpo_viz/pages/curves.py", "Training curves", ":material/show_chart:"),
                 ("mrtpo_viz/pages/credit.py", "Token credit", ":material/format_color_fill:"),
                 ("mrtpo_viz/pages/js.py", "JS divergence", ":material/difference:"),
                 ("mrtpo_viz/pages/debugger.py", "Verifier debugger", ":material/bug_report:"))
CONFIRM_KEY = "runs_confirm"  # (action, run path) awaiting confirmation
NOTICE_KEY = "runs_notice"  # what the last Resume / Extend said, shown once after the page is drawn again

st.title("Runs")
st.markdown("The MRTPO workbench trains language models with several verifiable rewards and shows which tokens "
            "each reward's credit went to. **Start here:** train a run on the **Launch** page, or open a shipped "
            "run's credit map on **Token credit** (select a row below first).")
sources = run_sources()
st.caption(f"Runs directory: `{sources[0][1]}` (set `MRTPO_RUNS_DIR` to change it) · "
           f"shipped samples: `{sources[1][1]}`")

launcher.adopt_logs(sources[0][1])  # train.log of runs started by an app that stopped while they loaded


def status_of(r) -> dict:
    """The run's state as the launcher sees it: a run this app just resumed is `starting` until its trainer writes."""
    return launcher.run_state(r.path)


listed = ui.page_runs()
statuses = {str(r.path): status_of(r) for r in listed}
runs = [dataclasses.replace(r, state="starting") if statuses[str(r.path)].get("state") == "starting" else r
        for r in listed]
by_path = {str(r.path): r for r in runs}
# Live while a run trains: the table is drawn again when an active run wrote a step (or started or ended).
training = [p for p, r in by_path.items() if r.state in ACTIVE_STATES]
ui.follow_runs(training, {p: loaders.run_label(by_path[p]) for p in training}, "runs", progress=False)

table = pd.DataFrame([analysis.run_row(loaders.run_label(r), r, loaders.config(r.path)[0], statuses[str(r.path)],
                                       read_notes(r.path), loaders.metrics(r.path)[0]) for r in runs],
                     columns=analysis.RUN_COLUMNS)
table["state"] = table["state"].map(ui.state_badge)

with st.expander("Filter and group"):
    f1, f2, f3 = st.columns([2, 2, 1])
    search = f1.text_input("Search names, tags and notes", key="runs_search")
    filter_by = f2.multiselect("Filter by", analysis.GROUPABLE, key="runs_filter_by")
    group_by = f3.selectbox("Group by", ["none", *analysis.GROUPABLE], key="runs_group_by")
    where = {}
    if filter_by:
        cols = st.columns(min(4, len(filter_by)))
        for i, column in enumerate(filter_by):
            values = analysis.group_values(table, column)
            where[column] = cols[i % len(cols)].multiselect(column, values, default=values, key=f"runs_f_{column}")
shown = analysis.filter_runs(table, search, where)
if len(shown) < len(table):
    st.caption(f"{len(shown)} of {len(table)} runs match the filters.")


def _select(key: str, paths: list[str]) -> None:
    """A click on a table row makes that run the chosen one (rows are read when clicked, not on later reruns,
    so a new run at the top of the list never shifts the choice)."""
    rows = st.session_state[key].selection.rows
    if rows:
        ui.set_run(paths[rows[0]])


def draw_table(frame: pd.DataFrame, key: str) -> None:
    st.dataframe(
        runs_table.ordered(frame.drop(columns=["source"])), hide_index=True, width="stretch",
        placeholder=runs_table.MISSING,
        on_select=functools.partial(_select, key, frame["path"].tolist()),
        selection_mode="single-row", key=key, column_config=runs_table.column_config(),
    )


if group_by == "none":
    draw_table(shown, "runs_table")
else:
    for value in analysis.group_values(shown, group_by):
        part = analysis.filter_runs(shown, where={group_by: [value]})
        st.text(f"{group_by} = {value or '—'} · {len(part)} run{'s' if len(part) != 1 else ''}")
        draw_table(part, f"runs_table_{group_by}_{value}")

chosen = by_path.get(st.session_state.get(ui.RUN_KEY))
if chosen is None:
    st.caption("Select a row to open that run on the other pages.")
else:
    label = loaders.run_label(chosen)
    notice = st.session_state.pop(NOTICE_KEY, None)
    if notice and notice[0] == str(chosen.path):
        st.success(notice[1])
    st.markdown(f"Selected: **{label}** ({ui.state_badge(chosen.state)})")
    c = st.columns(len(INSPECT_PAGES))
    for col, (page, title, icon) in zip(c, INSPECT_PAGES, strict=True):
        col.page_link(page, label=title, icon=icon, query_params={"run": label})
    writable = chosen.source == "runs"
    path = str(chosen.path)

    with st.expander("Tags and notes", expanded=False):
        notes = read_notes(path)
        with st.form(f"notes_{path}"):
            tags = st.text_input("Tags (comma-separated)", ", ".join(notes["tags"]), disabled=not writable)
            text = st.text_area("Notes", notes["notes"], disabled=not writable)
            if st.form_submit_button("Save", disabled=not writable):
                write_notes(path, tags.split(","), text)
                st.rerun()
        if not writable:
            st.caption("Shipped sample runs are part of the repository: they take no tags or notes.")

    if writable:
        a1, a2, a3, _ = st.columns([2, 1, 1, 2], vertical_alignment="bottom")
        why = launcher.can_resume(path)
        cfg, _ = loaders.config(path)
        done = chosen.state == "completed"  # extended: more steps from its last checkpoint
        total = a1.number_input("Extend to step" if done else "Resume up to step", min_value=max(1, chosen.step + 1),
                                value=2 * chosen.step if done and chosen.step else max(int(cfg.get("steps") or 1),
                                                                                       chosen.step + 1),
                                disabled=bool(why), key=f"resume_steps_{path}",
                                help=why or ("the completed run continues from its last checkpoint with more steps"
                                             if done else "continue from the newest checkpoint"))
        if a1.button("Extend" if done else "Resume", disabled=bool(why), key=f"resume_{path}", help=why or None):
            try:
                launched = launcher.resume_run(path, int(total))
            except (OSError, RunStoreError) as exc:
                st.error(f"Could not {'extend' if done else 'resume'}: {exc}")
            else:  # drawn again, so the header and the table show the run starting
                st.session_state[NOTICE_KEY] = (path, f"{'Extended' if done else 'Resumed'} {label} to {int(total)} "
                                                      f"steps (pid {launched.pid}); follow it on Training curves.")
                st.rerun()
        if a2.button("Archive…", key=f"archive_{path}"):
            st.session_state[CONFIRM_KEY] = ("archive", path)
        if a3.button("Delete…", key=f"delete_{path}"):
            st.session_state[CONFIRM_KEY] = ("delete", path)

        action, target = st.session_state.get(CONFIRM_KEY) or (None, None)
        if target == path:
            box = st.container(border=True)
            if action == "archive":
                box.warning(f"Archive **{label}**? It leaves every list and can be restored below, under "
                            "Archived runs.")
            else:
                box.error(f"Delete **{label}** for good: its config, metrics, credit maps, checkpoints and log? "
                          "Type its name to confirm.")
                typed = box.text_input("Run name", key=f"confirm_name_{path}")
            b1, b2, _ = box.columns([1, 1, 4])
            ok = b1.button("Archive" if action == "archive" else "Delete", type="primary", key=f"do_{action}_{path}",
                           disabled=action == "delete" and typed != chosen.name)
            if b2.button("Cancel", key=f"cancel_{path}"):
                st.session_state.pop(CONFIRM_KEY, None)
                st.rerun()
            if ok:
                try:
                    (launcher.archive_run if action == "archive" else launcher.delete_run)(path)
                except (OSError, RunStoreError) as exc:
                    box.error(f"Could not {action} {label}: {exc}")
                else:
                    st.session_state.pop(CONFIRM_KEY, None)
                    st.session_state[ui.RUN_KEY] = None
                    st.rerun()

archived = launcher.archived_runs(sources[0][1])
if archived:
    with st.expander(f"Archived runs ({len(archived)})"):
        for folder in archived:
            a, b = st.columns([4, 1])
            a.text(folder.name)
            if b.button("Restore", key=f"restore_{folder.name}"):
                try:
                    launcher.restore_run(folder)
                except (OSError, RunStoreError) as exc:
                    st.error(f"Could not restore {folder.name}: {exc}")
                else:
                    st.rerun()

for r in runs:
    ui.show_warnings(f"{loaders.run_label(r)}", r.warnings)
    if r.state in ("crashed", "failed"):
        with st.expander(f"{loaders.run_label(r)} {r.state}: error and log tail"):
            st.code(str(statuses[str(r.path)].get("error") or "no error text")[-4000:], language=None)
            tail = launcher.launch_log(r.path, 30)
            if tail:
                st.caption("Last lines of its log:")
                st.code(tail, language=None)
