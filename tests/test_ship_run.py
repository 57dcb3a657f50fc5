"""core.tools.ship_run: a finished run copied with every N-th credit map, readable by the run store."""

from __future__ import annotations

import pandas as pd
import pytest

from core.run.store import RunStore, write_notes
from core.tools import ship_run as ship
from mrtpo_viz.tools.synthetic import write_synthetic_run


def test_shipped_steps_are_every_nth_and_the_last():
    assert ship.shipped_steps([1, 2, 3, 4, 5, 6, 7], 3) == [3, 6, 7]
    assert ship.shipped_steps([1, 2, 3, 4, 5, 6], 3) == [3, 6]
    assert ship.shipped_steps([1, 2], 5) == [2]
    assert ship.shipped_steps([], 5) == []
    assert ship.shipped_steps([1, 2, 3], 1) == [1, 2, 3]
    with pytest.raises(ValueError, match="at least 1"):
        ship.shipped_steps([1], 0)


def test_a_shipped_run_keeps_every_metric_and_the_chosen_credit_maps(tmp_path):
    write_synthetic_run(tmp_path / "runs", "r", steps=7, config={"prompt_set": "/x/wt/sample_data/prompts/m.jsonl"})
    src = tmp_path / "runs" / "r"
    (src / "checkpoints" / "step_000007").mkdir(parents=True)
    (src / "train.log").write_text("log\n")
    write_notes(src, ["study"], "a note")
    assert ship.main([str(src), str(tmp_path / "out" / "r"), "--credit-every", "3"]) == 0
    a, b = RunStore(src), RunStore(tmp_path / "out" / "r")
    assert b.credit_steps() == [3, 6, 7]
    pd.testing.assert_frame_equal(a.metrics(), b.metrics())
    moved = {"run_name": "r", "runs_dir": str((tmp_path / "out").resolve()), "prompt_set": "sample_data/prompts/m.jsonl"}
    assert b.config() == {**a.config(), **moved} and b.status()["state"] == "completed"
    for step in (3, 6, 7):
        pd.testing.assert_frame_equal(a.credit(step), b.credit(step))
    names = sorted(p.name for p in (tmp_path / "out" / "r").iterdir())
    assert names == ["config.json", "credit", "metrics.jsonl", "notes.json", "status.json"]


def test_portable_path_and_a_copy_inside_the_repository():
    assert ship.portable_path("/a/b/sample_data/prompts/x.jsonl") == "sample_data/prompts/x.jsonl"
    assert ship.portable_path("/a/sample_data/b/sample_data/c") == "sample_data/c"
    assert ship.portable_path("/tmp/x.jsonl") == "/tmp/x.jsonl"
    assert ship.portable_path("sample_data/x") == "sample_data/x" and ship.portable_path(3) == 3
    cfg = ship.shipped_config({"run_name": "old", "runs_dir": "/w/runs"}, ship.REPO_ROOT / "sample_data/runs/new")
    assert cfg == {"run_name": "new", "runs_dir": "sample_data/runs"}


def test_a_running_run_or_an_existing_destination_is_refused(tmp_path, capsys):
    write_synthetic_run(tmp_path / "runs", "busy", steps=2, state="running")
    assert ship.main([str(tmp_path / "runs" / "busy"), str(tmp_path / "x")]) == 2
    assert "still being written" in capsys.readouterr().err and not (tmp_path / "x").exists()
    write_synthetic_run(tmp_path / "runs", "done", steps=2)
    (tmp_path / "taken").mkdir()
    assert ship.main([str(tmp_path / "runs" / "done"), str(tmp_path / "taken")]) == 2
    assert "exists already" in capsys.readouterr().err
    assert ship.main([str(tmp_path), str(tmp_path / "y")]) == 2
    assert "not a run folder" in capsys.readouterr().err


def test_a_run_of_schema_1_is_shipped_in_schema_3(tmp_path):
    """The copy's credit maps are schema 3 whatever the source's (the pages read a schema-3 index from the footer),
    and read back as the source's; the source is not changed."""
    import pyarrow.parquet as pq
    from helpers import write_schema_1

    from core.run.store import credit_path
    from core.tools.upgrade_run import frame_difference

    src = write_synthetic_run(tmp_path / "runs", "old", steps=2).path
    for step in (1, 2):
        write_schema_1(src, RunStore(src).credit(step))
    assert ship.main([str(src), str(tmp_path / "out" / "old"), "--credit-every", "1"]) == 0
    a, b = RunStore(src), RunStore(tmp_path / "out" / "old")
    for step in (1, 2):
        assert pq.ParquetFile(credit_path(src, step)).metadata.metadata[b"mrtpo_schema_version"] == b"1"
        assert pq.ParquetFile(credit_path(b.path, step)).metadata.metadata[b"mrtpo_schema_version"] == b"3"
        assert frame_difference(a.credit(step), b.credit(step)) == ""
    assert b.config()["schema_version"] == 3 and b.warnings == []
