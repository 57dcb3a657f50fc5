"""`mrtpo upgrade` (core.tools.upgrade_run): a schema-1 run rewritten in place in schema 3, reading back the same;
a run being written and a file that would read back differently are left as they were."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from helpers import write_schema_1

from core import cli
from core.run import record
from core.run.store import SCHEMA_VERSION, RunStore, RunWriter, credit_path
from core.tools import upgrade_run as up
from core.tools.bench_store import make_record


def _schema_1_run(tmp_path, steps=(1, 2, 3), state="completed"):
    """A run whose credit maps are schema-1 files (step 2's without `js_skipped`, as the oldest were)."""
    recs = {s: make_record(8, 16, 3, group_size=4, seed=s) for s in steps}
    names = recs[steps[0]].reward_names
    w = RunWriter.create(tmp_path, "old", {"steps": len(steps), "reward_names": names})
    (w.path / "config.json").write_text(json.dumps({**RunStore(w.path).config(), "schema_version": 1}))
    frames = {}
    for s, rec in recs.items():
        rec.step = s
        frame = record.credit_frame(rec)
        if s == 2:
            frame["distance_skipped"] = False
        write_schema_1(w.path, frame, with_skipped=s != 2)
        w.append_metrics({"step": s})
        frames[s] = frame
    w.set_status(state=state, step=max(steps))
    return w.path, frames


def _version(path, step):
    return pq.ParquetFile(credit_path(path, step)).metadata.metadata[b"mrtpo_schema_version"]


def test_frame_difference_names_the_first_differing_column():
    a = pd.DataFrame({"x": [1.0, np.nan], "r": pd.Categorical(["a", "b"]), "n": [1, 2]})
    assert up.frame_difference(a, a.assign(r=["a", "b"])) == ""  # categorical vs text, NaN == NaN
    assert up.frame_difference(a, a.assign(x=[1.0 + 1e-8, np.nan])) == ""  # the same float32
    assert up.frame_difference(a, a.assign(x=[1.001, np.nan])) == "x"
    assert up.frame_difference(a, a.assign(n=[1, 3])) == "n"
    assert up.frame_difference(a, a.assign(r=["a", "c"])) == "r"
    assert up.frame_difference(a, a[["n", "x", "r"]]).startswith("columns")
    assert up.frame_difference(a, a.iloc[:1]) == "2 rows != 1"
    t = pd.DataFrame({"s": ["x", None, "y"]})
    assert up.frame_difference(t, t.astype("category")) == ""  # missing on both sides
    assert up.frame_difference(t, t.assign(s=["x", "y", "y"])) == "s"  # missing on one side only
    assert up.frame_difference(t.assign(s=["x", "y", "y"]), t.astype("category")) == "s"
    assert up.frame_difference(t, pd.DataFrame({"s": pd.Categorical(["x", None, "z"])})) == "s"  # not among y's


def test_a_schema_1_run_is_rewritten_in_schema_3_and_reads_back_the_same(tmp_path, capsys):
    path, frames = _schema_1_run(tmp_path)
    before = RunStore(path)
    index_before = {s: before.credit_index(s) for s in frames}
    metrics_before = (path / "metrics.jsonl").read_bytes()
    assert cli.main(["upgrade", str(path)]) == 0
    assert "3 credit maps rewritten in schema 3" in capsys.readouterr().out
    after = RunStore(path)
    for s, frame in frames.items():
        assert _version(path, s) == str(SCHEMA_VERSION).encode()
        assert up.frame_difference(before.credit(s), after.credit(s)) == ""
        assert up.frame_difference(frame, after.credit(s)) == ""
        pd.testing.assert_frame_equal(after.credit_index(s), index_before[s], check_exact=False, rtol=1e-5,
                                      check_dtype=False)
    assert after.config()["schema_version"] == SCHEMA_VERSION and after.warnings == []
    assert (path / "metrics.jsonl").read_bytes() == metrics_before and after.status()["state"] == "completed"
    assert (path / ".writer.lock").exists()  # the trainer's lock file, there before, is left
    assert not up.writer_lock_held(path)
    done = up.upgrade_run(path)  # again: nothing left to do
    assert done.rewritten == [] and done.current == [1, 2, 3] and done.failed == {}


def test_a_run_being_written_or_no_run_is_refused(tmp_path, capsys):
    path, _ = _schema_1_run(tmp_path, state="running")
    held = RunWriter.open(path)  # the trainer's lock
    try:
        with pytest.raises(ValueError, match="being written"):
            up.upgrade_run(path)
        assert cli.main(["upgrade", str(path), str(tmp_path / "none")]) == 2
        err = capsys.readouterr().err
        assert "being written" in err and "not a run folder (no config.json)" in err
    finally:
        held.close()
    assert _version(path, 1) == b"1"


def test_a_map_that_would_read_back_differently_keeps_its_old_file(tmp_path, monkeypatch, capsys):
    path, _ = _schema_1_run(tmp_path)
    old = credit_path(path, 2).read_bytes()
    real = RunWriter.write_credit

    def wrong_on_step_2(self, step, frame):
        if step == 2:
            frame = frame.assign(weight=frame["weight"] * 2)
        return real(self, step, frame)

    monkeypatch.setattr(RunWriter, "write_credit", wrong_on_step_2)
    assert cli.main(["upgrade", str(path)]) == 2
    err = capsys.readouterr().err
    assert "step 2: the new file reads back differently (weight" in err and "the old one is kept" in err
    assert credit_path(path, 2).read_bytes() == old and _version(path, 1) == _version(path, 3) == b"3"
    assert RunStore(path).config()["schema_version"] == 1  # not every map is of schema 3
    assert not up.writer_lock_held(path)


def test_an_unreadable_map_is_reported_and_the_others_upgraded(tmp_path, capsys):
    path, frames = _schema_1_run(tmp_path)
    credit_path(path, 2).write_bytes(b"PAR1 not really")
    assert cli.main(["upgrade", str(path)]) == 2
    assert "step 2: unreadable" in capsys.readouterr().err
    assert credit_path(path, 2).read_bytes() == b"PAR1 not really" and _version(path, 1) == _version(path, 3) == b"3"
    assert RunStore(path).config()["schema_version"] == 1
