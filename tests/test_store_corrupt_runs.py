"""Corrupt run folders: the run-store readers never raise and name the bad file or line in a warning; each corrupt
run folder, beside a good run, on every page of the app (Streamlit AppTest, the corrupt run selected): no page may
raise and the good run stays listed (issue 16, "One bad run folder takes down every page"); a recycled pid is not
a running trainer."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from streamlit.testing.v1 import AppTest

from core.run import credit_format
from core.run.store import RunStore, RunWriter, credit_path, list_runs
from mrtpo_viz import ui
from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
PAGES = ("runs", "curves", "credit", "js", "debugger", "compare", "launch")


def _append(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text)


def _status(run: Path, **fields) -> None:
    st = json.loads((run / "status.json").read_text())
    st.update(fields)
    (run / "status.json").write_text(json.dumps(st))


def _credit(run: Path, change) -> None:
    """Rewrite every credit map of the run with `change(frame) -> pa.Table`, `frame` the step's long frame (a
    file in the layout of schema 1, without its version)."""
    store = RunStore(run)
    for f in sorted((run / "credit").glob("step_*.parquet")):
        frame = store.credit(int(f.stem.split("_")[1]))
        frame = frame.assign(**{c: frame[c].astype(str) for c in frame.columns
                                if isinstance(frame[c].dtype, pd.CategoricalDtype)})
        pq.write_table(change(frame), f)


def _credit_v2(run: Path, change) -> None:
    """Rewrite every credit map of the run (schema 2) with `change(table) -> pa.Table`, keeping its metadata
    unless `change` replaces it."""
    for f in sorted((run / "credit").glob("step_*.parquet")):
        pq.write_table(change(pq.read_table(f)), f)


def _zstd(raw: bytes, size: int | None = None) -> bytes:
    """A schema-3 index value holding `raw` (zstd, base64) and the JSON length `size` it declares."""
    return (b"zstd:" + str(len(raw) if size is None else size).encode() + b":"
            + base64.b64encode(pa.compress(raw, codec="zstd", asbytes=True)))


def _footer(run: Path, value_of) -> None:
    """Replace every credit map's footer index (schema 3) with `value_of(index dict) -> bytes`, rows kept."""
    for f in sorted((run / "credit").glob("step_*.parquet")):
        t = pq.read_table(f)
        index = credit_format.unpack_index(t.schema.metadata[credit_format.INDEX_KEY])
        pq.write_table(t.replace_schema_metadata({**t.schema.metadata,
                                                  credit_format.INDEX_KEY: value_of(index)}), f)


def _index_json(index: dict, **fields) -> bytes:
    """The index's JSON with `fields` changed; a field's value "1e999" is written as that bare JSON number."""
    text = json.dumps({**index, **{k: "<inf>" if v == "1e999" else v for k, v in fields.items()}})
    return text.replace('"<inf>"', "1e999").encode()


DEEP = b"[" * 200_000 + b"]" * 200_000  # JSON nested 200,000 deep (a zstd footer of under 1 KB)


def _table(frame: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(frame, preserve_index=False)


# name -> what it does to a good run folder (issue 16's cases first, then others)
CORRUPTIONS = {
    "metrics-step-nan": lambda r: _append(r / "metrics.jsonl", '{"step": NaN}\n'),
    "metrics-step-1e400": lambda r: _append(r / "metrics.jsonl", '{"step": 1e400}\n'),
    "status-numeric-updated-at": lambda r: _status(r, updated_at=1733000000),
    "status-text-step-no-metrics": lambda r: (_status(r, step="three"), (r / "metrics.jsonl").unlink()),
    "credit-no-token": lambda r: _credit(r, lambda f: _table(f.drop(columns=["token"]))),
    "credit-only-step": lambda r: _credit(r, lambda f: pa.table({"step": pa.array(f["step"], pa.int32())})),
    "credit-sample-text": lambda r: _credit(r, lambda f: _table(f.assign(sample="0x"))),
    "metrics-non-object-lines": lambda r: _append(r / "metrics.jsonl", '[1, 2]\n"step"\n7\nnull\n'),
    # others
    "metrics-step-text": lambda r: _append(r / "metrics.jsonl", '{"step": "4", "reward/all_satisfied": 0.5}\n'),
    "metrics-step-bool-and-negative": lambda r: _append(r / "metrics.jsonl", '{"step": true}\n{"step": -3}\n'),
    "metrics-value-text": lambda r: _append(r / "metrics.jsonl", '{"step": 4, "reward/all_satisfied": "high", '
                                                              '"loss/total": [1]}\n'),
    "status-fields-mistyped": lambda r: _status(r, state=["running"], total_steps="lots", pid="me", error=7),
    "status-not-object": lambda r: (r / "status.json").write_text("[1, 2]"),
    "config-fields-mistyped": lambda r: (r / "config.json").write_text(json.dumps(
        {**json.loads((r / "config.json").read_text()), "method": 5, "model": {"a": 1}, "reward_names": "x",
         "steps": "many", "group_size": "four"})),
    "config-list": lambda r: (r / "config.json").write_text("[1]"),
    "credit-values-nan-inf": lambda r: _credit(r, lambda f: _table(f.assign(credit=float("nan"),
                                                                              score=float("inf")))),
    "credit-dir-is-file": lambda r: (__import__("shutil").rmtree(r / "credit"), (r / "credit").write_text("x")),
    "credit-file-is-dir": lambda r: (credit_path(r, 2).unlink(), credit_path(r, 2).mkdir()),
    "metrics-is-dir": lambda r: ((r / "metrics.jsonl").unlink(), (r / "metrics.jsonl").mkdir()),
    "status-pid-huge": lambda r: _status(r, state="running", pid=2**80),
    # schema 3 (columnar): the index or a column gone, a column of another type, the index not JSON
    "credit-v2-no-index": lambda r: _credit_v2(r, lambda t: t.replace_schema_metadata(
        {k: v for k, v in t.schema.metadata.items() if k != b"mrtpo_credit_index"})),
    "credit-v2-no-end": lambda r: _credit_v2(r, lambda t: t.drop(["end"])),
    "credit-v2-no-credit": lambda r: _credit_v2(r, lambda t: t.drop(
        [c for c in ("credit", "credit_scale") if c in t.column_names])),
    "credit-v2-text-sample": lambda r: _credit_v2(r, lambda t: t.set_column(
        0, "sample", pa.array(["x"] * t.num_rows))),
    "credit-v2-index-garbage": lambda r: _credit_v2(r, lambda t: t.replace_schema_metadata(
        {**t.schema.metadata, b"mrtpo_credit_index": b"{not json"})),
    "credit-v3-index-not-zstd": lambda r: _credit_v2(r, lambda t: t.replace_schema_metadata(
        {**t.schema.metadata, b"mrtpo_credit_index": b"zstd:99:bm90IHpzdGQ="})),
    # token positions no response has (issue 29 item 5: a negative t broke the pages, 2**31 - 1 asked for 16 GiB)
    "credit-t-negative": lambda r: _credit(r, lambda f: _table(f.assign(t=-1 - f["t"]))),
    "credit-t-huge": lambda r: _credit(r, lambda f: _table(f.assign(t=f["t"].where(f.index != 0, 2**31 - 1)))),
    "credit-v2-t-negative": lambda r: _credit_v2(r, lambda t: t.set_column(
        t.schema.get_field_index("t"), "t", pa.array(-1 - t.column("t").to_numpy(), pa.int32()))),
    # issue 29 item 6: a 2 GB sparse hole after the real lines was read whole on every rerun (4.2 GB RSS); NUL
    # bytes a crash left mid-file; one line of 2 MB
    "metrics-sparse-hole-2gb": lambda r: os.truncate(r / "metrics.jsonl", 2 * 10**9),
    "metrics-nul-run": lambda r: _append(r / "metrics.jsonl", "\0" * 100_000 + '{"step": 3}\n'),
    "metrics-line-2mb": lambda r: _append(r / "metrics.jsonl", '{"step": 3, "x": "' + "a" * 2_000_000 + '"}\n'),
    # issue 45 class 1: a footer index that parses but cannot be trusted, or asks for too much to be parsed
    "credit-v3-index-deep-json": lambda r: _footer(r, lambda ix: DEEP),
    "credit-v3-index-deep-zstd": lambda r: _footer(r, lambda ix: _zstd(DEEP)),
    "credit-v3-index-length-2**40": lambda r: _footer(r, lambda ix: _zstd(_index_json(
        ix, length=[2**40, *ix["length"][1:]]))),
    "credit-v3-index-sample-2**40": lambda r: _footer(r, lambda ix: _zstd(_index_json(
        ix, sample=[2**40, *ix["sample"][1:]]))),
    "credit-v3-index-sample-1e999": lambda r: _footer(r, lambda ix: _zstd(_index_json(
        ix, sample=["1e999", *ix["sample"][1:]]))),
    "credit-v3-index-zstd-size-negative": lambda r: _footer(r, lambda ix: _zstd(_index_json(ix), size=-5)),
    "credit-v3-index-zstd-size-huge": lambda r: _footer(r, lambda ix: _zstd(_index_json(ix), size=999999999999)),
    "credit-v3-index-summary-list": lambda r: _footer(r, lambda ix: _zstd(_index_json(
        ix, distance_summary=[1, 2]))),
}
FOOTER_CASES = [c for c in CORRUPTIONS if c.startswith("credit-v3-index-") and c != "credit-v3-index-not-zstd"]
# case -> the file a warning must name (None: the values are odd but allowed, no warning needed)
NAMED = {case: case.split("-")[0] + (".jsonl" if case.startswith("metrics") else
                                      "" if case.startswith("credit") else ".json") for case in CORRUPTIONS}
NAMED.update({"credit-values-nan-inf": None, "credit-dir-is-file": "credit", "status-pid-huge": "status.json"})
NAMED.update(dict.fromkeys(FOOTER_CASES, "credit/step_000001.parquet"))


@pytest.fixture(scope="module")
def corrupt_dirs(tmp_path_factory):
    """case -> runs directory holding a good run and the corrupt one ("bad")."""
    out = {}
    for case, corrupt in CORRUPTIONS.items():
        root = tmp_path_factory.mktemp(case)
        write_synthetic_run(root, "good", steps=2, rewards=DEFAULT_REWARDS[:2], n_tokens=6)
        bad = write_synthetic_run(root, "bad", steps=2, rewards=DEFAULT_REWARDS[:2], n_tokens=6, seed=1).path
        corrupt(bad)
        out[case] = root
    return out


@pytest.mark.parametrize("case", list(CORRUPTIONS))
def test_reader_never_raises_and_names_the_problem(case, corrupt_dirs):
    root = corrupt_dirs[case]
    runs = {r.name: r for r in list_runs(root)}
    assert {"good", "bad"} <= set(runs)
    assert not runs["good"].warnings
    store = RunStore(root / "bad")
    store.config(), store.status(), store.metrics(), store.last_step()
    for step in store.credit_steps():
        df = store.credit(step)
        assert {"token", "sample", "reward", "credit"} <= set(df.columns)
        if len(df):  # every position kept is one a response of this file can have
            assert df["t"].min() >= 0 and df["t"].max() < len(df)
        index = store.credit_index(step)
        assert {"sample", "reward", "score", "length"} <= set(index.columns)
        store.credit_tokens(step, samples=index["sample"].iloc[:1].tolist())
        summary = store.credit_summary(step)
        assert {"reward", "where", "n", "median"} <= set(summary.columns)
    assert isinstance(runs["bad"].step, int) and isinstance(runs["bad"].state, str)
    assert runs["bad"].updated_at is None or isinstance(runs["bad"].updated_at, str)
    if NAMED[case]:
        assert any(NAMED[case] in w for w in store.warnings + runs["bad"].warnings), (store.warnings, runs["bad"])


@pytest.mark.parametrize("case", FOOTER_CASES)
@pytest.mark.parametrize("reader", ["credit_index", "credit_tokens", "credit_summary", "credit"])
def test_an_untrusted_footer_index_skips_the_step_with_one_warning(case, reader, corrupt_dirs):
    """Issue 45, class 1: each reader of a step whose footer index is corrupt returns an empty frame (the step is
    skipped) with exactly one warning, naming the file; the good run's same step reads as before."""
    root = corrupt_dirs[case]
    store = RunStore(root / "bad")
    out = getattr(store, reader)(1)
    assert out.empty if reader != "credit_summary" else out["n"].isna().all() or out.empty
    named = [w for w in store.warnings if "credit/step_000001.parquet" in w]
    assert len(named) == 1 and len(store.warnings) == 1, store.warnings
    good = RunStore(root / "good")
    assert not getattr(good, reader)(1).empty and not good.warnings


@pytest.mark.app
@pytest.mark.parametrize("case", list(CORRUPTIONS))
@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_with_a_corrupt_run_selected(case, page, corrupt_dirs, monkeypatch):
    root = corrupt_dirs[case]
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(root))
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state[ui.RUN_KEY] = str(root / "bad")
    at.run()
    assert not at.exception, at.exception
    if page != "runs":
        at.switch_page(f"mrtpo_viz/pages/{page}.py").run()
    assert not at.exception, at.exception


@pytest.mark.subprocess
def test_pid_recycled_is_not_running(tmp_path):
    """A status of `running` whose pid now belongs to another process (not the trainer that started the run)
    is reported crashed: the pid's start time differs from the one recorded."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        w = write_synthetic_run(tmp_path, "recycled", steps=1, state="running", pid=proc.pid)
        _status(w.path, pid_started="0")  # the trainer that wrote this started at another time
        assert RunStore(w.path).status()["state"] == "crashed"
        w2 = write_synthetic_run(tmp_path, "legacy", steps=1, state="running", pid=proc.pid)
        st = json.loads((w2.path / "status.json").read_text())
        st.pop("pid_started", None)
        (w2.path / "status.json").write_text(json.dumps(st))
        # no recorded start time: the command line must look like a trainer (this one is `python -c ...`)
        assert RunStore(w2.path).status()["state"] == "crashed"
    finally:
        proc.kill()
        proc.wait()


def test_a_live_trainer_pid_is_running(tmp_path):
    from core.run.store import RunWriter

    w = RunWriter.create(tmp_path, "mine", {"steps": 2})  # this process wrote it, so its identity is recorded
    w.set_status(state="running")
    assert RunStore(w.path).status()["state"] == "running", os.getpid()


def test_credit_without_metrics_line_is_not_a_step(tmp_path):
    """A kill between a step's credit file and its metrics line leaves a credit file: not a step yet."""
    w = write_synthetic_run(tmp_path, "torn", steps=2)
    from mrtpo_viz.tools.synthetic import synthetic_credit_frame

    w.write_credit(3, synthetic_credit_frame(3, 8, 6, DEFAULT_REWARDS[:2], 4, 0, True))
    assert RunStore(w.path).credit_steps() == [1, 2]


def test_readers_follow_no_link_out_of_a_run(tmp_path):
    """A crashed run whose train.log links to another file (e.g. /etc/passwd) shows none of it: not in the error,
    not in the log tail; linked metrics and credit files are not read either, and a run folder that links to
    another place is not listed. Each refusal is a warning naming the file."""
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "passwd"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
    runs = tmp_path / "runs"
    w = RunWriter.create(runs, "crashed", {"steps": 3})
    w.set_status(state="running", pid=2**22 + 5)  # no such process: the run is crashed
    (w.path / "train.log").symlink_to(secret)
    store = RunStore(w.path)
    status = store.status()
    assert status["state"] == "crashed" and "root:x" not in str(status.get("error"))
    assert store.log_tail() == ""
    assert any("train.log is a symbolic link" in m for m in store.warnings)

    (outside / "metrics.jsonl").write_text('{"step": 1, "reward/all_satisfied": 0.5}\n')
    (w.path / "metrics.jsonl").symlink_to(outside / "metrics.jsonl")
    assert store.metrics().empty and store.last_step() == 0

    real = RunWriter.create(outside, "elsewhere", {"steps": 1})
    real.set_status(state="completed", step=1)
    (runs / "linked").symlink_to(real.path)
    assert [r.name for r in list_runs(runs)] == ["crashed"]
