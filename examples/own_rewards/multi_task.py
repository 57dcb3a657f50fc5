"""TRL's multi-task setup with MRTPO: one dataset of two tasks (a `task` column), reward functions that return None
on the other task's rows, and `reward_weights=[2, 1, 0.5]`. The `task` column stays the user's (MRTPO reads it only
in rows with `constraints`). Each reward declares its contrast: the math reward the question, the haiku reward the
instruction held in the row's `instruction` column (empty on math rows, where the reward does not apply), the
length reward the last sentence.

    python examples/own_rewards/multi_task.py --max-steps 20
"""

from __future__ import annotations

import re

from common import load, parse_args, trl_settings

KEEP_SHORT = "Keep it under twenty words."
ROWS = [
    {"task": "math", "prompt": [{"role": "user", "content": f"What is 3 plus 4? {KEEP_SHORT}"}], "answer": "7",
     "instruction": ""},
    {"task": "math", "prompt": [{"role": "user", "content": f"What is 10 minus 2? {KEEP_SHORT}"}], "answer": "8",
     "instruction": ""},
    {"task": "poem", "prompt": [{"role": "user", "content": f"Write about snow. Write it as three short lines. "
                                                            f"{KEEP_SHORT}"}],
     "answer": "", "instruction": "Write it as three short lines."},
    {"task": "poem", "prompt": [{"role": "user", "content": f"Write about rivers. Write it as three short lines. "
                                                            f"{KEEP_SHORT}"}],
     "answer": "", "instruction": "Write it as three short lines."},
]


def math_reward(completions, task, answer, **kwargs):
    """1 when the completion's last number is the answer; None (does not apply) on other tasks' rows."""
    out = []
    for completion, t, a in zip(completions, task, answer, strict=True):
        numbers = re.findall(r"-?\d+", completion[0]["content"])
        out.append(None if t != "math" else float(bool(numbers) and numbers[-1] == a))
    return out


def haiku_reward(completions, task, **kwargs):
    """1 for exactly three non-empty lines; None on other tasks' rows."""
    out = []
    for completion, t in zip(completions, task, strict=True):
        lines = [line for line in completion[0]["content"].splitlines() if line.strip()]
        out.append(None if t != "poem" else float(len(lines) == 3))
    return out


def length_reward(completions, **kwargs):
    """Every task: 1 under twenty words, less the longer it gets."""
    return [min(1.0, 20 / max(len(c[0]["content"].split()), 1)) for c in completions]


def main(argv: list[str] | None = None):
    args = parse_args(__doc__, argv)
    from datasets import Dataset

    from core.integrations.trl import MRTPOConfig, MRTPOTrainer

    model, tokenizer = load(args.model)
    config = MRTPOConfig(
        **trl_settings(args, len(ROWS)), reward_weights=[2.0, 1.0, 0.5],
        reward_contrasts={"math_reward": "question", "haiku_reward": "column:instruction",
                          "length_reward": "last_sentence"},
    )
    trainer = MRTPOTrainer(model, reward_funcs=[math_reward, haiku_reward, length_reward], args=config,
                           train_dataset=Dataset.from_list(ROWS), processing_class=tokenizer)
    trainer.train()
    return trainer


if __name__ == "__main__":
    main()
