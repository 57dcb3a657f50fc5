"""TRL's reasoning setup with MRTPO: a conversational dataset with a `solution` column, a `\\boxed{}` accuracy
reward, TRL's `think_format_reward` and a style reward. Each reward declares the part of the prompt it depends on:
the accuracy reward the question (`question`: everything in the user turn but the other rewards' instructions), the
think format the system message (`system`), the style reward the sentence asking for it (`match:`). The accuracy
reward also reports the span it read (`reward_with_spans`), so Token credit draws it under the tokens.

    python examples/own_rewards/math_reasoning.py --max-steps 20
"""

from __future__ import annotations

import re

from common import load, parse_args, trl_settings

SYSTEM = "Think step by step inside <think></think> tags, then give the answer."
QUESTIONS = [("What is 3 plus 4?", "7"), ("What is 12 minus 5?", "7"), ("What is 6 times 2?", "12"),
             ("What is 9 plus 8?", "17")]
STYLE = "Put the final answer in \\boxed{} and use only lowercase letters."
ROWS = [{"prompt": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"{q} {STYLE}"}],
         "solution": a} for q, a in QUESTIONS]
BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def accuracy_reward(completions, solution, **kwargs):
    """1 when the last \\boxed{...} holds the solution; reports the span of what it read (the boxed answer)."""
    out = []
    for completion, answer in zip(completions, solution, strict=True):
        found = list(BOXED.finditer(completion[0]["content"]))
        if not found:
            out.append((0.0, []))
        else:
            out.append((float(found[-1].group(1).strip() == answer), [found[-1].span()]))
    return out


def lowercase_reward(completions, **kwargs):
    """A style reward: the share of letters that are lowercase."""
    scores = []
    for completion in completions:
        letters = [ch for ch in completion[0]["content"] if ch.isalpha()]
        scores.append(sum(ch.islower() for ch in letters) / len(letters) if letters else 0.0)
    return scores


def main(argv: list[str] | None = None):
    args = parse_args(__doc__, argv)
    from datasets import Dataset
    from trl.rewards import think_format_reward

    from core.integrations.trl import MRTPOConfig, MRTPOTrainer, reward_with_spans

    model, tokenizer = load(args.model)
    config = MRTPOConfig(
        **trl_settings(args, len(ROWS)),
        reward_contrasts={"accuracy_reward": "question", "think_format_reward": "system",
                          "lowercase_reward": "match:lowercase"},
    )
    rewards = [reward_with_spans(accuracy_reward), think_format_reward, lowercase_reward]
    trainer = MRTPOTrainer(model, reward_funcs=rewards, args=config, train_dataset=Dataset.from_list(ROWS),
                           processing_class=tokenizer)
    trainer.train()
    return trainer


if __name__ == "__main__":
    main()
