"""mrtpo_viz.tools.plotly_bundle: the plotly.js bundle `make` builds for the app's charts (its entry module, its
header read back by `ui.charts`, the app's traces all in it, nothing written and a reason given without npm). The
build itself runs at set-up (`make`), and tests/test_browser.py draws with what it wrote."""

from __future__ import annotations

import re
from pathlib import Path

from mrtpo_viz.tools import plotly_bundle
from mrtpo_viz.ui import charts

ROOT = Path(__file__).resolve().parent.parent


def test_the_entry_registers_the_traces_core_lacks_and_exports_plotly():
    assert plotly_bundle.entry_js(("scatter", "bar", "box")) == (
        "var Plotly = require('plotly.js/lib/core');\n"
        "Plotly.register([require('plotly.js/lib/bar'), require('plotly.js/lib/box')]);\n"
        "module.exports = Plotly;\n")
    assert plotly_bundle.entry_js(("scatter",)) == (
        "var Plotly = require('plotly.js/lib/core');\nPlotly.register([]);\nmodule.exports = Plotly;\n")


def test_the_banner_names_kind_and_version_as_the_app_reads_them(tmp_path):
    path = tmp_path / "p.js"
    path.write_text(plotly_bundle.banner("4.1.1") + "\nvar Plotly=1;\n")
    assert charts.bundle_header(path) == ("mrtpo", "4.1.1")
    assert "scatter, bar, box" in path.read_text().splitlines()[1] and "MIT license" in path.read_text()
    assert plotly_bundle._names_version(path, "4.1.1") and not plotly_bundle._names_version(path, "4.1.10")
    path.write_text("var Plotly=1; // plotly.js (mrtpo) v4.1.1\n")
    assert not plotly_bundle._names_version(path, "4.1.1")


def test_every_trace_the_app_constructs_is_in_the_bundle():
    """The figures are built with `plotly.graph_objects` classes: each trace class used in the app's code is one of
    TRACES (a page drawing another trace would draw nothing with the bundle)."""
    used = set()
    for path in [ROOT / "app.py", *sorted((ROOT / "mrtpo_viz").rglob("*.py"))]:
        used |= set(re.findall(r"\bgo\.([A-Z][A-Za-z]+)\(", path.read_text()))
    assert used - {"Figure"} and {name.lower() for name in used - {"Figure"}} <= set(plotly_bundle.TRACES), used


def test_without_npm_nothing_is_written_and_the_reasons_are_given(tmp_path, monkeypatch):
    monkeypatch.setattr(plotly_bundle.shutil, "which", lambda name: None)
    out = tmp_path / "share" / "plotly.min.js"
    said = plotly_bundle.write_bundle(out, "4.1.1")
    assert not out.exists() and not list(tmp_path.rglob("*.part"))
    assert said.startswith("no plotly.js bundle written") and said.count("npm is not installed") == 2
    assert "Streamlit's Plotly element" in said


def test_the_command_wants_one_path(capsys):
    assert plotly_bundle.main([]) == 2 and "usage" in capsys.readouterr().err
