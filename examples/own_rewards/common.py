"""What the three "bring your own rewards" examples share: their command line, the model, the TRL settings of a small
run (one process; CPU or one GPU). Each example keeps its data, its reward functions, its `reward_contrasts` and its
`MRTPOTrainer` call in its own file: those are what a TRL user writes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run from a clone without installing


def parse_args(doc: str, argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--model", default=str(ROOT / "sample_data/models/tiny-instruct"), help="a local causal-LM folder")
    ap.add_argument("--output-dir", default="trl-output")
    ap.add_argument("--runs-dir", default="runs", help="where the run store goes (`mrtpo app` lists it)")
    ap.add_argument("--run-name", default="")
    ap.add_argument("--max-steps", type=int, default=20)
    ap.add_argument("--num-generations", type=int, default=4)
    ap.add_argument("--max-completion-length", type=int, default=32)
    ap.add_argument("--replay-pairs", default="nonzero_adv", choices=("nonzero_adv", "all"),
                    help="all: replay every (sample, reward) pair, also where its advantage is 0 (to look at credit)")
    return ap.parse_args(argv)


def load(model_path: str):
    """(model, tokenizer) from a local folder; left padding, as TRL generates."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path, padding_side="left")
    return AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32), tokenizer


def trl_settings(args: argparse.Namespace, rows: int) -> dict:
    """GRPOConfig fields of a small run: every row once per step, G samples each, no HF checkpoints or logging."""
    import torch

    on_gpu = torch.cuda.is_available()
    return dict(output_dir=args.output_dir, max_steps=args.max_steps, learning_rate=1e-4,
                per_device_train_batch_size=rows * args.num_generations, num_generations=args.num_generations,
                max_completion_length=args.max_completion_length, bf16=on_gpu, use_cpu=not on_gpu,
                save_strategy="no", report_to=[], logging_steps=1, disable_tqdm=True,
                runs_dir=args.runs_dir, run_name=args.run_name, replay_pairs=args.replay_pairs)
