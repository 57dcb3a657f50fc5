"""The Runs page's table as it is drawn: the key columns first (the run, then its method and seed, its state and
progress, its summary metrics), sized so that they fit a 1,400 px window beside the sidebar without scrolling; the
other settings follow, reached by scrolling; a missing value reads "–" (`st.dataframe(placeholder=MISSING)`: it read
"None", cut to "No…" in a narrow column: issue 46, item 5). Never imports torch.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

MISSING = "–"  # what a missing value (None, NaN) reads in the table
# The columns a run is told apart by at a glance, in this order and within the page's width at 1,400 px (about
# 940 px beside the sidebar, less the row selection's box): their widths in pixels.
KEY_COLUMNS = {"run": 270, "method": 70, "seed": 50, "state": 110, "progress": 105,
               "all satisfied (last)": 95, "all satisfied (best)": 95, "held-out (last)": 80}
# Shorter headers for the key columns (the table's column names stay those of `analysis.RUN_COLUMNS`, which the
# filters use); each header's help says the whole.
LABELS = {"all satisfied (last)": ("all sat. last", "share of samples that satisfied every reward, last step"),
          "all satisfied (best)": ("all sat. best", "share of samples that satisfied every reward, best step"),
          "held-out (last)": ("held-out", "all-satisfied share on the held-out prompts, last evaluation")}


def ordered(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame`'s columns with the key columns (`KEY_COLUMNS`) first, the others in their order."""
    key = [c for c in KEY_COLUMNS if c in frame.columns]
    return frame[key + [c for c in frame.columns if c not in KEY_COLUMNS]]


def column_config() -> dict:
    """`st.dataframe`'s column_config for the table: the key columns' widths and headers, the progress as a bar, the
    numbers' formats, the path hidden."""
    config = {c: st.column_config.Column(c, width=w) for c, w in KEY_COLUMNS.items()}
    config["progress"] = st.column_config.ProgressColumn("progress", min_value=0.0, max_value=1.0, format="percent",
                                                         width=KEY_COLUMNS["progress"])
    for c, (label, why) in LABELS.items():
        config[c] = st.column_config.NumberColumn(label, format="%.3f", width=KEY_COLUMNS[c], help=why)
    config["lr"] = st.column_config.NumberColumn("lr", format="%.1e")
    config["s/step"] = st.column_config.NumberColumn("s/step", format="%.2f", help="median seconds per training step")
    config["path"] = None
    return config
