"""IFBench's `ratio:overlap` (`ratio:stop_words` is refused, docs/IFBENCH.md; the three sentence ratios split
sentences and live in `sentences.py`). Never imports torch.

>>> from core.verifiers import build
>>> build("ratio:overlap", reference_text="xbcd", percentage=50).verify("abcd").score  # bcd shared: 1 of 2
1.0
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from core.verifiers.ifbench.common import IFBenchVerifier
from core.verifiers.shared.base import Param, Span, as_text
from core.verifiers.shared.registry import register


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value)


def char_trigrams(text: str) -> dict[str, int]:
    """Each distinct 3-character substring of `text` and where it first starts."""
    first: dict[str, int] = {}
    for i in range(len(text) - 2):
        first.setdefault(text[i:i + 3], i)
    return first


def overlap_share(text: str, reference: str) -> float:
    """|T(text) ∩ T(reference)| / |T(text)|, T the set of character trigrams (docs/METHOD.md, "IFBench's n-gram
    overlap and letter draws"); NaN when `text` has fewer than 3 characters.

    >>> overlap_share("abcd", "xbcd")  # {abc, bcd} against {xbc, bcd}
    0.5
    """
    mine = char_trigrams(text)
    if not mine:
        return float("nan")
    return len(mine.keys() & char_trigrams(reference).keys()) / len(mine)


@register("ratio:overlap")
class NGramOverlap(IFBenchVerifier):
    """The share of the response's distinct character trigrams that also occur in `reference_text`
    (`overlap_share`) is within 2 percentage points of `percentage`. A response under 3 characters fails
    (IFBench divides by zero there). Spans: the first occurrence of each shared trigram."""

    params: ClassVar = {"reference_text": Param(as_text), "percentage": Param(_number)}
    description = "Maintain a trigram overlap of {percentage}% (±2%) with the provided reference text."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        mine, ref = char_trigrams(text), char_trigrams(self.kwargs["reference_text"])
        if not mine:
            return False, ()
        share = 100 * len(mine.keys() & ref.keys()) / len(mine)
        spans = [(i, i + 3) for g, i in mine.items() if g in ref]
        return self.kwargs["percentage"] - 2 <= share <= self.kwargs["percentage"] + 2, spans
