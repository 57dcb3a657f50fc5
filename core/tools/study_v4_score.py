"""Study v4's scoring child process (docs/results/study-v4.md, "Setting"): every checkpoint of one run, or the
untrained model, on the held-out and out-of-template sets, one CSV of per-prompt rows per scored step.

    python -m core.tools.study_v4_score RUN_DIR PARTS_DIR --arm mrtpo-js --seed 0 [--eval-prompts 128]
    python -m core.tools.study_v4_score RUN_DIR PARTS_DIR --arm initial --seed 0 --initial

`core.tools.study_v4 run` starts it after a run's training; it imports torch (the study command does not). A
step whose part file (`step-<s>.csv`) exists is not scored again, so an interrupted scoring resumes at the step it
stopped at. Responses are sampled as the trainer's held-out evaluation samples them (`held_out_rewards`: the
same random numbers for every arm of a seed), `samples` per prompt, at the run's temperature and length.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import pandas as pd

from core.config import TrainConfig
from core.paths import PROMPTS_DIR
from core.tools import study_v4_report as rep

SETS = {"heldout": PROMPTS_DIR / "multi-heldout-clean.jsonl", "ood": PROMPTS_DIR / "multi-ood.jsonl"}
SAMPLES = 4


def score(run_dir: Path, parts: Path, arm: str, seed: int, eval_prompts: int, initial: bool) -> int:
    import torch  # only in this child process

    from core import model as model_lib
    from core.prompt_sets import load_prompts
    from core.run.step import held_out_rewards
    from core.run.store import RunStore
    from core.run.store_read import step_of

    torch.set_num_threads(1)
    store = RunStore(run_dir)
    cfg = TrainConfig.from_json(run_dir / "config.json")
    names = load_prompts(cfg)[1]
    sets = {name: load_prompts(cfg, str(path))[0][:eval_prompts] for name, path in SETS.items()}
    todo = [(0, cfg.model)] if initial else [(step_of(c), str(c)) for c in store.checkpoints()]
    parts.mkdir(parents=True, exist_ok=True)
    for step, weights in todo:
        part = parts / f"step-{step}.csv"
        if part.exists():
            continue
        t0 = time.perf_counter()
        model, tok, _ = model_lib.load_policy(weights, device=cfg.device)
        model.float().eval()
        rows = []
        for set_name, items in sets.items():
            ids = [model_lib.encode_prompt(tok, item.prompt()) for item in items]
            rewards = held_out_rewards(model, tok, items, ids, names, samples=SAMPLES,
                                       max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, seed=seed)
            rows += [[arm, seed, step, set_name, key, metric, value]
                     for key, metric, value in rep.prompt_rows(rewards.tolist(), [i.key for i in items], names,
                                                               SAMPLES)]
        tmp = part.with_suffix(".tmp")
        pd.DataFrame(rows, columns=rep.CSV_COLUMNS).to_csv(tmp, index=False)
        os.replace(tmp, part)  # a part file is whole or absent
        held = next(v for _, _, s, n, k, m, v in rows if n == "heldout" and k == "" and m == rep.ALL)
        print(f"{arm}-s{seed} step {step}: scored in {time.perf_counter() - t0:.1f} s, held-out all-satisfied "
              f"{held:.3f}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m core.tools.study_v4_score", description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("parts", type=Path)
    p.add_argument("--arm", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--eval-prompts", type=int, default=128)
    p.add_argument("--initial", action="store_true", help="score the run's untrained model (step 0) instead")
    args = p.parse_args(argv)
    return score(args.run_dir, args.parts, args.arm, args.seed, args.eval_prompts, args.initial)


if __name__ == "__main__":
    sys.exit(main())
