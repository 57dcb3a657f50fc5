"""The rewrites of a constraint's part that the newer contrastive prompts make (docs/METHOD.md, "Relevance variants").

`core.contrast.verifier_contrastive(item, k, contrast)` finds the part of a prompt that states constraint k (its
sentence; for a task verifier the task text) and, for each kind of contrastive prompt, replaces it:

| contrast | constraint k's part becomes | what the distance then measures |
|---|---|---|
| `remove` | nothing | the decision to follow the constraint (and any effect of a shorter prompt) |
| `swap` | the part with its argument swapped (`Verifier.counterfactual`) | the tokens carrying the argument |
| `neutral` | a neutral text with as many words (`neutral_text`) | the constraint's content, length and position held |
| `placebo` | the part followed by a neutral text with as many words | what adding a same-length sentence does (the placebo) |
| `opposite` | the opposite constraint's sentence (`opposite_sentence`) | the tokens that differ between following and defying |
| `key` | the part without its argument strings and cue words (`key_removed`) | the key words alone, the sentence frame kept |

Each rewrite here returns None where it has nothing to do (a family without an opposite, a part without key words);
the caller then removes the part, as `swap` does for a family without an argument. Imports neither torch nor TRL.
"""

from __future__ import annotations

import random
import re
from typing import Any

# Plain sentences that state nothing a verifier checks: no keyword of the prompt sets' swap lists, no case, comma,
# ending or format instruction. `neutral_text` takes a run of their words from the start of one of them.
NEUTRAL_SENTENCES = (
    "The old house stood at the far side of a quiet road.",
    "Tall grass grew along the fence near the gate.",
    "A small stream ran past the garden toward the hills.",
    "Birds sat on the wires above the narrow path.",
    "The sky turned slowly from grey to blue over the fields.",
    "A cart rolled down the lane past the stone wall.",
)
NEUTRAL_WORDS = " ".join(s.rstrip(".") for s in NEUTRAL_SENTENCES).split()
_SENTENCE_STARTS = [sum(len(s.split()) for s in NEUTRAL_SENTENCES[:j]) for j in range(len(NEUTRAL_SENTENCES))]


def neutral_text(part: str, rng: random.Random) -> str:
    """A neutral text with as many words as `part` (at least one): the run of `NEUTRAL_SENTENCES`' words (full stops
    dropped, wrapping around) from the start of a sentence drawn by `rng`, its first letter capitalised, ending
    with a full stop.

    >>> neutral_text("Use only lowercase letters.", random.Random(0))
    'Birds sat on the.'
    """
    n = max(1, len(part.split()))
    start = _SENTENCE_STARTS[rng.randrange(len(_SENTENCE_STARTS))]
    text = " ".join(NEUTRAL_WORDS[(start + j) % len(NEUTRAL_WORDS)] for j in range(n))
    return text[0].upper() + text[1:] + "."


# Families whose count relation flips to give the opposite constraint: family -> the kwarg holding the relation.
RELATION_KWARG = {
    "length_constraints:number_words": "relation",
    "length_constraints:number_sentences": "relation",
    "keywords:frequency": "relation",
    "keywords:letter_frequency": "let_relation",
    "change_case:capital_word_frequency": "capital_relation",
}
FLIPPED_RELATION = {"at least": "less than", "less than": "at least"}
# The opposite of a family that no verifier states, as a sentence (the argument filled in from the kwargs).
OPPOSITE_TEXT = {
    "punctuation:no_comma": "Use many commas.",
    "startend:end_checker": "Do not end your response with the phrase {end_phrase}",
}
# Family -> (the family stating its opposite, how its kwargs map to that family's kwargs).
OPPOSITE_FAMILY = {
    "change_case:english_lowercase": ("change_case:english_capital", {}),
    "change_case:english_capital": ("change_case:english_lowercase", {}),
    "keywords:existence": ("keywords:forbidden_words", {"keywords": "forbidden_words"}),
    "keywords:forbidden_words": ("keywords:existence", {"forbidden_words": "keywords"}),
}


def opposite_sentence(verifier: Any) -> str | None:
    """The sentence of the constraint opposite to `verifier`'s, None for a family without one:
    lowercase <-> capital letters, required <-> forbidden keywords (the same words), a count relation flipped
    ("at least N" <-> "less than N": `RELATION_KWARG`), "no commas" -> "Use many commas.", an end phrase -> "Do not
    end your response with the phrase ...". Built by the opposite family's own `sentence()` where one states it.

    >>> from core.verifiers import build
    >>> opposite_sentence(build("change_case:english_lowercase"))
    'Use only capital letters.'
    >>> opposite_sentence(build("length_constraints:number_words", num_words=50, relation="at least"))
    'Answer with less than 50 words.'
    """
    from core.verifiers import build

    family, kwargs = verifier.family, {k: v for k, v in verifier.kwargs.items() if v is not None}
    if family in OPPOSITE_FAMILY:
        other, rename = OPPOSITE_FAMILY[family]
        return build(other, **{rename[k]: v for k, v in kwargs.items() if k in rename}).sentence()
    if family in RELATION_KWARG and kwargs.get(RELATION_KWARG[family]) in FLIPPED_RELATION:
        key = RELATION_KWARG[family]
        return build(family, **{**kwargs, key: FLIPPED_RELATION[kwargs[key]]}).sentence()
    if family in OPPOSITE_TEXT:
        try:
            return OPPOSITE_TEXT[family].format(**kwargs)
        except KeyError:
            return None
    return None


def key_removed(part: str, verifier: Any) -> str | None:
    """`part` without its key words: every occurrence (case-insensitive) of the verifier's argument strings
    ("morning", "at least 120", "The end.") and of its cue words at a word start ("lowercase", "comma"), spaces
    collapsed; None when `part` holds none of them (the caller then removes the whole part).

    >>> from core.verifiers import build
    >>> key_removed("Use only lowercase letters.", build("change_case:english_lowercase"))
    'Use only letters.'
    >>> key_removed("Include the keyword morning.", build("keywords:existence", keywords=["morning"]))
    'Include the.'
    """
    args, cues = verifier.prompt_cues()
    out = part
    for word in sorted({w.strip() for w in (*args, *cues) if w.strip()}, key=len, reverse=True):
        lead = r"(?<!\w)" if word[0].isalnum() else ""
        out = re.sub(lead + re.escape(word) + r"\w*", "", out, flags=re.IGNORECASE)
    out = re.sub(r"\s+([.,;:!?])", r"\1", re.sub(r"[ \t]{2,}", " ", out)).strip()
    if out == part.strip():
        return None
    return out[:1].upper() + out[1:] if part.strip()[:1].isupper() else out


def rewrite(contrast: str, part: str, verifier: Any, rng: random.Random) -> str | None:
    """Constraint k's part under a newer contrast (module table): `neutral`, `placebo`, `opposite`, `key`; None
    where the contrast has nothing to do (the caller removes the part)."""
    if contrast == "neutral":
        return neutral_text(part, rng)
    if contrast == "placebo":
        return part.rstrip() + " " + neutral_text(part, rng)
    if contrast == "opposite":
        return opposite_sentence(verifier)
    if contrast == "key":
        return key_removed(part, verifier)
    raise ValueError(f"rewrite does not handle the contrast {contrast!r}")
