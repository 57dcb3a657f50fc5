"""Small read-only tables as HTML, for the pages' first views: `st.dataframe` and `st.table` draw with a browser
module of 1.7 MB (Apache Arrow and a grid), fetched, compiled and run on a page's first visit. On Token credit and
JS divergence's first view the sample's three small tables (the rewards, the pairwise overlap and the span metrics)
were the only users of it: cold Token credit 1.70-1.80 -> 1.40-1.55 s, JS divergence 1.95-2.04 -> 1.68-1.74 s with
them as HTML (4 cold visits each, docs/results/app-speed.md); Compare's steps-to-reach table likewise. Tables a user
sorts, scrolls or selects rows of (Runs, the debugger's) stay `st.dataframe`.

Never imports torch.
"""

from __future__ import annotations

import html
import numbers
from collections.abc import Mapping

import numpy as np
import pandas as pd
import streamlit as st

# Theme-neutral: text in the page's colour, rules in a grey that reads on light and dark.
_STYLE = """<style>
.mrtpo-table-wrap { overflow-x: auto; }
table.mrtpo-table { border-collapse: collapse; font-size: 0.875rem; margin-bottom: 0.5rem; }
table.mrtpo-table th, table.mrtpo-table td { padding: 0.25rem 0.75rem; text-align: left; white-space: nowrap;
  border-bottom: 1px solid rgba(128, 128, 128, 0.3); }
table.mrtpo-table thead th { font-weight: 600; border-bottom-color: rgba(128, 128, 128, 0.6); }
table.mrtpo-table td.num { text-align: right; font-variant-numeric: tabular-nums; }
</style>"""


def cell_text(value, spec: str | None = None) -> str:
    """A cell as shown: "" for a missing value (None, NaN), a number to `spec` (a format spec such as ".3f"), else a
    float to at most 4 decimals without trailing zeros (never "-0"), anything else as `str`."""
    if value is None or (_is_number(value) and pd.isna(value)):
        return ""
    if spec is not None and _is_number(value):
        text = format(value, spec)
    elif isinstance(value, float):
        text = f"{value:.4f}".rstrip("0").rstrip(".")
    else:
        return str(value)
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text  # no "-0.00"


def _is_number(value) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, (bool, np.bool_))


def table_html(df: pd.DataFrame, formats: Mapping[str, str] | None = None, index: bool = False) -> str:
    """`df` as an HTML table (every text escaped; `formats`: a format spec per column; `index`: the row labels as
    the first column, under the index's name); numbers right-aligned."""
    formats = dict(formats or {})
    head = ([html.escape(str(df.index.name or ""))] if index else []) + [html.escape(str(c)) for c in df.columns]
    rows = []
    for label, row in zip(df.index, df.itertuples(index=False, name=None), strict=True):
        cells = [f"<th>{html.escape(str(label))}</th>"] if index else []
        for column, value in zip(df.columns, row, strict=True):
            align = ' class="num"' if _is_number(value) else ""
            cells.append(f"<td{align}>{html.escape(cell_text(value, formats.get(column)))}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return ('<div class="mrtpo-table-wrap"><table class="mrtpo-table" data-mrtpo="table"><thead><tr>'
            + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>" + "".join(rows)
            + "</tbody></table></div>")


def html_table(df: pd.DataFrame, formats: Mapping[str, str] | None = None, index: bool = False) -> None:
    """Show `df` as a read-only HTML table (`table_html`)."""
    st.html(_STYLE + table_html(df, formats, index))
