"""Reading `metrics.jsonl` in bounded memory, and only what was appended since the last read.

A page reruns every second while a run trains, and the file only grows: `MetricsReader` keeps, per file, the byte
offset it has parsed up to and the rows before it, and on the next read parses only the bytes after that offset.
It starts again from the top when the file was replaced (resume rewrites it atomically: a new inode), truncated,
or rewritten in place (the bytes just before the offset changed).

Guards against a file that is not what the trainer writes (docs/CONTRACTS.md, "What the readers follow"):
- the file is read in 1 MiB chunks, never whole;
- NUL bytes separate lines like a newline: a crash can leave a run of NULs in a file (a hole, or blocks allocated
  but never written), and a sparse hole is stepped over with `SEEK_DATA` without reading it;
- a line longer than `LINE_MAX_BYTES` is skipped without being held in memory;
each with one warning that says how many bytes were skipped.

Never imports torch or streamlit.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHUNK_BYTES = 1 << 20
LINE_MAX_BYTES = 1 << 20  # a metrics line is a few KB (one step's numbers); 1 MiB is far beyond any real one
_CHECK_BYTES = 64  # the bytes just before the parsed offset, compared on each read to notice a rewrite in place
_KEEP_FILES = 16  # how many files' parsed rows one reader keeps


def _fmt_bytes(n: int) -> str:
    """A byte count for a warning: '512 B', '3.0 MB', '2.1 GB'."""
    if n < 1000:
        return f"{n} B"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"  # pragma: no cover


@dataclass
class Lines:
    """What one pass over the bytes `[start, end)` found: the complete lines (their 1-based numbers and bytes),
    where the next pass starts (just after the last separator), and the bytes skipped as NULs or overlong lines."""

    lines: list[tuple[int, bytes]] = field(default_factory=list)
    tail: bytes = b""  # the bytes after the last separator (a line still being written, or torn by a kill)
    next_offset: int = 0
    next_line_no: int = 1
    nul_bytes: int = 0
    long_lines: int = 0
    long_bytes: int = 0


_SEPARATOR = re.compile(rb"\n|\0+")


def scan_lines(fd: int, start: int, line_no: int, size: int) -> Lines:
    """Split the bytes of an open file from `start` to `size` into lines, in chunks: a newline or a run of NUL bytes
    ends a line (only newlines count in the line numbers), blank lines are dropped, a line over `LINE_MAX_BYTES`
    is counted and dropped, and a sparse hole at a line's start is stepped over (`os.SEEK_DATA`) without reading."""
    out = Lines(next_offset=start, next_line_no=line_no)
    pending = bytearray()  # the current line's bytes so far
    long_len = 0  # > 0: the current line is past LINE_MAX_BYTES; its bytes are counted, not kept
    line_start = pos = start
    while pos < size:
        if not pending and not long_len:
            data = _next_data(fd, pos, size)
            if data > pos:
                out.nul_bytes += data - pos
                line_start = pos = data
                continue
        chunk = os.pread(fd, min(CHUNK_BYTES, size - pos), pos)
        if not chunk:
            break
        at = 0
        for m in _SEPARATOR.finditer(chunk):
            long_len = _extend(pending, long_len, chunk[at:m.start()])
            if long_len:
                out.long_lines += 1
                out.long_bytes += long_len
                long_len = 0
            elif pending.strip():
                out.lines.append((out.next_line_no, bytes(pending)))
            pending.clear()
            if m.group() == b"\n":
                out.next_line_no += 1
            else:
                out.nul_bytes += m.end() - m.start()
            at = m.end()
            line_start = pos + at
        long_len = _extend(pending, long_len, chunk[at:])
        pos += len(chunk)
    if long_len:  # an overlong line still being written: skipped for good, the next read starts after it
        out.long_lines += 1
        out.long_bytes += long_len
        out.next_offset = pos
    else:
        out.tail = bytes(pending)
        out.next_offset = line_start
    return out


def _extend(pending: bytearray, long_len: int, part: bytes) -> int:
    """Add `part` to the current line; returns its length once it is past LINE_MAX_BYTES (then only counted)."""
    if long_len:
        return long_len + len(part)
    if len(pending) + len(part) > LINE_MAX_BYTES:
        total = len(pending) + len(part)
        pending.clear()
        return total
    pending += part
    return 0


def _next_data(fd: int, pos: int, size: int) -> int:
    """Where the next bytes that are not a sparse hole start, at or after `pos` (`size` when only a hole is left;
    `pos` when the file system does not say)."""
    try:
        return min(os.lseek(fd, pos, os.SEEK_DATA), size)
    except OSError:  # ENXIO: nothing but a hole after pos; EINVAL: holes are not reported here
        try:
            os.lseek(fd, pos, os.SEEK_HOLE)
        except OSError:
            return pos
        return size


Row = dict[str, Any]
CheckRow = Callable[[Any, str], "tuple[Row | None, list[str]]"]


@dataclass
class _Parsed:
    ident: tuple[int, int]  # (st_dev, st_ino)
    seen: tuple[int, int]  # (st_size, st_mtime_ns) when read
    offset: int
    line_no: int
    check: bytes
    rows: list[Row]
    problems: list[str]
    nul_bytes: int
    long_lines: int
    long_bytes: int


def parse_lines(found: Lines, check_row: CheckRow, name: str) -> tuple[list[Row], list[str]]:
    """The rows of the complete lines (each checked by `check_row`) and the problems, naming lines by number."""
    rows: list[Row] = []
    problems: list[str] = []
    for n, raw in found.lines:
        try:
            row = json.loads(raw.decode("utf-8", errors="replace"))
        except (ValueError, RecursionError):
            problems.append(f"{name} line {n} is not JSON; skipped")
            continue
        checked, bad = check_row(row, f"{name} line {n}")
        problems += bad
        if checked is not None:
            rows.append(checked)
    return rows, problems


class MetricsReader:
    """Rows of JSON-lines files, parsed incrementally: each `read(path)` parses only the bytes appended since the
    previous read of the same file (thread-safe; the parsed rows of the last `_KEEP_FILES` files are kept)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parsed: OrderedDict[str, _Parsed] = OrderedDict()

    def forget(self) -> None:
        with self._lock:
            self._parsed.clear()

    def read(self, path: Path, check_row: CheckRow) -> tuple[list[Row], list[str]]:
        """(rows, problems) of the whole file; raises OSError when it cannot be opened. A torn last line (no
        newline yet) is parsed when it is valid JSON and silently left for the next read otherwise."""
        name = path.name
        with open(path, "rb") as fh:
            fd = fh.fileno()
            st = os.fstat(fd)
            key = str(path)
            with self._lock:
                prev = self._parsed.get(key)
            if prev is not None and not _continues(prev, fd, st):
                prev = None
            if prev is None:
                prev = _Parsed((st.st_dev, st.st_ino), (0, 0), 0, 1, b"", [], [], 0, 0, 0)
            found = scan_lines(fd, prev.offset, prev.line_no, st.st_size)
            rows, problems = parse_lines(found, check_row, name)
            n = min(_CHECK_BYTES, found.next_offset)
            check = os.pread(fd, n, found.next_offset - n)
        parsed = _Parsed(prev.ident, (st.st_size, st.st_mtime_ns), found.next_offset, found.next_line_no, check, prev.rows + rows,
                         prev.problems + problems, prev.nul_bytes + found.nul_bytes, prev.long_lines + found.long_lines,
                         prev.long_bytes + found.long_bytes)
        with self._lock:
            self._parsed[key] = parsed
            self._parsed.move_to_end(key)
            while len(self._parsed) > _KEEP_FILES:
                self._parsed.popitem(last=False)
        out_rows, out_problems = list(parsed.rows), list(parsed.problems)
        tail = found.tail.strip()
        if tail:
            try:
                row = json.loads(tail.decode("utf-8", errors="replace"))
            except (ValueError, RecursionError):
                row = None  # a line the trainer is writing, or one a kill tore: neither is corruption to report
            if row is not None:
                checked, bad = check_row(row, f"{name} line {found.next_line_no}")
                out_problems += bad
                if checked is not None:
                    out_rows.append(checked)
        if parsed.nul_bytes:
            out_problems.append(f"{name}: {_fmt_bytes(parsed.nul_bytes)} of NUL bytes (a hole a crash can leave); "
                                "skipped")
        if parsed.long_lines:
            out_problems.append(f"{name}: {parsed.long_lines} line(s) longer than {_fmt_bytes(LINE_MAX_BYTES)} "
                                f"({_fmt_bytes(parsed.long_bytes)} in all); skipped")
        return out_rows, out_problems


def _continues(prev: _Parsed, fd: int, st: os.stat_result) -> bool:
    """Whether the open file is the one `prev` parsed, unchanged or grown: the same inode, and either the same size
    and modification time, or larger with the same bytes just before the parsed offset."""
    if (st.st_dev, st.st_ino) != prev.ident or st.st_size < prev.seen[0]:
        return False
    if st.st_size == prev.seen[0]:
        return st.st_mtime_ns == prev.seen[1]
    return os.pread(fd, len(prev.check), prev.offset - len(prev.check)) == prev.check
