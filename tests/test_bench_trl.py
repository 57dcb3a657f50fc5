"""`mrtpo bench trl` (core.tools.bench_trl): the Baton that interleaves the two trainers' steps, and the command
on the micro model, one and two processes, with MRTPO's run store on."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from core.tools.bench_trl import Baton, interleaved

ROOT = Path(__file__).resolve().parent.parent


def test_the_baton_alternates_steps_and_lets_the_last_trainer_finish_alone():
    """Two threads of 3 and 5 steps: their steps alternate while both run, the longer one goes on alone after
    the shorter finished, and no two steps ever overlap."""
    baton, done, running = Baton(["a", "b"]), [], []

    def trainer(name, steps):
        try:
            baton.wait(name)
            for step in range(1, steps + 1):
                baton.pass_on(name)
                running.append(name)
                assert running == [name], running  # alone in its turn
                done.append(f"{name}{step}")
                running.remove(name)
        finally:
            baton.finish(name)

    threads = [threading.Thread(target=trainer, args=args) for args in (("a", 3), ("b", 5))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert not any(t.is_alive() for t in threads)
    assert done == ["a1", "b1", "a2", "b2", "a3", "b3", "b4", "b5"]
    assert interleaved(baton.taken, 3, ("a", "b")) and not interleaved(baton.taken, 4, ("a", "b"))


def test_interleaved_reads_the_turns():
    assert interleaved(["gdpo", "mrtpo", "gdpo", "mrtpo", "gdpo", "mrtpo"], 2)
    assert not interleaved(["gdpo", "mrtpo", "gdpo", "gdpo", "mrtpo", "mrtpo"], 2)
    assert not interleaved(["gdpo", "mrtpo", "gdpo", "mrtpo"], 2)  # a step missing


@pytest.mark.trl
@pytest.mark.subprocess
@pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="TRL is not installed (make test installs it)")
def test_bench_trl_interleaves_the_trainers_on_the_same_batches_with_the_run_store_on(micro_model, prompt_file,
                                                                                       tmp_path):
    """One and two processes, `--store both`: the steps alternate GDPO, MRTPO (store on), MRTPO (store off), every
    trainer sees the same batches, MRTPO's run store gets a metrics line per step, the table has a line per process
    count and MRTPO trainer with the load, and `--out` keeps every step's time."""
    out = subprocess.run([sys.executable, "-m", "core.cli", "bench", "trl", "--model", str(micro_model),
                          "--prompt-set", str(prompt_file), "--prompts", "2", "--group-size", "2",
                          "--max-new-tokens", "6", "--replay-chunk", "4", "--min-rewards", "1", "--repeats", "1",
                          "--nproc", "1", "2", "--device", "cpu", "--store", "both", "--out", str(tmp_path / "b.json")],
                         cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    turns = "steps interleaved (turns gdpo, mrtpo, mrtpo_no_store, ... from the start to the last step): yes"
    assert turns in out.stdout
    assert "same batches for every trainer (mean response length of every step equal): yes" in out.stdout
    assert "metrics lines written: 2 (1 process), 2 (2 processes)" in out.stdout
    assert len(re.findall(r"^the run store's cost on [12] process(es)?: MRTPO step with / without it, per step: "
                          r"median [\d.]+x \[[\d.]+, [\d.]+\]$", out.stdout, re.M)) == 2, out.stdout
    lines = re.findall(r"^\s+([12])\s+(MRTPO, store on|MRTPO, store off)\s+[\d.]+\s+[\d.]+\s+[\d.]+x\s+[\d.]+x "
                       r"\[[\d.]+, [\d.]+\].*\s[\d.]+ / [\d.]+$", out.stdout, re.M)
    assert lines == [("1", "MRTPO, store on"), ("1", "MRTPO, store off"), ("2", "MRTPO, store on"),
                     ("2", "MRTPO, store off")], out.stdout
    rows = json.loads((tmp_path / "b.json").read_text())["rows"]
    assert [r["nproc"] for r in rows] == [1, 2]
    assert all(len(r["results"][k]["steps"]) == 2 for r in rows for k in ("gdpo", "mrtpo", "mrtpo_no_store"))
