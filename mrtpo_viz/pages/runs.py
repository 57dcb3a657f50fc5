"""First page: every run found in the runs directory and in the shipped sample runs."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.store import list_runs
from mrtpo_viz.paths import run_sources

st.title("Runs")
sources = run_sources()
st.caption("Runs directory: `{}` (set `MRTPO_RUNS_DIR` to change it) · shipped samples: `{}`".format(
    sources[0][1], sources[1][1]))

runs = list_runs(*(d for _, d in sources), labels=[label for label, _ in sources])
if not runs:
    st.info("No runs yet. Start one from the Launch page, or with `mrtpo train` in a terminal.")
else:
    table = pd.DataFrame(
        [
            {
                "run": r.name,
                "source": r.source,
                "state": r.state,
                "step": r.step,
                "of": r.total_steps,
                "method": r.method,
                "model": r.model,
                "updated": r.updated_at,
            }
            for r in runs
        ]
    )
    st.dataframe(table, hide_index=True, width="stretch")
    for r in runs:
        for w in r.warnings:
            st.warning(f"{r.source}/{r.name}: {w}")
