"""mrtpo_viz.ui.charts: which plotly.js bundle the app draws its figures with, and the pages' figures drawn through
its component are the figures `st.plotly_chart` draws without it (Streamlit AppTest; the drawing itself, in
Chromium, is in tests/test_browser.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from plotly.offline import get_plotlyjs_version
from streamlit.testing.v1 import AppTest

from mrtpo_viz.tools import plotly_bundle
from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run
from mrtpo_viz.ui import charts

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def write_bundle(path: Path, version: str, kind: str = "cartesian") -> Path:
    """A file with a bundle's header comment and no code: plotly.js's cartesian bundle's (as plotly.js writes it) or
    the one `make` builds (`tools.plotly_bundle.banner`)."""
    head = (plotly_bundle.banner(version) if kind == "mrtpo" else
            f"/**\n* plotly.js (cartesian - minified) v{version}\n* Copyright 2012-2026, Plotly, Inc.\n*/")
    path.write_text(head + "\nwindow.Plotly = {};\n")
    return path


@pytest.fixture()
def fresh_bundle(monkeypatch):
    """charts.bundle() read again in the test, and nothing served."""
    monkeypatch.setattr(charts, "_served", [])
    charts.bundle.cache_clear()
    yield
    charts.bundle.cache_clear()


def test_the_kind_and_version_are_read_from_the_bundles_header(tmp_path):
    assert charts.bundle_header(write_bundle(tmp_path / "a.js", "4.1.1")) == ("cartesian", "4.1.1")
    assert charts.bundle_header(write_bundle(tmp_path / "m.js", "4.1.2", "mrtpo")) == ("mrtpo", "4.1.2")
    (tmp_path / "b.js").write_text("/** plotly.js v4.1.1 (the full bundle) */")
    (tmp_path / "c.js").write_text("/**\n* plotly.js (basic - minified) v4.1.1\n*/")  # no box trace: not used
    for other in ("b.js", "c.js", "missing.js"):
        assert charts.bundle_header(tmp_path / other) is None


def test_the_bundle_is_looked_for_in_the_environment_then_the_virtual_environment(monkeypatch, tmp_path):
    import sys

    monkeypatch.delenv(charts.BUNDLE_ENV, raising=False)
    assert charts.bundle_path() == Path(sys.prefix) / "share" / "mrtpo" / charts.BUNDLE_FILE
    monkeypatch.setenv(charts.BUNDLE_ENV, str(tmp_path / "x.js"))
    assert charts.bundle_path() == tmp_path / "x.js"
    monkeypatch.setenv(charts.BUNDLE_ENV, "off")
    assert charts.bundle_path() is None


def test_only_a_bundle_of_plotlys_own_version_is_used_and_only_once_served(monkeypatch, tmp_path, fresh_bundle,
                                                                          capsys):
    version = get_plotlyjs_version()
    good = write_bundle(tmp_path / "good.js", version)
    monkeypatch.setenv(charts.BUNDLE_ENV, str(good))
    assert charts.bundle() == (good, f"_mrtpo/plotly-cartesian-{version}.min.js")
    charts.bundle.cache_clear()
    built = write_bundle(tmp_path / "built.js", version, "mrtpo")
    monkeypatch.setenv(charts.BUNDLE_ENV, str(built))
    assert charts.bundle() == (built, f"_mrtpo/plotly-mrtpo-{version}.min.js")
    assert charts.drawn_with_bundle() is None  # no server serves it yet: st.plotly_chart
    assert charts.serve_bundle() == charts.bundle() == charts.drawn_with_bundle()

    charts._served.clear()
    charts.bundle.cache_clear()
    monkeypatch.setenv(charts.BUNDLE_ENV, str(write_bundle(tmp_path / "old.js", "3.0.0")))
    assert charts.serve_bundle() is None and charts.drawn_with_bundle() is None
    assert "is plotly.js 3.0.0" in capsys.readouterr().err
    for missing in (str(tmp_path / "none.js"), "off"):
        charts.bundle.cache_clear()
        monkeypatch.setenv(charts.BUNDLE_ENV, missing)
        assert charts.serve_bundle() is None


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    write_synthetic_run(root, "mrtpo-a", steps=4, rewards=DEFAULT_REWARDS, n_tokens=12)
    write_synthetic_run(root, "gdpo-b", steps=4, method="gdpo", rewards=DEFAULT_REWARDS, n_tokens=12, seed=1)
    return root


def page_figures(name: str, query: dict, runs_dir: Path, monkeypatch) -> dict[str, dict]:
    """The figures a page draws, by key: from `st.plotly_chart` elements, or from the charts component's data."""
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(runs_dir))
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.query_params.update(query)
    at.switch_page(f"mrtpo_viz/pages/{name}.py").run()
    assert not at.exception, at.exception
    drawn = {c.key: json.loads(c.proto.spec) for c in at.get("plotly_chart")}
    for element in at.get("bidi_component"):
        if element.proto.component_name == "mrtpo_pick_table":  # the debugger's table (`ui.pick_table`)
            continue
        assert element.proto.component_name == "mrtpo_chart"
        data = json.loads(element.proto.json)
        drawn[data["key"]] = json.loads(data["figure"])
    return drawn


@pytest.mark.app
@pytest.mark.parametrize("name, query, keys", [
    ("curves", {"run": "mrtpo-a"}, ["fig_rewards"]),
    ("curves", {"run": "mrtpo-a", "view": "optimisation"}, ["fig_optimisation"]),
    ("js", {"run": "mrtpo-a"}, ["fig_js_positions"]), ("js", {"run": "mrtpo-a", "view": "step"}, ["fig_js_inout"]),
    ("js", {"run": "mrtpo-a", "view": "training"}, ["fig_js_training"]),
    ("debugger", {"run": "mrtpo-a"}, ["fig_dbg_auc", "fig_dbg_mass"]),
    ("compare", {"run": ["mrtpo-a", "gdpo-b"]}, ["fig_compare_0"]),
])
def test_each_chart_page_draws_the_same_figures_through_the_bundle(name, query, keys, runs_dir, monkeypatch, tmp_path,
                                                                   fresh_bundle):
    """With the bundle served, every chart of the page is the charts component, carrying the bundle's URL path and
    the figure `st.plotly_chart` draws without it, under the same key; nothing is drawn by st.plotly_chart."""
    before = page_figures(name, query, runs_dir, monkeypatch)
    assert sorted(before) == keys and all(fig["data"] for fig in before.values())
    # every trace is one the bundle built at set-up holds (`tools.plotly_bundle.TRACES`)
    assert {trace.get("type", "scatter") for fig in before.values() for trace in fig["data"]} <= set(plotly_bundle.TRACES)
    monkeypatch.setenv(charts.BUNDLE_ENV, str(write_bundle(tmp_path / "b.js", get_plotlyjs_version())))
    assert charts.serve_bundle() is not None
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(runs_dir))
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.query_params.update(query)
    at.switch_page(f"mrtpo_viz/pages/{name}.py").run()
    assert not at.exception and not at.get("plotly_chart")
    data = [json.loads(e.proto.json) for e in at.get("bidi_component") if e.proto.component_name == "mrtpo_chart"]
    assert len(data) == len(keys) and {d["bundle"] for d in data} == {charts.bundle()[1]}
    assert page_figures(name, query, runs_dir, monkeypatch) == before


@pytest.mark.app
def test_the_first_page_asks_the_browser_for_the_bundle_and_the_components_modules(runs_dir, monkeypatch, tmp_path,
                                                                                  fresh_bundle):
    """With the bundle served, a session's prefetch script (`ui.prefetch`) loads the bundle (at once on a chart
    page) and the charts component's modules, not Streamlit's Plotly module."""
    from mrtpo_viz.ui import prefetch

    monkeypatch.setenv(charts.BUNDLE_ENV, str(write_bundle(tmp_path / "b.js", get_plotlyjs_version())))
    route = charts.serve_bundle()[1]
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(runs_dir))
    assert prefetch.app_modules() == prefetch.app_modules(bundled=True) != prefetch.app_modules(bundled=False)
    assert prefetch.app_modules()[0].startswith("static/js/BidiComponent.")
    for name, when in (("curves", "at-once"), ("credit", "settled")):
        at = AppTest.from_file(APP, default_timeout=60)
        at.switch_page(f"mrtpo_viz/pages/{name}.py").run()
        html = "".join(e.proto.body for e in at.get("html"))
        assert f'data-prefetch="{when}"' in html and json.dumps(route) in html and "__mrtpoLoadPlotly" in html
        assert all(m in html for m in prefetch.app_modules()) and "static/js/PlotlyChart." not in html
