"""The rule-based sentence splitter of IFEval's and IFBench's `instructions_util.split_into_sentences` (not
Punkt), which IFBench's sentence rules use, and IFBench's `sentence:` group plus the ids of other groups that
split sentences this way. Verdicts as IFBench's checks; spans: the whole text for rules about every sentence
(the splitter rewrites the text, so its sentences are not ranges of it), the keyword's occurrences for keyword
rules. Never imports torch.

The splitter, as rules applied in order to " " + text + "  " with newlines made spaces: a period that does not end
a sentence is protected (after Mr, St, Mrs, Ms, Dr; before com, net, org, io, gov, edu, me; between digits; in a
run of dots, which then ends a sentence; Ph.D.; after a single letter; inside acronyms like U.S.A.; after Inc, Ltd,
Jr, Sr, Co unless a sentence starter follows), a closing quote is moved before the end mark, and every remaining
`.`, `?` and `!` ends a sentence. Sentences are stripped; a last empty one is dropped (empty ones between two end
marks are kept, as in the reference).

>>> split_into_sentences("Dr. Smith arrived at 3.30 p.m. today. Was he late?! No.")
['Dr. Smith arrived at 3.30 p.m. today.', 'Was he late?', '!', 'No.']
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable
from typing import ClassVar

from core.verifiers.ifbench.common import PUNCTUATION, IFBenchVerifier, whole
from core.verifiers.shared.base import Param, Span, as_int, as_text
from core.verifiers.shared.registry import register

_P, _S = "\x00", "\x01"  # a protected period, a sentence end
_L = "([A-Za-z])"
_STARTERS = (r"(Mr|Mrs|Ms|Dr|Prof|Capt|Cpt|Lt|He\s|She\s|It\s|They\s|Their\s|Our\s|We\s|But\s|However\s|That\s|"
             r"This\s|Wherever)")
_SUFFIXES = "(Inc|Ltd|Jr|Sr|Co)"
_RULES: tuple[tuple[str, str], ...] = (
    ("(Mr|St|Mrs|Ms|Dr)[.]", "\\1" + _P),
    ("[.](com|net|org|io|gov|edu|me)", _P + "\\1"),
    ("([0-9])[.]([0-9])", "\\1" + _P + "\\2"),
)
_RULES_AFTER_DOTS: tuple[tuple[str, str], ...] = (
    (r"\s" + _L + "[.] ", " \\1" + _P + " "),
    ("([A-Z][.][A-Z][.](?:[A-Z][.])?) " + _STARTERS, "\\1" + _S + " \\2"),
    (_L + "[.]" + _L + "[.]" + _L + "[.]", "\\1" + _P + "\\2" + _P + "\\3" + _P),
    (_L + "[.]" + _L + "[.]", "\\1" + _P + "\\2" + _P),
    (" " + _SUFFIXES + "[.] " + _STARTERS, " \\1" + _S + " \\2"),
    (" " + _SUFFIXES + "[.]", " \\1" + _P),
    (" " + _L + "[.]", " \\1" + _P),
)


def split_into_sentences(text: str) -> list[str]:
    """The sentences of `text` as IFEval's / IFBench's `split_into_sentences` cuts them (module docstring)."""
    text = (" " + text + "  ").replace("\n", " ")
    for pattern, repl in _RULES:
        text = re.sub(pattern, repl, text)
    text = re.sub(r"\.{2,}", lambda m: _P * len(m.group(0)) + _S, text)
    text = text.replace("Ph.D.", "Ph" + _P + "D" + _P)
    for pattern, repl in _RULES_AFTER_DOTS:
        text = re.sub(pattern, repl, text)
    for a, b in ((".”", "”."), ('."', '".'), ('!"', '"!'), ('?"', '"?')):
        text = text.replace(a, b)
    for mark in ".?!":
        text = text.replace(mark, mark + _S)
    sentences = [s.strip() for s in text.replace(_P, ".").split(_S)]
    if sentences and not sentences[-1]:
        sentences = sentences[:-1]
    return sentences



_NO_PUNCT = str.maketrans("", "", PUNCTUATION)
_STRIP = PUNCTUATION + " "


@register("sentence:keyword")
class SentenceKeyword(IFBenchVerifier):
    """The `N`-th sentence (`split_into_sentences`) contains `word` (case-insensitive substring). Spans: the word's
    occurrences in the text."""

    params: ClassVar = {"word": Param(as_text), "N": Param(as_int(1))}
    description = "The response must include keyword {word} in the {N}-th sentence."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        sentences = split_into_sentences(text)
        word = self.kwargs["word"].lower()
        spans = [m.span() for m in re.finditer(re.escape(word), text.lower())]
        n = self.kwargs["N"]
        return len(sentences) >= n and word in sentences[n - 1].lower(), spans


@register("sentence:increment")
class IncrementingWordCount(IFBenchVerifier):
    """Each sentence has `small_n` more words than the one before: words split at whitespace once ASCII
    punctuation is removed (a sentence of punctuation alone has 0). Spans: the whole text."""

    params: ClassVar = {"small_n": Param(as_int(0))}
    description = "Each sentence must contain exactly {small_n} more words than the previous one."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        counts = [len(s.translate(_NO_PUNCT).split()) for s in split_into_sentences(text)]
        if not counts:  # the reference reads sentences[0] and raises
            return False, whole(text)
        return all(b == a + self.kwargs["small_n"] for a, b in zip(counts, counts[1:], strict=False)), whole(text)


@register("sentence:alliteration_increment")
class IncrementingAlliteration(IFBenchVerifier):
    """Each sentence has more alliterating words than the one before: within a sentence (lower-cased, split at
    whitespace, punctuation stripped from the start of each word, empty words dropped), each run of consecutive
    words with the same first letter counts its length (a pair 2, each further word 1). Spans: the whole text."""

    params: ClassVar = {}
    description = "Each sentence must have a longer sequence of consecutive alliterative words than the previous one."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        previous = -1
        for sentence in split_into_sentences(text):
            words = [w.lstrip(_STRIP) for w in sentence.lower().split()]
            words = [w for w in words if w]
            score, running = 0, False
            for a, b in zip(words, words[1:], strict=False):
                if a[0] == b[0]:
                    score += 1 if running else 2
                    running = True
                else:
                    running = False
            if score <= previous:
                return False, whole(text)
            previous = score
        return True, whole(text)


def _ends(sentences: list[str], mark: str) -> int:
    return sum(s.endswith(mark) for s in sentences)


@register("ratio:sentence_type")
class SentenceTypeRatio(IFBenchVerifier):
    """Twice as many sentences ending in "." as ending in "?" (`split_into_sentences`). Spans: the whole text."""

    params: ClassVar = {}
    description = "Maintain a 2:1 ratio of declarative to interrogative sentences."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        s = split_into_sentences(text)
        return _ends(s, ".") == 2 * _ends(s, "?"), whole(text)


@register("ratio:sentence_balance")
class SentenceBalance(IFBenchVerifier):
    """As many sentences ending in "." as in "?" and as in "!" (`split_into_sentences`). Spans: the whole text."""

    params: ClassVar = {}
    description = ("Ensure that the ratio of sentence types (declarative, interrogative, exclamatory) is balanced.")

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        s = split_into_sentences(text)
        return _ends(s, ".") == _ends(s, "?") == _ends(s, "!"), whole(text)


@register("ratio:sentence_words")
class SentenceCharacters(IFBenchVerifier):
    """Exactly 3 sentences (`split_into_sentences`), all with as many characters (stripped). Spans: the whole
    text."""

    params: ClassVar = {}
    description = ("Respond with three sentences, all containing the same number of characters but using all "
                   "different words.")

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        s = split_into_sentences(text)
        return len(s) == 3 and len({len(x.strip()) for x in s}) == 1, whole(text)


@register("words:last_first")
class LastWordFirstNext(IFBenchVerifier):
    """The last word of each sentence is the first word of the next (case-insensitive; trailing / leading
    punctuation and spaces stripped). A sentence left without a word (a lone "!") fails, where the reference
    raises. Spans: the whole text."""

    params: ClassVar = {}
    description = "The last word of each sentence must become the first word of the next sentence."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        s = split_into_sentences(text)
        for a, b in zip(s, s[1:], strict=False):
            last, first = a.rstrip(_STRIP).split(), b.lstrip(_STRIP).split()
            if not last or not first or last[-1].lower() != first[0].lower():
                return False, whole(text)
        return True, whole(text)


@register("words:keywords_specific_position")
class KeywordSpecificPosition(IFBenchVerifier):
    """`keyword` is the `m`-th token (`nltk.word_tokenize`, case-sensitive) of the `n`-th sentence
    (`split_into_sentences`). Spans: the keyword's occurrences in the text."""

    params: ClassVar = {"keyword": Param(lambda v: as_text(v).strip()), "n": Param(as_int(1)), "m": Param(as_int(1))}
    description = "Include keyword {keyword} in the {n}-th sentence, as the {m}-th word of that sentence."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        from core.verifiers.shared.punkt import reference_word_tokens

        k = self.kwargs
        spans = [m.span() for m in re.finditer(re.escape(k["keyword"]), text)]
        s = split_into_sentences(text)
        if len(s) < k["n"]:
            return False, spans
        words = reference_word_tokens(s[k["n"] - 1])
        return len(words) >= k["m"] and words[k["m"] - 1] == k["keyword"], spans


@register("custom:sentence_alphabet")
class SentenceAlphabet(IFBenchVerifier):
    """26 sentences (`split_into_sentences`), the i-th starting with the i-th letter of the alphabet
    (case-insensitive). An empty sentence fails, where the reference raises. Spans: the whole text."""

    params: ClassVar = {}
    description = "Tell me a 26-sentence story where each sentence's first word starts with the letters of the alphabet in order."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        s = split_into_sentences(text)
        ok = len(s) == 26 and all(x.split() and x.split()[0].lower()[0] == string.ascii_lowercase[i]
                                  for i, x in enumerate(s))
        return ok, whole(text)


@register("custom:word_reverse")
class WordReverse(IFBenchVerifier):
    """The response's words reversed (lower-cased, ASCII punctuation removed) contain "bald eagle" and come out of
    `split_into_sentences` as one of its sentences unchanged (as IFBench checks). Spans: the whole text."""

    params: ClassVar = {}
    description = ("What animal is the national symbol of the US? Respond to this query, but make your sentence in "
                   "reverse order of what it should be, per word.")

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        value = " ".join(text.lower().strip().translate(_NO_PUNCT).split()[::-1])
        return "bald eagle" in value and value in split_into_sentences(value), whole(text)


@register("format:no_bullets_bullets")
class SentencesThenBullets(IFBenchVerifier):
    """At least two sentences, then at least two bullet points by "*": line by line, lines before the first line
    starting (stripped) with "*" add their sentences (`split_into_sentences`); from the first bullet on, every line
    must be a bullet, and at least two sentences must come before it. As IFBench, a line after a line that splits
    into no sentence (a blank line) stops the counting: a non-bullet line there fails. Spans: the bullet lines."""

    params: ClassVar = {}
    description = ("Your answer must contain at least two sentences ending in a period followed by at least two "
                   "bullet points denoted by *.")

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        counting, n_sentences, bullets, at = True, 0, [], 0
        for line in text.split("\n"):
            span = (at, at + len(line))
            at += len(line) + 1
            if line.strip().startswith("*"):
                counting = False
                if n_sentences < 2:
                    return False, bullets + [span]
                bullets.append(span)
            elif counting:
                found = split_into_sentences(line.strip())
                counting = bool(found)  # the reference keeps the list, whose truth is its being non-empty
                n_sentences += len(found)
            else:
                return False, bullets
        return len(bullets) >= 2, bullets


@register("format:emoji")
class EmojiSentences(IFBenchVerifier):
    """An emoji ends every sentence (`split_into_sentences`): with ASCII punctuation removed and the sentence
    stripped, its last or second-to-last character is an emoji (`emoji.is_emoji`), or, for a sentence before the
    last, the next sentence starts with one (the emoji came after the end mark). A sentence of punctuation alone
    fails. Spans: the whole text."""

    params: ClassVar = {}
    description = "Please use an emoji at the end of every sentence."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        import emoji

        s = split_into_sentences(text)
        for i, sentence in enumerate(s):
            bare = sentence.translate(_NO_PUNCT).strip()
            if not bare:
                return False, whole(text)
            if emoji.is_emoji(bare[-1]) or emoji.is_emoji(bare[-2] if len(bare) > 1 else bare[-1]):
                continue
            if i == len(s) - 1:
                return False, whole(text)
            following = s[i + 1].translate(_NO_PUNCT).strip()
            if not following or not emoji.is_emoji(following[0]):
                return False, whole(text)
        return True, whole(text)
