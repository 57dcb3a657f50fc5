"""The run store: atomic writes, torn files, crash detection, name safety (real Parquet files)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from core.run.liveness import pid_alive
from core.run.store import (
    CREDIT_COLUMNS,
    CREDIT_SCHEMA,
    SCHEMA_VERSION,
    RunStore,
    RunStoreError,
    RunWriter,
    credit_path,
    list_runs,
    run_dir,
)


def credit_frame(step: int, n_samples: int = 2, rewards=("a", "b"), T: int = 3) -> pd.DataFrame:
    rows = []
    for i in range(n_samples):
        for k in rewards:
            for t in range(T):
                rows.append(
                    dict(step=step, sample=i, group=i // 2, prompt_key=f"p{i}", prompt="Do x.", response="abc",
                         reward=k, score=np.nan if k == "b" and i == 1 else 1.0, group_adv=0.5, t=t, token_id=t,
                         token="abc"[t], start=t, end=t + 1, distance=0.1 * t, weight=1.0, credit=0.25, in_span=t == 1,
                         token_adv=0.5)
                )
    return pd.DataFrame(rows)


def test_run_dir_rejects_escapes(tmp_path):
    assert run_dir(tmp_path, "ok-run_1.x") == (tmp_path / "ok-run_1.x").resolve()
    for bad in ["../x", "a/b", "", ".hidden", "..", "x" * 65, "a b", "/abs", "é"]:
        with pytest.raises(RunStoreError):
            run_dir(tmp_path, bad)


def test_write_and_read_back(tmp_path):
    w = RunWriter.create(tmp_path, "r1", {"method": "mrtpo", "steps": 3, "reward_names": ["a", "b"]})
    with pytest.raises(RunStoreError, match="already exists"):
        RunWriter.create(tmp_path, "r1", {"steps": 3})
    for step in (1, 2):
        w.write_credit(step, credit_frame(step))
        w.append_metrics({"step": step, "reward/a": 0.5 * step, "reward/b": float("nan")})
    w.set_status(state="running", step=2)

    store = RunStore(tmp_path / "r1")
    assert store.config()["schema_version"] == SCHEMA_VERSION == 3
    assert store.reward_names() == ["a", "b"]
    assert store.status()["state"] == "running"  # our own pid is alive
    m = store.metrics()
    assert list(m["step"]) == [1, 2] and m["reward/a"].tolist() == [0.5, 1.0]
    assert m["reward/b"].isna().all()  # NaN stored as null, read back as missing
    assert store.credit_steps() == [1, 2]
    c = store.credit(2)
    assert list(c.columns) == list(CREDIT_COLUMNS)
    assert len(c) == 2 * 2 * 3 and c["step"].eq(2).all()
    assert c["score"].isna().sum() == 3  # sample 1, reward b
    assert store.warnings == []


def test_missing_columns_rejected(tmp_path):
    w = RunWriter.create(tmp_path, "r", {"steps": 1})
    with pytest.raises(RunStoreError, match="lacks columns"):
        w.write_credit(1, credit_frame(1).drop(columns=["distance"]))


def test_torn_and_corrupt_files_warn_not_raise(tmp_path):
    w = RunWriter.create(tmp_path, "r", {"steps": 5})
    w.write_credit(1, credit_frame(1))
    w.append_metrics({"step": 1, "reward/a": 1.0})
    with open(w.path / "metrics.jsonl", "a") as fh:
        fh.write('{"step": 2, "rew')  # killed mid-line
    (w.path / "credit" / "step_000002.parquet").write_bytes(b"PAR1 not really")
    store = RunStore(w.path)
    assert list(store.metrics()["step"]) == [1]
    assert store.credit(2).empty and any("step 2" in x for x in store.warnings)
    (w.path / "config.json").write_text("{not json")
    assert RunStore(w.path).config() == {}


@pytest.mark.subprocess
def test_dead_pid_reads_as_crashed(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    w = RunWriter.create(tmp_path, "r", {"steps": 5})
    w.set_status(state="running", pid=proc.pid)
    (w.path / "train.log").write_text("Traceback...\nRuntimeError: boom\n")
    st = RunStore(w.path).status()
    assert st["state"] == "crashed" and "boom" in st["error"]
    assert not pid_alive(proc.pid) and pid_alive(os.getpid())


def test_truncate_after_for_resume(tmp_path):
    w = RunWriter.create(tmp_path, "r", {"steps": 5})
    for step in (1, 2, 3):
        w.write_credit(step, credit_frame(step))
        w.append_metrics({"step": step})
    w.truncate_after(1)
    store = RunStore(w.path)
    assert store.credit_steps() == [1] and list(store.metrics()["step"]) == [1]


def test_metrics_lines_stay_strict_json_through_a_resume(tmp_path):
    """NaN and inf are written as null, by a step and by the rewrite a resume does (it wrote bare NaN: a strict
    JSON parser failed on every resumed run's metrics lines)."""
    w = RunWriter.create(tmp_path, "r", {"steps": 5})
    for step in (1, 2, 3):
        w.append_metrics({"step": step, "loss/total": float("nan"), "policy/kl": float("inf"), "reward/a": 0.5})
    w.truncate_after(2)

    def strict(constant):
        raise ValueError(f"{constant} in a metrics line")

    lines = [json.loads(line, parse_constant=strict) for line in (w.path / "metrics.jsonl").read_text().splitlines()]
    assert lines == [{"step": s, "loss/total": None, "policy/kl": None, "reward/a": 0.5} for s in (1, 2)]


def test_list_runs_skips_non_runs_and_reports_corrupt(tmp_path):
    RunWriter.create(tmp_path, "good", {"steps": 2, "method": "gdpo"}).set_status(state="completed", step=2)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "status.json").write_text("[]")
    (tmp_path / "not-a-run").mkdir()
    (tmp_path / "file.txt").write_text("x")
    runs = {r.name: r for r in list_runs(tmp_path, tmp_path / "missing")}
    assert set(runs) == {"good", "bad"}
    assert runs["good"].state == "completed" and runs["good"].method == "gdpo"
    assert runs["bad"].warnings
    json.loads((tmp_path / "good" / "status.json").read_text())  # valid JSON on disk


def test_credit_maps_written_before_js_skipped_open_with_it_false(tmp_path):
    """Older run stores (the shipped sample runs among them) are schema-1 files with a `js` column and no
    `js_skipped`: they open with `distance` holding their `js` and `distance_skipped` False, in schema order; a
    frame that marks skipped pairs round-trips."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    w = RunWriter.create(tmp_path, "r", {"steps": 2})
    v1 = {"distance": "js"}  # schema 1's name of the column
    old_schema = pa.schema([f.with_name(v1.get(f.name, f.name)) for f in CREDIT_SCHEMA if f.name != "distance_skipped"],
                           metadata=CREDIT_SCHEMA.metadata)
    old = credit_frame(1).rename(columns=v1)
    assert "js" in old.columns and "distance" not in old.columns
    pq.write_table(pa.Table.from_pandas(old, schema=old_schema, preserve_index=False), credit_path(w.path, 1))
    new = credit_frame(2).assign(distance_skipped=lambda f: f["reward"] == "b")
    new.loc[new["distance_skipped"], "distance"] = np.nan
    w.write_credit(2, new)
    store = RunStore(w.path)
    c1, c2 = store.credit(1), store.credit(2)
    assert list(c1.columns) == list(CREDIT_COLUMNS) == list(c2.columns)
    assert "js" not in c1.columns and c1["distance"].tolist() == pytest.approx(old["js"].tolist())
    assert not c1["distance_skipped"].any() and c1["distance_skipped"].dtype == bool
    assert c2["distance_skipped"].tolist() == new["distance_skipped"].tolist()
    assert c2.loc[c2["distance_skipped"], "distance"].isna().all()
    assert store.credit_index(1)["distance_computed"].all() and store.credit_summary(1)["n"].sum() == len(old)
    assert store.warnings == []


def test_the_writer_takes_a_long_frame_with_schema_1_names(tmp_path):
    """A long frame built before the rename (`js`, `js_skipped`) writes as one with `distance`, `distance_skipped`."""
    w = RunWriter.create(tmp_path, "r", {"steps": 2})
    frame = credit_frame(1).assign(distance_skipped=lambda f: f["reward"] == "b")
    w.write_credit(1, frame)
    w.write_credit(2, frame.assign(step=2).rename(columns={"distance": "js", "distance_skipped": "js_skipped"}))
    w.append_metrics({"step": 2})
    store = RunStore(w.path)
    one, two = store.credit(1), store.credit(2)
    pd.testing.assert_frame_equal(one.drop(columns="step"), two.drop(columns="step"))


def test_last_step_reads_the_tail_only(tmp_path, monkeypatch):
    """The run list's step comes from the end of metrics.jsonl (a torn last line ignored), and equals what
    reading the whole file gives; a file of one very long line still works."""
    from core.run import store_read as store_lib

    w = RunWriter.create(tmp_path, "r", {"steps": 500})
    for step in range(1, 301):
        w.append_metrics({"step": step, "reward/a": step / 300, "pad": "x" * 300})
    with open(w.path / "metrics.jsonl", "a") as fh:
        fh.write('{"step": 301, "rew')  # killed mid-line
    store = RunStore(w.path)
    assert store.last_step() == 300 == int(store.metrics()["step"].max())
    assert {r.name: r.step for r in list_runs(tmp_path)}["r"] == 300
    monkeypatch.setattr(store_lib, "_TAIL_BYTES", 100)  # shorter than one line: falls back to the whole file
    assert RunStore(w.path).last_step() == 300
    assert RunStore(tmp_path / "missing").last_step() == 0


def test_the_schema_version_is_stated_once_and_is_one_the_readers_read():
    """One number (`core.run.schema.SCHEMA_VERSION`) is config.json's schema_version and the credit files'
    mrtpo_schema_version; the store and the credit file format take it from there, and the readers read it."""
    from core.run import credit_format, schema, store

    assert store.SCHEMA_VERSION is schema.SCHEMA_VERSION
    assert not hasattr(credit_format, "VERSION")  # the second statement of the number is gone
    assert schema.SCHEMA_VERSION in schema.READABLE_VERSIONS and str(schema.SCHEMA_VERSION) in schema.COLUMNAR_VERSIONS
