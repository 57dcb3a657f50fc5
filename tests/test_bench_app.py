"""`mrtpo bench app`'s table and its judgement against issue 26's targets (mrtpo_viz.tools.bench_app), on results
written for the test (the browser visits themselves run in `mrtpo bench app`), and its `--script-run` timing of
scripts written for the test, in Chromium."""

from __future__ import annotations

import json
import os

import pytest

from mrtpo_viz.tools.bench_app import (
    CHROMIUM,
    FLOOR_PAGE,
    OVER,
    over_table,
    paired_over,
    script_run_ms,
    table,
    target_misses,
    turns,
)


def cells(cold, landing, warm, reload=1.0):
    return {"cold": cold, "landing": landing, "warm": warm, "reload": [reload]}


RESULTS = {
    "tiny": {FLOOR_PAGE: cells([0.9, 1.1, 1.0], [None], [None]),
             "runs": cells([1.9], [None], [0.2]),
             "curves": cells([2.1, 1.95, 2.4], [0.5], [0.3, 0.6, 0.7])},
    "synthetic": {"runs": cells([2.05], [None], [0.5]),
                  "curves": cells([None], [0.45], [0.51])},
}


def test_misses_are_cold_over_the_floor_plus_one_second_and_in_app_over_half_a_second():
    # floor cold median 1.0 -> cold limit 2.0; curves tiny cold median 2.1 misses, runs tiny 1.9 does not;
    # warm medians 0.6 (tiny) and 0.51 (synthetic) miss, 0.5 exactly does not; a page never shown misses;
    # landing is not judged on Runs (the first page) and is met at 0.5 and 0.45
    assert target_misses(RESULTS, ["runs", "curves"]) == [
        "runs synthetic cold: 2.050 s (<= 2.00 s)",
        "curves tiny cold: 2.100 s (<= 2.00 s)", "curves tiny warm: 0.600 s (<= 0.50 s)",
        "curves synthetic cold: not shown (<= 2.00 s)", "curves synthetic warm: 0.510 s (<= 0.50 s)"]
    assert target_misses({"t": {"js": cells([1.0], [0.502], [0.5])}}, ["js"]) == ["js t landing: 0.502 s (<= 0.50 s)"]


def test_without_the_floor_row_cold_is_not_judged():
    without = {run: {p: c for p, c in by_page.items() if p != FLOOR_PAGE} for run, by_page in RESULTS.items()}
    assert target_misses(without, ["runs", "curves"]) == [
        "curves tiny warm: 0.600 s (<= 0.50 s)", "curves synthetic warm: 0.510 s (<= 0.50 s)"]


def test_each_runs_cold_visits_are_judged_against_the_floor_measured_with_them():
    # the machine slowed between the runs: tiny's floor 1.0 (limit 2.0), synthetic's 1.2 (limit 2.2)
    per_run = {"tiny": RESULTS["tiny"], "synthetic": {**RESULTS["synthetic"], FLOOR_PAGE: cells([1.2], [None], [None]),
                                                      "curves": cells([2.15], [0.45], [0.3])}}
    assert target_misses(per_run, ["runs", "curves"]) == [
        "curves tiny cold: 2.100 s (<= 2.00 s)", "curves tiny warm: 0.600 s (<= 0.50 s)"]
    text = table(per_run, ["runs", "curves"], floor=True).splitlines()
    assert text[2] == "| streamlit floor (one `st.title`) | 1.00 s | n/a | n/a | 1.00 s | 1.20 s | n/a | n/a | 1.00 s |"


def test_with_paired_floor_visits_cold_is_judged_on_each_visits_seconds_over_its_own_floor():
    assert paired_over(1.9, 0.85) == 1.9 - 0.85 and paired_over(None, 0.8) is None and paired_over(1.2, None) is None
    # tiny's floor row (1.0) would pass curves' cold 1.95 but its paired visits are 0.95, 1.1, 1.05 over theirs:
    # median 1.05 misses; synthetic's 0.9 and 1.0 over (median 0.95) pass although its cold was not shown once
    paired = {"tiny": {**RESULTS["tiny"], "curves": {**cells([1.95], [0.4], [0.3]), OVER: [0.95, 1.1, 1.05]}},
              "synthetic": {"curves": {**cells([None, 1.9, 2.0], [0.4], [0.3]), OVER: [0.9, 1.0]}}}
    assert target_misses(paired, ["curves"]) == ["curves tiny cold over its floor: 1.050 s (<= 1.00 s)"]
    assert over_table(paired, ["curves"], spread=True).splitlines() == [
        "| page | tiny cold over its floor | synthetic cold over its floor |", "|---|---|---|",
        "| curves | 1.05 s (0.95-1.10) | 0.95 s (0.90-1.00) |"]


def test_the_table_has_the_floor_under_the_first_run_and_medians():
    text = table(RESULTS, ["runs", "curves"], floor=True).splitlines()
    assert text[0] == ("| page | tiny cold | tiny landing | tiny warm | tiny reload | synthetic cold | synthetic landing"
                       " | synthetic warm | synthetic reload |")
    assert text[2] == "| streamlit floor (one `st.title`) | 1.00 s | n/a | n/a | 1.00 s |  |  |  |  |"
    assert text[4] == "| curves | 2.10 s | 0.50 s | 0.60 s | 1.00 s | n/a | 0.45 s | 0.51 s | 1.00 s |"


def test_the_table_gives_each_cells_range_with_spread():
    text = table(RESULTS, ["runs", "curves"], floor=True, spread=True).splitlines()
    assert text[2] == "| streamlit floor (one `st.title`) | 1.00 s (0.90-1.10) | n/a | n/a | 1.00 s |  |  |  |  |"
    # one visit: no range; a visit that did not show the page: n/a
    assert text[4] == ("| curves | 2.10 s (1.95-2.40) | 0.50 s | 0.60 s (0.30-0.70) | 1.00 s | n/a | 0.45 s | 0.51 s"
                       " | 1.00 s |")


def test_checkouts_take_turns_page_by_page_or_visit_by_visit():
    sides = ["before", "after"]
    assert turns(sides, 0, 3, False) == [("before", 3), ("after", 3)]
    assert turns(sides, 1, 3, False) == [("after", 3), ("before", 3)]
    assert turns(sides, 0, 3, True) == [("before", 1), ("after", 1), ("after", 1), ("before", 1), ("before", 1),
                                        ("after", 1)]
    assert turns(sides, 1, 2, True) == [("after", 1), ("before", 1), ("before", 1), ("after", 1)]
    assert turns([""], 0, 2, True) == [("", 1), ("", 1)]  # one checkout: its visits, one at a time


def test_the_bench_waits_for_what_the_apps_settled_check_waits_for():
    from mrtpo_viz.tools import bench_app_visits
    from mrtpo_viz.ui import prefetch

    assert json.loads(bench_app_visits._CHARTS) == prefetch.CHART_SELECTOR
    assert json.loads(bench_app_visits._DRAWN) == prefetch.DRAWN_SELECTOR


@pytest.mark.browser
def test_script_run_times_each_files_run_in_chromium(tmp_path):
    """`mrtpo bench app --script-run`: each file is run in Chromium (a script that spins 150 ms is timed at 150 ms
    or more; the empty one at less), the files taking turns, `repeat` times each."""
    from helpers import require

    require(os.access(CHROMIUM, os.X_OK), "no Chromium", "apt-get install chromium")
    spin = tmp_path / "spin.js"
    spin.write_text("window.spun = 0; const t0 = performance.now(); while (performance.now() - t0 < 150) spun++;")
    empty = tmp_path / "empty.js"
    empty.write_text("window.ran = true;")
    times = script_run_ms([spin, empty], repeat=2)
    assert list(times) == [spin, empty] and all(len(ms) == 2 for ms in times.values())
    assert min(times[spin]) >= 150 and max(times[empty]) < min(times[spin])
