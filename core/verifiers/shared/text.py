"""Deterministic word and sentence tokenizers (no NLTK data, nothing downloaded).

IFEval counts words with NLTK's `RegexpTokenizer(r"\\w+")`. Since NLTK 3.10 that tokenizer matches with the
`regex` engine (installed with NLTK, its dependency), whose `\\w` differs from Python's `re` outside ASCII:
it keeps combining marks inside a word ("नमस्ते दुनिया" is 2 words, `re` finds 5 pieces) and does not count
vulgar fractions or superscript digits ("½ cup" is 1 word, `re` finds 2). `word_spans` uses the same pattern on
the same engine, so counts equal current NLTK's on every text (a property test compares them); with NLTK 3.9
or older (`re`), IFEval's own count differs on such texts.

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

IFEval counts capital words (`change_case:capital_word_frequency`) over `nltk.word_tokenize`: Punkt's
sentence split, then the Treebank word tokenizer on each sentence. `capital_words` does the same with
`sentence_spans` in place of Punkt and NLTK's Treebank tokenizer (`NLTKWordTokenizer`, pure regular
expressions, no data) on each sentence. The split matters: Treebank splits off only a text's final period,
and a contraction before that period only then ("I WON'T." is I | WO | N'T | . but "I WON'T. Never" on the
whole text keeps "WON'T." as one token), so tokenizing the whole text at once counts fewer capital words.
Where `sentence_spans` and Punkt split differently (see above), the count can still differ, and only for a
capital word with a contraction ('S, N'T, 'LL, ...) right before the disputed period.
"""

from __future__ import annotations

import functools
import re

import regex

Span = tuple[int, int]

_WORD_RE = regex.compile(r"\w+")  # NLTK >= 3.10's RegexpTokenizer(r"\w+"): the `regex` engine (module docstring)
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
    """Character ranges of the words IFEval counts (`\\w+` runs, `regex` engine).

    >>> word_spans("½ नमस्ते")
    [(2, 8)]
    """
    return [m.span() for m in _WORD_RE.finditer(text)]


def count_words(text: str) -> int:
    """Number of `\\w+` runs, exactly as IFEval's `count_words` with NLTK >= 3.10."""
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


@functools.lru_cache(maxsize=1)
def _treebank():
    from nltk.tokenize.destructive import NLTKWordTokenizer  # imported on first use (about 1 s)

    return NLTKWordTokenizer()


def treebank_tokens(text: str) -> list[str]:
    """The tokens of NLTK's Treebank word tokenizer on `text` (one sentence; see the module docstring)."""
    return _treebank().tokenize(text)


def _align(text: str, tokens: list[str]) -> list[Span | None]:
    """Each token's character range in `text`, in order (None where it is not verbatim in the text: the
    tokenizer writes double quotes as `` or '')."""
    spans: list[Span | None] = []
    pos = 0
    for token in tokens:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if text.startswith(token, pos):
            start = pos
        elif token in ("``", "''"):
            width = 1 if text.startswith('"', pos) else 2 if text.startswith(("``", "''"), pos) else 0
            spans.append((pos, pos + width) if width else None)
            pos += width
            continue
        else:
            start = text.find(token, pos)
            if start == -1:
                spans.append(None)
                continue
        spans.append((start, start + len(token)))
        pos = start + len(token)
    return spans


def capital_words(text: str) -> tuple[int, list[Span]]:
    """(count, character ranges) of the Treebank tokens, per sentence, that are all capitals (`token.isupper()`,
    as IFEval counts them: "DON'T" is two, "WELL-KNOWN" one, "I WON'T. Never" two in its first sentence).

    >>> capital_words("I WON'T. Never")
    (3, [(0, 1), (2, 4), (4, 7)])
    """
    count, spans = 0, []
    for start, end in sentence_spans(text):
        sentence = text[start:end]
        tokens = treebank_tokens(sentence)
        for token, span in zip(tokens, _align(sentence, tokens), strict=True):
            if token.isupper():
                count += 1
                if span is not None:
                    spans.append((start + span[0], start + span[1]))
    return count, spans
