"""The default prompt set's generator (for the tiny-instruct model).

Writing prompts: task "Write a short note about {topic}." plus 2-4 constraints from four
families (include a keyword, end with a phrase, all lowercase, no commas); arithmetic prompts:
"What is {a} plus {b}?" (a, b in 1..9, family `task:arithmetic`) plus 1-3 of those constraints.
The held-out split uses other topics and other keywords (same end phrases and families).

The vocabulary is small on purpose: a 1M-parameter model must learn to copy the stated keyword
and end phrase from the prompt. Deterministic for a given (n, seed, split).

    python -m core.tools.promptgen --out sample_data/prompts      # rewrites default.jsonl, heldout.jsonl

Never imports torch.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

from core.tasks import save_prompt_set

TOPICS = (
    "rivers", "mountains", "the sea", "cats", "dogs", "bread", "rain", "the moon", "trees", "music",
    "trains", "gardens", "winter", "books", "birds", "coffee", "the city", "bees", "the desert", "bicycles",
)  # fmt: skip
KEYWORDS = (
    "light",
    "green",
    "stone",
    "quiet",
    "bright",
    "warm",
    "river",
    "happy",
    "little",
    "steady",
    "gentle",
    "morning",
)
HELDOUT_TOPICS = (
    "clocks", "islands", "horses", "candles", "bridges", "snow", "apples", "kites", "the forest", "boats",
)  # fmt: skip
HELDOUT_KEYWORDS = ("silver", "calm", "sweet", "fresh", "round", "golden")
END_PHRASES = ("That is all.", "The end.", "Thank you.", "See you soon.")

WRITING_FAMILIES = (
    "keywords:existence",
    "startend:end_checker",
    "change_case:english_lowercase",
    "punctuation:no_comma",
)
SPLITS = ("train", "heldout")


def _constraint(family: str, rng: random.Random, keywords: tuple[str, ...], topic: str) -> dict[str, Any]:
    if family == "keywords:existence":
        # A keyword inside the topic could be copied from the task instead of the constraint.
        choices = [w for w in keywords if w not in topic] or list(keywords)
        return {"family": family, "kwargs": {"keywords": [rng.choice(choices)]}}
    if family == "startend:end_checker":
        return {"family": family, "kwargs": {"end_phrase": rng.choice(END_PHRASES)}}
    return {"family": family, "kwargs": {}}


def generate_prompts(
    n: int,
    seed: int = 0,
    split: str = "train",
    *,
    arithmetic_share: float = 0.2,
    writing_constraints: tuple[int, int] = (2, 4),
    arithmetic_constraints: tuple[int, int] = (1, 3),
) -> list[dict[str, Any]]:
    """`n` prompts as native JSONL records (`key`, `task`, `constraints`).

    `round(n * arithmetic_share)` of them (at random positions) are arithmetic prompts. The
    number of format constraints is drawn uniformly from the inclusive ranges given (the
    bootstrap corpus uses (0, 3) so that a contrastive prompt is one the model has seen).

    >>> generate_prompts(1, seed=0, arithmetic_share=0.0)[0]["task"]
    'Write a short note about cats.'
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not 0.0 <= arithmetic_share <= 1.0:
        raise ValueError(f"arithmetic_share must be in [0, 1], got {arithmetic_share}")
    for name, (lo, hi) in (
        ("writing_constraints", writing_constraints),
        ("arithmetic_constraints", arithmetic_constraints),
    ):
        if not 0 <= lo <= hi <= len(WRITING_FAMILIES):
            raise ValueError(f"{name} must satisfy 0 <= low <= high <= {len(WRITING_FAMILIES)}, got {(lo, hi)}")
    topics, keywords = (TOPICS, KEYWORDS) if split == "train" else (HELDOUT_TOPICS, HELDOUT_KEYWORDS)
    rng = random.Random(f"{split}:{seed}")
    arithmetic = set(rng.sample(range(n), round(n * arithmetic_share)))
    prefix = "p" if split == "train" else "h"
    records = []
    for i in range(n):
        if i in arithmetic:
            a, b = rng.randint(1, 9), rng.randint(1, 9)
            task, topic = f"What is {a} plus {b}?", ""
            lo, hi = arithmetic_constraints
            constraints = [{"family": "task:arithmetic", "kwargs": {"answer": a + b}}]
        else:
            topic = rng.choice(topics)
            task = f"Write a short note about {topic}."
            lo, hi = writing_constraints
            constraints = []
        chosen = rng.sample(WRITING_FAMILIES, rng.randint(lo, hi))
        constraints += [_constraint(family, rng, keywords, topic) for family in chosen]
        records.append({"key": f"{prefix}{i + 1:04d}", "task": task, "constraints": constraints})
    return records


def write_default_sets(out_dir: str | Path, n_train: int = 200, n_heldout: int = 60, seed: int = 0) -> list[Path]:
    """Write `default.jsonl` (train split) and `heldout.jsonl` into `out_dir`."""
    out_dir = Path(out_dir)
    paths = [out_dir / "default.jsonl", out_dir / "heldout.jsonl"]
    save_prompt_set(generate_prompts(n_train, seed, "train"), paths[0])
    save_prompt_set(generate_prompts(n_heldout, seed, "heldout"), paths[1])
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.tools.promptgen", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for default.jsonl and heldout.jsonl")
    parser.add_argument("--n", type=int, default=200, help="train prompts (default 200)")
    parser.add_argument("--heldout-n", type=int, default=60, help="held-out prompts (default 60)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for path in write_default_sets(args.out, args.n, args.heldout_n, args.seed):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
