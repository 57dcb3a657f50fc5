"""IFEval's `startend:` group: end phrase, quotation; and `startend:start_checker` (the workbench's own
mirror of the end phrase, sharing its rule)."""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import ClassVar

from core.verifiers.ifeval.common import (
    SWAP_END_PHRASES,
    SWAP_START_PHRASES,
    _lower_map,
    _with_stop,
)
from core.verifiers.shared.base import (
    Param,
    Span,
    Verifier,
    as_text,
    swap_values,
)
from core.verifiers.shared.registry import register


class _PhrasePosition(Verifier):
    """Shared by the start and end checks, as IFEval's end_checker: strip whitespace, then
    double quotes, from the text; compare its lower-cased end (or start) with the stripped,
    lower-cased phrase."""

    phrase_arg: ClassVar[str] = ""
    at_end: ClassVar[bool] = True

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        phrase = self.kwargs[self.phrase_arg].strip().lower()
        ws_stripped = text.strip()
        stripped = ws_stripped.strip('"')
        lowered = stripped.lower()
        ok = lowered.endswith(phrase) if self.at_end else lowered.startswith(phrase)
        lead = len(text) - len(text.lstrip()) + len(ws_stripped) - len(ws_stripped.lstrip('"'))
        # The compared part comes from at most len(phrase) original characters (lower-casing
        # never shortens), so only those are mapped.
        if self.at_end:
            tail_start = max(0, len(stripped) - len(phrase))
            low_tail, index = _lower_map(stripped[tail_start:])
            start = lead + tail_start + index[max(0, len(low_tail) - len(phrase))]
            span = (start, lead + len(stripped))
        else:
            low_head, index = _lower_map(stripped[: len(phrase)])
            span = (lead, lead + index[min(len(low_head), len(phrase))])
        return float(ok), [span]

    def prompt_cues(self) -> tuple[list[str], dict[str, int]]:
        return [self.kwargs[self.phrase_arg]], dict(self.cue_words)

    swap_kind = "phrase"

    def counterfactual(self, part: str, rng: random.Random) -> str | None:
        pool = SWAP_END_PHRASES if self.at_end else SWAP_START_PHRASES
        return swap_values(part, [self.kwargs[self.phrase_arg]], pool, rng)


@register("startend:end_checker")
class EndChecker(_PhrasePosition):
    """The response ends with the phrase (after stripping whitespace and double quotes,
    case-insensitive).
    Spans: the end of the text compared with the phrase.

    >>> EndChecker(end_phrase="That is all.").verify("Rain. That is all.  ")
    VerifyResult(score=1.0, spans=((6, 18),))
    """

    params: ClassVar = {"end_phrase": Param(as_text, help="a phrase")}
    phrase_arg = "end_phrase"
    at_end = True
    cue_words = {"end": 1, "finish": 1, "phrase": 1}

    def sentence(self) -> str:
        return _with_stop(f"End your response with the phrase {self.kwargs['end_phrase']}")


@register("startend:start_checker")
class StartChecker(_PhrasePosition):
    """The response starts with the phrase (after stripping whitespace and double quotes,
    case-insensitive); not
    an IFEval family, the mirror image of `startend:end_checker`. Spans: the start of the text
    compared with the phrase."""

    params: ClassVar = {"start_phrase": Param(as_text, help="a phrase")}
    phrase_arg = "start_phrase"
    at_end = False
    cue_words = {"start": 1, "begin": 1, "phrase": 1}

    def sentence(self) -> str:
        return _with_stop(f"Start your response with the phrase {self.kwargs['start_phrase']}")


@register("startend:quotation")
class Quotation(Verifier):
    """The response, stripped of whitespace, is longer than one character and starts and ends with a
    double quote `"`. Spans: its first and last characters (the ones compared), whether they match or not.

    >>> Quotation().verify(' "Hi." ')
    VerifyResult(score=1.0, spans=((1, 2), (5, 6)))
    """

    params: ClassVar = {}
    cue_words = {"quotation": 2, "double quot": 2, "wrap": 1}

    def sentence(self) -> str:
        return "Wrap your entire response with double quotation marks."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        start, end = len(text) - len(text.lstrip()), len(text.rstrip())
        if start >= end:
            return 0.0, []
        ok = end - start > 1 and text[start] == '"' and text[end - 1] == '"'
        return float(ok), [(start, start + 1), (end - 1, end)]
