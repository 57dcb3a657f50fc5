"""IFEval's `length_constraints:` group: words, sentences, paragraphs, the nth paragraph's first word."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import ClassVar

from core.verifiers.ifeval.common import (
    _compare,
    _graded_count,
    _relation_param,
)
from core.verifiers.ifeval.scan import (
    _pieces,
)
from core.verifiers.shared.base import (
    Param,
    Span,
    Verifier,
    as_int,
    as_text,
)
from core.verifiers.shared.registry import register
from core.verifiers.shared.text import sentence_spans, word_spans


@register("length_constraints:number_words")
class NumberWords(Verifier):
    """Word count (`\\w+` runs, as IFEval) `< num_words` or `>= num_words`. Graded: see
    `_graded_count`. Spans: every word."""

    has_graded = True
    params: ClassVar = {"num_words": Param(as_int(0), help="an integer >= 0"), "relation": _relation_param()}
    cue_words = {"words": 1}

    def sentence(self) -> str:
        return f"Answer with {self.kwargs['relation']} {self.kwargs['num_words']} words."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        spans = word_spans(text)
        k = self.kwargs
        if self.graded:
            return _graded_count(len(spans), k["relation"], k["num_words"]), spans
        return float(_compare(len(spans), k["relation"], k["num_words"])), spans

    def prompt_cues(self) -> tuple[list[str], dict[str, int]]:
        return [f"{self.kwargs['relation']} {self.kwargs['num_words']}"], dict(self.cue_words)


@register("length_constraints:number_sentences")
class NumberSentences(Verifier):
    """Sentence count `< num_sentences` or `>= num_sentences` (our Punkt-like splitter, see
    `core.verifiers.shared.text`). Graded: see `_graded_count`. Spans: every sentence."""

    has_graded = True
    params: ClassVar = {"num_sentences": Param(as_int(0), help="an integer >= 0"), "relation": _relation_param()}
    cue_words = {"sentences": 1}

    def sentence(self) -> str:
        return f"Answer with {self.kwargs['relation']} {self.kwargs['num_sentences']} sentences."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        spans = sentence_spans(text)
        k = self.kwargs
        if self.graded:
            return _graded_count(len(spans), k["relation"], k["num_sentences"]), spans
        return float(_compare(len(spans), k["relation"], k["num_sentences"])), spans

    def prompt_cues(self) -> tuple[list[str], dict[str, int]]:
        return [f"{self.kwargs['relation']} {self.kwargs['num_sentences']}"], dict(self.cue_words)


_DIVIDER_RE = re.compile(r"\s?\*\*\*\s?")



@register("length_constraints:number_paragraphs")
class NumberParagraphs(Verifier):
    """Exactly `num_paragraphs` paragraphs separated by the markdown divider `***` (IFEval:
    `re.split(r"\\s?\\*\\*\\*\\s?")`; blank first or last pieces do not count, a blank piece between two
    dividers fails the check). Graded: max(0, 1 - |count - N| / max(N, 1)), 0 with a blank middle piece.
    Spans: the dividers (they decide the count), empty when there is none.

    >>> NumberParagraphs(num_paragraphs=2).verify("One.\\n***\\nTwo.")
    VerifyResult(score=1.0, spans=((4, 9),))
    """

    has_graded = True
    params: ClassVar = {"num_paragraphs": Param(as_int(0), help="an integer >= 0")}
    cue_words = {"paragraphs": 2, "***": 1, "divider": 1}

    def sentence(self) -> str:
        return f"Write {self.kwargs['num_paragraphs']} paragraphs separated by the markdown divider ***."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        dividers = [m.span() for m in _DIVIDER_RE.finditer(text)]
        pieces = _pieces(text, dividers)
        count, broken = len(pieces), False
        for i, (start, end) in enumerate(pieces):
            if not text[start:end].strip():
                if i in (0, len(pieces) - 1):
                    count -= 1
                else:
                    broken = True
        target = self.kwargs["num_paragraphs"]
        if broken:
            return 0.0, dividers
        if self.graded:
            return max(0.0, 1 - abs(count - target) / max(target, 1)), dividers
        return float(count == target), dividers

    def prompt_cues(self) -> tuple[list[str], dict[str, int]]:
        return [f"{self.kwargs['num_paragraphs']} paragraphs"], dict(self.cue_words)


_FIRST_WORD_STOP = frozenset(".,?!'\"")


@register("length_constraints:nth_paragraph_first_word")
class NthParagraphFirstWord(Verifier):
    """Exactly `num_paragraphs` paragraphs separated by blank lines (`\\n\\n`; blank pieces do not count),
    and paragraph `nth_paragraph` (counted among all pieces, blank ones included, as IFEval indexes
    them) starts with `first_word`: its first whitespace token, leading quotes removed, cut at the
    first of `. , ? ! ' "`, lower-cased. Spans: the `\\n\\n` separators (they decide the count) and the
    first word compared (when that paragraph exists and is not blank).

    >>> NthParagraphFirstWord(num_paragraphs=2, nth_paragraph=2, first_word="then").verify("A.\\n\\nThen, b.")
    VerifyResult(score=1.0, spans=((2, 4), (4, 8)))
    """

    params: ClassVar = {
        "num_paragraphs": Param(as_int(1), help="an integer >= 1"),
        "nth_paragraph": Param(as_int(1), help="an integer >= 1 (1 is the first paragraph)"),
        "first_word": Param(lambda v: as_text(v).strip().lower(), help="a word"),
    }
    cue_words = {"paragraph": 2, "start with": 1, "\\n\\n": 1}

    def sentence(self) -> str:
        k = self.kwargs
        return (
            f"Write {k['num_paragraphs']} paragraphs separated by blank lines; paragraph {k['nth_paragraph']}"
            f" must start with the word {k['first_word']}."
        )

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        k = self.kwargs
        separators = [m.span() for m in re.finditer(r"\n\n", text)]
        pieces = _pieces(text, separators)
        count = sum(1 for s, e in pieces if text[s:e].strip())
        spans = list(separators)
        if k["nth_paragraph"] > count:
            return 0.0, spans
        start, end = pieces[k["nth_paragraph"] - 1]
        paragraph = text[start:end]
        if not paragraph.strip():
            return 0.0, spans
        token = re.search(r"\S+", paragraph)
        word_start = start + token.start()
        raw = token.group()
        stripped = raw.lstrip("'").lstrip('"')
        word_start += len(raw) - len(stripped)
        length = next((i for i, c in enumerate(stripped) if c in _FIRST_WORD_STOP), len(stripped))
        first_word = stripped[:length].lower()
        spans.append((word_start, word_start + max(length, 1)))
        return float(count == k["num_paragraphs"] and first_word == k["first_word"]), spans

    def prompt_cues(self) -> tuple[list[str], dict[str, int]]:
        k = self.kwargs
        return [f"{k['num_paragraphs']} paragraphs", k["first_word"]], dict(self.cue_words)
