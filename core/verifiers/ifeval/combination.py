"""IFEval's `combination:` group: two responses, the repeated request."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from core.verifiers.ifeval.common import (
    _lower_map,
)
from core.verifiers.ifeval.scan import (
    _pieces,
)
from core.verifiers.shared.base import (
    Param,
    Span,
    Verifier,
    as_text,
)
from core.verifiers.shared.registry import register


@register("combination:two_responses")
class TwoResponses(Verifier):
    """Two different responses separated by six asterisks `******` (IFEval: split on it; a blank piece
    is allowed only first or last; exactly two non-blank pieces, different once stripped).
    Spans: the separators.

    >>> TwoResponses().verify("Yes.\\n******\\nNo.")
    VerifyResult(score=1.0, spans=((5, 11),))
    """

    params: ClassVar = {}
    cue_words = {"two different responses": 2, "******": 2, "asterisk": 1}

    def sentence(self) -> str:
        return "Give two different responses separated by six asterisk symbols: ******."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        separators, pos = [], 0
        while (found := text.find("******", pos)) != -1:
            separators.append((found, found + 6))
            pos = found + 6
        pieces = [text[s:e] for s, e in _pieces(text, separators)]
        valid = []
        for i, piece in enumerate(pieces):
            if piece.strip():
                valid.append(piece.strip())
            elif i not in (0, len(pieces) - 1):
                return 0.0, separators
        return float(len(valid) == 2 and valid[0] != valid[1]), separators


@register("combination:repeat_prompt")
class RepeatPrompt(Verifier):
    """The response starts with the request, repeated word for word (IFEval: the stripped, lower-cased
    response starts with the stripped, lower-cased `prompt_to_repeat`). In a prompt set whose record
    leaves `prompt_to_repeat` out, the loader fills in the prompt's task text (the request without the
    constraint sentences, as IFEval's instruction asks). Spans: the start of the text compared with the
    request (as many characters as the request).

    >>> RepeatPrompt(prompt_to_repeat="Name a river.").verify("name a river. The Nile.")
    VerifyResult(score=1.0, spans=((0, 13),))
    """

    params: ClassVar = {
        "prompt_to_repeat": Param(as_text, help="the request to repeat (default in a prompt set: the task)")
    }
    prompt_arg: ClassVar[str] = "prompt_to_repeat"
    cue_words = {"repeat the request": 2, "word for word": 2, "repeat": 1}

    def sentence(self) -> str:
        return "First repeat the request word for word without change, then give your answer."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        request = self.kwargs["prompt_to_repeat"].strip().lower()
        stripped = text.strip()
        lead = len(text) - len(text.lstrip())
        low_head, index = _lower_map(stripped[: len(request)])
        span = (lead, lead + index[min(len(low_head), len(request))])
        return float(stripped.lower().startswith(request)), [span]
