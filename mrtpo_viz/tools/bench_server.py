"""`mrtpo bench app --server-only`: the CPU time of each page's script run on the server, without a browser.

A browser's wall-clock seconds on a busy machine mostly measure the machine's load; the server's CPU time
for one run of a page's script hardly depends on it. For each run layout (as `mrtpo bench app`) and page,
a fresh interpreter (one per page, so nothing is cached or imported before) does what `mrtpo app` does:
  imports  `mrtpo_viz.server.serve.warm_up()` (the app's imports and Plotly's validators; paid once per server,
           before it listens; `-` for a checkout without it);
  cold     the page's first script run in a new session (Streamlit's AppTest): every `st.cache_*` empty;
  warm     the same page run again in that session (caches filled, as on coming back to the page).
The cold run leaves out what a server pays once when it starts (the scan for custom components) and
AppTest's own "not run by streamlit run" check. Each is process CPU time in ms (`time.process_time`: every thread of the process), the median of
`--repeat` interpreters. Each interpreter also reports the wall seconds of the cold and warm runs (`cold_s`,
`warm_s`), its peak and final resident memory (`peak_mb`, `rss_mb`: Linux VmHWM / VmRSS, the whole server
process) and the Parquet rows the cold run read (`cold_rows`), which `mrtpo bench store --pages` prints.
`--profile DIR` also writes a cProfile of each cold run (the script thread)
as `DIR/<run>-<page>.prof` (read it with `python -m pstats`). Never imports torch.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

# Run by a fresh interpreter in the served checkout: argv = page, profile path or "".
_CHILD = r"""
import cProfile, json, os, pstats, sys, threading, time
page, prof = sys.argv[1], sys.argv[2]
from streamlit.testing.v1 import AppTest
imports = None
try:
    from mrtpo_viz.server.serve import warm_up
except ImportError:
    warm_up = None
if warm_up is not None:
    t = time.process_time(); warm_up(); imports = (time.process_time() - t) * 1e3
at = AppTest.from_file(os.path.abspath("app.py"), default_timeout=600)
# What a real server pays once at start-up, not per page, and AppTest pays on its first run: the scan for
# custom components, and (AppTest only) the "not run with streamlit run" check, which walks the stack.
import streamlit.delta_generator
from streamlit.components.v2.component_manager import BidiComponentManager
streamlit.delta_generator._use_warning_has_been_displayed = True
at._bidi_component_manager = BidiComponentManager()
at._bidi_component_manager.discover_and_register_components(start_file_watching=False)
if page != "runs":
    at.switch_page(f"mrtpo_viz/pages/{page}.py")
# Parquet rows the pages read (a whole-step read shows as a step's rows)
import pyarrow.parquet as pq
rows_read = [0]
def counted(fn):
    def wrapper(*args, **kwargs):
        out = fn(*args, **kwargs)
        rows_read[0] += out.num_rows
        return out
    return wrapper
pq.ParquetFile.read = counted(pq.ParquetFile.read)
pq.ParquetFile.read_row_groups = counted(pq.ParquetFile.read_row_groups)
pq.ParquetFile.read_row_group = counted(pq.ParquetFile.read_row_group)
def status_kb(field):
    with open("/proc/self/status") as fh:
        return next((int(line.split()[1]) for line in fh if line.startswith(field + ":")), 0)
profiles = []
def start(frame, event, arg):  # profile the script thread, which AppTest starts
    sys.setprofile(None)
    p = cProfile.Profile(); profiles.append(p); p.enable()
if prof:
    threading.setprofile(start)
w0 = time.perf_counter(); t0 = time.process_time(); at.run(); t1 = time.process_time(); w1 = time.perf_counter()
cold_rows = rows_read[0]
threading.setprofile(None)
if prof and profiles:
    stats = None
    for p in profiles:
        p.create_stats()
        stats = pstats.Stats(p) if stats is None else stats.add(p)
    stats.dump_stats(prof)
w2 = time.perf_counter(); at.run(); t2 = time.process_time(); w3 = time.perf_counter()
print(json.dumps({"imports": imports, "cold": (t1 - t0) * 1e3, "warm": (t2 - t1) * 1e3,
                  "cold_s": w1 - w0, "warm_s": w3 - w2, "peak_mb": status_kb("VmHWM") / 1024,
                  "rss_mb": status_kb("VmRSS") / 1024, "cold_rows": cold_rows,
                  "titles": [t.value for t in at.title], "errors": [str(e.value)[:300] for e in at.exception]}))
"""

KINDS = ("imports", "cold", "warm")


def page_cpu_ms(app_root: Path, runs_dir: Path, page: str, profile: Path | None = None) -> dict:
    """One fresh interpreter serving `app_root` with `runs_dir`: {"imports", "cold", "warm"} CPU ms of `page`, and
    "cold_s", "warm_s" (wall seconds), "peak_mb", "rss_mb" (the process's memory), "cold_rows" (Parquet rows read)."""
    env = {**os.environ, "MRTPO_RUNS_DIR": str(runs_dir), "PYTHONPATH": str(app_root), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", _CHILD, page, str(profile or "")], cwd=app_root, env=env,
                         capture_output=True, text=True, timeout=900)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode or not lines:
        raise RuntimeError(f"page {page}: the server-side run failed:\n{out.stderr[-2000:]}")
    result = json.loads(lines[-1])
    if result["errors"]:
        raise RuntimeError(f"page {page} raised: {result['errors']}")
    return result


def _cell(xs: list[float | None]) -> str:
    xs = [x for x in xs if x is not None]
    return f"{statistics.median(xs):.0f}" if xs else "-"


def measure(app_root: Path, layouts: dict[str, Path], pages: list[str], repeat: int, profile_dir: Path | None,
            progress) -> dict[str, dict[str, dict[str, list[float | None]]]]:
    """{run: {page: {kind: [ms per interpreter]}}}."""
    results: dict[str, dict[str, dict[str, list[float | None]]]] = {}
    for run, runs_dir in layouts.items():
        results[run] = {}
        for page in pages:
            cells: dict[str, list[float | None]] = {k: [] for k in KINDS}
            for i in range(repeat):
                prof = profile_dir / f"{run.replace(' ', '-')}-{page}.prof" if profile_dir and i == 0 else None
                r = page_cpu_ms(app_root, runs_dir, page, prof)
                for k in KINDS:
                    cells[k].append(r[k])
            results[run][page] = cells
            progress(f"  {run} {page}: " + ", ".join(f"{k} {_cell(cells[k])} ms" for k in KINDS))
    return results


def table(results: dict[str, dict[str, dict[str, list[float | None]]]], pages: list[str]) -> str:
    """Markdown: one row per page, imports / cold / warm CPU ms per run."""
    runs = list(results)
    lines = ["| page | " + " | ".join(f"{r} {k}" for r in runs for k in KINDS) + " |",
             "|" + "---|" * (1 + len(KINDS) * len(runs))]
    for page in pages:
        lines.append(f"| {page} | " + " | ".join(_cell(results[r][page][k]) for r in runs for k in KINDS) + " |")
    return "\n".join(lines)


def main(app_root: Path, layouts: dict[str, Path], pages: list[str], repeat: int, profile_dir: str | None) -> int:
    prof = Path(profile_dir) if profile_dir else None
    if prof:
        prof.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    results = measure(app_root, layouts, pages, repeat, prof, lambda msg: print(msg, flush=True))
    print(f"\nServer-side CPU ms per page (imports: the server's warm-up; cold: first script run of a new session; "
          f"warm: the next run; median of {repeat}; app at {app_root}; load {load:.2f} -> {os.getloadavg()[0]:.2f}):\n")
    print(table(results, pages))
    return 0
