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


# issue 45, class 3: what `mrtpo upgrade` did with an empty config.json, a map past the last metrics step, an
# unreadable schema-3 map, and a kill halfway through a run that had no lock file


def test_an_empty_config_is_named_before_any_map_is_rewritten(tmp_path, capsys):
    path, _ = _schema_1_run(tmp_path)
    (path / "config.json").write_text("")
    assert cli.main(["upgrade", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "config.json" in err and "nothing was rewritten" in err, err
    assert {_version(path, s) for s in (1, 2, 3)} == {b"1"}


def test_a_map_past_the_last_metrics_step_is_upgraded_too(tmp_path, capsys):
    path, _ = _schema_1_run(tmp_path)
    rec = make_record(8, 16, 3, group_size=4, seed=4)
    rec.step = 4
    write_schema_1(path, record.credit_frame(rec))  # a step killed between its credit file and its metrics line
    assert cli.main(["upgrade", str(path)]) == 0
    assert "4 credit maps rewritten" in capsys.readouterr().out
    assert _version(path, 4) == b"3" and RunStore(path).config()["schema_version"] == SCHEMA_VERSION


def test_an_unreadable_schema_3_map_is_not_already_of_it(tmp_path, capsys):
    path, _ = _schema_1_run(tmp_path)
    assert cli.main(["upgrade", str(path)]) == 0
    capsys.readouterr()
    f = credit_path(path, 2)
    t = pq.read_table(f)
    pq.write_table(t.replace_schema_metadata({**t.schema.metadata, b"mrtpo_credit_index": b"zstd:-5:AAAA"}), f)
    assert cli.main(["upgrade", str(path)]) == 2
    out, err = capsys.readouterr()
    assert "2 already of it" in out and "step 2: unreadable" in err and "credit/step_000002.parquet" in err


@pytest.mark.subprocess
def test_an_upgrade_killed_halfway_leaves_no_lock_file_once_rerun(tmp_path, capsys):
    """A run that had no `.writer.lock` (the shipped runs) has none after an upgrade that was killed (kill -9 at
    its second map) and then run again."""
    import subprocess
    import sys

    path, frames = _schema_1_run(tmp_path)
    (path / ".writer.lock").unlink()
    code = ("import os, signal, sys\n"
            "from core.run.store import RunWriter\n"
            "from core.tools import upgrade_run as up\n"
            "real = RunWriter.write_credit\n"
            "def write(self, step, frame):\n"
            "    if step == 2:\n"
            "        os.kill(os.getpid(), signal.SIGKILL)\n"
            "    return real(self, step, frame)\n"
            "RunWriter.write_credit = write\n"
            "up.upgrade_run(sys.argv[1])\n")
    killed = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert _version(path, 1) == b"3" and _version(path, 2) == b"1"
    assert cli.main(["upgrade", str(path)]) == 0
    assert not (path / ".writer.lock").exists()
    assert {_version(path, s) for s in frames} == {b"3"}
