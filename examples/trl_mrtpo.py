"""MRTPO from a TRL script: your prompts with their constraint lists, the workbench's verifiers as reward
functions, `MRTPOTrainer` in place of `GRPOTrainer`. Process 0 writes a run store that `mrtpo app` shows
while the run trains.

    # one process (CPU or one GPU)
    python examples/trl_mrtpo.py --model sample_data/models/tiny-instruct --max-steps 20
    # two processes on CPU (gloo): torchrun, not `accelerate launch --cpu` (that starts one process)
    torchrun --standalone --nproc_per_node 2 examples/trl_mrtpo.py --max-steps 20
    # 8 GPUs with DeepSpeed ZeRO-2 (bf16)
    accelerate launch --config_file examples/accelerate/deepspeed_zero2.yaml examples/trl_mrtpo.py \
        --model /path/to/a/local/causal-lm --max-steps 500 --per-device-batch 8 --max-completion-length 256

Each row of the dataset has a `prompt` (text or chat messages) and `constraints`, a list of
{"family", "kwargs"} that `core.verifiers` knows (`mrtpo app` -> Verifier debugger lists them). With a
`task` column the prompt must contain the task followed by the constraints' sentences, and the contrastive
prompt removes exactly one sentence; without it, the sentence is located in the prompt text.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a clone without installing

# Your data: prompts and the constraints each one states.
ROWS = [
    {"prompt": [{"role": "user", "content": "Write a short note about rivers. Include the keyword steady. "
                                            "Do not use any commas."}],
     "task": "Write a short note about rivers.",
     "constraints": [{"family": "keywords:existence", "kwargs": {"keywords": ["steady"]}},
                     {"family": "punctuation:no_comma", "kwargs": {}}]},
    {"prompt": [{"role": "user", "content": "What is 3 plus 4? Use only lowercase letters."}],
     "task": "What is 3 plus 4?",
     "constraints": [{"family": "task:arithmetic", "kwargs": {"answer": 7}},
                     {"family": "change_case:english_lowercase", "kwargs": {}}]},
    {"prompt": [{"role": "user", "content": "Write a short note about mountains. Use only lowercase letters. "
                                            "End your response with the phrase Is there anything else?"}],
     "task": "Write a short note about mountains.",
     "constraints": [{"family": "change_case:english_lowercase", "kwargs": {}},
                     {"family": "startend:end_checker", "kwargs": {"end_phrase": "Is there anything else?"}}]},
    {"prompt": [{"role": "user", "content": "What is 2 plus 5? Do not use any commas."}],
     "task": "What is 2 plus 5?",
     "constraints": [{"family": "task:arithmetic", "kwargs": {"answer": 7}},
                     {"family": "punctuation:no_comma", "kwargs": {}}]},
]


def main(argv: list[str] | None = None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="sample_data/models/tiny-instruct", help="a local causal-LM folder")
    ap.add_argument("--output-dir", default="trl-output")
    ap.add_argument("--runs-dir", default="runs", help="where the run store goes (`mrtpo app` lists it)")
    ap.add_argument("--run-name", default="")
    ap.add_argument("--max-steps", type=int, default=20)
    ap.add_argument("--per-device-batch", type=int, default=16, help="completions per process and step")
    ap.add_argument("--num-generations", type=int, default=8)
    ap.add_argument("--max-completion-length", type=int, default=48)
    ap.add_argument("--learning-rate", type=float, default=3e-4)
    ap.add_argument("--routing", default="replay", choices=("replay", "span", "uniform"))
    args = ap.parse_args(argv)

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from core.integrations.trl import MRTPOConfig, MRTPOTrainer, verifier_rewards

    dataset = Dataset.from_list(ROWS)
    tokenizer = AutoTokenizer.from_pretrained(args.model, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    on_gpu = torch.cuda.is_available()
    config = MRTPOConfig(
        output_dir=args.output_dir, max_steps=args.max_steps, learning_rate=args.learning_rate,
        per_device_train_batch_size=args.per_device_batch, num_generations=args.num_generations,
        max_completion_length=args.max_completion_length, bf16=on_gpu, use_cpu=not on_gpu,
        lr_scheduler_type="constant", save_strategy="no", report_to=[], logging_steps=1,
        # MRTPO: route each reward's advantage to the tokens its constraint changes (contrastive replay)
        routing=args.routing, relevance="js", lam=1.0, w_max=5.0,
        family_weights={"task:arithmetic": 2.0},  # reward weights by verifier family; the rest get 1
        runs_dir=args.runs_dir, run_name=args.run_name,
    )
    trainer = MRTPOTrainer(model, reward_funcs=verifier_rewards(dataset), args=config, train_dataset=dataset,
                           processing_class=tokenizer)
    trainer.train()
    if trainer.writer is not None:
        print(f"run store: {trainer.writer.path}  (mrtpo app --runs-dir {args.runs_dir})")
    return trainer


if __name__ == "__main__":
    main()
