"""`mrtpo bench overhead`: MRTPO's step time against GDPO's on the same batches, printed.

    mrtpo bench overhead [--model PATH] [--prompts 4] [--group-size 8] [--repeats 3]

It times one MRTPO step (contrastive replay) against one GDPO step on the same batches,
in one process: every repeat samples one batch (generation and verification are shared, they are
the same work for both methods), then runs the rest of the step for GDPO and for MRTPO from the
same model and optimizer state. MRTPO's extra cost is the K contrastive passes (the full-prompt
pass that gives the rollout log-probs is reused for p_t). Target: MRTPO step <= 1.3x GDPO's.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import statistics
import sys
import tempfile
import time

TARGET_RATIO = 1.3


def _overhead_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mrtpo bench overhead", description=__doc__.split("\n\n")[1])
    p.add_argument("--model", default="tiny-instruct", help="preset or local model folder (default: tiny-instruct)")
    p.add_argument("--micro", action="store_true", help="use a micro random model built on the fly (smoke test)")
    p.add_argument("--prompt-set", default="sample_data/prompts/default.jsonl")
    p.add_argument("--prompts", type=int, default=4, help="prompts per batch (default: 4)")
    p.add_argument("--group-size", type=int, default=8, help="responses per prompt (default: 8)")
    p.add_argument("--min-rewards", type=int, default=3, help="use prompts with at least this many rewards (default: 3)")
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--replay-chunk", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3, help="timed batches (after one warm-up batch)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--seed", type=int, default=0)
    return p


def overhead(argv: list[str]) -> int:
    args = _overhead_parser().parse_args(argv)
    from core.config import ConfigError, TrainConfig
    from core.model import ModelLoadError
    from core.paths import missing_model_hint

    model = args.model
    tmp = None
    if args.micro:
        from core.tools.fixtures import make_micro_model

        tmp = tempfile.TemporaryDirectory(prefix="mrtpo-bench-")
        model = str(make_micro_model(f"{tmp.name}/micro"))
    try:
        base = TrainConfig(
            model=model, prompt_set=args.prompt_set, method="mrtpo", group_size=args.group_size,
            prompts_per_step=args.prompts, max_new_tokens=args.max_new_tokens, replay_chunk=args.replay_chunk,
            device=args.device, seed=args.seed, steps=args.repeats + 1,
        )  # fmt: skip
        return _run_overhead(base, args)
    except (ConfigError, ModelLoadError) as exc:
        print(f"mrtpo bench overhead: {exc}{missing_model_hint(exc)}", file=sys.stderr)
        return 2
    finally:
        if tmp is not None:
            tmp.cleanup()


def _run_overhead(base, args) -> int:
    import torch

    from core.run import lifecycle
    from core.run import step as step_lib

    state = lifecycle.build_state(base)
    state.items = [it for it in state.items if len(it.constraints) >= args.min_rewards] or state.items
    rewards = sorted({len(it.constraints) for it in state.items})
    init_model = copy.deepcopy(state.model.state_dict())
    init_opt = copy.deepcopy(state.optimizer.state_dict())
    configs = {m: dataclasses.replace(base, method=m) for m in ("gdpo", "mrtpo")}
    rows: dict[str, list[dict[str, float]]] = {m: [] for m in configs}
    shared: list[dict[str, float]] = []
    print(
        f"model {base.model} on {state.device}, {base.prompts_per_step} prompts x G={base.group_size}, "
        f"{'/'.join(map(str, rewards))} rewards per prompt, max_new_tokens {base.max_new_tokens}, "
        f"{args.repeats} timed batches (+1 warm-up)",
        flush=True,
    )
    for step in range(1, args.repeats + 2):
        state.model.load_state_dict(init_model)
        t0 = time.perf_counter()
        rollout = step_lib.collect_rollout(state, step)
        t_gen = time.perf_counter() - t0
        tokens = int(rollout.mask.sum())
        for method, cfg in configs.items():
            state.cfg = cfg
            state.model.load_state_dict(init_model)
            state.optimizer.load_state_dict(init_opt)
            if state.device.type == "cuda":
                torch.cuda.synchronize()
            m = step_lib.train_step(state, step, rollout=rollout).metrics
            if state.device.type == "cuda":
                torch.cuda.synchronize()
            if step > 1:
                rows[method].append(m)
        if step > 1:
            shared.append({"generate": t_gen, "tokens": tokens})

    def med(method: str, key: str) -> float:
        return statistics.median(r[key] for r in rows[method])

    gen = statistics.median(s["generate"] for s in shared)
    parts = ("time/verify", "time/logprobs", "time/replay", "time/advantages", "time/update")
    head = "".join(f"{key.split('/')[1]:>11}" for key in parts)
    print(f"\n{'':8}{'generate':>11}{head}{'step':>11}   (median seconds)")
    steps = {}
    for method in configs:
        times = [med(method, key) for key in parts]
        steps[method] = gen + sum(times)
        print(f"{method:8}{gen:11.3f}" + "".join(f"{x:11.3f}" for x in times) + f"{steps[method]:11.3f}")
    ratio = steps["mrtpo"] / steps["gdpo"]
    post = (steps["mrtpo"] - gen) / max(steps["gdpo"] - gen, 1e-9)
    print(f"\nMRTPO / GDPO step time: {ratio:.2f}x (target <= {TARGET_RATIO}x: "
          f"{'met' if ratio <= TARGET_RATIO else 'NOT met'}); after generation: {post:.2f}x")
    print(f"response tokens per batch: {statistics.median(s['tokens'] for s in shared):.0f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return overhead(list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
