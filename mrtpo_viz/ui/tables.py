"""Small read-only tables as HTML, for the pages' first views: `st.dataframe` and `st.table` draw with a browser
module of 1.7 MB (Apache Arrow and a grid), fetched, compiled and run on a page's first visit. On Token credit and
JS divergence's first view the sample's three small tables (the rewards, the pairwise overlap and the span metrics)
were the only users of it: cold Token credit 1.70-1.80 -> 1.40-1.55 s, JS divergence 1.95-2.04 -> 1.68-1.74 s with
them as HTML (4 cold visits each, docs/results/app-speed.md); Compare's steps-to-reach table and JS divergence's
in / out table likewise.

`pick_table` is such a table whose rows the user selects (a click, or Enter on a focused row): a small custom
component (`st.components.v2`, no iframe; the chart pages load its code for their charts anyway) returning the
selected row. The Verifier debugger's disagreement table uses it: `st.dataframe`'s row selection made its page the
only chart page still fetching the 1.7 MB module. Tables a user sorts or scrolls (Runs) stay `st.dataframe`.

Never imports torch.
"""

from __future__ import annotations

import functools
import html
import numbers
from collections.abc import Mapping

import numpy as np
import pandas as pd
import streamlit as st

# Theme-neutral: text in the page's colour, rules in a grey that reads on light and dark; a bar in the theme's primary
# colour (`--primary-color` in st.html, `--st-primary-color` in a component).
_CSS = """
.mrtpo-table-wrap { overflow-x: auto; }
table.mrtpo-table { border-collapse: collapse; font-size: 0.875rem; margin-bottom: 0.5rem; }
table.mrtpo-table th, table.mrtpo-table td { padding: 0.25rem 0.75rem; text-align: left; white-space: nowrap;
  border-bottom: 1px solid rgba(128, 128, 128, 0.3); }
table.mrtpo-table thead th { font-weight: 600; border-bottom-color: rgba(128, 128, 128, 0.6); }
table.mrtpo-table td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.mrtpo-table .bar { display: inline-block; width: 4rem; height: 0.5rem; margin-right: 0.5rem; border-radius: 0.25rem;
  background: rgba(128, 128, 128, 0.25); overflow: hidden; vertical-align: middle; }
table.mrtpo-table .bar > span { display: block; height: 100%;
  background: var(--st-primary-color, var(--primary-color, #ff4b4b)); }
"""
_STYLE = f"<style>{_CSS}</style>"


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


def bar_width(value, low: float, high: float) -> float:
    """The filled share of a bar cell, in percent: 100 (value - low) / (high - low), clipped to [0, 100]; 0 for a
    missing value."""
    if value is None or pd.isna(value) or high <= low:
        return 0.0
    return float(min(100.0, max(0.0, 100.0 * (value - low) / (high - low))))


def _cell(value, spec: str | None, bar: tuple[float, float] | None, link: str | None) -> str:
    text = html.escape(cell_text(value, spec))
    if link is not None:  # the value is the link's address (made by the page), `link` the text shown
        return f'<td><a href="{html.escape(str(value))}" target="_blank" rel="noopener">{html.escape(link)}</a></td>' \
            if text else "<td></td>"
    align = ' class="num"' if _is_number(value) else ""
    if bar is not None and text:
        text = f'<span class="bar"><span style="width: {bar_width(value, *bar):.1f}%"></span></span>{text}'
    return f"<td{align}>{text}</td>"


def table_html(df: pd.DataFrame, formats: Mapping[str, str] | None = None, index: bool = False,
               bars: Mapping[str, tuple[float, float]] | None = None, links: Mapping[str, str] | None = None) -> str:
    """`df` as an HTML table (every text escaped; `formats`: a format spec per column; `index`: the row labels as
    the first column, under the index's name); numbers right-aligned. `bars`: columns drawn with a bar filled from
    a low to a high value (`bar_width`) before the number; `links`: columns whose values are addresses, shown as a
    link with the given text that opens in a new tab. Each body row carries its position as `data-row`."""
    formats, bars, links = dict(formats or {}), dict(bars or {}), dict(links or {})
    head = ([html.escape(str(df.index.name or ""))] if index else []) + [html.escape(str(c)) for c in df.columns]
    rows = []
    for i, (label, row) in enumerate(zip(df.index, df.itertuples(index=False, name=None), strict=True)):
        cells = [f"<th>{html.escape(str(label))}</th>"] if index else []
        cells += [_cell(value, formats.get(column), bars.get(column), links.get(column))
                  for column, value in zip(df.columns, row, strict=True)]
        rows.append(f'<tr data-row="{i}">' + "".join(cells) + "</tr>")
    return ('<div class="mrtpo-table-wrap"><table class="mrtpo-table" data-mrtpo="table"><thead><tr>'
            + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>" + "".join(rows)
            + "</tbody></table></div>")


def html_table(df: pd.DataFrame, formats: Mapping[str, str] | None = None, index: bool = False) -> None:
    """Show `df` as a read-only HTML table (`table_html`)."""
    st.html(_STYLE + table_html(df, formats, index))


# The selectable table's browser code: the table's HTML (`table_html`) in one element, the selected row marked; a click
# on a row (not on its link), or Enter / Space on a focused row, selects it and sends its position as the state `row`.
_PICK_JS = r"""
export default function (component) {
  const {data, parentElement} = component;
  let box = parentElement.querySelector('.mrtpo-pick');
  if (!box) {
    box = document.createElement('div');
    box.className = 'mrtpo-pick';
    parentElement.appendChild(box);
    const pick = (tr) => {
      if (!tr || tr.dataset.row === undefined) return;
      mark(box, Number(tr.dataset.row));
      box.__set('row', Number(tr.dataset.row));
    };
    box.addEventListener('click', (e) => { if (!e.target.closest('a')) pick(e.target.closest('tr[data-row]')); });
    box.addEventListener('keydown', (e) => {
      if ((e.key === 'Enter' || e.key === ' ') && e.target.matches('tr[data-row]')) { e.preventDefault(); pick(e.target); }
    });
  }
  box.__set = component.setStateValue;  // the latest element's
  if (box.__html !== data.html) {
    box.innerHTML = data.html;
    box.__html = data.html;
    box.querySelectorAll('tbody tr').forEach((tr) => { tr.tabIndex = 0; });
  }
  mark(box, data.selected);
}

function mark(box, row) {
  box.querySelectorAll('tbody tr').forEach((tr) => {
    const on = Number(tr.dataset.row) === row;
    tr.classList.toggle('selected', on);
    tr.setAttribute('aria-selected', String(on));
  });
}
"""

_PICK_CSS = _CSS + """
.mrtpo-pick tbody tr { cursor: pointer; }
.mrtpo-pick tbody tr:hover { background: rgba(128, 128, 128, 0.12); }
.mrtpo-pick tbody tr.selected { background: color-mix(in srgb, var(--st-primary-color, #ff4b4b) 18%, transparent); }
.mrtpo-pick tbody tr:focus-visible { outline: 2px solid var(--st-primary-color, #ff4b4b); outline-offset: -2px; }
.mrtpo-pick a { color: var(--st-link-color, inherit); }
"""


@functools.cache
def _pick_component():
    """The selectable table's component (registered once per process; in the page's DOM, so the table reads the
    page's font)."""
    return st.components.v2.component("mrtpo_pick_table", js=_PICK_JS, css=_PICK_CSS, isolate_styles=False)


def pick_table(df: pd.DataFrame, key: str, formats: Mapping[str, str] | None = None,
               bars: Mapping[str, tuple[float, float]] | None = None, links: Mapping[str, str] | None = None) -> int:
    """Show `df` as an HTML table (`table_html`) whose rows the user selects, and return the selected row's
    position: 0 until one is selected, or when the selected one is past the table's end (the table got shorter)."""
    state = st.session_state.get(key) or {}
    row = state.get("row")
    selected = row if isinstance(row, int) and 0 <= row < len(df) else 0
    _pick_component()(data={"html": table_html(df, formats, bars=bars, links=links), "selected": selected},
                      key=key, default={"row": selected}, on_row_change=lambda: None)
    return selected
