"""`mrtpo bootstrap`: build an embedded model from nothing: tiny-instruct (the default demo) or, with
`--setting multi`, tiny-multi (the harder setting: 4-6 constraints of four kinds per prompt).

No model hub is reachable at run time, so the project makes its own small instruction follower:

1. a synthetic corpus: prompts from the default prompt-set families (a writing task or an
   arithmetic question, plus 0-4 constraint sentences) and template responses that obey each
   *stated* constraint only part of the time and an unstated one almost never, so the model learns
   partial, prompt-dependent compliance (contrastive replay needs the dependence, RL needs the room);
2. a byte-level BPE tokenizer trained on that corpus (`tokenizers`), with special tokens, an eos
   and a pad token and a chat template;
3. a small Llama-architecture `transformers` model trained on the corpus (loss on response tokens);
4. a standard `save_pretrained` folder (safetensors + tokenizer + README card).

`python -m core.tools.bootstrap --evaluate` measures the shipped folder: load time, sampling speed,
per-family satisfaction with the sentence stated and removed, all-satisfied rate, samples.

This module imports torch; `core.cli` imports it only when `mrtpo bootstrap` runs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path

import torch

from core.tools.bootstrap_corpus import (  # noqa: F401  (the names tests and tools read from core.tools.bootstrap)
    _ARITH_RE,
    ARITH,
    END,
    EOS,
    FORBIDDEN,
    KEYWORD,
    LOWER,
    MULTI_RESPONSE_FAMILIES,
    NO_COMMA,
    PAD,
    POSTSCRIPT,
    SETTING_OUT,
    TITLE,
    USER,
    WORD_LIMIT,
    BootstrapConfig,
    Example,
    build_corpus,
    check_templates,
    prompt_ids,
    train_tokenizer,
)
from core.tools.bootstrap_eval import (  # noqa: F401  (as above)
    conditioning_stats,
    eval_items,
    evaluate,
    folder_config,
    load,
    sample,
    write_card,
)

# ---------------------------------------------------------------------------------------------
# Model and training
# ---------------------------------------------------------------------------------------------


def build_model(cfg: BootstrapConfig, tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads, num_key_value_heads=cfg.num_heads,
        max_position_embeddings=cfg.max_positions, tie_word_embeddings=True, rms_norm_eps=1e-5,
        bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(cfg.seed)
    return LlamaForCausalLM(config)


def encode_examples(tokenizer, examples: Sequence[Example]) -> list[tuple[list[int], int]]:
    """(ids, n_prompt) per example: chat-formatted prompt ids, then response ids and eos."""
    eos = tokenizer.eos_token_id
    prompt_cache: dict[str, list[int]] = {}
    responses = tokenizer([e.response for e in examples], add_special_tokens=False)["input_ids"]
    out = []
    for e, r in zip(examples, responses, strict=True):
        if e.prompt not in prompt_cache:
            prompt_cache[e.prompt] = prompt_ids(tokenizer, e.prompt)
        p = prompt_cache[e.prompt]
        out.append((p + list(r) + [eos], len(p)))
    return out


def make_batches(encoded: Sequence[tuple[list[int], int]], batch_size: int, pad_id: int, seed: int):
    """Length-bucketed batches (examples sorted by length inside shuffled windows of 64 batches, so
    padding stays small). Yields (input_ids (B, T), labels (B, T)) with -100 on prompt and padding."""
    rng = random.Random(f"batches-{seed}")
    order = list(range(len(encoded)))
    rng.shuffle(order)
    window = batch_size * 64
    batches = []
    for w in range(0, len(order), window):
        chunk = sorted(order[w:w + window], key=lambda i: len(encoded[i][0]))
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    for idx in batches:
        t_max = max(len(encoded[i][0]) for i in idx)
        ids = torch.full((len(idx), t_max), pad_id, dtype=torch.long)  # (B, T)
        labels = torch.full((len(idx), t_max), -100, dtype=torch.long)  # (B, T)
        for row, i in enumerate(idx):
            seq, n_prompt = encoded[i]
            ids[row, :len(seq)] = torch.tensor(seq)
            labels[row, n_prompt:len(seq)] = torch.tensor(seq[n_prompt:])
        yield ids, labels


def lr_at(step: int, cfg: BootstrapConfig) -> float:
    """Linear warm-up to cfg.lr over warmup_steps, then cosine decay to lr * min_lr_ratio at cfg.steps:
    lr(s) = lr * (r + (1 - r) * (1 + cos(pi * p)) / 2), p = (s - warmup) / (steps - warmup)."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    p = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps))
    r = cfg.min_lr_ratio
    return cfg.lr * (r + (1 - r) * (1 + math.cos(math.pi * p)) / 2)


def response_loss(model, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over response tokens only (the lm head runs only where a label exists).
    Right padding needs no attention mask: causal attention never lets a real token see a later pad."""
    hidden = model.model(input_ids=ids).last_hidden_state[:, :-1]  # (B, T-1, H)
    target = labels[:, 1:]  # (B, T-1)
    mask = target != -100
    logits = model.lm_head(hidden[mask])  # (N, V)
    return torch.nn.functional.cross_entropy(logits, target[mask])


@torch.no_grad()
def keyword_probe(model, probe: Sequence[tuple[list[int], int]]) -> float:
    """Mean probability the model gives the stated keyword's first token at its slot (teacher-forced)."""
    if not probe:
        return float("nan")
    model.eval()
    total = 0.0
    for seq, pos in probe:
        logits = model(input_ids=torch.tensor([seq[:pos]])).logits[0, -1]
        total += torch.softmax(logits.float(), -1)[seq[pos]].item()
    model.train()
    return total / len(probe)


def make_probe(tokenizer, examples: Sequence[Example], n: int = 32) -> list[tuple[list[int], int]]:
    """(ids, slot position) for examples whose response includes the stated keyword."""
    probe = []
    for e in examples:
        if e.keyword is None or len(probe) >= n:
            continue
        p = prompt_ids(tokenizer, e.prompt)
        enc = tokenizer(e.response, add_special_tokens=False, return_offsets_mapping=True)
        start = e.response.lower().find(e.keyword.lower())
        pos = next((i for i, (s, t) in enumerate(enc["offset_mapping"]) if s <= start < t), None)
        if pos is not None:
            probe.append((p + list(enc["input_ids"]), len(p) + pos))
    return probe


def train(model, batches, cfg: BootstrapConfig, probe=(), log: Callable[[str], None] = print) -> list[dict]:
    """AdamW on the response loss; logs a line every cfg.log_every steps. Returns the log records."""
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.95))
    model.train()
    records, t0, c0, run_loss = [], time.perf_counter(), time.process_time(), 0.0
    for step, (ids, labels) in enumerate(batches):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, cfg)
        loss = response_loss(model, ids, labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        run_loss += loss.item()
        done = step + 1
        if done % cfg.log_every == 0 or done == cfg.steps:
            elapsed = time.perf_counter() - t0
            n = cfg.log_every if done % cfg.log_every == 0 else done % cfg.log_every
            rec = {"step": done, "loss": run_loss / n, "kw_prob": keyword_probe(model, probe),
                   "lr": lr_at(step, cfg), "elapsed_s": elapsed, "cpu_s": time.process_time() - c0}
            records.append(rec)
            eta = elapsed / done * (cfg.steps - done)
            bar = "#" * int(20 * done / cfg.steps)
            log(f"[{bar:<20}] step {done}/{cfg.steps} loss {rec['loss']:.3f} keyword-p {rec['kw_prob']:.2f} "
                f"lr {rec['lr']:.1e} {elapsed:.0f}s elapsed (cpu {rec['cpu_s']:.0f}s), eta {eta:.0f}s")
            run_loss = 0.0
    model.eval()
    return records


# ---------------------------------------------------------------------------------------------
# The whole build
# ---------------------------------------------------------------------------------------------


def bootstrap(cfg: BootstrapConfig, out: Path, log: Callable[[str], None] = print) -> dict:
    """Build corpus, tokenizer and model, train, save to `out`. Returns a summary dict."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    t0 = time.perf_counter()
    n = cfg.steps * cfg.batch_size
    examples, vocab = build_corpus(n, cfg)
    log(f"corpus: {n} examples, {len(vocab['topics'])} topics, {len(vocab['keywords'])} keywords "
        f"({time.perf_counter() - t0:.1f}s)")
    tok_texts = [e.prompt + "\n" + e.response for e in examples[: min(n, 20000)]]
    tokenizer = train_tokenizer(tok_texts, cfg.vocab_size)
    encoded = encode_examples(tokenizer, examples)
    lengths = [len(s) for s, _ in encoded]
    log(f"tokenizer: {len(tokenizer)} tokens; sequences {min(lengths)}-{max(lengths)} tokens, mean "
        f"{sum(lengths) / len(lengths):.1f}; response mean {sum(len(s) - p for s, p in encoded) / len(encoded):.1f} "
        f"({time.perf_counter() - t0:.1f}s)")
    if max(lengths) > cfg.max_positions:
        raise ValueError(f"a corpus sequence has {max(lengths)} tokens > max_positions {cfg.max_positions}")
    model = build_model(cfg, tokenizer)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: Llama {cfg.num_layers} layers, hidden {cfg.hidden_size}, ffn {cfg.intermediate_size}, "
        f"{n_params / 1e6:.2f}M parameters; {cfg.steps} steps of batch {cfg.batch_size}, "
        f"{torch.get_num_threads()} threads")
    probe = make_probe(tokenizer, examples[-2000:])
    load_before = os.getloadavg()[0]
    t_train, c_train = time.perf_counter(), time.process_time()
    records = train(model, make_batches(encoded, cfg.batch_size, tokenizer.pad_token_id, cfg.seed), cfg, probe, log)
    timing = {"train_s": time.perf_counter() - t_train, "train_cpu_s": time.process_time() - c_train,
              "total_s": time.perf_counter() - t0, "threads": torch.get_num_threads(),
              "loadavg_1min_start": load_before, "loadavg_1min_end": os.getloadavg()[0], "cpus": os.cpu_count()}
    save_folder(model, tokenizer, cfg, out, {"log": records, "timing": timing, "params": n_params,
                                             "corpus_vocab": vocab, "tokenizer_size": len(tokenizer)})
    log(f"saved {out} ({folder_mb(out):.1f} MB); training {timing['train_s']:.0f}s "
        f"(cpu {timing['train_cpu_s']:.0f}s), total {timing['total_s']:.0f}s")
    return {"params": n_params, **timing, "records": records}


def folder_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()) / 1e6


def save_folder(model, tokenizer, cfg: BootstrapConfig, out: Path, meta: dict) -> None:
    """save_pretrained (fp32 safetensors: about 4 MB), tokenizer, a sampling generation config
    (temperature 1, top_k=0: the full distribution) and `bootstrap_config.json` (config + training log)."""
    from transformers import GenerationConfig

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.generation_config = GenerationConfig(
        do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=cfg.gen_tokens,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    (out / "bootstrap_config.json").write_text(json.dumps({"config": asdict(cfg), **meta}, indent=1) + "\n")


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mrtpo bootstrap", description=__doc__.splitlines()[0])
    parser.add_argument("--setting", choices=list(SETTING_OUT), default="tiny",
                        help="tiny: tiny-instruct (the default demo model); multi: tiny-multi, 4-6 constraints of "
                        "four kinds per prompt (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder (default: the setting's folder in sample_data/models)")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps (default: the setting's; --micro: 40)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--micro", action="store_true", help="tiny corpus, tiny model, few steps (for tests)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: reproducible; 2 is faster on two idle cores; 0: torch's choice)")
    parser.add_argument("--evaluate", action="store_true", help="measure the folder at --out instead of building")
    parser.add_argument("--eval-prompts", type=int, default=60)
    parser.add_argument("--eval-samples", type=int, default=8)
    parser.add_argument("--eval-split", choices=["train", "heldout"], default="train")
    parser.add_argument("--card", action="store_true", help="with --evaluate: write the numbers into README.md")
    argv_list = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv_list)
    if args.out is None:
        args.out = SETTING_OUT[args.setting]
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.evaluate:
        result = evaluate(args.out, args.eval_prompts, args.eval_samples, seed=args.seed, split=args.eval_split)
        if args.card:
            held = None
            if args.eval_split == "train":  # the card also shows the held-out split's conditioning
                model, tokenizer = load(args.out)
                built = folder_config(args.out)
                items = eval_items(args.eval_prompts, seed=1000 + args.seed, split="heldout", setting=built["setting"])
                held = conditioning_stats(model, tokenizer, items, args.eval_samples, seed=args.seed,
                                          max_new_tokens=built["gen_tokens"])
            cmd = "python -m core.tools.bootstrap " + " ".join(a for a in argv_list if a != "--card")
            print(f"wrote {write_card(args.out, result, cmd.strip(), held)}")
        return 0
    cfg = BootstrapConfig.for_setting(args.setting, args.seed, micro=args.micro)
    cfg = replace(cfg, threads=args.threads)
    if args.steps:
        cfg = replace(cfg, steps=args.steps)

    def log(line: str) -> None:
        print(line, flush=True)

    bootstrap(cfg, args.out, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
