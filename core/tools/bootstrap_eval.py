"""`mrtpo bootstrap --evaluate`: a built folder measured (load time, sampling speed, per-family satisfaction with
the sentence stated and removed, all-satisfied rate, samples) and its README card written."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

import torch

from core.presets import bootstrap_command
from core.tools.bootstrap_corpus import (
    SETTING_MODEL,
    BootstrapConfig,
    prompt_ids,
)

# ---------------------------------------------------------------------------------------------
# Evaluation of a built folder
# ---------------------------------------------------------------------------------------------


def load(folder: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    model.eval()
    return model, tokenizer


@torch.no_grad()
def sample(model, tokenizer, prompts: Sequence[str], max_new_tokens: int = 64, seed: int = 0,
           min_new_tokens: int = 0, batch: int = 64) -> list[str]:
    """One sampled response per prompt at temperature 1 (top_k=0: the full distribution)."""
    torch.manual_seed(seed)
    out = []
    for s in range(0, len(prompts), batch):
        chunk = [prompt_ids(tokenizer, p) for p in prompts[s:s + batch]]
        t_max = max(len(c) for c in chunk)
        ids = torch.tensor([[tokenizer.pad_token_id] * (t_max - len(c)) + c for c in chunk])  # (B, T) left-padded
        mask = (torch.arange(t_max)[None, :] >= torch.tensor([t_max - len(c) for c in chunk])[:, None]).long()
        gen = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                             max_new_tokens=max_new_tokens, min_new_tokens=min_new_tokens,
                             pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
        out += tokenizer.batch_decode(gen[:, t_max:], skip_special_tokens=True)
    return out


def conditioning_stats(model, tokenizer, items: Sequence, samples_per_prompt: int, seed: int = 0,
                       max_new_tokens: int = 64) -> dict:
    """Per family: satisfaction rate (verifier score) with its sentence stated and with it removed (the
    contrastive prompt; for task:arithmetic the question is removed); the rate at which all of a prompt's
    constraints are satisfied together; a few samples. `items` are core.tasks.PromptItems."""
    g = samples_per_prompt
    full = sample(model, tokenizer, [it.prompt() for it in items for _ in range(g)], max_new_tokens, seed=seed)
    jobs = [(i, k) for i, it in enumerate(items) for k in range(len(it.constraints))]
    contrast = sample(model, tokenizer, [items[i].contrastive_prompt(k) for i, k in jobs for _ in range(g)],
                      max_new_tokens, seed=seed + 1)
    stated: dict[str, list[float]] = {}
    removed: dict[str, list[float]] = {}
    all_sat = []
    for i, it in enumerate(items):
        for text in full[i * g:(i + 1) * g]:
            scores = [c.verify(text).score for c in it.constraints]
            for c, v in zip(it.constraints, scores, strict=True):
                stated.setdefault(c.family, []).append(v)
            all_sat.append(float(all(v >= 1.0 for v in scores)))
    for j, (i, k) in enumerate(jobs):
        c = items[i].constraints[k]
        removed.setdefault(c.family, []).extend(c.verify(t).score for t in contrast[j * g:(j + 1) * g])
    families = {f: {"stated": sum(v) / len(v), "removed": sum(removed[f]) / len(removed[f]), "n": len(v)}
                for f, v in stated.items()}
    examples = [(items[i].prompt(), full[i * g]) for i in range(min(len(items), 8))]
    return {"families": families, "all_satisfied": sum(all_sat) / len(all_sat), "n_samples": len(full),
            "examples": examples}


def eval_items(n: int, seed: int = 0, split: str = "train", setting: str = "tiny",
               arithmetic_share: float | None = None) -> list:
    """Prompts distributed as the setting's RL prompt set (tiny: 2-4 constraints; multi: 4-6) for measurement
    (`arithmetic_share`: the setting's unless given)."""
    from core.tasks import item_from_record
    from core.tools.promptgen import generate_prompts

    records = generate_prompts(n, seed=seed, split=split, setting=setting, arithmetic_share=arithmetic_share)
    return [item_from_record(r) for r in records]


def folder_config(folder: Path) -> dict:
    """The BootstrapConfig fields a built folder records (older folders lack the newer fields: defaults)."""
    try:
        recorded = json.loads((Path(folder) / "bootstrap_config.json").read_text())["config"]
    except (OSError, ValueError, KeyError):
        recorded = {}
    return {**asdict(BootstrapConfig()), **recorded}


def speed_stats(folder: Path, n: int = 32, new_tokens: int = 64, repeats: int = 3, setting: str = "tiny") -> dict:
    """Seconds to load the folder (`first_load_s` includes transformers' lazy imports of the Llama code;
    `load_s` is the best of `repeats` later loads), and to sample n responses of exactly new_tokens tokens
    (best of repeats, after a warm-up)."""
    t0 = time.perf_counter()
    load(folder)
    first = time.perf_counter() - t0
    loads = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        model, tokenizer = load(folder)
        loads.append(time.perf_counter() - t0)
    prompts = [it.prompt() for it in eval_items(n, seed=7, setting=setting)]
    sample(model, tokenizer, prompts[:2], max_new_tokens=4)  # warm-up
    times = []
    for r in range(repeats):
        t0 = time.perf_counter()
        sample(model, tokenizer, prompts, max_new_tokens=new_tokens, min_new_tokens=new_tokens, seed=r)
        times.append(time.perf_counter() - t0)
    return {"first_load_s": first, "load_s": min(loads), "sample_s": min(times), "n": n, "new_tokens": new_tokens,
            "threads": torch.get_num_threads(), "loadavg_1min": os.getloadavg()[0], "cpus": os.cpu_count()}


def evaluate(folder: Path, n_prompts: int = 60, samples_per_prompt: int = 8, seed: int = 0, split: str = "train",
             log: Callable[[str], None] = print) -> dict:
    """Print and return the measured targets of a built folder (on prompts of the setting it was built for)."""
    built = folder_config(folder)
    setting, tokens = built["setting"], built["gen_tokens"]
    speed = speed_stats(folder, new_tokens=tokens, setting=setting)
    log(f"load {speed['load_s']:.2f}s (first in a process {speed['first_load_s']:.2f}s); {speed['n']} x {speed['new_tokens']} new tokens sampled in "
        f"{speed['sample_s']:.2f}s ({speed['threads']} threads; {speed['cpus']} cpus, 1-min load average "
        f"{speed['loadavg_1min']:.1f})")
    model, tokenizer = load(folder)
    items = eval_items(n_prompts, seed=1000 + seed, split=split, setting=setting)
    stats = conditioning_stats(model, tokenizer, items, samples_per_prompt, seed=seed, max_new_tokens=tokens)
    log(f"{n_prompts} {setting} {split}-split prompts x {samples_per_prompt} samples (seed {seed}); contrastive prompts "
        "drop one sentence (for task:arithmetic, the question)")
    log(f"{'family':<32} {'stated':>7} {'removed':>8} {'ratio':>6}")
    for fam, v in stats["families"].items():
        ratio = v["stated"] / v["removed"] if v["removed"] > 0 else float("inf")
        log(f"{fam:<32} {v['stated']:7.2f} {v['removed']:8.2f} {ratio:6.1f}")
    log(f"all constraints of a prompt satisfied: {stats['all_satisfied']:.2f}")
    for p, r in stats["examples"][:5]:
        log(f"PROMPT: {p}\nRESPONSE: {r}")
    return {"speed": speed, **stats}


def _family_rows(families: dict) -> str:
    return "\n".join(
        f"| `{fam}` | {v['stated']:.2f} | {v['removed']:.2f} | "
        f"{(v['stated'] / v['removed']) if v['removed'] > 0 else float('inf'):.1f} | {v['n']} |"
        for fam, v in families.items()
    )


def target_line(result: dict, heldout: dict | None = None) -> str:
    """The card's line on the conditioning targets: each family satisfied 30-80% of the time with its sentence
    stated and at least twice as often as with it removed; all of a prompt's constraints together 5-30%."""
    misses = []
    for split, stats in (("train", result), ("held-out", heldout)):
        if not stats:
            continue
        for fam, v in stats["families"].items():
            if not (0.3 <= v["stated"] <= 0.8 and v["stated"] >= 2 * v["removed"]):
                misses.append(f"`{fam}` on the {split} split ({v['stated']:.2f} stated, {v['removed']:.2f} removed)")
        if not 0.05 <= stats["all_satisfied"] <= 0.3:
            misses.append(f"all satisfied on the {split} split ({stats['all_satisfied']:.2f})")
    head = "targets (each family 30-80% stated and >= 2x removed; all satisfied together 5-30%): "
    return head + ("all met" if not misses else "missed by " + "; ".join(misses))


# The parts of a model card that differ between settings.
CARDS = {
    "tiny": {
        "role": "The embedded default policy of the MRTPO workbench",
        "what": """It is a *research fixture*, not a useful assistant: it follows the four constraint families of the default
prompt set (include a keyword, end with a phrase, all lowercase, no commas) and answers "What is a plus b?"
only part of the time, so that reinforcement learning has room to improve and contrastive replay (dropping a
constraint sentence from the prompt) changes its next-token distributions where the constraint acts.""",
        "corpus_constraints": "0-4",
        "templates": "Template responses (1-4 short sentences on the topic)",
        "eval_prompts": "default-set prompts (2-4 constraints",
        "notes": "",
        "families": "the default prompt-set families",
    },
    "multi": {
        "role": "The embedded policy of the harder setting (`mrtpo train --model tiny-multi`, prompt sets\n"
                "`sample_data/prompts/multi.jsonl` and `multi-heldout.jsonl`)",
        "what": """It is a *research fixture*, not a useful assistant. Its prompts carry 4-6 constraints of four kinds at once:
format (start with a phrase, end with a phrase, a `<<title>>`, a `P.S.` postscript), safety (do not use the word the
topic invites: "water" for rivers, "sum" for "What is a plus b?"), style (lowercase, no commas, fewer than 20/25/30
words) and content (include a keyword), plus correctness (the sum) on arithmetic prompts. About 30% of the writing
prompts pair a word limit with a keyword and an end phrase, which pull against each other: every part a response
adds costs words. It obeys each stated constraint only part of the time, so that reinforcement learning has room to
improve and credit assignment has something to sort out.""",
        "corpus_constraints": "0-6 (writing) or 0-5 (arithmetic)",
        "templates": "Template responses (a long body of >= 30 words, or a compact one of 11-25 words when keeping a "
                     "word limit; a start-phrase line, a title line, a postscript line and an end phrase around it)",
        "eval_prompts": "multi-set prompts (4-6 constraints",
        "notes": "- The word the topic invites (`core.tools.promptgen.INVITED_WORDS`) is used in 90% of responses whose "
                 "prompt does not\n  forbid it, so the safety constraint needs a decision, not luck.\n"
                 "- Copying the stated keyword was not learned within the 3,500 steps (the tiny-instruct build learned "
                 "it after about\n  1,700 of 3,000 steps with fewer families per prompt): `keywords:existence` is "
                 "a missed target here; a longer\n  build or a keyword-richer corpus is the next thing to try.\n"
                 "- Evaluation sets (study v4, `core.tools.promptgen.EVAL_SETS`, 128 prompts each): "
                 "`multi-heldout-clean.jsonl` (held-out\n  topics; no prompt, arithmetic question or argument value of "
                 "`multi.jsonl`: other end / start phrases, word limits\n  22/28/35, the `P.P.S` marker, *total* "
                 "forbidden on arithmetic prompts) and `multi-ood.jsonl` (the same arguments on\n  topics of neither "
                 "split, every task and constraint sentence in words never used in training, given per\n  constraint "
                 "as its `sentence`). The corpus of the build holds none of their prompts or arguments (it holds the "
                 "clean\n  set's topics); `tests/test_eval_sets.py` checks both files. `multi-heldout-128.jsonl` "
                 "(study v3's) is kept:\n  study v3's numbers were scored on it.\n",
        "families": "the multi prompt-set families",
    },
}


def write_card(folder: Path, result: dict, command: str, heldout: dict | None = None) -> Path:
    """Write the model card README.md of a built folder from its bootstrap_config.json and evaluate() results
    (`heldout`: conditioning_stats on the held-out split, optional)."""
    folder = Path(folder)
    meta = json.loads((folder / "bootstrap_config.json").read_text())
    cfg, timing, speed = meta["config"], meta.get("timing", {}), result["speed"]
    rows = _family_rows(result["families"])
    held = ""
    if heldout:
        held = (f"\nHeld-out split (other topics and keywords; {heldout['n_samples']} samples, same command with "
                f"`--eval-split heldout`):\n\n| family | stated | removed | ratio | samples |\n|---|---|---|---|---|\n"
                f"{_family_rows(heldout['families'])}\n\n- all satisfied together: {heldout['all_satisfied']:.2f}\n")
    samples = "\n".join(f"- **{p}**\n  > " + r.replace("\n", "\n  > ") for p, r in result["examples"][:5])
    p_comply = ", ".join(f"`{k}` {v}" for k, v in cfg["p_comply"].items())
    setting = cfg.get("setting", "tiny")
    card = CARDS[setting]
    build_cmd = bootstrap_command(SETTING_MODEL[setting])
    kw = next((r["step"] for r in meta.get("log", []) if r.get("kw_prob", 0) >= 0.3), None)
    kw_note = (f"Copying the stated keyword appears after about {kw:,} of the {cfg['steps']:,} steps"
               if kw else "The stated keyword's probability at its slot stayed below 0.3")
    text = f"""# {SETTING_MODEL[setting]}

{card['role']}: a {meta['params'] / 1e6:.2f}M-parameter Llama-architecture causal
LM with a {meta['tokenizer_size']}-token byte-level BPE tokenizer, built from nothing by this repository
(`{build_cmd}`, seed {cfg['seed']}) on a synthetic instruction corpus. No external data or weights.
It loads with plain `AutoModelForCausalLM.from_pretrained` / `AutoTokenizer.from_pretrained` (fp32 safetensors).

{card['what']}

## Format
- chat template: `<|user|>\\n{{prompt}}<|end|>\\n<|assistant|>\\n`; the reply ends with the eos `<|end|>`;
  pad `<|pad|>` (distinct from eos); generation config: sampling at temperature 1 with `top_k=0`,
  {cfg.get('gen_tokens', 64)} new tokens.
- architecture: {cfg['num_layers']} layers, hidden {cfg['hidden_size']}, {cfg['num_heads']} heads, ffn
  {cfg['intermediate_size']}, tied embeddings, {cfg['max_positions']} positions.

## How it was built
`{build_cmd} --seed {cfg['seed']} --steps {cfg['steps']} --threads {cfg['threads']}` (the defaults): corpus of
{cfg['steps'] * cfg['batch_size']} examples
({cfg['steps']} AdamW steps of batch {cfg['batch_size']}, each example seen once, lr {cfg['lr']} with warm-up and
cosine decay, loss on response tokens only). Prompts come from `core.tools.promptgen` (setting `{setting}`) with
{card['corpus_constraints']} constraints (so each
contrastive prompt is in the corpus; {cfg['heldout_share']:.0%} from the held-out split; {cfg['arithmetic_share']:.0%}
arithmetic prompts, whose questions are dropped
in {cfg['p_drop_task']:.0%} of arithmetic prompts). {card['templates']} obey a stated
constraint with probability {p_comply}, and an unstated one with probability {cfg['p_unstated']}.
Build time: {timing.get('total_s', float('nan')) / 60:.1f} min wall ({timing.get('train_cpu_s', float('nan')) / 60:.1f}
min of CPU time in training) with {timing.get('threads', '?')} torch thread(s) on a shared {timing.get('cpus', '?')}-core
machine (1-minute load average {timing.get('loadavg_1min_start', float('nan')):.1f} at the start of training,
{timing.get('loadavg_1min_end', float('nan')):.1f} at the end).

## Measured
`{command}`

- load: {speed['load_s']:.2f} s ({speed['first_load_s']:.2f} s for the first load in a process, which includes
  transformers' lazy imports); sampling {speed['n']} responses x {speed['new_tokens']} new tokens:
  {speed['sample_s']:.2f} s ({speed['threads']} torch thread(s) on {speed['cpus']} shared cores, 1-minute load
  average {speed['loadavg_1min']:.1f} while measuring).
- conditioning, {result['n_samples']} samples of {card['eval_prompts']}; verified with
  `core.verifiers`); "removed" samples the contrastive prompt (that sentence dropped; for `task:arithmetic`
  the question dropped):

| family | satisfied, sentence stated | satisfied, sentence removed | ratio | samples |
|---|---|---|---|---|
{rows}

- all constraints of a prompt satisfied together: {result['all_satisfied']:.2f}
- {target_line(result, heldout)}
{held}
Samples (prompt, then one sampled response):

{samples}

## Notes
- The build is deterministic for a seed and thread count on a given CPU type (`--threads 1`, the default,
  reproduces these weights). {kw_note};
  `bootstrap_config.json` logs the probability of the stated keyword at its slot every 50 steps (`kw_prob`).
{card['notes']}- On a shared 2-core machine run with one torch thread: with two threads on busy cores training took about 5x
  the CPU time per step and sampling about 10x the wall time.

## Limitations
Tiny vocabulary and template-like language; outside {card['families']} it produces the same
kind of note. Not for any use beyond testing RL credit assignment.
"""
    path = folder / "README.md"
    path.write_text(text)
    return path
