"""TRL's quickstart with MRTPO: a plain-text dataset, TRL's `reward_len` and a regex format reward, routed by
contrastive replay. The only MRTPO-specific line is `reward_contrasts`: for each reward, the part of the prompt
it depends on (here the last sentence asks for the length, a sentence mentioning <answer> asks for the format).

    python examples/own_rewards/quickstart.py --max-steps 20
    mrtpo app        # Token credit: what each of the two rewards credited, token by token
"""

from __future__ import annotations

import re

from common import load, parse_args, trl_settings

PROMPTS = [f"Write a short note about {topic}. Wrap the note in <answer></answer> tags. Keep it to about 20 characters."
           for topic in ("rivers", "cats", "snow", "bread")]


def reward_len(completions, **kwargs):
    """TRL's quickstart reward: completions close to 20 characters (here scaled to about [-1, 0])."""
    return [-abs(20 - len(completion)) / 20 for completion in completions]


def format_reward(completions, **kwargs):
    """1 when the completion is wrapped in <answer></answer>, as in TRL's GRPO documentation."""
    return [1.0 if re.match(r"^<answer>.*?</answer>$", c, re.DOTALL) else 0.0 for c in completions]


def main(argv: list[str] | None = None):
    args = parse_args(__doc__, argv)
    from datasets import Dataset

    from core.integrations.trl import MRTPOConfig, MRTPOTrainer

    model, tokenizer = load(args.model)
    config = MRTPOConfig(
        **trl_settings(args, len(PROMPTS)),
        generation_kwargs={"min_new_tokens": 4},  # the embedded tiny model was trained on chat prompts only
        reward_contrasts={"reward_len": "last_sentence", "format_reward": "match:<answer>"},
    )
    trainer = MRTPOTrainer(model, reward_funcs=[reward_len, format_reward], args=config,
                           train_dataset=Dataset.from_list([{"prompt": p} for p in PROMPTS]),
                           processing_class=tokenizer)
    trainer.train()
    return trainer


if __name__ == "__main__":
    main()
