"""IFEval's `keywords:` group: existence, forbidden words, frequency, letter frequency."""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from typing import ClassVar

from core.verifiers.ifeval.common import (
    SWAP_WORDS,
    _compare,
    _graded_count,
    _join_words,
    _lower_map,
    _relation_param,
)
from core.verifiers.shared.base import (
    Param,
    Span,
    Verifier,
    as_int,
    as_text,
    as_word_list,
    swap_values,
)
from core.verifiers.shared.registry import register


@register("keywords:existence")
class KeywordExistence(Verifier):
    """Every keyword appears (case-insensitive substring, as IFEval). Graded: share of keywords
    present. Spans: all occurrences of the keywords.

    >>> KeywordExistence(keywords=["light"]).verify("Light and light.")
    VerifyResult(score=1.0, spans=((0, 5), (10, 15)))
    """

    has_graded = True
    params: ClassVar = {"keywords": Param(as_word_list, help="list of keywords")}
    cue_words = {"keyword": 2, "include": 1, "mention": 1}

    def sentence(self) -> str:
        words = self.kwargs["keywords"]
        return f"Include the keyword {words[0]}." if len(words) == 1 else f"Include the keywords {_join_words(words)}."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        spans: list[Span] = []
        found = 0
        for word in self.kwargs["keywords"]:
            hits = [m.span() for m in re.finditer(re.escape(word), text, flags=re.IGNORECASE)]
            found += bool(hits)
            spans += hits
        total = len(self.kwargs["keywords"])
        score = found / total if self.graded else float(found == total)
        return score, spans

    def prompt_cues(self) -> tuple[list[str], dict[str, int]]:
        return list(self.kwargs["keywords"]), dict(self.cue_words)

    swap_kind = "keyword"

    def counterfactual(self, part: str, rng: random.Random) -> str | None:
        return swap_values(part, self.kwargs["keywords"], SWAP_WORDS, rng)


@register("keywords:forbidden_words")
class ForbiddenWords(Verifier):
    """None of the words appears as a whole word (case-insensitive). Graded: 1 - share of the
    forbidden words present. Spans: the occurrences (empty when the rule holds)."""

    has_graded = True
    params: ClassVar = {"forbidden_words": Param(lambda v: sorted(set(as_word_list(v))), help="list of words")}
    cue_words = {"keyword": 1, "forbid": 1, "avoid": 1, "not": 1}

    def sentence(self) -> str:
        words = self.kwargs["forbidden_words"]
        if len(words) == 1:
            return f"Do not include the word {words[0]}."
        return f"Do not include the words {_join_words(words, 'or')}."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        spans: list[Span] = []
        present = 0
        for word in self.kwargs["forbidden_words"]:
            hits = [m.span() for m in re.finditer(r"\b" + re.escape(word) + r"\b", text, flags=re.IGNORECASE)]
            present += bool(hits)
            spans += hits
        total = len(self.kwargs["forbidden_words"])
        score = 1 - present / total if self.graded else float(present == 0)
        return score, spans

    def prompt_cues(self) -> tuple[list[str], dict[str, int]]:
        return list(self.kwargs["forbidden_words"]), dict(self.cue_words)

    swap_kind = "keyword"

    def counterfactual(self, part: str, rng: random.Random) -> str | None:
        return swap_values(part, self.kwargs["forbidden_words"], SWAP_WORDS, rng)


@register("keywords:frequency")
class KeywordFrequency(Verifier):
    """The keyword occurs (case-insensitive substring) `< frequency` or `>= frequency` times.
    Graded: see `_graded_count`. Spans: the occurrences."""

    has_graded = True
    params: ClassVar = {
        "keyword": Param(lambda v: as_text(v).strip(), help="a word"),
        "frequency": Param(as_int(0), help="an integer >= 0"),
        "relation": _relation_param(),
    }
    cue_words = {"times": 1, "appear": 1, "occur": 1}

    def sentence(self) -> str:
        k = self.kwargs
        return f"Use the word {k['keyword']} {k['relation']} {k['frequency']} times."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        k = self.kwargs
        spans = [m.span() for m in re.finditer(re.escape(k["keyword"]), text, flags=re.IGNORECASE)]
        count = len(spans)
        if self.graded:
            return _graded_count(count, k["relation"], k["frequency"]), spans
        return float(_compare(count, k["relation"], k["frequency"])), spans

    def prompt_cues(self) -> tuple[list[str], dict[str, int]]:
        k = self.kwargs
        return [k["keyword"], f"{k['relation']} {k['frequency']}"], dict(self.cue_words)

    swap_kind = "keyword"

    def counterfactual(self, part: str, rng: random.Random) -> str | None:
        return swap_values(part, [self.kwargs["keyword"]], SWAP_WORDS, rng)


def _letter(value: object) -> str:
    text = as_text(value).strip()
    if len(text) != 1:
        raise ValueError(f"expected a single letter, got {value!r}")
    return text.lower()


@register("keywords:letter_frequency")
class LetterFrequency(Verifier):
    """The letter occurs (in the lower-cased text, as IFEval's `Counter(value.lower())`) `< let_frequency`
    or `>= let_frequency` times. Graded: see `_graded_count`. Spans: every counted occurrence.

    >>> LetterFrequency(letter="a", let_frequency=2, let_relation="at least").verify("A cat")
    VerifyResult(score=1.0, spans=((0, 1), (3, 4)))
    """

    has_graded = True
    params: ClassVar = {
        "letter": Param(_letter, help="one letter"),
        "let_frequency": Param(as_int(0), help="an integer >= 0"),
        "let_relation": _relation_param(),
    }
    cue_words = {"letter": 2, "times": 1, "appear": 1}

    def sentence(self) -> str:
        k = self.kwargs
        return f"Use the letter {k['letter']} {k['let_relation']} {k['let_frequency']} times."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        k = self.kwargs
        lowered, index = _lower_map(text)
        positions = [i for i, c in enumerate(lowered) if c == k["letter"]]
        spans = sorted({(index[i], index[i] + 1) for i in positions})  # İ -> i̇ counts once per lowered 'i'
        count = len(positions)
        if self.graded:
            return _graded_count(count, k["let_relation"], k["let_frequency"]), spans
        return float(_compare(count, k["let_relation"], k["let_frequency"])), spans

    def prompt_cues(self) -> tuple[list[str], dict[str, int]]:
        k = self.kwargs
        return [f"letter {k['letter']}", f"{k['let_relation']} {k['let_frequency']}"], dict(self.cue_words)
