"""`mrtpo bench overhead`: MRTPO's step time against GDPO's on the same batches, printed.

    mrtpo bench overhead [--model PATH] [--checkpoint RUN/checkpoints/step_000100] [--repeats 3]

It times one MRTPO step (contrastive replay) against one GDPO step on the same batches, in one
process: every repeat samples one batch twice with the same seed (the same responses: once as GDPO
samples, once keeping the sampling's logits as MRTPO does), verifies it, then runs the rest of the
step for GDPO and for MRTPO from the same model and optimizer state. What each step includes:
GDPO = sample + verify + update (log pi_old is the first update pass's, detached); MRTPO = sample
(keeping p_t) + verify + p_t log-softmax + contrastive passes for the (sample, reward) pairs whose
group advantage is nonzero + update. `--checkpoint` starts from a run's checkpoint (a policy that has
learned the easy rewards, so most pairs are skipped) and draws the batches that run would draw next.
Targets: MRTPO step <= 1.15x GDPO's on the initial model, <= 1.05x from a step-100 checkpoint.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from core.config import REPLAY_DTYPES

TARGET_FRESH = 1.15
TARGET_TRAINED = 1.05


def _overhead_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mrtpo bench overhead", description=__doc__.split("\n\n")[1])
    p.add_argument("--model", help="preset or local model folder (default: the checkpoint's run's, else tiny-instruct)")
    p.add_argument("--micro", action="store_true", help="use a micro random model built on the fly (smoke test)")
    p.add_argument("--checkpoint", metavar="DIR",
                   help="start from a run's checkpoint folder (RUN/checkpoints/step_NNNNNN): its policy and optimizer, "
                        "and the batches its run would draw after that step; the run's model, prompt set, "
                        "max_new_tokens and relevance unless given")
    p.add_argument("--prompt-set", help="default: the checkpoint's run's, else sample_data/prompts/default.jsonl")
    p.add_argument("--prompts", type=int, default=4, help="prompts per batch (default: 4)")
    p.add_argument("--group-size", type=int, default=8, help="responses per prompt (default: 8)")
    p.add_argument("--min-rewards", type=int, default=3, help="use prompts with at least this many rewards (default: 3)")
    p.add_argument("--max-new-tokens", type=int, help="default: the checkpoint's run's, else 48")
    p.add_argument("--relevance", help="MRTPO's relevance variant (default: the checkpoint's run's, else the default)")
    p.add_argument("--replay-chunk", type=int, default=16)
    p.add_argument("--replay-dtype", default="auto", choices=REPLAY_DTYPES,
                   help="precision of the contrastive passes (default: auto, the run's: fp32 on CPU)")
    p.add_argument("--repeats", type=int, default=3, help="timed batches (after one warm-up batch)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--seed", type=int, default=0)
    return p


DEFAULT_PROMPT_SET = "sample_data/prompts/default.jsonl"


def checkpoint_run_config(checkpoint: Path) -> dict:
    """The config.json of the run a checkpoint folder (RUN/checkpoints/step_NNNNNN) belongs to; {} if unreadable."""
    try:
        data = json.loads((checkpoint.parent.parent / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def overhead(argv: list[str]) -> int:
    args = _overhead_parser().parse_args(argv)
    checkpoint = None
    if args.checkpoint:
        checkpoint = Path(args.checkpoint)
        if not (checkpoint / "config.json").is_file() or not (checkpoint / "trainer_state.json").is_file():
            print(f"mrtpo bench overhead: {args.checkpoint!r} is not a checkpoint folder "
                  "(expected RUN/checkpoints/step_NNNNNN with config.json and trainer_state.json)", file=sys.stderr)
            return 2
    from core.config import DEFAULT_RELEVANCE, ConfigError, TrainConfig
    from core.model import ModelLoadError
    from core.presets import missing_model_hint

    run_config = checkpoint_run_config(checkpoint) if checkpoint is not None else {}
    model = args.model or run_config.get("model", "tiny-instruct")
    tmp = None
    if args.micro:
        from core.tools.fixtures import make_micro_model

        tmp = tempfile.TemporaryDirectory(prefix="mrtpo-bench-")
        model = str(make_micro_model(f"{tmp.name}/micro"))
    try:
        base = TrainConfig(
            model=model, prompt_set=args.prompt_set or run_config.get("prompt_set", DEFAULT_PROMPT_SET),
            method="mrtpo", group_size=args.group_size, prompts_per_step=args.prompts,
            max_new_tokens=args.max_new_tokens or run_config.get("max_new_tokens", 48),
            relevance=args.relevance or run_config.get("relevance", DEFAULT_RELEVANCE),
            replay_chunk=args.replay_chunk, replay_dtype=args.replay_dtype, device=args.device, seed=args.seed, steps=args.repeats + 1,
        )  # fmt: skip
        return _run_overhead(base, args, checkpoint)
    except (ConfigError, ModelLoadError) as exc:
        print(f"mrtpo bench overhead: {exc}{missing_model_hint(exc)}", file=sys.stderr)
        return 2
    finally:
        if tmp is not None:
            tmp.cleanup()


def _run_overhead(base, args, checkpoint: Path | None) -> int:
    import torch

    from core.run import lifecycle
    from core.run import step as step_lib

    first_step = 1
    if checkpoint is not None:
        first_step = int(json.loads((checkpoint / "trainer_state.json").read_text())["step"]) + 1
    state = lifecycle.build_state(base, model_path=None if checkpoint is None else str(checkpoint),
                                  optimizer_state=None if checkpoint is None else checkpoint / "optimizer.pt")
    state.items = [it for it in state.items if len(it.constraints) >= args.min_rewards] or state.items
    rewards = sorted({len(it.constraints) for it in state.items})
    init_model = copy.deepcopy(state.model.state_dict())
    init_opt = copy.deepcopy(state.optimizer.state_dict())
    configs = {m: dataclasses.replace(base, method=m) for m in ("gdpo", "mrtpo")}
    rows: dict[str, list[dict[str, float]]] = {m: [] for m in configs}
    shared: list[dict[str, float]] = []
    sync = torch.cuda.synchronize if state.device.type == "cuda" else (lambda: None)
    start = "the initial model" if checkpoint is None else f"checkpoint {checkpoint} (batches of steps {first_step}..)"
    print(
        f"model {base.model} on {state.device} from {start}, {base.prompts_per_step} prompts x G={base.group_size}, "
        f"{'/'.join(map(str, rewards))} rewards per prompt, max_new_tokens {base.max_new_tokens}, relevance {base.relevance}, replay precision {base.replay_dtype}, "
        f"{args.repeats} timed batches (+1 warm-up)",
        flush=True,
    )
    for n in range(args.repeats + 1):
        step = first_step + n
        state.model.load_state_dict(init_model)
        gen = {}
        for method, keep in (("gdpo", False), ("mrtpo", True)):  # same seed: the same responses
            state.cfg = configs[method]
            sync()
            t0 = time.perf_counter()
            gen[method] = (step_lib.collect_rollout(state, step, keep_logits=keep), time.perf_counter() - t0)
        assert torch.equal(gen["gdpo"][0].response_ids, gen["mrtpo"][0].response_ids)
        for method, cfg in configs.items():
            state.cfg = cfg
            state.model.load_state_dict(init_model)
            state.optimizer.load_state_dict(init_opt)
            sync()
            m = step_lib.train_step(state, step, rollout=gen[method][0]).metrics
            sync()
            if n > 0:
                rows[method].append({**m, "time/generate": gen[method][1]})
        if n > 0:
            shared.append({"tokens": int(gen["gdpo"][0].mask.sum())})

    def med(method: str, key: str) -> float:
        return statistics.median(r.get(key, 0.0) for r in rows[method])

    parts = ("time/generate", "time/verify", "time/logprobs", "time/replay", "time/advantages", "time/update")
    head = "".join(f"{key.split('/')[1]:>11}" for key in parts)
    print(f"\n{'':8}{head}{'step':>11}   (median seconds)")
    steps = {}
    for method in configs:
        times = [med(method, key) for key in parts]
        steps[method] = sum(times)
        print(f"{method:8}" + "".join(f"{x:11.3f}" for x in times) + f"{steps[method]:11.3f}")
    ratio = steps["mrtpo"] / steps["gdpo"]
    target = TARGET_FRESH if checkpoint is None else TARGET_TRAINED
    gen_g, gen_m = med("gdpo", "time/generate"), med("mrtpo", "time/generate")
    post = (steps["mrtpo"] - gen_m) / max(steps["gdpo"] - gen_g, 1e-9)
    print(f"\nMRTPO / GDPO step time: {ratio:.2f}x (target <= {target}x "
          f"{'from a trained checkpoint' if checkpoint else 'on the initial model'}: "
          f"{'met' if ratio <= target else 'NOT met'}); after generation: {post:.2f}x")
    shares = [r["replay/pass_share"] for r in rows["mrtpo"] if "replay/pass_share" in r]
    if shares:
        print(f"contrastive passes run: {statistics.median(shares):.0%} of the applicable (sample, reward) pairs "
              f"(median; per batch {', '.join(f'{x:.0%}' for x in shares)})")
    print(f"response tokens per batch: {statistics.median(s['tokens'] for s in shared):.0f}")
    print("GDPO step = sample + verify + update (log pi_old from the first update pass); MRTPO step = sample "
          "keeping p_t + verify + logprobs (p_t log-softmax) + replay (contrastive passes) + update")
    return 0


def main(argv: list[str] | None = None) -> int:
    return overhead(list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
