"""Deterministic word and sentence tokenizers (no NLTK, no data downloads).

IFEval counts words with NLTK's `RegexpTokenizer(r"\\w+")`: `word_spans` is the same regex, so
word counts are identical on every text.

IFEval counts sentences with NLTK's pre-trained Punkt model (`tokenizers/punkt/english.pickle`).
`sentence_spans` approximates it with Punkt's main rules:
- a sentence ends at a token ending in `.`, `!` or `?` (optionally followed by closing quotes or
  brackets) that is followed by whitespace or the end of the text; a period glued to the next
  word (`3.5`, `a.b`) never ends a sentence; newlines alone never end one (as in Punkt);
- a token whose period marks a known abbreviation (`Mr.`, `Dr.`, `e.g.`, `etc.`, ... see
  `ABBREVIATIONS`) or a single-letter initial (`J.`) does not end a sentence;
- an ellipsis (`..`, `...`, `…`) ends a sentence only when the next word starts with a capital.
Where it may differ from Punkt: abbreviations outside the list (Punkt's model knows ~150),
initials and ordinal numbers before a capitalised word (Punkt uses learned orthographic
statistics there), and period-less breaks Punkt makes after unusual punctuation. On ordinary
prose (sentences ending in `.`, `!`, `?` followed by a space) the counts are the same.
"""

from __future__ import annotations

import re

Span = tuple[int, int]

_WORD_RE = re.compile(r"\w+")
_TOKEN_RE = re.compile(r"\S+")
_CLOSERS = "\"')]}»”’*"
_OPENERS = "\"'([{«“‘*"

# Lower-cased, without the final period. A subset of the abbreviations Punkt's English model knows.
ABBREVIATIONS = frozenset(
    """
    mr mrs ms dr prof st jr sr vs etc e.g i.e u.s u.k a.m p.m inc ltd co corp no fig approx dept
    est jan feb mar apr jun jul aug sep sept oct nov dec mt ft gen col lt sgt rev hon messrs
    """.split()
)


def word_spans(text: str) -> list[Span]:
    """Character ranges of the words IFEval counts (`\\w+` runs)."""
    return [m.span() for m in _WORD_RE.finditer(text)]


def count_words(text: str) -> int:
    """Number of `\\w+` runs, exactly as IFEval's `count_words`."""
    return len(_WORD_RE.findall(text))


def _ends_sentence(token: str, next_token: str | None) -> bool:
    core = token.rstrip(_CLOSERS)
    if not core or core[-1] not in ".!?…":
        return False
    if core[-1] in "!?":
        return True
    if core.endswith("..") or core.endswith("…"):
        if next_token is None:
            return True
        nxt = next_token.lstrip(_OPENERS)
        return bool(nxt) and nxt[0].isupper()
    stem = core[:-1].lstrip(_OPENERS).lower()
    if stem in ABBREVIATIONS:
        return False
    if len(stem) == 1 and stem.isalpha():
        return False  # an initial, "J. Smith"
    return True


def sentence_spans(text: str) -> list[Span]:
    """Character ranges of the sentences of `text` (see the module docstring for the rules);
    each range starts at a sentence's first non-space character and ends after its last token."""
    tokens = [m.span() for m in _TOKEN_RE.finditer(text)]
    spans: list[Span] = []
    start = None
    for i, (tok_start, tok_end) in enumerate(tokens):
        if start is None:
            start = tok_start
        next_token = text[tokens[i + 1][0] : tokens[i + 1][1]] if i + 1 < len(tokens) else None
        if _ends_sentence(text[tok_start:tok_end], next_token):
            spans.append((start, tok_end))
            start = None
    if start is not None:
        spans.append((start, tokens[-1][1]))
    return spans


def count_sentences(text: str) -> int:
    """Number of sentences (approximates IFEval's Punkt-based `count_sentences`)."""
    return len(sentence_spans(text))
