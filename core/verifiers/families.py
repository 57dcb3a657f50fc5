"""The built-in constraint families.

Verdicts follow IFEval's strict checks (google-research `instruction_following_eval`,
`instructions.py`) on the same text; every remaining difference, with its reason, is listed in
docs/IFEVAL.md. In short: sentences are split by `text.py`'s Punkt-like splitter (number of sentences, and the
sentences whose Treebank tokens `capital_word_frequency` counts); `language:response_language` detects with
py3langid among the languages a prompt can ask for (see `language.py`), where IFEval uses langdetect; the case
rules check case alone (IFEval also asks langdetect for English); keywords, the section splitter and custom
postscript markers are matched literally (IFEval: unescaped regexes); `letter_frequency` counts a non-letter
"letter" as asked (IFEval draws a random letter). Words are counted as NLTK >= 3.10 counts them (`text.py`).

Every family scores 0 with no spans on an empty or whitespace-only response, as IFEval (which counts an
instruction as followed only when `response.strip()` is non-empty); see `Verifier.verify`.

Spans (what the check inspected), by kind of rule:
- presence rules (keywords, title, placeholders, highlights, bullets, postscript): the items
  found; empty when none was found;
- absence rules (no comma, forbidden words): the violations; empty when the rule holds ("the
  verifier's span only exists when the rule is broken");
- all-text rules (lowercase, capitals): the offending characters, or the whole text when the
  rule holds (every letter was inspected) or when the text has no letter at all;
- counting rules (words, sentences, keyword / letter / capital-word frequency, section headers): every
  counted unit;
- separator rules (paragraphs split by `***` or by blank lines, two responses split by `******`): the
  separators, which decide the count (empty when there is none); `nth_paragraph_first_word` adds the
  first word it compared;
- position rules (start/end phrase, repeated request, quotation marks): the part of the text compared
  (phrase or request: as many characters as it has; quotation: the first and last characters),
  whether it matched or not;
- whole-text rules (response language): the whole text;
- JSON: the block that was parsed; `task:arithmetic`: the first integer, or the whole text when
  it holds none (the whole text was searched).

A family that needs the prompt (`combination:repeat_prompt`) names its argument in `prompt_arg`;
`core.tasks` fills it with the task text when a prompt-set record leaves it out.

Graded variants (`graded=True`) where a family has one; binary otherwise (asking for a graded
variant of a binary-only family raises `VerifierSpecError`).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable
from typing import ClassVar

from core.verifiers.base import (
    Param,
    Span,
    Verifier,
    as_choice,
    as_int,
    as_text,
    as_word_list,
    register,
    swap_values,
)
from core.verifiers.language import LANGUAGE_NAMES, detect_language
from core.verifiers.text import capital_words, sentence_spans, word_spans

RELATIONS = ("less than", "at least")


def _relation_param() -> Param:
    return Param(as_choice(RELATIONS), choices=RELATIONS, help="comparison")


def _compare(count: int, relation: str, target: int) -> bool:
    """IFEval's relations: 'less than' is count < target, 'at least' is count >= target."""
    return count < target if relation == "less than" else count >= target


def _graded_count(count: int, relation: str, target: int) -> float:
    """Graded count score.
    at least N: min(1, count / N)   (1 when N = 0)
    less than N: 1 if count < N else (N - 1) / count   (0 when N <= 1)."""
    if relation == "at least":
        return 1.0 if target <= 0 else min(1.0, count / target)
    if count < target:
        return 1.0
    return max(0.0, (target - 1) / count) if count > 0 else 0.0


# Values the `swap` relevance draws a counterfactual argument from (`Verifier.counterfactual`): words and
# phrases of the kind the shipped prompt sets use (core/tools/promptgen.py), so a swapped prompt stays in the
# distribution the embedded models were trained on.
SWAP_WORDS = (
    "light", "green", "stone", "quiet", "bright", "warm", "river", "happy", "little", "steady", "gentle", "morning",
    "silver", "calm", "sweet", "fresh", "round", "golden",
)  # fmt: skip
SWAP_END_PHRASES = ("That is all.", "The end.", "Thank you.", "See you soon.")
SWAP_START_PHRASES = ("Dear reader", "Hello friend", "Good day", "Well now")


def _join_words(words: list[str], conj: str = "and") -> str:
    if len(words) == 1:
        return words[0]
    return " ".join(words[:-1]) + f" {conj} " + words[-1]


def _with_stop(sentence: str) -> str:
    """End a sentence with a period unless the phrase it quotes already ends in . ! or ?
    ("End your response with the phrase That is all." rather than "... all..")."""
    return sentence if sentence.rstrip()[-1:] in ".!?" else sentence.rstrip() + "."


def _lower_map(text: str) -> tuple[str, list[int] | range]:
    """`text.lower()` and, for each lowered character, the index of the original character it
    came from (plus a final entry len(text)). Lower-casing never removes characters, so when the
    length is unchanged the map is the identity; otherwise (İ -> i̇) lower character by character."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered, range(len(text) + 1)
    pieces, index = [], []
    for i, char in enumerate(text):
        low = char.lower()
        pieces.append(low)
        index.extend([i] * len(low))
    index.append(len(text))
    return "".join(pieces), index


def _runs(positions: list[int]) -> list[Span]:
    """Consecutive character positions grouped into ranges."""
    spans: list[Span] = []
    for pos in positions:
        if spans and spans[-1][1] == pos:
            spans[-1] = (spans[-1][0], pos + 1)
        else:
            spans.append((pos, pos + 1))
    return spans


# ---------------------------------------------------------------------------------------------
# Linear-time scanners with the same matches as IFEval's regexes. Some of those regexes
# backtrack quadratically on adversarial text (50k newlines, a line of 50k '['): a policy
# early in training produces such text, and verification must stay fast.


def _line_starts(text: str, pos: int):
    """Positions >= pos where `^` matches with re.MULTILINE (start of text or after a newline)."""
    if pos == 0:
        yield 0
        pos = 1
    while True:
        nl = text.find("\n", pos - 1)
        if nl == -1:
            return
        yield nl + 1
        pos = nl + 2


def _line_end(text: str, pos: int) -> int:
    """Where `.*$` started at pos stops: the next newline at or after pos, or the end."""
    end = text.find("\n", pos)
    return len(text) if end == -1 else end


def _bullet_matches(text: str, marker: str) -> list[Span]:
    """The matches of re.finditer(r"^\\s*\\*[^\\*].*$") (marker '*') or r"^\\s*-.*$" (marker '-')
    with re.MULTILINE. `\\s*` may cross blank lines; after it must come the marker (for '*', then
    one character that is not '*', possibly a newline), then the rest of that line."""
    n = len(text)
    nonspace = [n] * (n + 1)  # nonspace[i]: first non-whitespace index >= i
    for i in range(n - 1, -1, -1):
        nonspace[i] = nonspace[i + 1] if text[i].isspace() else i
    matches, pos = [], 0
    while pos <= n:
        found = None
        for start in _line_starts(text, pos):
            if start > n:
                break
            q = nonspace[start]
            if q < n and text[q] == marker:
                if marker == "-":
                    found = (start, _line_end(text, q + 1))
                elif q + 1 < n and text[q + 1] != "*":
                    found = (start, _line_end(text, q + 2))
            if found:
                break
        if found is None:
            break
        matches.append(found)
        pos = found[1] if found[1] > found[0] else found[1] + 1
    return matches


def _bracket_matches(text: str) -> list[Span]:
    """The matches of re.finditer(r"\\[.*?\\]"): from a '[' to the first ']' after it on the same line."""
    matches, pos = [], 0
    while True:
        start = text.find("[", pos)
        if start == -1:
            return matches
        line_end = _line_end(text, start)
        close = text.find("]", start + 1, line_end)
        if close == -1:
            pos = line_end + 1  # no ']' on this line after this '[' nor after any later one
            if pos > len(text):
                return matches
            continue
        matches.append((start, close + 1))
        pos = close + 1


def _title_matches(text: str) -> list[Span]:
    """The matches of re.finditer(r"<<[^\\n]+>>"): per line, from its first '<<' to its last '>>'
    when at least one character lies between them."""
    matches, pos, n = [], 0, len(text)
    while pos <= n:
        end = _line_end(text, pos)
        first, last = text.find("<<", pos, end), text.rfind(">>", pos, end)
        if first != -1 and last >= first + 3:
            matches.append((first, last + 2))
        pos = end + 1
    return matches


# ---------------------------------------------------------------------------------------------
# keywords


@register("keywords:existence")
class KeywordExistence(Verifier):
    """Every keyword appears (case-insensitive substring, as IFEval). Graded: share of keywords
    present. Spans: all occurrences of the keywords.

    >>> KeywordExistence(keywords=["light"]).verify("Light and light.")
    VerifyResult(score=1.0, spans=((0, 5), (10, 15)))
    """

    has_graded = True
    params: ClassVar = {"keywords": Param(as_word_list, help="list of keywords")}
    cue_words = {"keyword": 2, "include": 1, "mention": 1}

    def sentence(self) -> str:
        words = self.kwargs["keywords"]
        return f"Include the keyword {words[0]}." if len(words) == 1 else f"Include the keywords {_join_words(words)}."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        spans: list[Span] = []
        found = 0
        for word in self.kwargs["keywords"]:
            hits = [m.span() for m in re.finditer(re.escape(word), text, flags=re.IGNORECASE)]
            found += bool(hits)
            spans += hits
        total = len(self.kwargs["keywords"])
        score = found / total if self.graded else float(found == total)
        return score, spans

    def prompt_cues(self) -> tuple[list[str], dict[str, int]]:
        return list(self.kwargs["keywords"]), dict(self.cue_words)

    swap_kind = "keyword"

    def counterfactual(self, part: str, rng: random.Random) -> str | None:
        return swap_values(part, self.kwargs["keywords"], SWAP_WORDS, rng)


@register("keywords:forbidden_words")
class ForbiddenWords(Verifier):
    """None of the words appears as a whole word (case-insensitive). Graded: 1 - share of the
    forbidden words present. Spans: the occurrences (empty when the rule holds)."""

    has_graded = True
    params: ClassVar = {"forbidden_words": Param(lambda v: sorted(set(as_word_list(v))), help="list of words")}
    cue_words = {"keyword": 1, "forbid": 1, "avoid": 1, "not": 1}

    def sentence(self) -> str:
        words = self.kwargs["forbidden_words"]
        if len(words) == 1:
            return f"Do not include the word {words[0]}."
        return f"Do not include the words {_join_words(words, 'or')}."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        spans: list[Span] = []
        present = 0
        for word in self.kwargs["forbidden_words"]:
            hits = [m.span() for m in re.finditer(r"\b" + re.escape(word) + r"\b", text, flags=re.IGNORECASE)]
            present += bool(hits)
            spans += hits
        total = len(self.kwargs["forbidden_words"])
        score = 1 - present / total if self.graded else float(present == 0)
        return score, spans

    def prompt_cues(self) -> tuple[list[str], dict[str, int]]:
        return list(self.kwargs["forbidden_words"]), dict(self.cue_words)

    swap_kind = "keyword"

    def counterfactual(self, part: str, rng: random.Random) -> str | None:
        return swap_values(part, self.kwargs["forbidden_words"], SWAP_WORDS, rng)


@register("keywords:frequency")
class KeywordFrequency(Verifier):
    """The keyword occurs (case-insensitive substring) `< frequency` or `>= frequency` times.
    Graded: see `_graded_count`. Spans: the occurrences."""

    has_graded = True
    params: ClassVar = {
        "keyword": Param(lambda v: as_text(v).strip(), help="a word"),
        "frequency": Param(as_int(0), help="an integer >= 0"),
        "relation": _relation_param(),
    }
    cue_words = {"times": 1, "appear": 1, "occur": 1}

    def sentence(self) -> str:
        k = self.kwargs
        return f"Use the word {k['keyword']} {k['relation']} {k['frequency']} times."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        k = self.kwargs
        spans = [m.span() for m in re.finditer(re.escape(k["keyword"]), text, flags=re.IGNORECASE)]
        count = len(spans)
        if self.graded:
            return _graded_count(count, k["relation"], k["frequency"]), spans
        return float(_compare(count, k["relation"], k["frequency"])), spans

    def prompt_cues(self) -> tuple[list[str], dict[str, int]]:
        k = self.kwargs
        return [k["keyword"], f"{k['relation']} {k['frequency']}"], dict(self.cue_words)

    swap_kind = "keyword"

    def counterfactual(self, part: str, rng: random.Random) -> str | None:
        return swap_values(part, [self.kwargs["keyword"]], SWAP_WORDS, rng)


# ---------------------------------------------------------------------------------------------
# start / end


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


# ---------------------------------------------------------------------------------------------
# case


@register("change_case:english_lowercase")
class EnglishLowercase(Verifier):
    """`text.islower()`: at least one cased letter and no upper/title-case letter (IFEval without
    its language detection). Graded: share of cased letters that are lowercase. Spans: the
    offending letters, or the whole text when the rule holds or the text has no letter."""

    has_graded = True
    params: ClassVar = {}
    cue_words = {"lowercase": 2, "lower case": 2, "lower-case": 2, "capital": 1}

    def sentence(self) -> str:
        return "Use only lowercase letters."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        bad = [i for i, c in enumerate(text) if c.isupper() or c.istitle()]
        good = sum(1 for c in text if c.islower())
        if self.graded:
            score = good / (good + len(bad)) if good + len(bad) else 0.0
        else:
            score = float(text.islower())
        return score, (_runs(bad) if bad else [(0, len(text))])


@register("change_case:english_capital")
class EnglishCapital(Verifier):
    """`text.isupper()`: at least one cased letter and no lower/title-case letter (IFEval without
    its language detection). Graded: share of cased letters that are uppercase. Spans: the
    offending letters, or the whole text when the rule holds or the text has no letter."""

    has_graded = True
    params: ClassVar = {}
    cue_words = {"capital": 2, "uppercase": 2, "upper case": 2, "all caps": 2}

    def sentence(self) -> str:
        return "Use only capital letters."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        bad = [i for i, c in enumerate(text) if c.islower() or (c.istitle() and not c.isupper())]
        good = sum(1 for c in text if c.isupper())
        if self.graded:
            score = good / (good + len(bad)) if good + len(bad) else 0.0
        else:
            score = float(text.isupper())
        return score, (_runs(bad) if bad else [(0, len(text))])


# ---------------------------------------------------------------------------------------------
# length


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
    `core.verifiers.text`). Graded: see `_graded_count`. Spans: every sentence."""

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


# ---------------------------------------------------------------------------------------------
# format


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


@register("punctuation:no_comma")
class NoComma(Verifier):
    """No ',' anywhere. Graded: 1 / (1 + number of commas). Spans: each comma (empty when the
    rule holds).

    >>> NoComma().verify("a, b, c")
    VerifyResult(score=0.0, spans=((1, 2), (4, 5)))
    """

    has_graded = True
    params: ClassVar = {}
    cue_words = {"comma": 2}

    def sentence(self) -> str:
        return "Do not use any commas."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        spans = [(i, i + 1) for i, c in enumerate(text) if c == ","]
        if self.graded:
            return 1 / (1 + len(spans)), spans
        return float(not spans), spans


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


# ---------------------------------------------------------------------------------------------
# content


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


# ---------------------------------------------------------------------------------------------
# task correctness


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


# ---------------------------------------------------------------------------------------------
# The rest of IFEval's 25 instruction ids


def _letter(value: object) -> str:
    text = as_text(value).strip()
    if len(text) != 1:
        raise ValueError(f"expected a single letter, got {value!r}")
    return text.lower()


@register("keywords:letter_frequency")
class LetterFrequency(Verifier):
    """The letter occurs (in the lower-cased text, as IFEval's `Counter(value.lower())`) `< let_frequency`
    or `>= let_frequency` times. Graded: see `_graded_count`. Spans: every counted occurrence.

    >>> LetterFrequency(letter="a", let_frequency=2, let_relation="at least").verify("A cat")
    VerifyResult(score=1.0, spans=((0, 1), (3, 4)))
    """

    has_graded = True
    params: ClassVar = {
        "letter": Param(_letter, help="one letter"),
        "let_frequency": Param(as_int(0), help="an integer >= 0"),
        "let_relation": _relation_param(),
    }
    cue_words = {"letter": 2, "times": 1, "appear": 1}

    def sentence(self) -> str:
        k = self.kwargs
        return f"Use the letter {k['letter']} {k['let_relation']} {k['let_frequency']} times."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        k = self.kwargs
        lowered, index = _lower_map(text)
        positions = [i for i, c in enumerate(lowered) if c == k["letter"]]
        spans = sorted({(index[i], index[i] + 1) for i in positions})  # İ -> i̇ counts once per lowered 'i'
        count = len(positions)
        if self.graded:
            return _graded_count(count, k["let_relation"], k["let_frequency"]), spans
        return float(_compare(count, k["let_relation"], k["let_frequency"])), spans

    def prompt_cues(self) -> tuple[list[str], dict[str, int]]:
        k = self.kwargs
        return [f"letter {k['letter']}", f"{k['let_relation']} {k['let_frequency']}"], dict(self.cue_words)


@register("change_case:capital_word_frequency")
class CapitalWordFrequency(Verifier):
    """Words in all capital letters (Treebank tokens with `token.isupper()`, as IFEval over
    `nltk.word_tokenize`; see `core.verifiers.text.capital_words`) number `< capital_frequency` or
    `>= capital_frequency`. Graded: see `_graded_count`. Spans: every counted capital word.

    >>> CapitalWordFrequency(capital_frequency=2, capital_relation="at least").verify("GO NOW, ok")
    VerifyResult(score=1.0, spans=((0, 2), (3, 6)))
    """

    has_graded = True
    params: ClassVar = {
        "capital_frequency": Param(as_int(0), help="an integer >= 0"),
        "capital_relation": _relation_param(),
    }
    cue_words = {"capital": 2, "all caps": 2, "times": 1}

    def sentence(self) -> str:
        k = self.kwargs
        return f"Use words in all capital letters {k['capital_relation']} {k['capital_frequency']} times."

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        k = self.kwargs
        count, spans = capital_words(text)
        if self.graded:
            return _graded_count(count, k["capital_relation"], k["capital_frequency"]), spans
        return float(_compare(count, k["capital_relation"], k["capital_frequency"])), spans

    def prompt_cues(self) -> tuple[list[str], dict[str, int]]:
        k = self.kwargs
        return [f"{k['capital_relation']} {k['capital_frequency']}"], dict(self.cue_words)


def _language(value: object) -> str:
    code = as_text(value).strip()
    if code not in LANGUAGE_NAMES:
        raise ValueError(f"got {value!r}")
    return code


@register("language:response_language")
class ResponseLanguage(Verifier):
    """The detector (py3langid, see `core.verifiers.language`) says the response is in `language` (an
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


_DIVIDER_RE = re.compile(r"\s?\*\*\*\s?")


def _pieces(text: str, separators: list[Span]) -> list[Span]:
    """The ranges between (and around) the separator matches: len(separators) + 1 pieces."""
    bounds = [0] + [p for span in separators for p in span] + [len(text)]
    return list(zip(bounds[::2], bounds[1::2], strict=True))


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


# ---------------------------------------------------------------------------------------------- kinds of reward

# The kind of judgement each built-in family makes; studies report per-kind rates (see docs/METHOD.md,
# "Paired differences against GDPO"). One place knows it: `core.tools.promptgen` draws the multi setting's
# constraints by kind from this table and the efficiency report groups rewards with it.
# - format: where things go and how the response is laid out (start/end phrase, title, postscript,
#   paragraphs, sections, bullets, JSON, quotation, repeated request, two responses, fixed answers);
# - safety: a word the response must not use (the multi setting forbids the word its topic invites);
# - correctness: the answer is right (`task:arithmetic`);
# - style: how the text reads everywhere (case, commas, length, language, letter frequency);
# - content: what the response must say. `keywords:existence` (and `keywords:frequency`) are neither layout,
#   nor a ban, nor a right answer, nor a property of all the text: a decision of this project, kept as a fifth
#   kind so that the keyword, one arm of the multi setting's conflicting triple (word limit against keyword and
#   end phrase), is reported on its own instead of blurring format or style.
REWARD_KINDS = ("format", "safety", "correctness", "style", "content")
OTHER_KIND = "other"  # a custom family (`register` / `load_custom`) outside this table
REWARD_KIND: dict[str, str] = {
    "startend:start_checker": "format",
    "startend:end_checker": "format",
    "startend:quotation": "format",
    "detectable_format:title": "format",
    "detectable_format:json_format": "format",
    "detectable_format:number_bullet_lists": "format",
    "detectable_format:number_highlighted_sections": "format",
    "detectable_format:multiple_sections": "format",
    "detectable_format:constrained_response": "format",
    "detectable_content:postscript": "format",
    "detectable_content:number_placeholders": "format",
    "length_constraints:number_paragraphs": "format",
    "length_constraints:nth_paragraph_first_word": "format",
    "combination:two_responses": "format",
    "combination:repeat_prompt": "format",
    "keywords:forbidden_words": "safety",
    "task:arithmetic": "correctness",
    "change_case:english_lowercase": "style",
    "change_case:english_capital": "style",
    "change_case:capital_word_frequency": "style",
    "punctuation:no_comma": "style",
    "length_constraints:number_words": "style",
    "length_constraints:number_sentences": "style",
    "language:response_language": "style",
    "keywords:letter_frequency": "style",
    "keywords:existence": "content",
    "keywords:frequency": "content",
}  # fmt: skip


def reward_kind(family: str) -> str:
    """The kind of a family's reward (`REWARD_KIND`), `other` for a family outside the table; a reward name of a
    repeated statement (`family#2`, see `core.tasks.reward_name`) has its family's kind.

    >>> reward_kind("keywords:existence"), reward_kind("my:custom"), reward_kind("keywords:frequency#2")
    ('content', 'other', 'content')
    """
    return REWARD_KIND.get(family.split("#", 1)[0], OTHER_KIND)
