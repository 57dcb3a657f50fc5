"""IFBench's `count:` group: counts of words, unique words, conjunctions, names, numbers, punctuation marks,
pronouns and keywords, and Japanese every N-th word. Verdicts as IFBench's checks (docs/IFBENCH.md); spans: every
counted unit (a counting rule), or the offending words (`words_japanese`, an all-text rule).

>>> from core.verifiers import build
>>> build("count:pronouns", N=2).verify("She told me.")
VerifyResult(score=1.0, spans=((0, 3), (9, 11)))
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import ClassVar

from core.verifiers.ifbench.common import PUNCTUATION, IFBenchVerifier, split_spans, strip_span
from core.verifiers.shared.base import Param, Span, as_int, as_text
from core.verifiers.shared.registry import register
from core.verifiers.shared.text import word_spans

_STRIP = PUNCTUATION + " "


@register("count:word_count_range")
class WordCountRange(IFBenchVerifier):
    """Between `min_words` and `max_words` words (inclusive), words counted as IFEval counts them (`\\w+` runs).
    Spans: every word."""

    params: ClassVar = {"min_words": Param(as_int(0)), "max_words": Param(as_int(0))}
    description = "The response must contain between {min_words} and {max_words} words."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        spans = word_spans(text)
        return self.kwargs["min_words"] <= len(spans) <= self.kwargs["max_words"], spans


@register("count:unique_word_count")
class UniqueWordCount(IFBenchVerifier):
    """At least `N` unique words: whitespace-separated pieces, lower-cased, with punctuation stripped from both ends
    (a piece of punctuation alone counts as the empty word, as in IFBench). Spans: the first occurrence of each."""

    params: ClassVar = {"N": Param(as_int(0))}
    description = "Use at least {N} unique words in the response."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        first: dict[str, Span] = {}
        for piece, span in split_spans(text):
            word, kept = strip_span(piece.lower(), span, _STRIP)
            first.setdefault(word, kept)
        return len(first) >= self.kwargs["N"], first.values()


CONJUNCTIONS = ("and", "but", "for", "nor", "or", "so", "yet")


@register("count:conjunctions")
class Conjunctions(IFBenchVerifier):
    """At least `small_n` different coordinating conjunctions (and, but, for, nor, or, so, yet). As IFBench, a
    conjunction is a whitespace-separated piece that is one once punctuation is stripped and case folded, and two
    pieces are different when they differ as written ("and" and "And," are two). Spans: the pieces counted."""

    params: ClassVar = {"small_n": Param(as_int(0))}
    description = "Use at least {small_n} different coordinating conjunctions in the response."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        found = [(p, s) for p, s in split_spans(text) if p.strip(_STRIP).lower() in CONJUNCTIONS]
        return len({p for p, _ in found}) >= self.kwargs["small_n"], [s for _, s in found]


PERSON_NAMES = (
    "Emma", "Liam", "Sophia", "Jackson", "Olivia", "Noah", "Ava", "Lucas", "Isabella", "Mason", "Mia", "Ethan",
    "Charlotte", "Alexander", "Amelia", "Benjamin", "Harper", "Leo", "Zoe", "Daniel", "Chloe", "Samuel", "Lily",
    "Matthew", "Grace", "Owen", "Abigail", "Gabriel", "Ella", "Jacob", "Scarlett", "Nathan", "Victoria", "Elijah",
    "Layla", "Nicholas", "Audrey", "David", "Hannah", "Christopher", "Penelope", "Thomas", "Nora", "Andrew", "Aria",
    "Joseph", "Claire", "Ryan", "Stella", "Jonathan",
)  # fmt: skip  (the 50 names IFBench's instruction lists)


@register("count:person_names")
class PersonNames(IFBenchVerifier):
    """At least `N` different names of IFBench's list of 50 (`PERSON_NAMES`), each found as a case-sensitive
    substring, as IFBench ("Leo" inside "Leonard" counts). Spans: every occurrence of a listed name."""

    params: ClassVar = {"N": Param(as_int(0))}
    description = ("Mention at least {N} different person names in the response, from this list of person names: "
                   + ", ".join(PERSON_NAMES) + " .")

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        spans = [m.span() for name in PERSON_NAMES for m in re.finditer(re.escape(name), text)]
        return sum(name in text for name in PERSON_NAMES) >= self.kwargs["N"], spans


_NUMBER = re.compile(r"\d+(?:[" + re.escape(PUNCTUATION) + r"]+\d+)*")


@register("count:numbers")
class Numbers(IFBenchVerifier):
    """Exactly `N` numbers: runs of digits once ASCII punctuation is removed (so "3.5" and "1,000" are one number
    each, as in IFBench). Spans: each number, punctuation inside it included."""

    params: ClassVar = {"N": Param(as_int(0))}
    description = "Include exactly {N} numbers in the response."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        spans = [m.span() for m in _NUMBER.finditer(text)]
        return len(spans) == self.kwargs["N"], spans


_MARKS = ".,!?;:"


@register("count:punctuation")
class PunctuationCover(IFBenchVerifier):
    """Every one of . , ! ? ; : and an interrobang (?! or !? or ‽). As IFBench, the first "?!" (else the first
    "!?") is set aside before the six marks are looked for. Spans: the interrobang and the first of each mark."""

    params: ClassVar = {}
    description = ("Use every standard punctuation mark at least once, including semicolons, colons, and the "
                   "interrobang (?!).")

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        where = [text.find(b) for b in ("?!", "!?", "‽")]
        if all(w < 0 for w in where):
            return False, ()
        spans: list[Span] = []
        rest = text
        for pair in ("?!", "!?"):
            at = text.find(pair)
            if at >= 0:
                rest = text[:at] + "\0\0" + text[at + 2:]
                spans.append((at, at + 2))
                break
        else:
            at = text.find("‽")
            spans.append((at, at + 1))
        firsts = [rest.find(m) for m in _MARKS]
        spans += [(f, f + 1) for f in firsts if f >= 0]
        return all(f >= 0 for f in firsts), spans


PRONOUNS = frozenset((
    "i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "ourselves", "you", "your", "yours", "yourself",
    "yourselves", "he", "him", "his", "himself", "she", "her", "hers", "herself", "it", "its", "itself", "they",
    "them", "their", "theirs", "themselves",
))  # fmt: skip


@register("count:pronouns")
class Pronouns(IFBenchVerifier):
    """At least `N` personal pronouns (`PRONOUNS`): "/" read as a space, ASCII punctuation removed, the text
    lower-cased and split at whitespace (so "it's" is "its", as in IFBench). Spans: each pronoun."""

    params: ClassVar = {"N": Param(as_int(0))}
    description = "The response should include at least {N} pronouns."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        spans = []
        for piece, span in split_spans(text.replace("/", " ")):
            if "".join(c for c in piece.lower() if c not in PUNCTUATION) in PRONOUNS:
                spans.append(strip_span(piece, span, PUNCTUATION)[1])
        return len(spans) >= self.kwargs["N"], spans


_JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


@register("count:words_japanese")
class NthWordJapanese(IFBenchVerifier):
    """Every `N`-th whitespace-separated word is Japanese (holds a kana or CJK character), punctuation stripped
    from its ends; a word that is empty or all digits once stripped is exempt, as in IFBench. Spans: the
    offending words."""

    params: ClassVar = {"N": Param(as_int(1))}

    def sentence(self) -> str:
        return f"Every {_ordinal(self.kwargs['N'])} word of your response must be in Japanese."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        bad = []
        for i, (piece, span) in enumerate(split_spans(text)):
            word, kept = strip_span(piece, span, _STRIP)
            if (i + 1) % self.kwargs["N"] == 0 and word and not word.isdigit() and not _JAPANESE.search(word):
                bad.append(kept)
        return not bad, bad


_KEYWORD_COUNTS = (1, 2, 3, 5, 7)


@register("count:keywords_multiple")
class KeywordsMultiple(IFBenchVerifier):
    """`keyword1` once, `keyword2` twice, `keyword3` three times, `keyword4` five times and `keyword5` seven times,
    counted as case-insensitive non-overlapping substrings (as IFBench). Spans: every occurrence."""

    params: ClassVar = {f"keyword{i}": Param(lambda v: as_text(v).strip()) for i in range(1, 6)}
    description = ("Include keyword {keyword1} once in your response, keyword {keyword2} twice in your response, "
                   "keyword {keyword3} three times in your response, keyword {keyword4} five times in your "
                   "response, and keyword {keyword5} seven times in your response.")

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        low = text.lower()
        ok, spans = True, []
        for i, want in enumerate(_KEYWORD_COUNTS, start=1):
            word = self.kwargs[f"keyword{i}"].lower()
            found = [m.span() for m in re.finditer(re.escape(word), low)]
            spans += found
            ok = ok and len(found) == want
        return ok, spans
