"""IFBench's `format:` group (12 of its 14 ids here; `format:emoji` and `format:no_bullets_bullets` split
sentences and live in `sentences.py`): nesting, options, one word per line, indentation stairs, quotes, list markers, italic
theses, sub-bullets, title case, a template, no whitespace. Verdicts as IFBench's checks, quirks included (each
docstring says which); spans: the characters or lines each rule inspected.

>>> from core.verifiers import build
>>> build("format:no_whitespace").verify("a b")
VerifyResult(score=0.0, spans=((1, 2),))
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import ClassVar

from core.verifiers.ifbench.common import PUNCTUATION, IFBenchVerifier
from core.verifiers.shared.base import Param, Span, as_text
from core.verifiers.shared.punkt import punkt_sentences
from core.verifiers.shared.registry import register

_CLOSE = {")": "(", "]": "[", "}": "{"}


@register("format:parentheses")
class NestedParentheses(IFBenchVerifier):
    """Brackets ( [ { nested at least 5 deep: scanning left to right with a stack of open brackets, the rule holds at
    the first matching close bracket after a depth of 5 was reached; a close bracket that does not match empties
    the stack and the depth reached (IFBench's scan). Spans: the bracket characters scanned."""

    params: ClassVar = {}
    description = "Nest parentheses (and [brackets {{and braces}}]) at least 5 levels deep."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        stack: list[str] = []
        deepest, spans = 0, []
        for i, ch in enumerate(text):
            if ch in "([{":
                stack.append(ch)
                deepest = max(deepest, len(stack))
                spans.append((i, i + 1))
            elif ch in _CLOSE:
                spans.append((i, i + 1))
                if stack and stack[-1] == _CLOSE[ch]:
                    stack.pop()
                    if deepest >= 5:
                        return True, spans
                else:
                    stack, deepest = [], 0
        return False, spans


@register("format:quotes")
class NestedQuotes(IFBenchVerifier):
    """Quotes within quotes at least 3 deep: a quote character (" or ') equal to the innermost open one closes it,
    any other opens one; the rule holds once a close leaves the depth 3 below the deepest reached (IFBench's
    scan: an apostrophe opens a quote too). Spans: the quote characters scanned."""

    params: ClassVar = {}
    description = ("Include quotes within quotes within quotes, at least 3 levels deep, alternating between double "
                   "quotes and single quotes.")

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        stack: list[str] = []
        deepest, spans = 0, []
        for i, ch in enumerate(text):
            if stack and ch == stack[-1]:
                stack.pop()
                spans.append((i, i + 1))
                if deepest - len(stack) >= 3:
                    return True, spans
            elif ch in "\"'":
                stack.append(ch)
                deepest = max(deepest, len(stack))
                spans.append((i, i + 1))
        return False, spans


_STRIP = PUNCTUATION + " "


@register("format:options")
class Options(IFBenchVerifier):
    """The response is one of `options` (a text such as "yes/no/maybe", "I know or I don't know" or
    "a), b), c), d)"), split as IFBench splits it: at "/" if it has one, else at "or" (anywhere, as IFBench), else
    at ","; each option stripped. Options that start a, b, c are matched exactly (the response as it is, unstripped);
    others case-insensitively with punctuation and spaces stripped from both. Spans: the whole response."""

    params: ClassVar = {"options": Param(as_text)}
    description = "Answer with one of the following options: {options}. Do not give any explanation."

    def _choices(self) -> tuple[bool, list[str]]:
        options = self.kwargs["options"]
        exact = re.match(r"\W*[aA]\W*[bB]\W*[cC]\W*", options) is not None
        sep = "/" if "/" in options else "or" if "or" in options else ","
        return exact, [o.strip() for o in options.split(sep)]

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        exact, choices = self._choices()
        if exact:
            return text in choices, [(0, len(text))]
        said = text.strip(_STRIP).lower()
        return any(o.strip(_STRIP).lower() == said for o in choices), [(0, len(text))]


_NO_PUNCT = str.maketrans("", "", PUNCTUATION)


@register("format:newline")
class NewLineWords(IFBenchVerifier):
    """One word per line: with ASCII punctuation removed, the non-empty lines (split at "\\n") are as many as the
    whitespace-separated words (IFBench: a line of spaces alone still counts as a line). Spans: the lines."""

    params: ClassVar = {}
    description = "Write each word on a new line."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        bare = text.translate(_NO_PUNCT)
        lines = [x for x in bare.strip().split("\n") if x != ""]
        spans, at = [], 0
        for line in text.split("\n"):
            if line.strip():
                spans.append((at, at + len(line)))
            at += len(line) + 1
        return len(lines) == len(bare.strip().split()), spans


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


@register("format:line_indent")
class IndentStairs(IFBenchVerifier):
    """Each line indented by more spaces than the line before. Blank lines are dropped as IFBench drops them: by
    removing from the list while iterating over it, which keeps the second of two consecutive blank lines (so two
    blank lines in a row break the stairs). Spans: the lines compared."""

    params: ClassVar = {}
    description = "Create stairs by incrementally indenting each new line."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        starts, at = [], 0
        raw = text.split("\n")
        for line in raw:
            starts.append((at, at + len(line)))
            at += len(line) + 1
        lines = list(zip(raw, starts, strict=True))
        i = 0
        while i < len(lines):  # IFBench's `for line in lines: ... lines.remove(line)`: the first equal line goes,
            line = lines[i][0]  # and the iteration's index moves on past the line that slid into its place
            if not line.strip():
                del lines[next(k for k, (x, _) in enumerate(lines) if x == line)]
            i += 1
        ok = all(_indent(lines[k + 1][0]) > _indent(lines[k][0]) for k in range(len(lines) - 1))
        return ok, [s for _, s in lines]


@register("format:quote_unquote")
class QuoteExplanation(IFBenchVerifier):
    """Every quoted phrase is followed by an unquoted explanation: with curly double quotes made straight, the
    sequence '"' (a quote mark in single quotes) removed and all whitespace removed, the text has no '""' (a quote
    closing right before another opens) and does not end in '"' once digits and punctuation other than '"' are
    stripped from its ends. Spans: the double quotes."""

    params: ClassVar = {}
    description = "Every quoted phrase must be followed by an unquoted explanation."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        spans = [(m.start(), m.end()) for m in re.finditer("[\"“”]", text)]
        value = text.replace("“", '"').replace("”", '"').replace("'\"'", "")
        value = "".join(value.split())
        if '""' in value:
            return False, spans
        tail = value.strip("0123456789" + PUNCTUATION.replace('"', ""))
        return bool(tail) and tail[-1] != '"', spans


@register("format:list")
class SpecialBullets(IFBenchVerifier):
    """A list whose items are marked by `sep` instead of bullet points: `sep` occurs at least twice (literally).
    Spans: each occurrence."""

    params: ClassVar = {"sep": Param(as_text)}
    description = "Answer with a list of items, instead of bullet points use {sep}."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        spans = [m.span() for m in re.finditer(re.escape(self.kwargs["sep"]), text)]
        return len(spans) >= 2, spans


@register("format:thesis")
class ItalicsThesis(IFBenchVerifier):
    """A thesis in HTML italics followed by more text: from the first "<i>" (else "<em>"), up to the first "</i>"
    after it (else "</em>"), the thesis is non-blank and text follows. As IFBench, the thesis is read from 3
    characters after the opening tag's start and the rest from 4 after the closing tag's start, whichever tags
    they are (with <em>, ">" and "m>" count as text). Spans: the thesis."""

    params: ClassVar = {}
    description = "Each section must begin with a thesis statement in italics, use HTML to indicate the italics."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        start = text.find("<i>")
        if start < 0:
            start = text.find("<em>")
            if start < 0:
                return False, ()
        rest = text[start:]
        end = rest.find("</i>")
        if end < 0:
            end = rest.find("</em>")
            if end < 0:
                return False, ()
        thesis = rest[3:end]
        span = [(start + 3, start + max(3, end))]
        return thesis.strip() != "" and rest[end + 4:].strip() != "", span


@register("format:sub-bullets")
class SubBullets(IFBenchVerifier):
    """Bullets by "*", each with a sub-bullet by "-": every piece of the text after a "*" (split at "*") holds a
    "-" (IFBench: so a text without "*" follows it, and "**bold**" makes empty pieces that fail). Spans: the "*"s."""

    params: ClassVar = {}
    description = ("Your response must include bullet points denoted by * and at least one sub-bullet point denoted "
                   "by - for each bullet point.")

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        spans = [(m.start(), m.end()) for m in re.finditer(r"\*", text)]
        return all("-" in piece for piece in text.split("*")[1:]), spans


@register("format:title_case")
class TitleCase(IFBenchVerifier):
    """Title case: no token (NLTK's `word_tokenize`: Treebank tokens of each Punkt sentence) starts lower-case
    with the rest all lower-case or all upper-case. As IFBench, a one-letter lower-case word ("a") and tokens
    without cased letters pass, and so do minor words only when capitalised ("Of"). Spans: the offending tokens,
    or the whole text when it holds."""

    params: ClassVar = {}
    description = "Write the entire response in title case (capitalize the first letter of every major word)."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        from nltk.tokenize import NLTKWordTokenizer

        tokenizer = NLTKWordTokenizer()
        bad, offset = [], 0
        for sentence in punkt_sentences(text):
            base = text.find(sentence, offset)
            base = offset if base < 0 else base
            for start, end in tokenizer.span_tokenize(sentence):
                word = sentence[start:end]
                head, tail = word[:1], word[1:]
                if head.isupper() and tail.islower():
                    continue
                if head.islower() and (tail.isupper() or tail.islower()):
                    bad.append((base + start, base + end))
            offset = base + len(sentence)
        return not bad, bad or [(0, len(text))]


_TEMPLATE = ("My Answer:", "My Conclusion:", "Future Outlook:")


@register("format:output_template")
class OutputTemplate(IFBenchVerifier):
    """The template's three headings "My Answer:", "My Conclusion:" and "Future Outlook:" each occur (anywhere, in
    any order, as IFBench checks). Spans: the first occurrence of each heading found."""

    params: ClassVar = {}
    description = ("Use this exact template for your response: My Answer: [answer] My Conclusion: [conclusion] "
                   "Future Outlook: [outlook]")

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        at = [(text.find(h), len(h)) for h in _TEMPLATE]
        return all(a >= 0 for a, _ in at), [(a, a + n) for a, n in at if a >= 0]


@register("format:no_whitespace")
class NoWhitespace(IFBenchVerifier):
    """No whitespace character at all. Spans: the whitespace characters (an absence rule: its violations)."""

    params: ClassVar = {}
    description = "The output should not contain any whitespace."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        spans = [(i, i + 1) for i, ch in enumerate(text) if ch.isspace()]
        return not spans, spans
