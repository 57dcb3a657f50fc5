"""IFEval's `language:` group: the response's language (detected by `core.verifiers.shared.language`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from core.verifiers.shared.base import (
    Param,
    Span,
    Verifier,
    as_text,
)
from core.verifiers.shared.language import LANGUAGE_NAMES, detect_language
from core.verifiers.shared.registry import register


def _language(value: object) -> str:
    code = as_text(value).strip()
    if code not in LANGUAGE_NAMES:
        raise ValueError(f"got {value!r}")
    return code


@register("language:response_language")
class ResponseLanguage(Verifier):
    """The detector (py3langid, see `core.verifiers.shared.language`) says the response is in `language` (an
    ISO 639-1 code); a non-blank text with nothing to detect (digits, punctuation) passes, as in IFEval; a text
    with letters the detector cannot read ("To") fails.
    IFEval uses langdetect: the two detectors can disagree on short or mixed-language texts.
    Spans: the whole text (the detector reads all of it); none for an empty text.

    >>> ResponseLanguage(language="fr").verify("Le chat dort sur le canapé depuis ce matin.").score
    1.0
    """

    params: ClassVar = {
        "language": Param(_language, choices=tuple(LANGUAGE_NAMES), help="an ISO 639-1 language code")
    }
    cue_words = {"language": 2, "entire response": 1}

    def sentence(self) -> str:
        return f"Your entire response should be in {LANGUAGE_NAMES[self.kwargs['language']]}, no other language."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        detected = detect_language(text)
        return float(detected is None or detected == self.kwargs["language"]), [(0, len(text))]

    def prompt_cues(self) -> tuple[list[str], dict[str, int]]:
        return [LANGUAGE_NAMES[self.kwargs["language"]]], dict(self.cue_words)
