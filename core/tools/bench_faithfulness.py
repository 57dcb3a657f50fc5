"""`mrtpo bench faithfulness`: how reward-specific each relevance variant's routing is, on fixed samples.

    mrtpo bench faithfulness [--model tiny-instruct] [--prompts 64] [--samples 4] [--out docs/results]

Samples `--samples` responses to each of the first `--prompts` prompts of the prompt set (default: the
default set, the policy as shipped, seed 0), verifies them, and for every relevance variant of
`core.algos.routing.RELEVANCE` replays every applicable (sample, reward) pair (`replay_pairs=all`) and
computes, per reward, the span metrics of docs/METHOD.md ("Span agreement", "Specificity"): mass_in and
its ceiling, lift and lift with rotated reward labels, mass_in with rotated labels, retained mass (docs/METHOD.md,
"Reading the credit metrics"), mass control, overlap, auc, auc minus the entropy baseline's, auc by outcome. The
same metrics for five baselines that need no replay: `random` (uniform noise), `position` (1 / (t + 1): early
tokens), `entropy` (the policy's next-token entropy, the same for every reward), `span` (the verifier span mask
itself, the oracle) and `scatter` (a useless router: each reward on one distinct token outside its own span, which
scores low overlap and control). Routing weights use
`--routing-clip` (default: the trainer's, `clip`). Cost: contrastive passes per response and seconds of replay per batch,
next to one GDPO step (sample + verify + update) on the same batch. Metrics are averaged over batches.
Writes `faithfulness-<model>-<routing_clip>.md` and `.csv` under `--out` and prints the Markdown.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path

from core.choices import ROUTING_CLIPS
from core.config import REPLAY_DTYPES, TrainConfig

METRICS = ("mass_in", "mass_in_ceiling", "lift", "lift_rotated", "mass_in_rotated", "retained", "mass_control",
           "overlap", "auc", "auc_vs_entropy",
           "auc_satisfied", "auc_violated", "auc_control")
BASELINES = ("random", "position", "entropy", "span", "scatter")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mrtpo bench faithfulness", description=__doc__.split("\n\n")[1])
    p.add_argument("--model", default="tiny-instruct", help="preset or local model folder (default: tiny-instruct)")
    p.add_argument("--prompt-set", default="sample_data/prompts/default.jsonl")
    p.add_argument("--prompts", type=int, default=64, help="prompts (the first ones of the set; default 64)")
    p.add_argument("--samples", type=int, default=4, help="responses per prompt (default 4)")
    p.add_argument("--batch-prompts", type=int, default=16, help="prompts per batch (default 16)")
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--replay-chunk", type=int, default=16)
    p.add_argument("--replay-dtype", default="auto", choices=REPLAY_DTYPES,
                   help="precision of the contrastive passes (default: auto, the run's: fp32 on CPU)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda"))
    p.add_argument("--routing-clip", default=TrainConfig.routing_clip, choices=ROUTING_CLIPS,
                   help=f"weights above w_max: mass (redistributed) or clip (lost); default {TrainConfig.routing_clip}, "
                        "the trainer's")
    p.add_argument("--out", default="docs/results", help="folder of the Markdown and CSV report")
    return p


# Two-sided 95% Student t quantiles by degrees of freedom (n - 1); beyond 30 the normal 1.96.
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        15: 2.131, 20: 2.086, 30: 2.042}


def interval95(values: list[float]) -> tuple[float, float]:
    """95% interval of the mean over batches: mean -/+ t_{0.975, n-1} * sd / sqrt(n) (sd with n - 1);
    (nan, nan) with fewer than 2 finite values. Degrees of freedom between table entries use the next lower one."""
    vals = [v for v in values if v is not None and not math.isnan(v)]
    n = len(vals)
    if n < 2:
        return float("nan"), float("nan")
    m = sum(vals) / n
    sd = math.sqrt(sum((v - m) ** 2 for v in vals) / (n - 1))
    t = 1.96 if n - 1 > 30 else _T95[max(d for d in _T95 if d <= n - 1)]
    half = t * sd / math.sqrt(n)
    return m - half, m + half


def baseline_relevance(name: str, span_mask, mask, entropy, applicable, seed: int):
    """(B, K, T) relevance of a baseline (NaN where a reward does not apply): `random` uniform noise,
    `position` 1 / (t + 1), `entropy` the policy's next-token entropy, `span` the span mask (the oracle)."""
    import torch

    b, k, t = span_mask.shape
    if name == "random":
        rel = torch.rand((b, k, t), generator=torch.Generator().manual_seed(seed))
    elif name == "position":
        rel = (1.0 / (torch.arange(t, dtype=torch.float32) + 1.0)).expand(b, k, t)
    elif name == "entropy":
        rel = entropy.float()[:, None, :].expand(b, k, t)
    elif name == "span":
        rel = span_mask.float()
    elif name == "scatter":  # issue 28's useless router: each reward on one distinct token outside its own span
        rel = torch.zeros((b, k, t))
        for i in range(b):
            used: set[int] = set()
            real = [tt for tt in range(t) if mask[i, tt] > 0]
            for kk in range(k):
                free = [tt for tt in real if tt not in used and not bool(span_mask[i, kk, tt])]
                if free:
                    rel[i, kk, free[0]] = 1.0
                    used.add(free[0])
    else:
        raise ValueError(f"unknown baseline {name!r}; valid: {', '.join(BASELINES)}")
    rel = rel * mask.float()[:, None, :]
    return torch.where(applicable[:, :, None], rel, torch.full_like(rel, float("nan")))


def relevance_metrics(rel, weights, scores, mask, names, entropy, group_adv=None, w_max: float = 5.0
                      ) -> dict[str, dict[str, float]]:
    """reward -> metric -> value for one batch (METRICS), plus "*" -> {"overlap": the response-level mean}.
    `retained` (the share of each reward's GDPO advantage mass the routing keeps) needs the group advantages
    (B, K); without them it is NaN."""
    import torch

    from core.algos import span_metrics

    app = scores.applicable
    flat = span_metrics.span_agreement(rel, weights, scores.span_mask, mask, names, app)
    flat.update(span_metrics.specificity(weights, rel, scores.span_mask, mask, scores.rewards, names, app, entropy))
    flat.update(span_metrics.rotated_controls(weights, scores.span_mask, mask, app, names))
    adv = group_adv if group_adv is not None else torch.zeros(app.shape)
    flat.update(span_metrics.credit_mass(weights, adv, mask, app, names, w_max))
    out = {name: {m: flat[f"span/{name}/{m}"] for m in METRICS} for name in names}
    out["*"] = {"overlap": flat["span/overlap"]}
    return out


def run(args) -> tuple[list[dict], list[dict], dict]:
    """(metric rows, cost rows, settings): one row per (relevance or baseline, reward)."""
    import torch

    from core.algos import advantages as adv_lib
    from core.algos import routing as routing_lib
    from core.run import lifecycle
    from core.run import step as step_lib

    torch.set_num_threads(max(1, torch.get_num_threads()))
    base = TrainConfig(model=args.model, prompt_set=args.prompt_set, group_size=args.samples,
                       prompts_per_step=args.batch_prompts, max_new_tokens=args.max_new_tokens,
                       replay_chunk=args.replay_chunk, replay_dtype=args.replay_dtype, seed=args.seed,
                       device=args.device, replay_pairs="all", routing_clip=args.routing_clip,
                       runs_dir="runs", checkpoint_every=0, steps=1)
    state = lifecycle.build_state(base)
    state.items = state.items[: args.prompts]
    gdpo = lifecycle.build_state(dataclasses.replace(base, method="gdpo"))
    names = state.reward_names
    n_batches = math.ceil(len(state.items) / args.batch_prompts)
    sums: dict[tuple[str, str, str], list[float]] = {}
    cost: dict[str, dict[str, list[float]]] = {}

    def add(label: str, per_reward: dict[str, dict[str, float]]) -> None:
        for reward, values in per_reward.items():
            for metric, value in values.items():
                sums.setdefault((label, reward, metric), []).append(value)

    for batch in range(1, n_batches + 1):
        t0 = time.perf_counter()
        rollout = step_lib.collect_rollout(state, batch, keep_logits=True)
        scores = step_lib.verify(state, rollout)
        t_sample = time.perf_counter() - t0
        t0 = time.perf_counter()
        logprobs = step_lib.rollout_logprobs(state, rollout)
        t_logprobs = time.perf_counter() - t0
        entropy = logprobs.entropy.float().cpu()
        group_adv = adv_lib.group_normalized(scores.rewards, args.samples, base.eps)  # (B, K) for `retained`
        for variant in routing_lib.RELEVANCE:
            state.cfg = dataclasses.replace(base, relevance=variant)
            t0 = time.perf_counter()
            routing = step_lib.route(state, rollout, scores, logprobs)
            seconds = time.perf_counter() - t0
            rel = routing_lib.get_relevance(variant)(routing.distances, routing.replayed)
            add(variant, relevance_metrics(rel, routing.weights, scores, rollout.mask, names, entropy, group_adv,
                                           base.w_max))
            c = cost.setdefault(variant, {"passes": [], "replay_s": [], "logprobs_s": []})
            c["passes"].append(float(routing.replayed.sum()) / rollout.mask.shape[0])
            c["replay_s"].append(seconds)
            c["logprobs_s"].append(t_logprobs)
        for name in BASELINES:
            rel = baseline_relevance(name, scores.span_mask, rollout.mask, entropy, scores.applicable,
                                     args.seed + batch)
            weights = routing_lib.routing_weights(rel, rollout.mask, w_max=base.w_max, clip=base.routing_clip)
            add(name, relevance_metrics(rel, weights, scores, rollout.mask, names, entropy, group_adv, base.w_max))
        rollout.logits = None
        t0 = time.perf_counter()
        step_lib.train_step(gdpo, batch, rollout=rollout)  # verify + update of GDPO on the same responses
        cost.setdefault("gdpo", {"step_s": []})["step_s"].append(t_sample + time.perf_counter() - t0)
        print(f"batch {batch}/{n_batches} done", file=sys.stderr, flush=True)

    def mean(values: list[float]) -> float:
        values = [v for v in values if v is not None and not math.isnan(v)]
        return sum(values) / len(values) if values else float("nan")

    rows = []
    for label in (*routing_lib.RELEVANCE, *BASELINES):
        for reward in (*names, "*"):
            row = {"relevance": label, "reward": reward}
            row.update({m: mean(sums.get((label, reward, m), [])) for m in (("overlap",) if reward == "*" else METRICS)})
            if reward != "*":
                row["lift_lo"], row["lift_hi"] = interval95(sums.get((label, reward, "lift"), []))
            rows.append(row)
    gdpo_s = mean(cost["gdpo"]["step_s"])
    cost_rows = [{"relevance": "gdpo", "passes_per_response": 0.0, "replay_s_per_batch": 0.0,
                  "step_s": gdpo_s, "step_vs_gdpo": 1.0}]
    for variant in routing_lib.RELEVANCE:
        c = cost[variant]
        step_s = gdpo_s + mean(c["logprobs_s"]) + mean(c["replay_s"])
        cost_rows.append({"relevance": variant, "passes_per_response": mean(c["passes"]),
                          "replay_s_per_batch": mean(c["replay_s"]), "step_s": step_s, "step_vs_gdpo": step_s / gdpo_s})
    settings = {"model": args.model, "prompt_set": args.prompt_set, "prompts": len(state.items),
                "samples": args.samples, "batches": n_batches, "responses_per_batch": args.batch_prompts * args.samples,
                "max_new_tokens": args.max_new_tokens, "routing_clip": args.routing_clip, "seed": args.seed,
                "threads": torch.get_num_threads()}
    return rows, cost_rows, settings


def _fmt(v: float) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"


def markdown(rows: list[dict], cost_rows: list[dict], settings: dict) -> str:
    """The report: settings, cost per variant, overlap per variant, one table per reward."""
    lines = [f"# Faithfulness of the relevance variants ({settings['model']})", "",
             "Produced by `mrtpo bench faithfulness` (" + ", ".join(f"{k} {v}" for k, v in settings.items()) + ").",
             "Metrics: docs/METHOD.md, \"Span agreement\" and \"Specificity\"; every applicable (sample, reward) pair "
             "replayed; averages over batches. Baselines need no replay.", "",
             "## Cost and overlap", "",
             "| relevance | contrastive passes / response | replay s / batch | step s (est.) | x GDPO | mean pairwise overlap |",
             "|---|---|---|---|---|---|"]
    overlap = {r["relevance"]: r["overlap"] for r in rows if r["reward"] == "*"}
    for c in cost_rows:
        lines.append(f"| {c['relevance']} | {_fmt(c['passes_per_response'])} | {_fmt(c['replay_s_per_batch'])} | "
                     f"{_fmt(c['step_s'])} | {_fmt(c['step_vs_gdpo'])} | {_fmt(overlap.get(c['relevance'], 1.0))} |")
    for label in BASELINES:
        lines.append(f"| baseline: {label} | - | - | - | - | {_fmt(overlap[label])} |")
    lines += ["", "GDPO step = sample + verify + update on the batch; a variant's step is estimated as GDPO's + the "
              "p_t log-softmax + its replay (every applicable pair; `replay_pairs=nonzero_adv` runs fewer).", ""]
    for reward in dict.fromkeys(r["reward"] for r in rows if r["reward"] != "*"):
        lines += [f"## {reward}", "", "| relevance | " + " | ".join(METRICS) + " |",
                  "|---" * (len(METRICS) + 1) + "|"]
        for r in rows:
            if r["reward"] == reward:
                lines.append(f"| {r['relevance']} | " + " | ".join(_fmt(r[m]) for m in METRICS) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import pandas as pd

    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    rows, cost_rows, settings = run(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tag = f"{Path(args.model).name}-{args.routing_clip}"
    pd.DataFrame(rows).to_csv(out / f"faithfulness-{tag}.csv", index=False)
    pd.DataFrame(cost_rows).to_csv(out / f"faithfulness-{tag}-cost.csv", index=False)
    text = markdown(rows, cost_rows, settings)
    (out / f"faithfulness-{tag}.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
