"""A fixed-batch MRTPOTrainer run for the multi-process tests (run directly or with torch.distributed.run).

Completions come from a deterministic `rollout_func` (TRL's hook for custom generation): the completion of
the sample at global index g of step s is drawn from a generator seeded with (s, g), so one process and
several processes train on exactly the same batches (each process gets rows [p b, (p + 1) b) of TRL's
global batch). Prints `rank <r> pid <pid>` so the test can tell which process wrote the run store.

    python -m torch.distributed.run --standalone --nproc_per_node 2 tests/trl_fixed_batch.py \
        --model M --prompts P.jsonl --runs-dir R --run-name two
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is "experimental" in TRL 1.16

from core.integrations.trl import MRTPOConfig, MRTPOTrainer, end_process_group, prompt_dataset  # noqa: E402
from core.tasks import load_prompt_set  # noqa: E402

BATCH = 16  # 4 prompts x G = 4
GROUP = 4


def fixed_rollout(prompts, trainer):
    """Completion ids for this process's rows: 2..10 tokens drawn from a generator seeded by (step, global row),
    about half of them ending with eos."""
    tok = trainer.processing_class
    prompt_ids = trainer._tokenize_prompts(prompts)[0]
    b, p, step = len(prompts), trainer.accelerator.process_index, trainer.state.global_step
    special = set(tok.all_special_ids)
    vocab = torch.tensor([i for i in range(len(tok)) if i not in special])
    completions = []
    for i in range(b):
        g = torch.Generator().manual_seed(1000 * step + p * b + i)
        n = int(torch.randint(2, 11, (1,), generator=g))
        ids = vocab[torch.randint(len(vocab), (n,), generator=g)].tolist()
        if torch.rand(1, generator=g).item() < 0.5:
            ids[-1] = tok.eos_token_id
        completions.append(ids)
    return {"prompt_ids": [list(x) for x in prompt_ids], "completion_ids": completions, "logprobs": None}


def main(argv: list[str] | None = None) -> str | None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--runs-dir", required=True)
    ap.add_argument("--run-name", required=True)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--routing", default="replay")
    ap.add_argument("--credit-samples", type=int, default=0)
    ap.add_argument("--credit-every", type=int, default=1)
    ap.add_argument("--grad-accum", type=int, default=1, help="micro-batches per optimizer step (one batch per step)")
    args = ap.parse_args(argv)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    world = int(os.environ.get("WORLD_SIZE", "1"))
    tok = AutoTokenizer.from_pretrained(args.model)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(args.model)
    config = MRTPOConfig(
        output_dir=os.path.join(args.runs_dir, ".hf"), use_cpu=True, bf16=False, seed=0,
        per_device_train_batch_size=BATCH // world // args.grad_accum, gradient_accumulation_steps=args.grad_accum,
        num_generations=GROUP, max_completion_length=10,
        max_steps=args.steps, learning_rate=1e-3, lr_scheduler_type="constant", disable_dropout=True,
        save_strategy="no", logging_strategy="no", report_to=[], activation_checkpointing=False, disable_tqdm=True,
        routing=args.routing, replay_chunk=5, runs_dir=args.runs_dir, run_name=args.run_name,
        credit_samples=args.credit_samples, credit_every=args.credit_every, final_checkpoint=True,
    )
    trainer = MRTPOTrainer(model, args=config, train_dataset=prompt_dataset(load_prompt_set(args.prompts), tok),
                           processing_class=tok, rollout_func=fixed_rollout)
    # one write of the whole line: with PYTHONUNBUFFERED, print() writes the text and its newline separately, and
    # the two ranks' lines on the shared pipe interleaved ("rank 0 pid 1rank 1 pid 2\n\n") under load
    sys.stdout.write(f"rank {trainer.accelerator.process_index} pid {os.getpid()}\n")
    sys.stdout.flush()
    finished = False
    try:
        trainer.train()
        finished = True
    finally:
        end_process_group(trainer, finished)
    return str(trainer.writer.path) if trainer.writer is not None else None


if __name__ == "__main__":
    main()
