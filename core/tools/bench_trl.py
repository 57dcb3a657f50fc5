"""`mrtpo bench trl`: MRTPOTrainer against TRL's own GDPO on the same batches, on 1 and on N processes.

    mrtpo bench trl [--model tiny-instruct] [--nproc 1 2] [--repeats 3] [--device auto] [--store on|off|both]

For each process count (1: one process; N > 1: `torch.distributed.run --standalone`, gloo on CPU, NCCL on GPU) it
trains TRL's `GRPOTrainer` with `multi_objective_aggregation="normalize_then_sum"` (GDPO) and `MRTPOTrainer`
(replay routing, default relevance) for `repeats` + 1 optimizer steps each, interleaved: the trainers run in one
process, each in its own thread, and a `Baton` lets one run at a time, switching at every optimizer step (GDPO 1,
MRTPO 1, GDPO 2, ...), so a change of the machine's load falls on all alike. Before every step each trainer starts
from the same weights, an empty optimizer state and the same random seed, and TRL's sampler hands each the same
prompts, so all train on the same batch (generation included: it is part of TRL's step). MRTPO writes its run
store as a user's run does (a real `RunWriter` in a temporary folder, removed afterwards: status, metrics line and
credit map every step; the final checkpoint is written after the timed steps); `--store off` times it without
(`runs_dir` None), `--store both` interleaves two MRTPOTrainers, with and without, beside GDPO. The first step is a
warm-up; the table shows medians of the others: seconds per optimizer step, the ratio of the medians and the
median (and quartiles) of the per-step ratios, response tokens per second, MRTPO's phases (TRL's generation and
scoring, verify, replay, advantages), and the load average before and after. Compare the ratio with the built-in
trainer's (`mrtpo bench overhead`) measured beside it.

On a GPU: `mrtpo bench trl --model smollm2-135m --device cuda --max-new-tokens 256` (bf16 autocast, fp32
master weights, as `mrtpo train --backend trl` runs there).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

PREFIX = "BENCH_TRL_RESULT "  # a worker's result line
STORES = ("on", "off", "both")
# The trainers a worker interleaves, by --store: name -> MRTPO's run store on (None: TRL's GDPO, no store).
TRAINERS = {"on": {"gdpo": None, "mrtpo": True}, "off": {"gdpo": None, "mrtpo": False},
            "both": {"gdpo": None, "mrtpo": True, "mrtpo_no_store": False}}


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
    p.add_argument("--store", choices=STORES, default="on",
                   help="MRTPOTrainer's run store: on (default, as a user's run), off (runs_dir None), or both "
                        "(two MRTPOTrainers, with and without, interleaved with GDPO)")
    p.add_argument("--out", default=None, help="also write every measurement (each step's time) to this JSON file")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--store-dir", default=None, help=argparse.SUPPRESS)  # the workers' runs_dir (the parent's temp)
    return p


def _config(args):
    from core.config import TrainConfig

    return TrainConfig(
        model=args.model, prompt_set=args.prompt_set, method="mrtpo", group_size=args.group_size,
        prompts_per_step=args.prompts, max_new_tokens=args.max_new_tokens, replay_chunk=args.replay_chunk,
        device=args.device, seed=args.seed, steps=args.repeats + 1, backend="trl", runs_dir="runs",
    )


class Baton:
    """Strict turns between trainers that run in threads of one process: one runs at a time, in the order of
    `names`, and a thread hands the turn on at the start of each of its optimizer steps (`pass_on`), so the
    trainers' steps alternate. Each process of a multi-process run follows the same order, so their collective
    operations (DDP's all-reduce, TRL's gathers) pair up. A finished trainer drops out of the order."""

    def __init__(self, names: list[str]):
        self.names, self.turn, self.done = list(names), 0, set()
        self.cond = threading.Condition()
        self.taken: list[str] = []  # who held each turn, in order (the interleaving, for the report)

    def _mine(self, name: str) -> bool:
        return self.names[self.turn] == name

    def _advance(self) -> None:
        for k in range(1, len(self.names) + 1):
            i = (self.turn + k) % len(self.names)
            if self.names[i] not in self.done:
                self.turn = i
                return

    def wait(self, name: str) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self._mine(name))
            self.taken.append(name)

    def pass_on(self, name: str) -> None:
        """Give the turn to the next trainer still running and wait until it comes back."""
        with self.cond:
            self._advance()
            self.cond.notify_all()
            self.cond.wait_for(lambda: self._mine(name))
            self.taken.append(name)

    def finish(self, name: str) -> None:
        with self.cond:
            self.done.add(name)
            if self._mine(name):
                self._advance()
            self.cond.notify_all()


def worker(args) -> int:
    """One process of the measurement: the trainers interleaved, `repeats` + 1 steps each; rank 0 prints the
    result."""
    import torch
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from core import model as model_lib
    from core.integrations import trl_train
    from core.integrations.trl import MRTPOTrainer, prompt_dataset, verifier_rewards
    from core.prompt_sets import load_prompts

    cfg = _config(args)
    items, _ = load_prompts(cfg)
    items = [it for it in items if len(it.constraints) >= args.min_rewards] or items
    world, rank = trl_train.world_size(), int(os.environ.get("RANK", "0"))
    on_cpu = trl_train.use_cpu(cfg)
    order = list(TRAINERS[args.store])
    baton = Baton(order)

    class SameBatch(TrainerCallback):
        """At each step's start: hand the turn on and wait for it (`baton`), then reset weights, optimizer state
        and the random seed; time each step to its end (added last, so after the run store's own step end)."""

        def __init__(self, name, trainer):
            self.name, self.trainer, self.times, self.tokens = name, trainer, [], []
            self.init = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}

        def on_train_begin(self, a, state, control, **kw):
            self.opt = {k: v for k, v in self.trainer.optimizer.state_dict().items()}

        def on_step_begin(self, a, state, control, **kw):
            baton.pass_on(self.name)
            self.trainer.model.load_state_dict(self.init)
            self.trainer.optimizer.load_state_dict(self.opt)
            torch.manual_seed(args.seed * 1000 + 17 * rank)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            self.start = time.perf_counter()

        def on_step_end(self, a, state, control, **kw):
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            self.times.append(time.perf_counter() - self.start)
            self.tokens.append(self.trainer._metrics["train"]["completions/mean_length"][-1])

    with tempfile.TemporaryDirectory(prefix="mrtpo-bench-trl-") as out:
        trainers, timers, batches = {}, {}, {}
        for method, store in TRAINERS[args.store].items():
            model, tok, _ = model_lib.load_policy(cfg.model, device="cpu")
            data = prompt_dataset(items, tok)
            folder = os.path.join(out, method)
            if store is None:
                trainer = GRPOTrainer(model, reward_funcs=verifier_rewards(data),
                                      args=GRPOConfig(**trl_train.grpo_fields(cfg, folder, on_cpu, world)),
                                      train_dataset=data, processing_class=tok)
            else:
                config = trl_train.trl_args(cfg, folder, on_cpu, world)
                config.runs_dir = args.store_dir if store else None  # the store as a user's run has it
                config.run_name, config.print_steps = "bench", False
                trainer = MRTPOTrainer(model, args=config, train_dataset=data, processing_class=tok)
                real, batches[method] = trainer._token_advantages, []

                def keep_times(inputs, out_, times, real=real, kept=batches[method]):
                    local = real(inputs, out_, times)
                    kept.append(times)
                    return local

                trainer._token_advantages = keep_times
            timers[method] = SameBatch(method, trainer)
            trainer.add_callback(timers[method])
            trainer.remove_callback(trl_train.PrinterCallback)
            trainers[method] = trainer

        errors = {}

        def train(name):
            try:
                baton.wait(name)
                trainers[name].train()
            except BaseException as exc:  # reported below, after every thread ended
                errors[name] = exc
            finally:
                baton.finish(name)

        threads = [threading.Thread(target=train, args=(name,), name=f"bench-{name}") for name in order]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            name, exc = next(iter(errors.items()))
            raise RuntimeError(f"the {name} trainer failed") from exc

    results = {}
    for method, timer in timers.items():
        step = statistics.median(timer.times[1:])
        tokens = statistics.median(timer.tokens[1:]) * cfg.prompts_per_step * cfg.group_size
        results[method] = {"step": step, "tokens_per_s": tokens / step, "steps": timer.times,
                           "lengths": timer.tokens}
    phases = {method: {key: statistics.median(b[key] for b in kept[1:])
                       for key in ("time/generate", "time/verify", "time/replay", "time/advantages")}
              for method, kept in batches.items()}
    if rank == 0:
        device = "cpu" if on_cpu else torch.cuda.get_device_name(0)
        print(PREFIX + json.dumps({"nproc": world, "device": device, "results": results, "phases": phases,
                                   "order": order, "turns": baton.taken}), flush=True)
    return 0


def _measure(args, nproc: int) -> dict:
    """One worker run on `nproc` processes, with the load average (1 min) before and after it and, with the run
    store on, the number of metrics lines MRTPO's run store holds afterwards (the store was written)."""
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
    store = tempfile.mkdtemp(prefix="mrtpo-bench-trl-runs-")
    try:
        cmd += ["--store", args.store, "--store-dir", store]
        load_before = os.getloadavg()[0]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
        load_after = os.getloadavg()[0]
        for line in out.stdout.splitlines():
            if line.startswith(PREFIX):
                row = json.loads(line[len(PREFIX):])
                break
        else:
            raise RuntimeError(f"the {nproc}-process measurement failed:\n{out.stderr[-3000:]}")
        metrics = Path(store, "bench", "metrics.jsonl")
        row["store_lines"] = len(metrics.read_text(encoding="utf-8").splitlines()) if metrics.exists() else 0
    finally:
        shutil.rmtree(store, ignore_errors=True)
    return {**row, "load": [load_before, load_after]}


def interleaved(turns: list[str], steps: int, names: tuple[str, ...] | list[str] = ("gdpo", "mrtpo")) -> bool:
    """True when the trainers took turns in the order of `names` for all `steps` steps (`Baton.taken`): each step
    begins a turn, after one turn each to start (set up, first batch)."""
    return turns[:len(names) * (1 + steps)] == list(names) * (1 + steps)


def step_ratios(row: dict, method: str = "mrtpo", base: str = "gdpo") -> list[float]:
    """`method` / `base` step time of each timed step (warm-up left out): the trainers' k-th steps ran one right
    after the other on the same batch."""
    below, above = row["results"][base]["steps"][1:], row["results"][method]["steps"][1:]
    return [m / g for g, m in zip(below, above, strict=True)]


def quartiles(values: list[float]) -> tuple[float, float]:
    """(first, third) quartile; both the value itself for fewer than 2 values."""
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


LABELS = {"mrtpo": "MRTPO", "mrtpo_no_store": "MRTPO, store off"}


def report(args, rows: list[dict]) -> None:
    """The table: a line per process count and MRTPO trainer, then the checks (interleaving, same batches, the
    run store written) and the step-time ratio of 1 to N processes."""
    store = {"on": "on (a real run store in a temporary folder)", "off": "off (runs_dir None)",
             "both": "on and off (two MRTPOTrainers)"}[args.store]
    print(f"\nmodel {args.model} on {rows[0]['device']}, {args.prompts} prompts x G={args.group_size}, "
          f"max_new_tokens {args.max_new_tokens}, medians of {args.repeats} steps (+1 warm-up), same batch for every "
          f"trainer, steps interleaved ({', '.join(rows[0]['order'])}, ...), MRTPO's run store {store}")
    print(f"{'processes':>9} {'trainer':>16} {'gdpo s/step':>12} {'mrtpo s/step':>13} {'MRTPO/GDPO':>11} "
          f"{'per-step [quartiles]':>22} {'mrtpo tok/s':>12} {'generate':>9} {'verify':>7} {'replay':>7} {'adv':>6} "
          f"{'load before/after':>18}")
    for row in rows:
        g = row["results"]["gdpo"]
        for method in row["order"][1:]:
            m, ph = row["results"][method], row["phases"][method]
            if args.store == "off":
                label = "MRTPO, store off"
            else:
                label = LABELS[method] + (", store on" if method == "mrtpo" else "")
            ratios = step_ratios(row, method)
            lo, hi = quartiles(ratios)
            print(f"{row['nproc']:>9} {label:>16} {g['step']:12.3f} {m['step']:13.3f} {m['step'] / g['step']:10.2f}x "
                  f"{statistics.median(ratios):8.2f}x [{lo:.2f}, {hi:.2f}] {m['tokens_per_s']:12.0f} "
                  f"{ph['time/generate']:9.3f} {ph['time/verify']:7.3f} {ph['time/replay']:7.3f} "
                  f"{ph['time/advantages']:6.3f} {row['load'][0]:>9.2f} / {row['load'][1]:.2f}")
    print("MRTPO/GDPO: ratio of the median step times; per-step: median (and quartiles) of the step-by-step ratios; "
          "load: 1-minute load average")
    alternate = all(interleaved(r["turns"], args.repeats + 1, r["order"]) for r in rows)
    print(f"steps interleaved (turns {', '.join(rows[0]['order'])}, ... from the start to the last step): "
          f"{'yes' if alternate else 'NO'}")
    same = all(len({json.dumps(t["lengths"]) for t in r["results"].values()}) == 1 for r in rows)
    print(f"same batches for every trainer (mean response length of every step equal): {'yes' if same else 'NO'}")
    for row in rows if args.store == "both" else []:
        ratios = step_ratios(row, "mrtpo", "mrtpo_no_store")
        lo, hi = quartiles(ratios)
        print(f"the run store's cost on {row['nproc']} process{'es' if row['nproc'] > 1 else ''}: MRTPO step with / "
              f"without it, per step: median {statistics.median(ratios):.3f}x [{lo:.3f}, {hi:.3f}]")
    if args.store != "off":
        lines = ", ".join(f"{r['store_lines']} ({r['nproc']} process{'es' if r['nproc'] > 1 else ''})" for r in rows)
        print(f"MRTPO's run store, metrics lines written: {lines}")
    for row in rows[1:]:
        speed = {k: rows[0]["results"][k]["step"] / row["results"][k]["step"] for k in row["order"]}
        print(f"step time on {rows[0]['nproc']} / on {row['nproc']} processes: "
              + ", ".join(f"{LABELS.get(k, 'GDPO')} {v:.2f}x" for k, v in speed.items()))
    print("compare the MRTPO/GDPO ratio with the built-in trainer's: mrtpo bench overhead")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    from core.config import ConfigError, trl_problem
    from core.prompt_sets import load_prompts

    if trl_problem():
        print(f"mrtpo bench trl: {trl_problem()}", file=sys.stderr)
        return 2
    try:
        cfg = _config(args)
        load_prompts(cfg)
    except (ConfigError, ValueError) as exc:
        print(f"mrtpo bench trl: {exc}", file=sys.stderr)
        return 2
    if args.worker:
        return worker(args)
    rows = [_measure(args, n) for n in args.nproc]
    report(args, rows)
    if args.out:
        settings = {k: v for k, v in vars(args).items() if k not in ("worker", "store_dir", "out")}
        Path(args.out).write_text(json.dumps({"settings": settings, "rows": rows}, indent=1) + "\n")
        print(f"every measurement: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
