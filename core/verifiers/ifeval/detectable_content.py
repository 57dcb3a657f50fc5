"""IFEval's `detectable_content:` group: placeholders, postscript."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import ClassVar

from core.verifiers.ifeval.common import (
    _lower_map,
    _with_stop,
)
from core.verifiers.ifeval.scan import _bracket_matches
from core.verifiers.shared.base import (
    Param,
    Span,
    Verifier,
    as_int,
    as_text,
)
from core.verifiers.shared.registry import register


@register("detectable_content:number_placeholders")
class NumberPlaceholders(Verifier):
    """At least `num_placeholders` placeholders in square brackets (`[name]`). Graded:
    min(1, count / N). Spans: each placeholder."""

    has_graded = True
    params: ClassVar = {"num_placeholders": Param(as_int(0), help="an integer >= 0")}
    cue_words = {"placeholder": 2, "square bracket": 1}

    def sentence(self) -> str:
        return f"Include at least {self.kwargs['num_placeholders']} placeholders in square brackets such as [name]."

    def prompt_cues(self) -> tuple[list[str], dict[str, int]]:
        return [f"at least {self.kwargs['num_placeholders']} placeholder"], dict(self.cue_words)

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        spans = _bracket_matches(text)
        count, target = len(spans), self.kwargs["num_placeholders"]
        if self.graded:
            return (1.0 if target <= 0 else min(1.0, count / target)), spans
        return float(count >= target), spans


@register("detectable_content:postscript")
class Postscript(Verifier):
    """A line (case-insensitive) holding the postscript marker: IFEval's patterns for 'P.S.' and
    'P.P.S' (which allow a space after each period); any other marker is matched literally.
    Spans: from each marker to the end of its line."""

    params: ClassVar = {"postscript_marker": Param(lambda v: as_text(v).strip(), help="e.g. 'P.S.' or 'P.P.S'")}
    cue_words = {"postscript": 2}

    def sentence(self) -> str:
        return _with_stop(
            f"At the end of your response add a postscript starting with {self.kwargs['postscript_marker']}"
        )

    def _pattern(self) -> str:
        """IFEval's pattern without its leading `\\s*`: the marker never starts with whitespace,
        so the matches are the same, trimmed to the marker (and the search stays linear)."""
        marker = self.kwargs["postscript_marker"]
        if marker == "P.P.S":
            return r"p\.\s?p\.\s?s.*$"
        if marker == "P.S.":
            return r"p\.\s?s\..*$"
        return re.escape(marker.lower()) + r".*$"

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        ok = re.search(self._pattern(), text.lower(), flags=re.MULTILINE) is not None
        lowered, index = _lower_map(text)
        spans = [(index[m.start()], index[m.end()]) for m in re.finditer(self._pattern(), lowered, flags=re.MULTILINE)]
        return float(ok), spans

    def prompt_cues(self) -> tuple[list[str], dict[str, int]]:
        return [self.kwargs["postscript_marker"]], dict(self.cue_words)
