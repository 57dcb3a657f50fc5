"""`mrtpo bench contrast`: does the policy read a constraint's argument? The per-family test behind `auto`.

    mrtpo bench contrast [--model tiny-multi] [--prompt-set sample_data/prompts/multi.jsonl] [--prompts 32]

The `swap` contrast (docs/METHOD.md, "Relevance variants") replaces a constraint's argument (the forbidden word,
the keyword, the phrase, the operands) and measures how the policy's next-token distributions move. That only
carries signal when the policy reads the argument. This benchmark measures it per family: it samples
`--samples` responses to each of the first `--prompts` prompts (seed 0, the policy as given), and for every
constraint with an argument to swap teacher-forces the same response under three prompts: the real one, the
swapped one and the one with the constraint's sentence removed. At every response position it takes the
probability of the argument's tokens (`argument_probability`: the first token of each argument string, with and
without a leading space; for a task, the first token of the answer) and reports per family

    effect(contrast) = mean over samples of  max_t |p_arg(t | x) - p_arg(t | x^contrast)|

(`contrast_effects`) for swap and remove, and `reads_argument`: effect(swap) >= READ_RATIO x effect(remove)
(`reads_argument`). A family that passes is one whose argument the policy reads; `auto` relevance swaps those
and removes the rest (`core.contrast.AUTO_SWAP_FAMILIES` records the families that passed on the embedded
tiny-multi; rerun this for another model). Writes `contrast-<model>.md` and `.csv` under `--out`, prints the table.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

# A family reads its argument when swapping the argument moves the argument's probability at least this share of
# what removing the whole sentence moves it (the faithfulness issue measured 0.0006 vs 0.109 for forbidden words on
# tiny-multi: a ratio of 0.005, far below; a policy that reads the argument moves it about as much either way).
READ_RATIO = 0.25


def argument_strings(verifier) -> list[str]:
    """The strings whose probability tells whether the policy read the argument: for a task (arithmetic) the
    answer, else the verifier's argument strings (`prompt_cues()[0]`: keywords, forbidden words, phrases)."""
    if getattr(verifier, "is_task", False) and "answer" in getattr(verifier, "kwargs", {}):
        return [str(verifier.kwargs["answer"])]
    return [s for s in verifier.prompt_cues()[0] if s]


def argument_token_ids(tokenizer, strings: list[str]) -> list[int]:
    """First token id of each string, as written and after a space (where the response would write it)."""
    ids = set()
    for s in strings:
        for text in (s, " " + s):
            toks = tokenizer(text, add_special_tokens=False)["input_ids"]
            if toks:
                ids.add(int(toks[0]))
    return sorted(ids)


def argument_probability(logits, token_ids: list[int]):
    """p_arg(t) = sum over the argument's token ids of softmax(logits[t]) (T, V) -> (T,)."""
    import torch

    return torch.softmax(logits.float(), dim=-1)[:, token_ids].sum(-1)


def contrast_effects(p_real, p_other) -> float:
    """max_t |p_real(t) - p_other(t)| over a response's positions (1-D tensors of the same length)."""
    return float((p_real - p_other).abs().max()) if p_real.numel() else float("nan")


def reads_argument(effect_swap: float, effect_remove: float, ratio: float = READ_RATIO) -> bool:
    """True when swapping the argument moves its probability at least `ratio` x what removing the sentence does.
    False when removal moves nothing either (the policy does not read the constraint at all) or a value is NaN."""
    if math.isnan(effect_swap) or math.isnan(effect_remove) or effect_remove <= 0:
        return False
    return effect_swap >= ratio * effect_remove


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mrtpo bench contrast", description=__doc__.split("\n\n")[1])
    p.add_argument("--model", default="tiny-multi", help="preset or local model folder (default: tiny-multi)")
    p.add_argument("--prompt-set", default="sample_data/prompts/multi.jsonl")
    p.add_argument("--prompts", type=int, default=32, help="prompts (the first ones of the set; default 32)")
    p.add_argument("--samples", type=int, default=4, help="responses per prompt (default 4)")
    p.add_argument("--max-new-tokens", type=int, default=96)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda"))
    p.add_argument("--out", default="docs/results", help="folder of the Markdown and CSV report")
    return p


def run(args) -> tuple[list[dict], dict]:
    """One row per family: samples, effect of swap and of remove (mean and max over samples), reads_argument."""
    import torch

    from core import model as model_lib
    from core.config import TrainConfig
    from core.run import lifecycle
    from core.run import step as step_lib

    cfg = TrainConfig(model=args.model, prompt_set=args.prompt_set, group_size=args.samples,
                      prompts_per_step=min(args.prompts, 8), max_new_tokens=args.max_new_tokens, seed=args.seed,
                      device=args.device, method="gdpo", runs_dir="runs", checkpoint_every=0, steps=1)
    state = lifecycle.build_state(cfg)
    state.items = state.items[: args.prompts]
    tok, model, dev = state.tokenizer, state.model, state.device
    effects: dict[str, dict[str, list[float]]] = {}
    n_batches = math.ceil(len(state.items) / cfg.prompts_per_step)

    @torch.no_grad()
    def p_arg(prompt: str, response: list[int], ids: list[int]):
        prompt_ids = model_lib.encode_prompt(tok, prompt)
        x = torch.tensor([prompt_ids + response], device=dev)
        logits = model(x).logits[0, len(prompt_ids) - 1: len(prompt_ids) - 1 + len(response)]  # (T, V)
        return argument_probability(logits, ids).cpu()

    model.eval()
    for batch in range(1, n_batches + 1):
        items = state.items[(batch - 1) * cfg.prompts_per_step: batch * cfg.prompts_per_step]
        rollout = step_lib.generate(state, items, seed=args.seed + batch)  # group_size = --samples
        for i, item in enumerate(rollout.items):
            response = rollout.response_ids[i][rollout.mask[i].bool()].tolist()
            if not response:
                continue
            real = item.prompt()
            for k, verifier in enumerate(item.constraints):
                if not verifier.swap_kind:
                    continue
                swapped = item.contrastive_prompt(k, "swap")
                removed = item.contrastive_prompt(k, "remove")
                if swapped == removed:  # nothing swapped: the family has no argument in this prompt
                    continue
                ids = argument_token_ids(tok, argument_strings(verifier))
                if not ids:
                    continue
                p0 = p_arg(real, response, ids)
                e = effects.setdefault(verifier.family, {"swap": [], "remove": []})
                e["swap"].append(contrast_effects(p0, p_arg(swapped, response, ids)))
                e["remove"].append(contrast_effects(p0, p_arg(removed, response, ids)))
        print(f"batch {batch}/{n_batches} done", file=sys.stderr, flush=True)
    rows = []
    for family, e in effects.items():
        swap, remove = sum(e["swap"]) / len(e["swap"]), sum(e["remove"]) / len(e["remove"])
        rows.append({"family": family, "samples": len(e["swap"]), "effect_swap": swap, "effect_remove": remove,
                     "max_swap": max(e["swap"]), "max_remove": max(e["remove"]),
                     "ratio": swap / remove if remove > 0 else float("nan"),
                     "reads_argument": reads_argument(swap, remove)})
    settings = {"model": args.model, "prompt_set": args.prompt_set, "prompts": len(state.items),
                "samples": args.samples, "max_new_tokens": args.max_new_tokens, "seed": args.seed}
    return rows, settings


def markdown(rows: list[dict], settings: dict) -> str:
    def f(v: float) -> str:
        return "n/a" if isinstance(v, float) and math.isnan(v) else f"{v:.4f}"

    lines = [f"# Does the policy read the constraint's argument? ({settings['model']})", "",
             "Produced by `mrtpo bench contrast` (" + ", ".join(f"{k} {v}" for k, v in settings.items()) + ").",
             "effect = mean over sampled responses of max_t |p_arg(t | x) - p_arg(t | x')|, p_arg the probability of "
             f"the argument's first tokens; reads = effect(swap) >= {READ_RATIO} x effect(remove).", "",
             "| family | samples | effect swap | effect remove | ratio | max swap | max remove | reads argument |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['family']} | {r['samples']} | {f(r['effect_swap'])} | {f(r['effect_remove'])} | "
                     f"{f(r['ratio'])} | {f(r['max_swap'])} | {f(r['max_remove'])} | "
                     f"{'yes' if r['reads_argument'] else 'no'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import pandas as pd

    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.prompts < 1 or args.samples < 1:
        print("mrtpo bench contrast: --prompts and --samples must be >= 1", file=sys.stderr)
        return 2
    rows, settings = run(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tag = Path(args.model).name
    pd.DataFrame(rows).to_csv(out / f"contrast-{tag}.csv", index=False)
    text = markdown(rows, settings)
    (out / f"contrast-{tag}.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
