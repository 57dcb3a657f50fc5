"""IFBench's (and IFEval's) rule-based sentence splitter, `instructions_util.split_into_sentences`, restated for
this project: the checks of `format:emoji`, `format:no_bullets_bullets` and IFBench's sentence rules split with it,
not with Punkt. Never imports torch.

The rule, in the order the reference applies it (each step rewrites the text; `<prd>` is a period that does not
end a sentence, `<stop>` a sentence end):
1. pad the text with one space before and two after; newlines become spaces;
2. the period of the titles Mr, St, Mrs, Ms, Dr; of a website suffix (.com .net .org .io .gov .edu .me); between
   two digits (3.5); of every dot of a run of two or more dots (which then ends a sentence); of "Ph.D." - none of
   these ends a sentence;
3. a single letter with a period after a space, before a space ("J. Smith") does not end a sentence; an acronym
   (A.B. or A.B.C.) followed by a sentence starter (Mr, He, She, It, They, However, ...) ends one; the periods of
   other letter.letter(.letter). runs do not;
4. Inc, Ltd, Jr, Sr, Co with a period end a sentence before a starter, not otherwise; a letter with a period after
   a space does not;
5. a sentence end moves outside a closing quote (`."` -> `".`, also for `!`, `?` and the curly quote after `.`);
6. every remaining `.`, `?`, `!` ends a sentence; the pieces are stripped, and a blank last piece is dropped
   (blank pieces elsewhere stay).
"""

from __future__ import annotations

import re

_ALPHA = "([A-Za-z])"
_STARTERS = (r"(Mr|Mrs|Ms|Dr|Prof|Capt|Cpt|Lt|He\s|She\s|It\s|They\s|Their\s|Our\s|We\s|But\s|However\s|That\s|"
             r"This\s|Wherever)")
_SUFFIXES = "(Inc|Ltd|Jr|Sr|Co)"

# (pattern, replacement) applied in order; see the module docstring for what each does.
_BEFORE_DOTS = (
    (re.compile("(Mr|St|Mrs|Ms|Dr)[.]"), "\\1<prd>"),
    (re.compile("[.](com|net|org|io|gov|edu|me)"), "<prd>\\1"),
    (re.compile("([0-9])[.]([0-9])"), "\\1<prd>\\2"),
)
_DOT_RUN = re.compile(r"\.{2,}")
_AFTER_DOTS = (
    (re.compile(r"\s" + _ALPHA + "[.] "), " \\1<prd> "),
    (re.compile("([A-Z][.][A-Z][.](?:[A-Z][.])?) " + _STARTERS), "\\1<stop> \\2"),
    (re.compile(_ALPHA + "[.]" + _ALPHA + "[.]" + _ALPHA + "[.]"), "\\1<prd>\\2<prd>\\3<prd>"),
    (re.compile(_ALPHA + "[.]" + _ALPHA + "[.]"), "\\1<prd>\\2<prd>"),
    (re.compile(" " + _SUFFIXES + "[.] " + _STARTERS), " \\1<stop> \\2"),
    (re.compile(" " + _SUFFIXES + "[.]"), " \\1<prd>"),
    (re.compile(" " + _ALPHA + "[.]"), " \\1<prd>"),
)
_QUOTE_MOVES = ((".”", "”."), ('."', '".'), ('!"', '"!'), ('?"', '"?'))


def split_sentences(text: str) -> list[str]:
    """The sentences of `text` by the rule of the module docstring (IFBench's `split_into_sentences`).

    >>> split_sentences("Mr. Smith paid 3.5 dollars. He left! Did he?")
    ['Mr. Smith paid 3.5 dollars.', 'He left!', 'Did he?']
    >>> split_sentences("Wait... what")
    ['Wait...', 'what']
    """
    work = " " + text + "  "
    work = work.replace("\n", " ")
    for pattern, repl in _BEFORE_DOTS:
        work = pattern.sub(repl, work)
    work = _DOT_RUN.sub(lambda m: "<prd>" * len(m.group(0)) + "<stop>", work)
    work = work.replace("Ph.D.", "Ph<prd>D<prd>")
    for pattern, repl in _AFTER_DOTS:
        work = pattern.sub(repl, work)
    for old, new in _QUOTE_MOVES:
        work = work.replace(old, new)
    for mark in ".?!":
        work = work.replace(mark, mark + "<stop>")
    pieces = [piece.strip() for piece in work.replace("<prd>", ".").split("<stop>")]
    if pieces and not pieces[-1]:
        pieces.pop()
    return pieces
