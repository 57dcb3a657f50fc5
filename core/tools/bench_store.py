"""`mrtpo bench store`: one step's credit map at the sizes users train at, through the real writer and readers.

    mrtpo bench store                                   # 64x512x5, 512x1024x5, 128x4096x6
    mrtpo bench store --sizes 64x512x5 128x1024x5       # samples x tokens x rewards
    mrtpo bench store --offsets 64x1024                 # also time the token offsets on tiny-instruct's tokenizer
    mrtpo bench store --pages                           # and the app's pages on a 200-step run of each size

Each size runs in a fresh process: it makes a step's batch (`core.run.batch` Rollout, Scores, Routing,
Advantages of made-up values, groups of 16 samples, every response `tokens` long), then measures

- build: `core.run.record.credit_step` (the record both trainers write; `credit_frame` before schema 2);
- write: `RunWriter.write_credit` (Parquet, zstd, atomic replace);
- peak: the writing process's peak resident memory above what it held before the build (Linux VmHWM, reset
  through /proc/self/clear_refs), so Arrow's and pandas' buffers count, not only Python objects;
- disk: the step's file and its bytes per (sample, reward, token), text included;
- read step: `RunStore.credit(step)`, the whole step as a frame (seconds, peak RSS above the reader's start);
  index: `RunStore.credit_index`; read sample / read pair: the rows of one sample, of one reward of one sample
  (`RunStore.credit_tokens`), when the store has them.

A size that fails (an exception, e.g. Arrow's 2 GiB string limit) is a row saying where and why.

`--pages` then writes, per size, a finished 200-step run through the same `RunWriter` (metrics every step,
`mrtpo_viz.tools.synthetic.synthetic_metrics`; the size's credit map at the steps `credit_every` 10 stores:
1, 11, ..., 191 and 200, `core.run.credit_choice.stores_credit`) into a runs directory of its own (the shipped
sample runs are listed beside it, as in `mrtpo app`), and measures

- read index / read sample / heatmap: `RunStore.credit_index` of the last step, one sample's token rows
  (`RunStore.credit_tokens`) and its heatmap HTML (`mrtpo_viz.heatmap.token_heatmap_html`), in the writing
  process;
- per page (Runs, Training curves, Token credit, JS divergence, Compare), in a fresh interpreter per page
  (`mrtpo_viz.tools.bench_server`, Streamlit's AppTest): the wall seconds of its first script run in a new
  session (cold: every cache empty) and of the next run (warm), the server process's peak resident memory
  (VmHWM: Streamlit, the app's imports and the page together), and the Parquet rows the cold run read (a
  page that read a whole step would show the step's rows).

Targets (issue 24): Token credit and JS <= 0.5 s and <= 400 MB at every size; Runs and Training curves <= 0.5 s.
`--offsets BxT` times `core.model.decode_with_offsets` over B responses of T sampled-like ids (the tokenizer of
sample_data/models/tiny-instruct, one thread): wall and CPU seconds, and the load average beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

PREFIX = "BENCH_STORE_RESULT "  # a worker's result line
DEFAULT_SIZES = ("64x512x5", "512x1024x5", "128x4096x6")
WORDS = ("the", "river", "runs", "steady", "under", "a", "bridge", "and", "light", "falls", "on", "water", "stone",
         "calm", "end", "note", "is", "here", "slow", ",", "\n", "é", "über")


def parse_size(text: str, parts: int = 3) -> tuple[int, ...]:
    """'64x512x5' -> (64, 512, 5); raises ValueError with a one-line reason."""
    try:
        values = tuple(int(x) for x in text.lower().split("x"))
    except ValueError:
        values = ()
    if len(values) != parts or min(values) < 1:
        shape = "samples x tokens x rewards" if parts == 3 else "responses x tokens"
        raise ValueError(f"size {text!r} is not {shape} (whole numbers >= 1, e.g. {'64x512x5' if parts == 3 else '64x1024'})")
    return values


def _mem_kb(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


class _Item:
    """A sample's prompt as the record reads it (`key`, `prompt()`)."""

    def __init__(self, key: str, text: str):
        self.key, self.text = key, text

    def prompt(self) -> str:
        return self.text


def make_record(n_samples: int, n_tokens: int, n_rewards: int, group_size: int = 16, seed: int = 0):
    """A StepRecord of made-up values with the shapes of a real step (every response `n_tokens` long)."""
    import numpy as np
    import torch

    from core.run.batch import Advantages, Rollout, Routing, Scores
    from core.run.record import StepRecord

    rng = np.random.default_rng(seed)
    B, T, K = n_samples, n_tokens, n_rewards
    G = min(group_size, B)
    word = rng.integers(0, len(WORDS), size=(B, T))
    tokens = [[(w if t == 0 or w in (",", "\n") else " " + w) for t, w in enumerate(WORDS[j] for j in row)]
              for row in word]
    offsets, texts = [], []
    for toks in tokens:
        ends = np.cumsum([len(x) for x in toks])
        offsets.append(list(zip((ends - [len(x) for x in toks]).tolist(), ends.tolist(), strict=True)))
        texts.append("".join(toks))
    items = [_Item(f"p{i // G:04d}", f"Write a note about rivers ({i // G}). Include the keyword steady. Do not use "
                   "any commas. End your response with the exact phrase 'Is there anything else?'. " * 2)
             for i in range(B)]
    rollout = Rollout(items=items, prompt_ids=[[1, 2, 3]] * B,
                      response_ids=torch.from_numpy(rng.integers(0, 50000, size=(B, T))),
                      mask=torch.ones(B, T, dtype=torch.long), texts=texts, tokens=tokens, offsets=offsets)
    rewards = torch.from_numpy(rng.integers(0, 2, size=(B, K)).astype(np.float32))
    rewards[: B // 4, -1] = float("nan")
    span = torch.from_numpy(rng.random((B, K, T)) < 0.1)
    d = torch.from_numpy(rng.gamma(1.5, 0.03, (B, K, T)).astype(np.float32))
    d[torch.isnan(rewards)] = float("nan")
    weights = torch.from_numpy(rng.uniform(0, 3, (B, K, T)).astype(np.float32))
    group_adv = torch.from_numpy(rng.normal(0, 1, (B, K)).astype(np.float32))
    credit = weights * group_adv[:, :, None]
    rec = StepRecord(step=1, reward_names=[f"family:reward_{k}" for k in range(K)], group_size=G, rollout=rollout,
                     scores=Scores(rewards, span), routing=Routing(weights, d, ~torch.isnan(rewards)),
                     adv=Advantages(credit.sum(1), credit, group_adv), loss_stats={}, times={})
    return rec


def worker(size: str, folder: str) -> dict:
    """Measure one size in this process; returns the result row."""
    B, T, K = parse_size(size)
    row: dict = {"size": size, "samples": B, "tokens": T, "rewards": K}
    import gc

    from core.run import record
    from core.run.store import RunStore, RunWriter

    rec = make_record(B, T, K)
    writer = RunWriter.create(folder, "bench", {"steps": 1, "reward_names": rec.reward_names})
    gc.collect()
    base = _mem_kb("VmRSS")
    row["peak_measured"] = _reset_peak()
    stage = "build"
    try:
        start, cpu = time.perf_counter(), time.process_time()
        frame = record.credit_step(rec) if hasattr(record, "credit_step") else record.credit_frame(rec)
        row["build_s"], row["build_cpu_s"] = time.perf_counter() - start, time.process_time() - cpu
        stage = "write"
        start, cpu = time.perf_counter(), time.process_time()
        path = writer.write_credit(1, frame)
        row["write_s"], row["write_cpu_s"] = time.perf_counter() - start, time.process_time() - cpu
        row["peak_mb"] = (_mem_kb("VmHWM") - base) / 1024
        del frame
        writer.append_metrics({"step": 1})
        row["bytes"] = path.stat().st_size
        row["bytes_per_cell"] = row["bytes"] / (B * T * K)
        stage = "read step"
        gc.collect()
        base = _mem_kb("VmRSS")
        _reset_peak()
        store = RunStore(writer.path)
        start = time.perf_counter()
        whole = store.credit(1)
        row["read_step_s"] = time.perf_counter() - start
        row["read_step_mb"] = (_mem_kb("VmHWM") - base) / 1024
        row["read_rows"] = len(whole)
        del whole
        if hasattr(store, "credit_tokens"):
            stage = "read sample"
            store = RunStore(writer.path)
            start = time.perf_counter()
            store.credit_index(1)
            row["index_s"] = time.perf_counter() - start
            start = time.perf_counter()
            one = store.credit_tokens(1, samples=[B // 2])
            row["read_sample_s"] = time.perf_counter() - start
            row["read_sample_rows"] = len(one)
            start = time.perf_counter()
            one = store.credit_tokens(1, samples=[B // 2], rewards=[rec.reward_names[-1]])
            row["read_pair_s"] = time.perf_counter() - start
    except Exception as exc:  # noqa: BLE001 -- a failing size is a result row
        row["failed"] = f"{stage}: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
        row["peak_mb"] = (_mem_kb("VmHWM") - base) / 1024
    return row


RUN_STEPS, CREDIT_EVERY = 200, 10
PAGES = ("runs", "curves", "credit", "js", "compare")
PAGE_TITLES = {"runs": "Runs", "curves": "Training curves", "credit": "Token credit", "js": "JS divergence",
               "compare": "Compare"}
PAGE_TARGET_S, PAGE_TARGET_MB = 0.5, 400


def run_worker(size: str, runs_dir: str, steps: int = RUN_STEPS, every: int = CREDIT_EVERY) -> dict:
    """Write a finished `steps`-step run of `size` into `runs_dir` through RunWriter (metrics every step, the
    step's credit map where `stores_credit(step, every, steps)`), then time one sample's read and heatmap."""
    import dataclasses

    import numpy as np

    from core.run import record
    from core.run.credit_choice import stores_credit
    from core.run.store import RunStore, RunWriter
    from mrtpo_viz.heatmap import token_heatmap_html
    from mrtpo_viz.tools.synthetic import synthetic_metrics

    B, T, K = parse_size(size)
    rec = make_record(B, T, K)
    cs = record.credit_step(rec)
    names = list(rec.reward_names)
    config = {"model": "synthetic", "prompt_set": "synthetic", "method": "mrtpo", "routing": "replay",
              "steps": steps, "group_size": rec.group_size, "prompts_per_step": B // rec.group_size, "seed": 0,
              "lam": 1.0, "reward_names": names, "reward_weights": {}, "credit_samples": 0, "credit_every": every,
              "max_new_tokens": T}
    name = f"bench-{size}-{steps}-steps"
    writer = RunWriter.create(runs_dir, name, config)
    rng = np.random.default_rng(0)
    credit_steps, start = [], time.perf_counter()
    for step in range(1, steps + 1):
        if stores_credit(step, every, steps):
            writer.write_credit(step, dataclasses.replace(cs, step=step))
            credit_steps.append(step)
        writer.append_metrics(synthetic_metrics(step, tuple(names), rng))
        writer.set_status(state="running", step=step, total_steps=steps)
    writer.set_status(state="completed", step=steps, total_steps=steps)
    row = {"run": name, "run_write_s": time.perf_counter() - start, "credit_steps": len(credit_steps),
           "run_mb": sum(f.stat().st_size for f in writer.path.rglob("*") if f.is_file()) / 1e6}
    store = RunStore(writer.path)
    last, sample = credit_steps[-1], B // 2
    t0 = time.perf_counter()
    store.credit_index(last)
    t1 = time.perf_counter()
    one = store.credit_tokens(last, samples=[sample])
    t2 = time.perf_counter()
    token_heatmap_html(one, names[0], reward_names=names)
    t3 = time.perf_counter()
    row.update(index_s=t1 - t0, sample_s=t2 - t1, heatmap_s=t3 - t2, sample_rows=len(one))
    return row


def page_rows(size: str, runs_dir: str) -> dict:
    """Server seconds, memory and rows read of each page of PAGES on the run in `runs_dir` (one interpreter each)."""
    from pathlib import Path

    from core.paths import REPO_ROOT
    from mrtpo_viz.tools import bench_server

    out = {}
    for page in PAGES:
        try:
            out[page] = bench_server.page_cpu_ms(REPO_ROOT, Path(runs_dir), page)
        except RuntimeError as exc:  # a page that raised is a result, not a crash of the benchmark
            out[page] = {"failed": str(exc).strip().splitlines()[-1][:160]}
        print(f"  {size} {page}: " + (out[page].get("failed") or
                                       f"cold {out[page]['cold_s']:.2f} s, warm {out[page]['warm_s']:.2f} s, "
                                       f"peak {out[page]['peak_mb']:.0f} MB, rows read {out[page]['cold_rows']}"),
              file=sys.stderr, flush=True)
    return out


def pages_table(rows: list[dict]) -> str:
    """Markdown: one row per (size, page): cold / warm server seconds, peak server MB, rows read; per size the
    run's writing time and one sample's read and heatmap."""
    lines = ["| samples x tokens x rewards | page | cold s | cold CPU s | warm s | server peak MB "
             "| Parquet rows read (cold) | within target (cold s, MB) |", "|" + "---|" * 8]
    for r in rows:
        for page in PAGES:
            p = r.get("pages", {}).get(page, {"failed": r.get("failed", "not run")})
            if "failed" in p:
                lines.append(f"| {r['size']} | {PAGE_TITLES[page]} | - | - | - | - | - | {p['failed']} |")
                continue
            if page == "compare":
                verdict = "no target"
            else:
                ok = p["cold_s"] <= PAGE_TARGET_S and (page not in ("credit", "js") or p["peak_mb"] <= PAGE_TARGET_MB)
                verdict = "yes" if ok else "**no**"
            lines.append(f"| {r['size']} | {PAGE_TITLES[page]} | {p['cold_s']:.2f} | {p['cold'] / 1e3:.2f} | "
                         f"{p['warm_s']:.2f} | {p['peak_mb']:.0f} | {p['cold_rows']:,} | {verdict} |")
    lines += ["", "| samples x tokens x rewards | run written s (200 steps, 21 credit maps) | run on disk MB | "
              "read index s | read one sample s (rows) | its heatmap HTML s |", "|" + "---|" * 6]
    for r in rows:
        if "sample_s" in r:
            lines.append(f"| {r['size']} | {r['run_write_s']:.1f} | {r['run_mb']:.0f} | {r['index_s']:.3f} | "
                         f"{r['sample_s']:.3f} ({r['sample_rows']:,}) | {r['heatmap_s']:.3f} |")
    return "\n".join(lines)


def offsets_worker(size: str) -> dict:
    """Time decode_with_offsets over B responses of T ids on tiny-instruct's tokenizer (one thread)."""
    import numpy as np
    from transformers import AutoTokenizer

    from core.model import decode_with_offsets
    from core.paths import REPO_ROOT

    B, T = parse_size(size, 2)
    tok = AutoTokenizer.from_pretrained(str(REPO_ROOT / "sample_data" / "models" / "tiny-instruct"))
    rng = np.random.default_rng(0)
    text = "The river runs steady under a bridge, é ü ñ 漢字 and light falls on water. " * (T // 8 + 1)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    rows = []
    for _ in range(B):
        a = int(rng.integers(0, max(1, len(ids) - T)))
        rows.append(ids[a:a + T - 1] + [tok.eos_token_id])
    start, cpu = time.perf_counter(), time.process_time()
    for r in rows:
        decode_with_offsets(tok, r)
    return {"offsets": size, "seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu}


def _run_child(args: list[str]) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "core.tools.bench_store", *args], capture_output=True, text=True,
                          env=env)
    for line in proc.stdout.splitlines():
        if line.startswith(PREFIX):
            return json.loads(line[len(PREFIX):])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
    return {"failed": f"worker: {tail[0][:160]}"}


def _fmt(row: dict, key: str, spec: str) -> str:
    return format(row[key], spec) if key in row else "-"


def table(rows: list[dict]) -> str:
    head = ("| samples x tokens x rewards | build s | write s | build + write CPU s | peak MB | on disk MB "
            "| B/(sample, reward, token) | read step s | read step MB | index s | one sample s | one reward of it s "
            "| note |")
    lines = [head, "|" + "---|" * 13]
    for r in rows:
        cpu = r["build_cpu_s"] + r["write_cpu_s"] if "write_cpu_s" in r else None
        lines.append(" | ".join([
            f"| {r['size']}", _fmt(r, "build_s", ".2f"), _fmt(r, "write_s", ".2f"),
            "-" if cpu is None else f"{cpu:.2f}", _fmt(r, "peak_mb", ".0f"),
            f"{r['bytes'] / 1e6:.1f}" if "bytes" in r else "-", _fmt(r, "bytes_per_cell", ".2f"),
            _fmt(r, "read_step_s", ".2f"), _fmt(r, "read_step_mb", ".0f"), _fmt(r, "index_s", ".3f"),
            _fmt(r, "read_sample_s", ".3f"), _fmt(r, "read_pair_s", ".3f"),
            (r.get("failed", "") + ("" if r.get("peak_measured", True) else " (peak not measurable here)")) + " |",
        ]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mrtpo bench store", description=__doc__.split("\n\n")[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=list(DEFAULT_SIZES),
                        help="samples x tokens x rewards per step (default: %(default)s)")
    parser.add_argument("--offsets", nargs="*", default=None, metavar="BxT",
                        help="also time decode_with_offsets over B responses of T tokens (default when given "
                        "bare: 64x1024)")
    parser.add_argument("--pages", action="store_true",
                        help=f"also write a {RUN_STEPS}-step run of each size (credit every {CREDIT_EVERY}th step) and "
                        "time the app's pages on it (server seconds and memory, AppTest)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON lines too")
    parser.add_argument("--worker", nargs=2, metavar=("SIZE", "DIR"), help=argparse.SUPPRESS)
    parser.add_argument("--offsets-worker", metavar="BxT", help=argparse.SUPPRESS)
    parser.add_argument("--run-worker", nargs=2, metavar=("SIZE", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(PREFIX + json.dumps(worker(*args.worker)), flush=True)
        return 0
    if args.offsets_worker:
        print(PREFIX + json.dumps(offsets_worker(args.offsets_worker)), flush=True)
        return 0
    if args.run_worker:
        print(PREFIX + json.dumps(run_worker(*args.run_worker)), flush=True)
        return 0
    try:
        for s in args.sizes:
            parse_size(s)
        for s in args.offsets or ():
            parse_size(s, 2)
    except ValueError as exc:
        print(f"mrtpo bench store: error: {exc}", file=sys.stderr)
        return 2
    rows = []
    for size in args.sizes:
        with tempfile.TemporaryDirectory(prefix="mrtpo-bench-store-") as folder:
            print(f"{size} ...", file=sys.stderr, flush=True)
            row = {"size": size, **_run_child(["--worker", size, folder])}
            rows.append(row)
    print(table(rows))
    for size in ([] if args.offsets is None else (args.offsets or ["64x1024"])):
        r = _run_child(["--offsets-worker", size])
        shown = (f"{r['seconds']:.3f} s (CPU {r['cpu_seconds']:.3f} s; load average {os.getloadavg()[0]:.1f})"
                 if "seconds" in r else r.get("failed", "?"))
        print(f"token offsets (decode_with_offsets, tiny-instruct tokenizer, 1 thread), {size}: {shown}")
        rows.append(r)
    page_results, load = [], os.getloadavg()[0]
    for size in (args.sizes if args.pages else []):
        with tempfile.TemporaryDirectory(prefix="mrtpo-bench-pages-") as folder:
            print(f"{size}: writing a {RUN_STEPS}-step run ...", file=sys.stderr, flush=True)
            row = {"size": size, **_run_child(["--run-worker", size, folder])}
            if "failed" not in row:
                row["pages"] = page_rows(size, folder)
            page_results.append(row)
    if page_results:
        print(f"\nThe app's pages on a {RUN_STEPS}-step run of each size (credit map every {CREDIT_EVERY}th step; "
              "server side, AppTest, one fresh interpreter per page; cold s: wall seconds, which the machine's load "
              f"stretches: load average {load:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs):\n")
        print(pages_table(page_results))
        rows += page_results
    if args.json:
        for r in rows:
            print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
