"""mrtpo_viz.ui.tables: small read-only tables as HTML (hand-written expected cells)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from helpers import numeric, tables_in

from mrtpo_viz.ui.tables import bar_width, cell_text, table_html


def test_cells_are_shown_as_a_reader_expects():
    assert [cell_text(v) for v in (0.25, 1.0, 2.0 / 3, -0.00001, 1234.56789, np.float64(0.5), np.int64(7), 3)] == [
        "0.25", "1", "0.6667", "0", "1234.5679", "0.5", "7", "3"]
    assert [cell_text(v) for v in (None, float("nan"), np.float64("nan"), "n/a", True)] == ["", "", "", "n/a", "True"]
    assert [cell_text(v, ".3f") for v in (0.4, -0.0001, 2, float("nan"))] == ["0.400", "0.000", "2.000", ""]
    assert cell_text(-1.62, ".2f") == "-1.62"


def test_a_table_is_escaped_aligned_and_read_back_the_same():
    df = pd.DataFrame({"reward": ["<b>x</b>", "y & z"], "score": [1.0, np.nan], "tokens": [3, 12],
                       "share": [0.123456, 0.5]})
    text = table_html(df, {"share": ".2f"})
    assert "<b>x</b>" not in text and "&lt;b&gt;x&lt;/b&gt;" in text and "y &amp; z" in text
    assert text.count('<td class="num">') == 6 and text.count("<td>") == 2
    assert '<td class="num"></td>' in text and '<td class="num">0.12</td>' in text
    back = numeric(tables_in(text)[0])
    assert back["reward"].tolist() == ["<b>x</b>", "y & z"] and back["tokens"].tolist() == [3, 12]
    assert back["score"].iloc[0] == 1.0 and np.isnan(back["score"].iloc[1]) and back["share"].tolist() == [0.12, 0.5]


def test_row_labels_are_the_first_column_under_the_index_name():
    df = pd.DataFrame([["—", "0.400"], ["0.400", "—"]], index=pd.Index(["a", "b"], name="reward"),
                      columns=["a", "b"])
    text = table_html(df, index=True)
    assert "<thead><tr><th>reward</th><th>a</th><th>b</th></tr></thead>" in text
    assert '<tr data-row="0"><th>a</th><td>—</td><td>0.400</td></tr>' in text
    back = tables_in(text)[0]
    assert back.index.name == "reward" and back.loc["a", "b"] == "0.400" and back.loc["b", "b"] == "—"


def test_a_bar_is_filled_by_the_values_share_of_its_range():
    assert [bar_width(v, 0.0, 1.0) for v in (0.25, 0.0, 1.0, 1.5, -0.2, None, float("nan"))] == [
        25.0, 0.0, 100.0, 100.0, 0.0, 0.0, 0.0]
    assert bar_width(3, 2, 6) == 25.0 and bar_width(0.5, 1.0, 1.0) == 0.0  # an empty range: no bar


def test_bar_and_link_cells():
    df = pd.DataFrame({"mass_in": [0.25, np.nan], "open": ['credit?run=a&step=1"x', None]})
    text = table_html(df, {"mass_in": ".2f"}, bars={"mass_in": (0.0, 1.0)}, links={"open": "Token credit <↗>"})
    rows = text.split("<tbody>")[1].split("</tr>")
    assert rows[0] == ('<tr data-row="0"><td class="num"><span class="bar"><span style="width: 25.0%"></span></span>'
                       '0.25</td><td><a href="credit?run=a&amp;step=1&quot;x" target="_blank" rel="noopener">'
                       "Token credit &lt;↗&gt;</a></td>")
    assert rows[1] == '<tr data-row="1"><td class="num"></td><td></td>'  # missing: no bar, no link
    back = tables_in(text)[0]
    assert back["mass_in"].tolist() == ["0.25", ""] and back["open"].tolist() == ["Token credit <↗>", ""]
