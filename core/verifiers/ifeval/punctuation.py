"""IFEval's `punctuation:` group: no comma."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from core.verifiers.shared.base import (
    Span,
    Verifier,
)
from core.verifiers.shared.registry import register


@register("punctuation:no_comma")
class NoComma(Verifier):
    """No ',' anywhere. Graded: 1 / (1 + number of commas). Spans: each comma (empty when the
    rule holds).

    >>> NoComma().verify("a, b, c")
    VerifyResult(score=0.0, spans=((1, 2), (4, 5)))
    """

    has_graded = True
    params: ClassVar = {}
    cue_words = {"comma": 2}

    def sentence(self) -> str:
        return "Do not use any commas."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        spans = [(i, i + 1) for i, c in enumerate(text) if c == ","]
        if self.graded:
            return 1 / (1 + len(spans)), spans
        return float(not spans), spans
