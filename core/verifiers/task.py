"""The workbench's own task-correctness families (`task:`): `task:arithmetic`."""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from typing import ClassVar

from core.verifiers.shared.base import (
    Param,
    Span,
    Verifier,
    as_int,
)
from core.verifiers.shared.registry import register

_INT_RE = re.compile(r"-?\d+")


@register("task:arithmetic")
class Arithmetic(Verifier):
    """Task correctness: the first integer in the response equals `answer`. Spans: that integer,
    or the whole text when it holds no integer (the whole text was searched).

    >>> Arithmetic(answer=7).verify("It is 7.")
    VerifyResult(score=1.0, spans=((6, 7),))
    """

    is_task = True
    params: ClassVar = {"answer": Param(as_int(-(10**18), 10**18), help="an integer, |answer| <= 10**18")}

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        m = _INT_RE.search(text)
        if m is None:
            return 0.0, [(0, len(text))]
        try:
            value = int(m.group())
        except ValueError:  # more digits than int() accepts from a string: not the answer
            return 0.0, [m.span()]
        return float(value == self.kwargs["answer"]), [m.span()]

    swap_kind = "operands"

    def counterfactual(self, part: str, rng: random.Random) -> str | None:
        """The task text with every integer (operand) replaced by another one with as many digits, redrawn
        until the operands' sum differs (so the asked-for answer changes for a sum). None without an
        integer in the text.

        >>> import random
        >>> Arithmetic(answer=9).counterfactual("What is 5 plus 4?", random.Random(0))
        'What is 8 plus 8?'
        """
        olds = [int(m.group()) for m in _INT_RE.finditer(part)]
        if not olds:
            return None
        for _ in range(100):
            news = [_other_int(v, rng) for v in olds]
            if sum(news) != sum(olds):
                break
        values = iter(news)
        return _INT_RE.sub(lambda m: str(next(values)), part)


def _other_int(value: int, rng: random.Random) -> int:
    """An integer != value with as many digits and the same sign, drawn uniformly from rng (0 draws 1..8)."""
    digits = len(str(abs(value)))
    low, high = (1 if digits == 1 else 10 ** (digits - 1)), 10**digits - 1
    pick = rng.randint(low, high - 1)
    pick = pick + 1 if pick >= abs(value) and low <= abs(value) <= high else pick
    return -pick if value < 0 else pick
