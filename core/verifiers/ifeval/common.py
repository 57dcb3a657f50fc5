"""What IFEval's families share: the count relations and their graded score, the values the `swap` relevance
draws from, sentence helpers, and lower-casing with a map back to the original characters."""

from __future__ import annotations

from core.verifiers.shared.base import (
    Param,
    Span,
    as_choice,
)

RELATIONS = ("less than", "at least")


def _relation_param() -> Param:
    return Param(as_choice(RELATIONS), choices=RELATIONS, help="comparison")


def _compare(count: int, relation: str, target: int) -> bool:
    """IFEval's relations: 'less than' is count < target, 'at least' is count >= target."""
    return count < target if relation == "less than" else count >= target


def _graded_count(count: int, relation: str, target: int) -> float:
    """Graded count score.
    at least N: min(1, count / N)   (1 when N = 0)
    less than N: 1 if count < N else (N - 1) / count   (0 when N <= 1)."""
    if relation == "at least":
        return 1.0 if target <= 0 else min(1.0, count / target)
    if count < target:
        return 1.0
    return max(0.0, (target - 1) / count) if count > 0 else 0.0


# Values the `swap` relevance draws a counterfactual argument from (`Verifier.counterfactual`): words and
# phrases of the kind the shipped prompt sets use (core/tools/promptgen.py), so a swapped prompt stays in the
# distribution the embedded models were trained on.
SWAP_WORDS = (
    "light", "green", "stone", "quiet", "bright", "warm", "river", "happy", "little", "steady", "gentle", "morning",
    "silver", "calm", "sweet", "fresh", "round", "golden",
)  # fmt: skip
SWAP_END_PHRASES = ("That is all.", "The end.", "Thank you.", "See you soon.")
SWAP_START_PHRASES = ("Dear reader", "Hello friend", "Good day", "Well now")


def _join_words(words: list[str], conj: str = "and") -> str:
    if len(words) == 1:
        return words[0]
    return " ".join(words[:-1]) + f" {conj} " + words[-1]


def _with_stop(sentence: str) -> str:
    """End a sentence with a period unless the phrase it quotes already ends in . ! or ?
    ("End your response with the phrase That is all." rather than "... all..")."""
    return sentence if sentence.rstrip()[-1:] in ".!?" else sentence.rstrip() + "."


def _lower_map(text: str) -> tuple[str, list[int] | range]:
    """`text.lower()` and, for each lowered character, the index of the original character it
    came from (plus a final entry len(text)). Lower-casing never removes characters, so when the
    length is unchanged the map is the identity; otherwise (İ -> i̇) lower character by character."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered, range(len(text) + 1)
    pieces, index = [], []
    for i, char in enumerate(text):
        low = char.lower()
        pieces.append(low)
        index.extend([i] * len(low))
    index.append(len(text))
    return "".join(pieces), index


def _runs(positions: list[int]) -> list[Span]:
    """Consecutive character positions grouped into ranges."""
    spans: list[Span] = []
    for pos in positions:
        if spans and spans[-1][1] == pos:
            spans[-1] = (spans[-1][0], pos + 1)
        else:
            spans.append((pos, pos + 1))
    return spans
