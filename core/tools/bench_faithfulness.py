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
`--routing-clip` (default: the trainer's, `clip`). Each (contrast, distance) pass runs once per batch and serves every
variant reading it. Cost: contrastive passes per response and seconds of replay per batch (a variant's: the seconds of
the passes it reads, what it costs alone), next to one GDPO step (sample + verify + update) on the same batch
(`--no-gdpo-step` skips that update; a variant's step is then timed with the mean GDPO step of the batches that ran it). Every column is the mean over batches with its
95% t interval over batches (docs/METHOD.md, "Intervals over batches").
Writes `faithfulness-<model>-<routing_clip>.md` and `.csv` under `--out` and prints the Markdown.

Each finished batch's raw values are saved at once to `faithfulness-<model>-<routing_clip>-batches/batch-NNNN.csv`
under `--out` (beside `settings.json`, the settings that fix the samples); a re-run with the same settings skips the
saved batches (different settings are refused), and the reports are computed from the saved batches. `--batches N`
stops after the first N batches (and reports those). A saved batch that lacks labels added since (new variants) gets them: its samples are drawn
again (the same seeds), the `span` baseline is recomputed and must equal the saved values, and only the missing
labels' rows are appended.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from pathlib import Path

from core.choices import ROUTING_CLIPS
from core.config import REPLAY_DTYPES, TrainConfig

METRICS = ("mass_in", "mass_in_ceiling", "lift", "lift_rotated", "mass_in_rotated", "retained", "mass_control",
           "overlap", "auc", "auc_vs_entropy",
           "auc_satisfied", "auc_violated", "auc_control")
BASELINES = ("random", "position", "entropy", "span", "scatter")
# The training controls of issue 42 (docs/METHOD.md, "Controls"), measured as the trainer routes them: js's
# weights and relevance permuted over each response's tokens (the same permutation for both), and the top-q entropy
# routing (q = TrainConfig.entropy_q) that every reward shares. No replay beyond js's.
CONTROLS = ("js+shuffle", "top-entropy")


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
    p.add_argument("--auto-evidence", default="tiny-multi",
                   help="whose evidence the `auto` variant's per-family choice comes from (core/evidence/NAME.json; "
                        "default tiny-multi, the embedded model's)")
    p.add_argument("--no-gdpo-step", action="store_true",
                   help="skip the GDPO update that times the cost columns on the batches computed now (a third of a "
                        "CPU batch); their costs then use the mean GDPO step of the batches that measured it")
    p.add_argument("--batches", type=int, default=None,
                   help="stop after the first N batches and report them (default: all); the saved ones are skipped")
    return p


# The settings that fix a batch's samples and values: a resumed run must have the same ones.
SAVED_SETTINGS = ("model", "prompt_set", "prompts", "samples", "batch_prompts", "max_new_tokens", "replay_chunk",
                  "replay_dtype", "seed", "device", "routing_clip", "auto_evidence")
# A setting added after batches were saved without it: what those batches were computed with.
SAVED_DEFAULTS = {"auto_evidence": "tiny-multi"}
BATCH_COLUMNS = ("kind", "relevance", "reward", "metric", "value")


def batch_dir(args) -> Path:
    """The folder of the saved batches of a run: `<out>/faithfulness-<model>-<routing_clip>-batches`."""
    return Path(args.out) / f"faithfulness-{Path(args.model).name}-{args.routing_clip}-batches"


def open_batch_dir(args) -> Path:
    """The saved-batches folder, made with this run's settings, or checked against the saved ones (SystemExit with
    the differing settings when they differ: the saved batches would not be the same samples)."""
    folder = batch_dir(args)
    now = {k: getattr(args, k) for k in SAVED_SETTINGS}
    path = folder / "settings.json"
    if path.exists():
        saved = json.loads(path.read_text())
        saved = {**SAVED_DEFAULTS, **saved}
        diff = [f"{k}: saved {saved.get(k)!r}, now {now[k]!r}" for k in SAVED_SETTINGS if saved.get(k) != now[k]]
        if diff:
            raise SystemExit(f"mrtpo bench faithfulness: {folder} holds batches saved with other settings ("
                             + "; ".join(diff) + "); run with those settings to resume, or use another --out "
                             "(or remove that folder) to start afresh")
    else:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(now, indent=1) + "\n")
    return folder


def batch_path(folder: Path, batch: int) -> Path:
    return folder / f"batch-{batch:04d}.csv"


def save_batch(folder: Path, batch: int, rows: list[tuple]) -> None:
    """One batch's raw values (BATCH_COLUMNS rows), written to a temporary file and renamed: a crash leaves
    either the whole batch or none of it."""
    import pandas as pd

    path = batch_path(folder, batch)
    tmp = path.with_suffix(".csv.tmp")
    pd.DataFrame(rows, columns=list(BATCH_COLUMNS)).to_csv(tmp, index=False)
    os.replace(tmp, path)


def load_batch(folder: Path, batch: int) -> list[tuple]:
    import pandas as pd

    df = pd.read_csv(batch_path(folder, batch), keep_default_na=False, na_values=[""])
    return [(r.kind, r.relevance, r.reward, r.metric, float(r.value)) for r in df.itertuples(index=False)]


# Two-sided 95% Student t quantiles by degrees of freedom (n - 1); beyond 30 the normal 1.96.
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        15: 2.131, 20: 2.086, 30: 2.042}


def interval95(values: list[float]) -> tuple[float, float]:
    """95% t interval of the mean over batches (docs/METHOD.md, "Intervals over batches"):
    mean -/+ t_{0.975, n-1} * s / sqrt(n), s the standard deviation with n - 1, over the finite values;
    (nan, nan) with fewer than 2 finite values. Degrees of freedom between table entries use the next lower one.

    >>> [round(v, 3) for v in interval95([1.0, 2.0, 3.0, 4.0])]
    [0.446, 4.554]
    """
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

    from core.algos import routing as routing_lib
    from core.run import lifecycle

    torch.set_num_threads(max(1, torch.get_num_threads()))
    base = TrainConfig(model=args.model, prompt_set=args.prompt_set, group_size=args.samples,
                       prompts_per_step=args.batch_prompts, max_new_tokens=args.max_new_tokens,
                       replay_chunk=args.replay_chunk, replay_dtype=args.replay_dtype, seed=args.seed,
                       device=args.device, replay_pairs="all", routing_clip=args.routing_clip,
                       runs_dir="runs", checkpoint_every=0, steps=1, auto_evidence=args.auto_evidence)
    state = lifecycle.build_state(base)
    state.items = state.items[: args.prompts]
    gdpo = lifecycle.build_state(dataclasses.replace(base, method="gdpo"))
    names = state.reward_names
    n_all = math.ceil(len(state.items) / args.batch_prompts)
    n_batches = n_all if args.batches is None else max(1, min(args.batches, n_all))
    folder = open_batch_dir(args)
    sums: dict[tuple[str, str, str], list[float]] = {}
    cost: dict[str, dict[str, list[float]]] = {}
    by_batch: dict[tuple[str, str, str], dict[int, float]] = {}  # the same values by batch (the gaps pair them)

    spent: list[float] = []  # seconds of each batch computed by this run
    wanted = labels()
    for batch in range(1, n_batches + 1):
        saved = load_batch(folder, batch) if batch_path(folder, batch).exists() else None
        missing = [x for x in wanted if saved is not None and x not in {r[1] for r in saved}]
        if saved is not None and not missing:
            print(f"batch {batch}/{n_batches}: saved in {folder}, skipped", file=sys.stderr, flush=True)
        else:
            t0 = time.perf_counter()
            if saved is None:
                rows = run_batch(args, base, state, gdpo, batch)
            else:  # a batch saved before these labels existed: the same samples again, only the missing labels
                print(f"batch {batch}/{n_batches}: saved without {', '.join(missing)}; adding them", file=sys.stderr,
                      flush=True)
                rows = saved + same_samples(saved, run_batch(args, base, state, gdpo, batch, only=missing), batch)
            save_batch(folder, batch, rows)
            spent.append(time.perf_counter() - t0)
            left = sum(not batch_path(folder, b).exists() for b in range(batch + 1, n_batches + 1))
            print(progress_line(batch, n_batches, spent, left), file=sys.stderr, flush=True)
        for kind, label, reward, metric, value in load_batch(folder, batch):
            if kind == "cost":
                cost.setdefault(label, {}).setdefault(metric, []).append(value)
            else:
                sums.setdefault((label, reward, metric), []).append(value)
                by_batch.setdefault((label, reward, metric), {})[batch] = value
    rows, cost_rows = aggregate(sums, cost, routing_lib.RELEVANCE, names, by_batch)
    settings = {"model": args.model, "prompt_set": args.prompt_set, "prompts": len(state.items),
                "samples": args.samples, "batches": n_batches, "responses_per_batch": args.batch_prompts * args.samples,
                "max_new_tokens": args.max_new_tokens, "routing_clip": args.routing_clip,
                "auto_evidence": args.auto_evidence, "seed": args.seed,
                "threads": torch.get_num_threads()}
    if n_batches < n_all:
        settings["batches"] = f"{n_batches} of {n_all}"
    return rows, cost_rows, settings


def progress_line(batch: int, n_batches: int, spent: list[float], left: int) -> str:
    """"batch i/n: S s, ETA E s (HH:MM UTC)": S the batch's seconds, E the mean seconds of the batches this run
    computed times the batches still to compute."""
    eta = sum(spent) / len(spent) * left
    at = time.strftime("%H:%M UTC", time.gmtime(time.time() + eta))
    return f"batch {batch}/{n_batches}: {spent[-1]:.0f} s, ETA {eta:.0f} s ({at}), {left} to go"


CHECK_LABEL = "span"  # the baseline recomputed with any missing labels: its values must equal the saved ones


def labels() -> list[str]:
    """Every label a batch holds: the relevance variants, the baselines, the controls."""
    from core.algos import routing as routing_lib

    return [*routing_lib.RELEVANCE, *BASELINES, *CONTROLS]


def same_samples(saved: list[tuple], new: list[tuple], batch: int) -> list[tuple]:
    """`new` without its `CHECK_LABEL` rows, after checking them against the saved ones (SystemExit when a value
    differs by more than 1e-5: the batch's samples were not drawn again alike, and the labels would not pair)."""
    old = {(r[1], r[2], r[3]): r[4] for r in saved if r[1] == CHECK_LABEL}
    for _kind, label, reward, metric, value in new:
        if label == CHECK_LABEL and (label, reward, metric) in old:
            was = old[(label, reward, metric)]
            if not (math.isnan(was) and math.isnan(value)) and not abs(was - value) <= 1e-5:
                raise SystemExit(f"mrtpo bench faithfulness: batch {batch} sampled again differs from the saved one "
                                 f"({label} {reward} {metric}: saved {was}, now {value}); remove its file to redo it")
    return [r for r in new if r[1] != CHECK_LABEL]


def reward_variants(state, name: str) -> list[str]:
    """The variant each reward of `state` is routed by under variant `name`: `name` itself, or for `auto` the
    variant its family's evidence names (`core.run.replay.auto_variants`)."""
    from core.run import replay as replay_lib

    return replay_lib.auto_variants(state) if name == "auto" else [name] * len(state.reward_names)


def variant_passes(state, name: str) -> list[tuple[str, str]]:
    """The (contrast, distance) passes variant `name` replays, over every reward's variant (`reward_variants`)."""
    from core.algos import routing as routing_lib

    out = []
    for n in dict.fromkeys(reward_variants(state, name)):
        v = routing_lib.get_relevance(n)
        out += [(c, v.distance) for c in v.contrasts if (c, v.distance) not in out]
    return out


def variant_pass_count(state, name: str, replayed) -> float:
    """Contrastive passes per response of variant `name`: the replayed pairs times the contrasts each reward's
    variant replays (`reward_variants`), over the responses."""
    from core.algos import routing as routing_lib

    n = [len(routing_lib.get_relevance(v).contrasts) for v in reward_variants(state, name)]
    return float(sum(float(replayed[:, k].sum()) * n[k] for k in range(replayed.shape[1]))) / replayed.shape[0]


def run_batch(args, base: TrainConfig, state, gdpo, batch: int, only: list[str] | None = None) -> list[tuple]:
    """One batch's raw values as BATCH_COLUMNS rows: ("metric", label, reward, metric, value) for every variant and
    baseline, ("cost", label, "", metric, seconds or passes) for the cost. Depends only on the settings and `batch`
    (the prompts and samples are seeded by (seed, batch)), so a resumed run computes the same values. `only`: just
    these labels (and `CHECK_LABEL`), no GDPO step. Each (contrast, distance) pass runs once per batch and serves
    every variant that reads it; a variant's replay seconds are the sum of its passes' seconds (what it costs
    alone)."""
    import torch

    from core.algos import advantages as adv_lib
    from core.algos import routing as routing_lib
    from core.run import step as step_lib

    names = state.reward_names
    out: list[tuple] = []
    todo = set(labels() if only is None else [*only, CHECK_LABEL])

    def add(label: str, per_reward: dict[str, dict[str, float]]) -> None:
        for reward, values in per_reward.items():
            out.extend(("metric", label, reward, metric, float(value)) for metric, value in values.items())

    t0 = time.perf_counter()
    rollout = step_lib.collect_rollout(state, batch, keep_logits=True)
    scores = step_lib.verify(state, rollout)
    t_sample = time.perf_counter() - t0
    t0 = time.perf_counter()
    logprobs = step_lib.rollout_logprobs(state, rollout)
    t_logprobs = time.perf_counter() - t0
    entropy = logprobs.entropy.float().cpu()
    group_adv = adv_lib.group_normalized(scores.rewards, args.samples, base.eps)  # (B, K) for `retained`
    passes: dict = {}
    for variant in routing_lib.RELEVANCE:
        if variant not in todo and not (variant == "js" and "js+shuffle" in todo):
            continue
        state.cfg = dataclasses.replace(base, relevance=variant)
        routing = step_lib.route(state, rollout, scores, logprobs, passes=passes)
        seconds = sum(v for key, v in passes.items() if key[0] == "seconds" and key[1:3] in variant_passes(state, variant))
        rel = routing_lib.get_relevance(variant)(routing.distances, routing.replayed)
        if variant in todo:
            add(variant, relevance_metrics(rel, routing.weights, scores, rollout.mask, names, entropy, group_adv,
                                           base.w_max))
            out += [("cost", variant, "", "passes", variant_pass_count(state, variant, routing.replayed)),
                    ("cost", variant, "", "replay_s", seconds), ("cost", variant, "", "logprobs_s", t_logprobs)]
        if variant == "js" and "js+shuffle" in todo:  # the shuffle control: one permutation of js's relevance, weights
            mask = rollout.mask
            perm = [routing_lib.shuffle_routing(x, mask, routing_lib.shuffle_generator(args.seed, batch))
                    for x in (torch.nan_to_num(rel.float(), nan=0.0), routing.weights)]
            rel_sh = torch.where(scores.applicable[:, :, None], perm[0], torch.full_like(perm[0], float("nan")))
            add("js+shuffle", relevance_metrics(rel_sh, perm[1], scores, mask, names, entropy, group_adv,
                                                base.w_max))
    for name in BASELINES:
        if name not in todo:
            continue
        rel = baseline_relevance(name, scores.span_mask, rollout.mask, entropy, scores.applicable,
                                 args.seed + batch)
        weights = routing_lib.routing_weights(rel, rollout.mask, w_max=base.w_max, clip=base.routing_clip)
        add(name, relevance_metrics(rel, weights, scores, rollout.mask, names, entropy, group_adv, base.w_max))
    if "top-entropy" in todo:
        top = routing_lib.top_entropy_tokens(entropy, rollout.mask, base.entropy_q)  # (B, T), every reward's
        weights = routing_lib.entropy_routing(entropy, rollout.mask, len(names), q=base.entropy_q, lam=base.lam,
                                              w_max=base.w_max, clip=base.routing_clip)
        rel = torch.where(scores.applicable[:, :, None], top[:, None, :].expand_as(weights),
                          torch.full_like(weights, float("nan")))
        add("top-entropy", relevance_metrics(rel, weights, scores, rollout.mask, names, entropy, group_adv,
                                             base.w_max))
    rollout.logits = None
    if only is None and not getattr(args, "no_gdpo_step", False):
        t0 = time.perf_counter()
        step_lib.train_step(gdpo, batch, rollout=rollout)  # verify + update of GDPO on the same responses
        out.append(("cost", "gdpo", "", "step_s", t_sample + time.perf_counter() - t0))
    return out


GAP_PRIORS = ("entropy", "position")  # the priors a variant's gap must beat (issue 43's goal)
GAP_COLUMNS = ("gap", *(f"gap_over_{p}" for p in GAP_PRIORS))


def gap_values(by_batch: dict[tuple[str, str, str], dict[int, float]], label: str, reward: str,
               prior: str | None = None) -> list[float]:
    """Per batch b, the lift gap g_b = lift_b - mass_control_b of (`label`, `reward`), or with `prior` the paired
    difference g_b - g_b(prior) (docs/METHOD.md, "Intervals over batches"); batches where a term is undefined are
    left out."""
    def gaps(name: str) -> dict[int, float]:
        lift, ctl = by_batch.get((name, reward, "lift"), {}), by_batch.get((name, reward, "mass_control"), {})
        return {b: lift[b] - ctl[b] for b in lift if b in ctl and not math.isnan(lift[b] - ctl[b])}

    own = gaps(label)
    if prior is None:
        return list(own.values())
    other = gaps(prior)
    return [own[b] - other[b] for b in own if b in other]


def aggregate(sums: dict[tuple[str, str, str], list[float]], cost: dict[str, dict[str, list[float]]],
              variants, names: list[str], by_batch: dict[tuple[str, str, str], dict[int, float]] | None = None
              ) -> tuple[list[dict], list[dict]]:
    """(metric rows, cost rows) from the per-batch values: means over batches and the intervals; with `by_batch`
    (the values by batch) also the lift gap and its paired differences to the priors (`GAP_COLUMNS`)."""
    def mean(values: list[float]) -> float:
        values = [v for v in values if v is not None and not math.isnan(v)]
        return sum(values) / len(values) if values else float("nan")

    def put(row: dict, column: str, values: list[float]) -> None:  # the mean and its interval, <column>_lo / _hi
        row[column] = mean(values)
        row[f"{column}_lo"], row[f"{column}_hi"] = interval95(values)

    rows = []
    for label in (*variants, *BASELINES, *CONTROLS):
        for reward in (*names, "*"):
            row = {"relevance": label, "reward": reward}
            for m in ("overlap",) if reward == "*" else METRICS:
                put(row, m, sums.get((label, reward, m), []))
            if by_batch is not None and reward != "*":
                put(row, "gap", gap_values(by_batch, label, reward))
                for prior in GAP_PRIORS:
                    put(row, f"gap_over_{prior}", gap_values(by_batch, label, reward, prior))
            rows.append(row)
    gdpo = cost.get("gdpo", {}).get("step_s", [])
    gdpo_row = {"relevance": "gdpo"}
    put(gdpo_row, "passes_per_response", [0.0] * len(gdpo))
    put(gdpo_row, "replay_s_per_batch", [0.0] * len(gdpo))
    put(gdpo_row, "step_s", gdpo)
    gdpo_row["step_vs_gdpo"] = 1.0
    cost_rows = [gdpo_row]
    for variant in variants:
        c = cost.get(variant)
        if not c:
            continue
        row = {"relevance": variant}
        put(row, "passes_per_response", c["passes"])
        put(row, "replay_s_per_batch", c["replay_s"])
        # per batch: GDPO's mean step (over the batches that timed it) + the log-softmax + this variant's replay
        put(row, "step_s", [mean(gdpo) + lp + r for lp, r in zip(c["logprobs_s"], c["replay_s"], strict=True)])
        row["step_vs_gdpo"] = row["step_s"] / mean(gdpo)
        cost_rows.append(row)
    return rows, cost_rows


def _fmt(v: float) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"


def _cell(row: dict, column: str) -> str:
    """"mean [lo, hi]" (the 95% interval over batches), or the mean alone where there is no interval."""
    lo, hi = row.get(f"{column}_lo"), row.get(f"{column}_hi")
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return _fmt(row.get(column))
    return f"{_fmt(row[column])} [{_fmt(lo)}, {_fmt(hi)}]"


def markdown(rows: list[dict], cost_rows: list[dict], settings: dict) -> str:
    """The report: settings, cost per variant, overlap per variant, one table per reward."""
    lines = [f"# Faithfulness of the relevance variants ({settings['model']})", "",
             "Produced by `mrtpo bench faithfulness` (" + ", ".join(f"{k} {v}" for k, v in settings.items()) + ").",
             "Metrics: docs/METHOD.md, \"Span agreement\" and \"Specificity\"; every applicable (sample, reward) pair "
             "replayed; means over batches with the 95% t interval over batches in brackets, mean -/+ "
             "t_{0.975,n-1} s / sqrt(n) (docs/METHOD.md, \"Intervals over batches\"; none with one batch). "
             "Baselines need no replay.", ""]
    if " of " in str(settings.get("batches", "")):
        lines += [f"**Partial run: every number is from the first {settings['batches']} batches** (the rest were not "
                  "run yet; the command without `--batches` resumes from the saved batches).", ""]
    lines += ["## Cost and overlap", "",
              "| relevance | contrastive passes / response | replay s / batch | step s (est.) | x GDPO | mean pairwise overlap |",
              "|---|---|---|---|---|---|"]
    overlap = {r["relevance"]: r for r in rows if r["reward"] == "*"}
    for c in cost_rows:
        ov = _cell(overlap[c["relevance"]], "overlap") if c["relevance"] in overlap else _fmt(1.0)
        lines.append(f"| {c['relevance']} | {_cell(c, 'passes_per_response')} | {_cell(c, 'replay_s_per_batch')} | "
                     f"{_cell(c, 'step_s')} | {_fmt(c['step_vs_gdpo'])} | {ov} |")
    for label in BASELINES:
        lines.append(f"| baseline: {label} | - | - | - | - | {_cell(overlap[label], 'overlap')} |")
    for label in CONTROLS:
        lines.append(f"| control: {label} | - | - | - | - | {_cell(overlap[label], 'overlap')} |")
    lines += ["", "GDPO step = sample + verify + update on the batch; a variant's step is estimated as GDPO's + the "
              "p_t log-softmax + its replay (every applicable pair; `replay_pairs=nonzero_adv` runs fewer).", ""]
    if any("gap" in r for r in rows):
        lines += ["## Lift gap over the priors", "",
                  "gap = lift - mass_control per batch; gap - prior: the paired difference per batch to the entropy "
                  "or position prior's gap (docs/METHOD.md, \"Intervals over batches\"). Credit is reward-specific "
                  "beyond the priors where all three intervals lie above 0.", "",
                  "| reward | relevance | " + " | ".join(GAP_COLUMNS) + " |", "|---|---" + "|---" * len(GAP_COLUMNS) + "|"]
        for r in rows:
            if r["reward"] != "*" and "gap" in r and r["relevance"] not in GAP_PRIORS:
                lines.append(f"| {r['reward']} | {r['relevance']} | "
                             + " | ".join(_cell(r, c) for c in GAP_COLUMNS) + " |")
        lines.append("")
    for reward in dict.fromkeys(r["reward"] for r in rows if r["reward"] != "*"):
        lines += [f"## {reward}", "", "| relevance | " + " | ".join(METRICS) + " |",
                  "|---" * (len(METRICS) + 1) + "|"]
        for r in rows:
            if r["reward"] == reward:
                lines.append(f"| {r['relevance']} | " + " | ".join(_cell(r, m) for m in METRICS) + " |")
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
