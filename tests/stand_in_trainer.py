"""A trainer stand-in for the stop tests: a real process that writes a real run store the way the trainer does
(credit map, then metrics line, then status), leaves a half-written step behind, and then either ignores SIGTERM
(`stubborn`: only SIGKILL ends it) or honours it as the trainer does (`cooperative`: writes `stopped` and exits).

    python stand_in_trainer.py train <stubborn|cooperative> <runs_dir> <name>

The tests run a copy named `mrtpo`, so its command line is that of the installed `mrtpo train`.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import pandas as pd

from core.run.store import CREDIT_COLUMNS, RunWriter

COMPLETE_STEPS = 3


def credit(step: int) -> pd.DataFrame:
    row = dict(step=step, sample=0, group=0, prompt_key="p0", prompt="Do x.", response="ab", reward="a", score=1.0,
               group_adv=0.5, t=0, token_id=7, token="ab", start=0, end=2, distance=0.1, distance_skipped=False, weight=1.0,
               credit=0.25, in_span=True, token_adv=0.5)
    return pd.DataFrame([row], columns=list(CREDIT_COLUMNS))


def main() -> None:
    _, mode, runs_dir, name = sys.argv[1:5]
    stop = []
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    w = RunWriter.create(runs_dir, name, {"steps": 100, "method": "mrtpo"})
    w.set_status(state="running", pid=os.getpid())
    for step in range(1, COMPLETE_STEPS + 1):
        w.write_credit(step, credit(step))
        w.append_metrics({"step": step, "time/step": 0.1, "reward/all_satisfied": 0.5})
        w.set_status(state="running", step=step)
    ckpt = w.checkpoint_dir(2)  # a complete checkpoint at step 2 (what Resume needs) ...
    ckpt.mkdir(parents=True)
    (ckpt / "trainer_state.json").write_text('{"step": 2, "seed": 0}\n')
    (ckpt.parent / f".{w.checkpoint_dir(4).name}.tmp").mkdir()  # ... and one half-saved
    # Step 4 half-written: its credit map is in place, its metrics line torn mid-write.
    w.write_credit(COMPLETE_STEPS + 1, credit(COMPLETE_STEPS + 1))
    with open(w.path / "metrics.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"step": 4, "time/st')
    print("ready", flush=True)
    while not stop:
        time.sleep(0.05)
    w.set_status(state="stopped", step=COMPLETE_STEPS, error=None)


if __name__ == "__main__":
    main()
