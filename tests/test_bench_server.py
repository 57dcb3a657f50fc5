"""`mrtpo bench app --server-only` (mrtpo_viz.tools.bench_server): a page's server-side script run, in a
fresh interpreter, reports its imports, cold and warm CPU ms (and wall seconds, memory, Parquet rows read), and
a page that raises is an error, not a number."""

from __future__ import annotations

from pathlib import Path

import pytest

from mrtpo_viz.tools import bench_server
from mrtpo_viz.tools.synthetic import write_synthetic_run

pytestmark = pytest.mark.subprocess  # every test runs a page in a fresh interpreter

ROOT = Path(__file__).resolve().parent.parent


def test_page_cpu_ms_runs_the_page_and_the_table_has_its_row(tmp_path):
    write_synthetic_run(tmp_path, "bench", steps=3)
    r = bench_server.page_cpu_ms(ROOT, tmp_path, "curves")
    assert r["titles"] == ["Training curves"]
    assert r["imports"] > 0 and r["cold"] > 0 and r["warm"] > 0
    # wall seconds, the process's memory, and no credit rows read: Training curves draws from metrics.jsonl
    assert r["cold_s"] > 0 and r["warm_s"] > 0 and r["peak_mb"] >= r["rss_mb"] > 50 and r["cold_rows"] == 0
    text = bench_server.table({"run": {"curves": {k: [r[k]] for k in bench_server.KINDS}}}, ["curves"])
    assert text.splitlines()[0] == "| page | run imports | run cold | run warm |"
    assert text.splitlines()[2] == f"| curves | {r['imports']:.0f} | {r['cold']:.0f} | {r['warm']:.0f} |"


def test_a_page_that_fails_is_an_error(tmp_path):
    with pytest.raises(RuntimeError, match="nosuchpage"):
        bench_server.page_cpu_ms(ROOT, tmp_path, "nosuchpage")
