"""IFEval's `change_case:` group: all lowercase, all capitals, capital-word frequency."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from core.verifiers.ifeval.common import (
    _compare,
    _graded_count,
    _relation_param,
    _runs,
)
from core.verifiers.shared.base import (
    Param,
    Span,
    Verifier,
    as_int,
)
from core.verifiers.shared.registry import register
from core.verifiers.shared.text import capital_words


@register("change_case:english_lowercase")
class EnglishLowercase(Verifier):
    """`text.islower()`: at least one cased letter and no upper/title-case letter (IFEval without
    its language detection). Graded: share of cased letters that are lowercase. Spans: the
    offending letters, or the whole text when the rule holds or the text has no letter."""

    has_graded = True
    params: ClassVar = {}
    cue_words = {"lowercase": 2, "lower case": 2, "lower-case": 2, "capital": 1}

    def sentence(self) -> str:
        return "Use only lowercase letters."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        bad = [i for i, c in enumerate(text) if c.isupper() or c.istitle()]
        good = sum(1 for c in text if c.islower())
        if self.graded:
            score = good / (good + len(bad)) if good + len(bad) else 0.0
        else:
            score = float(text.islower())
        return score, (_runs(bad) if bad else [(0, len(text))])


@register("change_case:english_capital")
class EnglishCapital(Verifier):
    """`text.isupper()`: at least one cased letter and no lower/title-case letter (IFEval without
    its language detection). Graded: share of cased letters that are uppercase. Spans: the
    offending letters, or the whole text when the rule holds or the text has no letter."""

    has_graded = True
    params: ClassVar = {}
    cue_words = {"capital": 2, "uppercase": 2, "upper case": 2, "all caps": 2}

    def sentence(self) -> str:
        return "Use only capital letters."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        bad = [i for i, c in enumerate(text) if c.islower() or (c.istitle() and not c.isupper())]
        good = sum(1 for c in text if c.isupper())
        if self.graded:
            score = good / (good + len(bad)) if good + len(bad) else 0.0
        else:
            score = float(text.isupper())
        return score, (_runs(bad) if bad else [(0, len(text))])


@register("change_case:capital_word_frequency")
class CapitalWordFrequency(Verifier):
    """Words in all capital letters (Treebank tokens with `token.isupper()`, as IFEval over
    `nltk.word_tokenize`; see `core.verifiers.shared.text.capital_words`) number `< capital_frequency` or
    `>= capital_frequency`. Graded: see `_graded_count`. Spans: every counted capital word.

    >>> CapitalWordFrequency(capital_frequency=2, capital_relation="at least").verify("GO NOW, ok")
    VerifyResult(score=1.0, spans=((0, 2), (3, 6)))
    """

    has_graded = True
    params: ClassVar = {
        "capital_frequency": Param(as_int(0), help="an integer >= 0"),
        "capital_relation": _relation_param(),
    }
    cue_words = {"capital": 2, "all caps": 2, "times": 1}

    def sentence(self) -> str:
        k = self.kwargs
        return f"Use words in all capital letters {k['capital_relation']} {k['capital_frequency']} times."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        k = self.kwargs
        count, spans = capital_words(text)
        if self.graded:
            return _graded_count(count, k["capital_relation"], k["capital_frequency"]), spans
        return float(_compare(count, k["capital_relation"], k["capital_frequency"])), spans

    def prompt_cues(self) -> tuple[list[str], dict[str, int]]:
        k = self.kwargs
        return [f"{k['capital_relation']} {k['capital_frequency']}"], dict(self.cue_words)
