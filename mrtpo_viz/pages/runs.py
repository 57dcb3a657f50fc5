"""First page: every run found in the runs directory and in the shipped sample runs, with its state and
progress; select one to open it on the other pages. Corrupt or half-written runs show a warning."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from mrtpo_viz import launcher, loaders, ui
from mrtpo_viz.paths import run_sources

st.title("Runs")
sources = run_sources()
st.caption(f"Runs directory: `{sources[0][1]}` (set `MRTPO_RUNS_DIR` to change it) · "
           f"shipped samples: `{sources[1][1]}`")

launcher.adopt_logs(sources[0][1])  # train.log of runs started by an app that stopped while they loaded
runs = ui.page_runs()

table = pd.DataFrame(
    [
        {
            "run": loaders.run_label(r),
            "state": ui.state_badge(r.state),
            "progress": (r.step / r.total_steps) if r.total_steps else None,
            "step": r.step,
            "of": r.total_steps,
            "method": r.method,
            "model": r.model,
            "updated": r.updated_at,
        }
        for r in runs
    ]
)
event = st.dataframe(
    table, hide_index=True, width="stretch", on_select="rerun", selection_mode="single-row", key="runs_table",
    column_config={"progress": st.column_config.ProgressColumn("progress", min_value=0.0, max_value=1.0,
                                                               format="percent")},
)
rows = event.selection.rows if event is not None and hasattr(event, "selection") else []
current = st.session_state.get(ui.RUN_KEY)
if rows:
    current = str(runs[rows[0]].path)
    st.session_state[ui.RUN_KEY] = current
    st.session_state[ui.RUNS_KEY] = [current]
chosen = next((r for r in runs if str(r.path) == current), None)
if chosen is not None:
    st.markdown(f"Selected: **{loaders.run_label(chosen)}** ({ui.state_badge(chosen.state)})")
    c = st.columns(4)
    c[0].page_link("mrtpo_viz/pages/curves.py", label="Training curves", icon=":material/show_chart:")
    c[1].page_link("mrtpo_viz/pages/credit.py", label="Token credit", icon=":material/format_color_fill:")
    c[2].page_link("mrtpo_viz/pages/js.py", label="JS divergence", icon=":material/difference:")
    c[3].page_link("mrtpo_viz/pages/debugger.py", label="Verifier debugger", icon=":material/bug_report:")
else:
    st.caption("Select a row to open that run on the other pages.")

for r in runs:
    ui.show_warnings(f"{loaders.run_label(r)}", r.warnings)
    if r.state in ("crashed", "failed"):
        with st.expander(f"{loaders.run_label(r)} {r.state}: error and log tail"):
            st.code(str(loaders.status(r.path).get("error") or loaders.log_tail(r.path) or "no error text")[-4000:],
                    language=None)
