"""Pieces the IFBench verifiers share: the base class (the instruction's sentence is IFBench's wording with the
arguments filled in), argument converters and word helpers. Never imports torch."""

from __future__ import annotations

import re
import string
from collections.abc import Iterable
from typing import ClassVar

from core.verifiers.shared.base import Span, Verifier

PUNCTUATION = string.punctuation
_NONSPACE = re.compile(r"\S+")


class IFBenchVerifier(Verifier):
    """Base of the IFBench families: `description` is the instruction's sentence, formatted with the arguments;
    `rule(text)` returns (followed, spans)."""

    description: ClassVar[str] = ""

    def sentence(self) -> str:
        return self.description.format(**self.kwargs)

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        raise NotImplementedError

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        ok, spans = self.rule(text)
        return float(bool(ok)), spans


def split_spans(text: str) -> list[tuple[str, Span]]:
    """`text.split()`'s pieces with their character ranges."""
    return [(m.group(), m.span()) for m in _NONSPACE.finditer(text)]


def strip_span(piece: str, span: Span, chars: str) -> tuple[str, Span]:
    """`piece.strip(chars)` and the range it keeps (the whole piece's range when nothing is left)."""
    left = len(piece) - len(piece.lstrip(chars))
    kept = piece.strip(chars)
    return kept, ((span[0] + left, span[0] + left + len(kept)) if kept else span)


def whole(text: str) -> list[Span]:
    """The whole text as one span (a rule that inspected all of it)."""
    return [(0, len(text))]
