"""metrics.jsonl read in bounded memory and incrementally (core/run/metrics_file.py; issue 29 item 6: a 2 GB sparse
file was read whole on every rerun of every page)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from core.run import metrics_file
from core.run.metrics_file import LINE_MAX_BYTES, MetricsReader
from core.run.store import RunStore, check_metrics_row


def _line(step: int, **values) -> str:
    return json.dumps({"step": step, **values}) + "\n"


@pytest.fixture
def bytes_read(monkeypatch):
    """The number of bytes the reader asks the file for (every read goes through os.pread)."""
    count = [0]
    real = os.pread

    def counting(fd, n, offset):
        data = real(fd, n, offset)
        count[0] += len(data)
        return data

    monkeypatch.setattr(metrics_file.os, "pread", counting)
    return count


def _read(reader: MetricsReader, path: Path):
    rows, problems = reader.read(path, check_metrics_row)
    return [r["step"] for r in rows], problems


def test_a_sparse_hole_is_stepped_over_not_read(tmp_path, bytes_read):
    f = tmp_path / "metrics.jsonl"
    f.write_text("".join(_line(s, loss=0.5) for s in range(1, 9)))
    os.truncate(f, 2 * 10**9)  # 8 real lines, then a 2 GB hole (no disk blocks)
    steps, problems = _read(MetricsReader(), f)
    assert steps == list(range(1, 9))
    assert bytes_read[0] <= 2 * metrics_file.CHUNK_BYTES  # of 2 GB: the hole is never read
    assert problems == ["metrics.jsonl: 2.0 GB of NUL bytes (a hole a crash can leave); skipped"]
    # the trainer goes on writing after the hole: those lines are read, the hole still skipped
    with open(f, "a") as fh:
        fh.write(_line(9))
    steps, _ = _read(MetricsReader(), f)
    assert steps == list(range(1, 10))


def test_a_rerun_parses_only_the_appended_bytes(tmp_path, bytes_read):
    f = tmp_path / "metrics.jsonl"
    f.write_text("".join(_line(s, loss=float(s), pad="x" * 1000) for s in range(1, 201)))
    reader = MetricsReader()
    assert _read(reader, f)[0] == list(range(1, 201))
    first = bytes_read[0]
    assert first >= f.stat().st_size
    assert _read(reader, f)[0] == list(range(1, 201))  # unchanged: nothing parsed again
    assert bytes_read[0] - first < 1000
    with open(f, "a") as fh:
        fh.write(_line(201))
    before = bytes_read[0]
    rows, _ = reader.read(f, check_metrics_row)
    assert [r["step"] for r in rows] == list(range(1, 202)) and rows[0]["loss"] == 1.0
    assert bytes_read[0] - before < 200  # the new line and the few bytes that show the file was not rewritten


def test_a_replaced_or_rewritten_file_is_read_again(tmp_path):
    f = tmp_path / "metrics.jsonl"
    f.write_text(_line(1, loss=1.0) + _line(2, loss=2.0))
    reader = MetricsReader()
    assert _read(reader, f)[0] == [1, 2]
    # resume replaces the file (a new inode) with fewer lines, then appends
    tmp = tmp_path / "new"
    tmp.write_text(_line(1, loss=1.0))
    os.replace(tmp, f)
    assert _read(reader, f)[0] == [1]
    # rewritten in place, longer, with other bytes before the parsed offset
    f.write_text(_line(1, loss=7.0) + _line(5, loss=5.0) + _line(6))
    rows, _ = reader.read(f, check_metrics_row)
    assert [(r["step"], r.get("loss")) for r in rows] == [(1, 7.0), (5, 5.0), (6, None)]
    # rewritten in place with the same size and a later modification time
    text = f.read_text().replace("7.0", "8.0")
    f.write_text(text)
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    rows, _ = reader.read(f, check_metrics_row)
    assert rows[0]["loss"] == 8.0


def test_nul_bytes_separate_lines_and_line_numbers_count_newlines(tmp_path):
    f = tmp_path / "metrics.jsonl"
    # a crash left zeros over the end of line 2; the resumed trainer appended line 3 after them
    f.write_bytes(_line(1).encode() + b'{"step": 2, "lo' + b"\0" * 5000 + _line(3).encode() + b"oops\n" + _line(4).encode())
    steps, problems = _read(MetricsReader(), f)
    assert steps == [1, 3, 4]
    assert problems == ["metrics.jsonl line 2 is not JSON; skipped", "metrics.jsonl line 3 is not JSON; skipped",
                        "metrics.jsonl: 5.0 kB of NUL bytes (a hole a crash can leave); skipped"]


def test_an_overlong_line_is_skipped_without_being_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(metrics_file, "CHUNK_BYTES", 4096)  # the long line spans many chunks
    f = tmp_path / "metrics.jsonl"
    long = _line(2, x="a" * (LINE_MAX_BYTES + 10))
    f.write_text(_line(1) + long + _line(3))
    steps, problems = _read(MetricsReader(), f)
    assert steps == [1, 3]
    assert problems == ["metrics.jsonl: 1 line(s) longer than 1.0 MB (1.0 MB in all); skipped"]


def test_a_torn_last_line_waits_for_its_end(tmp_path):
    f = tmp_path / "metrics.jsonl"
    f.write_text(_line(1) + '{"step": 2, "lo')
    reader = MetricsReader()
    assert _read(reader, f) == ([1], [])  # being written (or torn by a kill): no warning
    with open(f, "a") as fh:
        fh.write('ss": 0.5}\n')
    rows, problems = reader.read(f, check_metrics_row)
    assert [(r["step"], r.get("loss")) for r in rows] == [(1, None), (2, 0.5)] and problems == []
    # a last line that is whole JSON but has no newline yet is read, and read again once it has one
    with open(f, "a") as fh:
        fh.write(_line(3).rstrip("\n"))
    assert _read(reader, f)[0] == [1, 2, 3]
    with open(f, "a") as fh:
        fh.write("\n" + _line(4))
    assert _read(reader, f)[0] == [1, 2, 3, 4]


def test_run_store_metrics_of_a_sparse_2gb_file(tmp_path):
    """The page's reader: 8 steps, the last step from the real lines, the hole named in a warning."""
    run = tmp_path / "r"
    run.mkdir()
    f = run / "metrics.jsonl"
    f.write_text("".join(_line(s, **{"reward/all_satisfied": s / 10}) for s in range(1, 9)))
    os.truncate(f, 2 * 10**9)
    store = RunStore(run)
    assert store.metrics()["step"].tolist() == list(range(1, 9))
    assert store.last_step() == 8
    assert any("NUL bytes" in w for w in store.warnings)
