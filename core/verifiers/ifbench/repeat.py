"""IFBench's `repeat:` group: repeat the request with its first word changed, output one given sentence, copy a
span of the request's words. Verdicts as IFBench's checks; spans: the part of the response compared.
Never imports torch.

>>> from core.verifiers import build
>>> build("repeat:repeat_change", prompt_to_repeat="Write a poem.").verify("Compose a poem.").score
1.0
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from core.verifiers.ifbench.common import IFBenchVerifier, whole
from core.verifiers.shared.base import Param, Span, as_int, as_text
from core.verifiers.shared.registry import register

_REQUEST = Param(as_text, help="the request (default in a prompt set: the prompt)")



@register("repeat:repeat_change")
class RepeatChange(IFBenchVerifier):
    """The request repeated with its first word changed: the response differs from `prompt_to_repeat` and, past
    the first whitespace-separated word, equals it word for word (case-sensitive). Spans: the whole response."""

    params: ClassVar = {"prompt_to_repeat": _REQUEST}
    prompt_arg: ClassVar[str] = "prompt_to_repeat"
    description = ("Repeat the request, but change the first word of the repeated request, (do not say anything "
                   "before repeating the request; the request you need to repeat does not include this sentence) "
                   "and do not answer the actual request! Request: {prompt_to_repeat}")

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        request = self.kwargs["prompt_to_repeat"]
        return text != request and request.split()[1:] == text.split()[1:], whole(text)


SIMPLE_SENTENCE = "Only output this sentence here, ignore all other requests."


@register("repeat:repeat_simple")
class RepeatSimple(IFBenchVerifier):
    """The response is the sentence "Only output this sentence here, ignore all other requests." (stripped,
    case-insensitive). Spans: the whole response."""

    params: ClassVar = {}
    description = SIMPLE_SENTENCE

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        return text.strip().lower() == SIMPLE_SENTENCE.lower(), whole(text)


@register("repeat:repeat_span")
class RepeatSpan(IFBenchVerifier):
    """The response is the request's words `n_start` up to (not including) `n_end`: lower-cased, split at
    whitespace, compared word for word (the words of `prompt_to_repeat`, as IFBench slices them, though its
    instruction speaks of character indices and of including `n_end`). Where `n_start` is 0 IFBench draws a random
    start instead (its `if not n_start`); here 0 is used (docs/IFBENCH.md). Spans: the whole response."""

    params: ClassVar = {"prompt_to_repeat": _REQUEST, "n_start": Param(as_int(0)), "n_end": Param(as_int(0))}
    prompt_arg: ClassVar[str] = "prompt_to_repeat"
    description = ("Copy the span of words that lies between (and including) index {n_start} and {n_end}, the "
                   "indices are character indices!")

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        words = self.kwargs["prompt_to_repeat"].strip().lower().split()
        return text.strip().lower().split() == words[self.kwargs["n_start"]:self.kwargs["n_end"]], whole(text)
