"""IFEval's `detectable_format:` group: JSON, bullet lists, title, highlighted sections, multiple sections,
constrained response."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import ClassVar

from core.verifiers.ifeval.scan import _bullet_matches, _title_matches
from core.verifiers.shared.base import (
    Param,
    Span,
    Verifier,
    as_int,
    as_text,
)
from core.verifiers.shared.registry import register


@register("detectable_format:json_format")
class JsonFormat(Verifier):
    """The whole response (whitespace and one ```json fence removed, as IFEval) parses as JSON.
    Spans: the block that was parsed."""

    params: ClassVar = {}
    cue_words = {"json": 2, "markdown ticks": 1}

    def sentence(self) -> str:
        return "Wrap your entire response in JSON format."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        # Same sequence as IFEval: strip, drop the prefixes ```json, ```Json, ```JSON, ``` in turn,
        # drop a ``` suffix, strip; tracked as indices so the span maps back into `text`.
        start, end = len(text) - len(text.lstrip()), len(text.rstrip())
        if start >= end:
            return 0.0, []
        for prefix in ("```json", "```Json", "```JSON", "```"):
            if text.startswith(prefix, start, end):
                start += len(prefix)
        if end - start >= 3 and text.endswith("```", start, end):
            end -= 3
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        try:
            json.loads(text[start:end])
            ok = True
        except (ValueError, RecursionError):
            ok = False
        return float(ok), [(start, end)]


@register("detectable_format:number_bullet_lists")
class NumberBulletLists(Verifier):
    """Exactly `num_bullets` markdown bullets (lines starting with `* ` or `-`, IFEval's two
    regexes). Graded: max(0, 1 - |count - N| / max(N, 1)). Spans: each bullet item."""

    has_graded = True
    params: ClassVar = {"num_bullets": Param(as_int(0), help="an integer >= 0")}
    cue_words = {"bullet": 2, "markdown": 1, "point": 1, "* ": 1}

    def sentence(self) -> str:
        n = self.kwargs["num_bullets"]
        return f"Use exactly {n} markdown bullet point{'s' if n != 1 else ''} such as * this."

    def prompt_cues(self) -> tuple[list[str], dict[str, int]]:
        return [f"exactly {self.kwargs['num_bullets']} bullet"], dict(self.cue_words)

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        spans: list[Span] = []
        for start, end in _bullet_matches(text, "*") + _bullet_matches(text, "-"):
            while start < end and text[start].isspace():
                start += 1  # the span starts at the bullet marker
            spans.append((start, end))
        count, target = len(spans), self.kwargs["num_bullets"]
        if self.graded:
            return max(0.0, 1 - abs(count - target) / max(target, 1)), spans
        return float(count == target), spans


@register("detectable_format:title")
class Title(Verifier):
    """A title in double angular brackets, `<<...>>` on one line with non-blank content.
    Spans: every `<<...>>` found."""

    params: ClassVar = {}
    cue_words = {"title": 2, "<<": 1, "angular": 1}

    def sentence(self) -> str:
        return "Give your answer a title wrapped in double angular brackets such as <<my title>>."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        matches = _title_matches(text)
        ok = any(text[s:e].lstrip("<").rstrip(">").strip() for s, e in matches)
        return float(ok), matches


@register("detectable_format:number_highlighted_sections")
class NumberHighlightedSections(Verifier):
    """At least `num_highlights` non-blank markdown highlights (`*text*` or `**text**`, IFEval's
    count). Graded: min(1, count / N). Spans: the counted highlights."""

    has_graded = True
    params: ClassVar = {"num_highlights": Param(as_int(0), help="an integer >= 0")}
    cue_words = {"highlight": 2, "markdown": 1}

    def sentence(self) -> str:
        return (
            f"Highlight at least {self.kwargs['num_highlights']} sections with markdown such as *highlighted section*."
        )

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        spans = [m.span() for m in re.finditer(r"\*[^\n\*]*\*", text) if m.group().strip("*").strip()]
        spans += [
            m.span()
            for m in re.finditer(r"\*\*[^\n\*]*\*\*", text)
            if m.group().removeprefix("**").removesuffix("**").strip()
        ]
        count, target = len(spans), self.kwargs["num_highlights"]
        if self.graded:
            return (1.0 if target <= 0 else min(1.0, count / target)), spans
        return float(count >= target), spans

    def prompt_cues(self) -> tuple[list[str], dict[str, int]]:
        return [f"at least {self.kwargs['num_highlights']} section"], dict(self.cue_words)


@register("detectable_format:multiple_sections")
class MultipleSections(Verifier):
    """At least `num_sections` section headers: the splitter (`section_spliter`, e.g. "Section" or
    "SECTION", case-sensitive, matched literally) then a number (IFEval: `re.split(r"\\s?" + spliter +
    r"\\s?\\d+\\s?")`, sections = pieces - 1). Graded: min(1, count / N). Spans: each header found.

    >>> MultipleSections(section_spliter="SECTION", num_sections=2).verify("SECTION 1\\na\\nSECTION 2\\nb")
    VerifyResult(score=1.0, spans=((0, 9), (12, 21)))
    """

    has_graded = True
    params: ClassVar = {
        "section_spliter": Param(lambda v: as_text(v).strip(), help='a word such as "Section" or "SECTION"'),
        "num_sections": Param(as_int(0), help="an integer >= 0"),
    }
    cue_words = {"section": 2}

    def sentence(self) -> str:
        k = self.kwargs
        return (
            f"Your response must have {k['num_sections']} sections; mark the beginning of each with"
            f" {k['section_spliter']} X, such as {k['section_spliter']} 1."
        )

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        pattern = r"\s?" + re.escape(self.kwargs["section_spliter"]) + r"\s?\d+\s?"
        spans = []
        for m in re.finditer(pattern, text):
            start, end = m.span()
            while start < end and text[start].isspace():
                start += 1
            while end > start and text[end - 1].isspace():
                end -= 1
            spans.append((start, end))
        count, target = len(spans), self.kwargs["num_sections"]
        if self.graded:
            return (1.0 if target <= 0 else min(1.0, count / target)), spans
        return float(count >= target), spans

    def prompt_cues(self) -> tuple[list[str], dict[str, int]]:
        return [f"{self.kwargs['num_sections']} sections", self.kwargs["section_spliter"]], dict(self.cue_words)


CONSTRAINED_OPTIONS = ("My answer is yes.", "My answer is no.", "My answer is maybe.")


@register("detectable_format:constrained_response")
class ConstrainedResponse(Verifier):
    """The response contains one of IFEval's three options ("My answer is yes.", "... no.", "... maybe.";
    case-sensitive substring). Spans: every occurrence of an option; empty when none is there."""

    params: ClassVar = {}
    cue_words = {"my answer is": 2, "options": 1}

    def sentence(self) -> str:
        return "Answer with one of the following options: " + ", ".join(f'"{o}"' for o in CONSTRAINED_OPTIONS) + "."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        spans = [m.span() for option in CONSTRAINED_OPTIONS for m in re.finditer(re.escape(option), text)]
        return float(bool(spans)), spans
