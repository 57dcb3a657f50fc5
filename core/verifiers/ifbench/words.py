"""IFBench's `words:` group (10 of its 13 ids; `words:start_verb` is refused, `last_first` and
`keywords_specific_position` split sentences and live in `sentences.py`, docs/IFBENCH.md): alphabet chains, few
vowels, consonant clusters, palindromes, prime word lengths, repeats, odd and even syllables, paragraphs that end
with their first word, no consecutive first letters, a word's position. Verdicts as IFBench's checks (each docstring says how words are cut); spans: the
words inspected, or the offending ones.

>>> from core.verifiers import build
>>> build("words:consonants").verify("strong black tea")
VerifyResult(score=0.0, spans=((13, 16),))
"""

from __future__ import annotations

import string
from collections import Counter
from collections.abc import Iterable
from typing import ClassVar

from core.verifiers.ifbench.common import PUNCTUATION, IFBenchVerifier, split_spans
from core.verifiers.shared.base import Param, Span, as_int, as_text
from core.verifiers.shared.punkt import punkt_sentences
from core.verifiers.shared.registry import register

_STRIP = PUNCTUATION + " "
_NO_PUNCT = str.maketrans("", "", PUNCTUATION)


def _bare_words(text: str) -> list[tuple[str, Span]]:
    """IFBench's most common cut: ASCII punctuation removed from the text, then split at whitespace; each word with
    the range of its whitespace-separated piece (pieces of punctuation alone give no word)."""
    out = []
    for piece, span in split_spans(text):
        word = piece.translate(_NO_PUNCT)
        if word:
            out.append((word, span))
    return out


@register("words:alphabet")
class AlphabetLoop(IFBenchVerifier):
    """Each word starts with the letter after the previous word's (z is followed by a): words as `_bare_words`,
    lower-cased; the first word's first letter must be a-z. Spans: the words checked, up to the first that
    breaks the chain."""

    params: ClassVar = {}
    description = "Each word must start with the next letter of the alphabet, looping back to 'A' after 'Z'."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        words = _bare_words(text)
        if not words:
            return False, ()
        letter = words[0][0][0].lower()
        spans = [words[0][1]]
        if letter not in string.ascii_lowercase:
            return False, spans
        for word, span in words[1:]:
            letter = string.ascii_lowercase[(string.ascii_lowercase.index(letter) + 1) % 26]
            spans.append(span)
            if word.lower()[0] != letter:
                return False, spans
        return True, spans


@register("words:vowel")
class SingleVowelParagraph(IFBenchVerifier):
    """One paragraph (no line break inside the stripped text) using at most three of the vowels a, e, i, o, u
    (case-insensitive). Spans: the vowels."""

    params: ClassVar = {}
    description = "Write a paragraph using words that contain only three type of vowels."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        spans = [(i, i + 1) for i, ch in enumerate(text) if ch.lower() in "aeiou"]
        one = "\n" not in text.strip()
        return one and len({text[a].lower() for a, _ in spans}) <= 3, spans


_CONSONANTS = frozenset("bcdfghjklmnpqrstvwxyz")


@register("words:consonants")
class ConsonantClusters(IFBenchVerifier):
    """Every whitespace-separated word (lower-cased, punctuation kept) holds two consonants in a row. Spans: the
    words without one."""

    params: ClassVar = {}
    description = "Ensure each word in your response has at least one consonant cluster (two or more consonants together)."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        bad = [span for piece, span in split_spans(text.lower())
               if not any(a in _CONSONANTS and b in _CONSONANTS for a, b in zip(piece, piece[1:], strict=False))]
        return not bad, bad


@register("words:palindrome")
class Palindromes(IFBenchVerifier):
    """At least 10 palindromes of 5 letters or more: words as `_bare_words`, lower-cased (repeats count). Spans:
    the palindromes."""

    params: ClassVar = {}
    description = "Include at least 10 single-word palindromes, each at least 5 characters long."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        spans = [span for word, span in _bare_words(text) if len(word) >= 5 and word.lower() == word.lower()[::-1]]
        return len(spans) >= 10, spans


_PRIMES = frozenset((2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97))


@register("words:prime_lengths")
class PrimeLengths(IFBenchVerifier):
    """Every word's length is a prime below 100: words as `_bare_words` (so "I" and "a" fail). Spans: the words of
    other lengths."""

    params: ClassVar = {}
    description = "Use only words with lengths that are prime numbers."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        bad = [span for word, span in _bare_words(text) if len(word) not in _PRIMES]
        return not bad, bad


@register("words:repeats")
class LimitedRepeats(IFBenchVerifier):
    """No word used more than `small_n` times: words as `_bare_words`, lower-cased. Spans: every occurrence of a
    word used too often."""

    params: ClassVar = {"small_n": Param(as_int(0))}
    description = "The response should not repeat any word more than {small_n} times."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        words = [(w.lower(), s) for w, s in _bare_words(text)]
        counts = Counter(w for w, _ in words)
        bad = [s for w, s in words if counts[w] > self.kwargs["small_n"]]
        return not bad, bad


@register("words:paragraph_last_first")
class ParagraphLastFirst(IFBenchVerifier):
    """Each non-blank line (a paragraph, split at "\\n") ends with the word it starts with: the line stripped,
    lower-cased, punctuation stripped from its ends, split at whitespace; first word == last word (punctuation
    inside a word kept). Spans: the lines."""

    params: ClassVar = {}
    description = ("Each paragraph must end with the same word it started with, separate paragraphs with a "
                   "newline.")

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        ok, spans, at = True, [], 0
        for line in text.split("\n"):
            words = line.strip().lower().strip(_STRIP).split()
            if line.strip():
                spans.append((at, at + len(line)))
                ok = ok and bool(words) and words[0] == words[-1]
            at += len(line) + 1
        return ok, spans


@register("words:no_consecutive")
class NoConsecutiveFirstLetter(IFBenchVerifier):
    """No two words in a row start with the same letter: words as `_bare_words`, lower-cased. Spans: the words
    that repeat the previous word's first letter."""

    params: ClassVar = {}
    description = "No two consecutive words can share the same first letter."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        words = [(w.lower(), s) for w, s in _bare_words(text)]
        bad = [s for (a, _), (b, s) in zip(words, words[1:], strict=False) if a[0] == b[0]]
        return not bad, bad


@register("words:odd_even_syllables")
class AlternateParitySyllables(IFBenchVerifier):
    """Words alternate between odd and even syllable counts: words as `_bare_words`, lower-cased, syllables
    counted by `syllapy` (its word list, then its rules), as IFBench. Spans: the words whose parity repeats the
    previous word's."""

    params: ClassVar = {}
    description = "Alternate between words with odd and even numbers of syllables."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        import syllapy

        words = [(syllapy.count(w.lower()) % 2, s) for w, s in _bare_words(text)]
        bad = [s for (a, _), (b, s) in zip(words, words[1:], strict=False) if a == b]
        return not bad, bad


def word_token_spans(text: str) -> list[Span]:
    """Character ranges of `nltk.word_tokenize(text)`'s tokens (Treebank tokens of each Punkt sentence)."""
    from nltk.tokenize import NLTKWordTokenizer

    tokenizer, spans, offset = NLTKWordTokenizer(), [], 0
    for sentence in punkt_sentences(text):
        base = text.find(sentence, offset)
        base = offset if base < 0 else base
        spans += [(base + a, base + b) for a, b in tokenizer.span_tokenize(sentence)]
        offset = base + len(sentence)
    return spans


@register("words:words_position")
class WordsPosition(IFBenchVerifier):
    """The second word and the second-to-last word are both `keyword` (case-sensitive), words being
    `nltk.word_tokenize`'s tokens (punctuation marks are tokens). Spans: those two tokens."""

    params: ClassVar = {"keyword": Param(lambda v: as_text(v).strip())}
    description = ("The second word in your response and the second to last word in your response should be the "
                   "word {keyword}.")

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        from core.verifiers.shared.punkt import reference_word_tokens

        words = reference_word_tokens(text)
        if len(words) < 2:
            return False, ()
        spans = word_token_spans(text)
        picked = [spans[1], spans[-2]] if len(spans) == len(words) else []
        return words[1] == words[-2] == self.kwargs["keyword"], picked
