"""`mrtpo bench trl`: MRTPOTrainer against TRL's own GDPO on the same batches, on 1 and on N processes.

    mrtpo bench trl [--model tiny-instruct] [--nproc 1 2] [--repeats 3] [--device auto]

For each process count (1: this machine's one process; N > 1: `torch.distributed.run --standalone`, gloo on
CPU, NCCL on GPU) it trains TRL's `GRPOTrainer` with `multi_objective_aggregation="normalize_then_sum"` (GDPO)
and `MRTPOTrainer` (replay routing) for `repeats` + 1 optimizer steps each. Before every step both start from
the same weights, an empty optimizer state and the same random seed, and TRL's sampler hands both the same
prompts, so both train on the same batch (generation included: it is part of TRL's step). The first step is
a warm-up; the table shows medians of the others: seconds per optimizer step, response tokens per second,
MRTPO's phases (TRL's generation and scoring, verify, replay, advantages) and the MRTPO / GDPO ratio.
Compare the ratio with the built-in trainer's (`mrtpo bench overhead`) measured beside it.

On a GPU: `mrtpo bench trl --model smollm2-135m --device cuda --max-new-tokens 256` (bf16 autocast, fp32
master weights, as `mrtpo train --backend trl` runs there).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

PREFIX = "BENCH_TRL_RESULT "  # a worker's result line


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mrtpo bench trl", description=__doc__.split("\n\n")[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="tiny-instruct", help="preset or local model folder (default: tiny-instruct)")
    p.add_argument("--prompt-set", default="sample_data/prompts/default.jsonl")
    p.add_argument("--prompts", type=int, default=4, help="prompts per step (default: 4)")
    p.add_argument("--group-size", type=int, default=8, help="responses per prompt (default: 8)")
    p.add_argument("--min-rewards", type=int, default=3, help="use prompts with at least this many rewards (default: 3)")
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--replay-chunk", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3, help="timed steps per trainer (after one warm-up step)")
    p.add_argument("--nproc", type=int, nargs="+", default=[1, 2], help="process counts to measure (default: 1 2)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return p


def _config(args):
    from core.config import TrainConfig

    return TrainConfig(
        model=args.model, prompt_set=args.prompt_set, method="mrtpo", group_size=args.group_size,
        prompts_per_step=args.prompts, max_new_tokens=args.max_new_tokens, replay_chunk=args.replay_chunk,
        device=args.device, seed=args.seed, steps=args.repeats + 1, backend="trl", runs_dir="runs",
    )


def worker(args) -> int:
    """One process of the measurement: both trainers, `repeats` + 1 steps each; rank 0 prints the result."""
    import tempfile

    import torch
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from core import model as model_lib
    from core.integrations import trl_train
    from core.integrations.trl import MRTPOTrainer, prompt_dataset, verifier_rewards

    cfg = _config(args)
    items, _ = cfg.load_prompts()
    items = [it for it in items if len(it.constraints) >= args.min_rewards] or items
    world, rank = trl_train.world_size(), int(os.environ.get("RANK", "0"))
    on_cpu = trl_train.use_cpu(cfg)

    class SameBatch(TrainerCallback):
        """Reset weights, optimizer state and the random seed before every step; time each step."""

        def __init__(self, trainer):
            self.trainer, self.times, self.tokens = trainer, [], []
            self.init = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}

        def on_train_begin(self, a, state, control, **kw):
            self.opt = {k: v for k, v in self.trainer.optimizer.state_dict().items()}

        def on_step_begin(self, a, state, control, **kw):
            self.trainer.model.load_state_dict(self.init)
            self.trainer.optimizer.load_state_dict(self.opt)
            torch.manual_seed(args.seed * 1000 + 17 * rank)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            self.start = time.perf_counter()
            self.seen = self.trainer.state.num_input_tokens_seen

        def on_step_end(self, a, state, control, **kw):
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            self.times.append(time.perf_counter() - self.start)
            self.tokens.append(self.trainer._metrics["train"]["completions/mean_length"][-1])

    results, phases = {}, {}
    for method in ("gdpo", "mrtpo"):
        model, tok, _ = model_lib.load_policy(cfg.model, device="cpu")
        data = prompt_dataset(items, tok)
        with tempfile.TemporaryDirectory(prefix="mrtpo-bench-trl-") as out:
            fields = trl_train.grpo_fields(cfg, out, on_cpu, world)
            if method == "gdpo":
                trainer = GRPOTrainer(model, reward_funcs=verifier_rewards(data), args=GRPOConfig(**fields),
                                      train_dataset=data, processing_class=tok)
            else:
                config = trl_train.trl_args(cfg, out, on_cpu, world)
                config.runs_dir = None  # time the training step, not the run store (as `mrtpo bench overhead`)
                trainer = MRTPOTrainer(model, args=config, train_dataset=data, processing_class=tok)
                batches = []
                real = trainer._token_advantages

                def keep_times(inputs, out_, times, real=real, batches=batches):
                    local = real(inputs, out_, times)
                    batches.append(times)
                    return local

                trainer._token_advantages = keep_times
            timer = SameBatch(trainer)
            trainer.add_callback(timer)
            trainer.remove_callback(trl_train.PrinterCallback)
            trainer.train()
        step = statistics.median(timer.times[1:])
        tokens = statistics.median(timer.tokens[1:]) * cfg.prompts_per_step * cfg.group_size
        results[method] = {"step": step, "tokens_per_s": tokens / step, "steps": timer.times,
                           "lengths": timer.tokens}
        if method == "mrtpo":
            for key in ("time/generate", "time/verify", "time/replay", "time/advantages"):
                phases[key] = statistics.median(b[key] for b in batches[1:])
    if rank == 0:
        device = "cpu" if on_cpu else torch.cuda.get_device_name(0)
        print(PREFIX + json.dumps({"nproc": world, "device": device, "results": results, "phases": phases}), flush=True)
    return 0


def _measure(args, nproc: int) -> dict:
    flags = ["--model", args.model, "--prompt-set", args.prompt_set, "--prompts", str(args.prompts),
             "--group-size", str(args.group_size), "--min-rewards", str(args.min_rewards),
             "--max-new-tokens", str(args.max_new_tokens), "--replay-chunk", str(args.replay_chunk),
             "--repeats", str(args.repeats), "--device", args.device, "--seed", str(args.seed), "--worker"]
    if nproc == 1:
        cmd = [sys.executable, "-m", "core.tools.bench_trl", *flags]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc),
               "-m", "--", "core.tools.bench_trl", *flags]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    print(f"measuring {nproc} process{'es' if nproc > 1 else ''} ...", flush=True)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if line.startswith(PREFIX):
            return json.loads(line[len(PREFIX):])
    raise RuntimeError(f"the {nproc}-process measurement failed:\n{out.stderr[-3000:]}")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    from core.config import ConfigError, trl_problem

    if trl_problem():
        print(f"mrtpo bench trl: {trl_problem()}", file=sys.stderr)
        return 2
    try:
        cfg = _config(args)
        cfg.load_prompts()
    except (ConfigError, ValueError) as exc:
        print(f"mrtpo bench trl: {exc}", file=sys.stderr)
        return 2
    if args.worker:
        return worker(args)
    rows = [_measure(args, n) for n in args.nproc]
    print(f"\nmodel {args.model} on {rows[0]['device']}, {args.prompts} prompts x G={args.group_size}, "
          f"max_new_tokens {args.max_new_tokens}, medians of {args.repeats} steps (+1 warm-up), same batch for both")
    print(f"{'processes':>9} {'gdpo s/step':>12} {'mrtpo s/step':>13} {'MRTPO/GDPO':>11} {'mrtpo tok/s':>12}"
          f" {'generate':>9} {'verify':>7} {'replay':>7} {'adv':>6}")
    base = {}
    for row in rows:
        g, m, ph = row["results"]["gdpo"], row["results"]["mrtpo"], row["phases"]
        base.setdefault("mrtpo", m["step"])
        print(f"{row['nproc']:>9} {g['step']:12.3f} {m['step']:13.3f} {m['step'] / g['step']:10.2f}x "
              f"{m['tokens_per_s']:12.0f} {ph['time/generate']:9.3f} {ph['time/verify']:7.3f} "
              f"{ph['time/replay']:7.3f} {ph['time/advantages']:6.3f}")
    same = all(r["results"]["gdpo"]["lengths"] == r["results"]["mrtpo"]["lengths"] for r in rows)
    print(f"same batches for both trainers (mean response length of every step equal): {'yes' if same else 'NO'}")
    for row in rows[1:]:
        print(f"{row['nproc']} processes vs {rows[0]['nproc']}: MRTPO step {base['mrtpo'] / row['results']['mrtpo']['step']:.2f}x "
              f"faster, GDPO step {rows[0]['results']['gdpo']['step'] / row['results']['gdpo']['step']:.2f}x faster")
    print("compare the MRTPO/GDPO ratio with the built-in trainer's: mrtpo bench overhead")
    return 0


if __name__ == "__main__":
    sys.exit(main())
