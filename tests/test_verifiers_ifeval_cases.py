"""Regression cases where the verifiers' verdicts differed from IFEval's (issue: verdicts a policy could profit
from). Expectations are written by hand from IFEval's published definitions, not taken from the project's output."""

from __future__ import annotations

import pytest

from core.verifiers import build

# The eight ids whose "absence" or "less than" form passed an empty response; each with a non-empty text that
# does follow it, so the empty verdict is the rule, not a verifier that always fails.
EMPTY_CASES = [
    ("punctuation:no_comma", {}, "No commas here."),
    ("keywords:forbidden_words", {"forbidden_words": ["river"]}, "A lake."),
    ("language:response_language", {"language": "en"}, "The river runs past the old mill every morning."),
    ("keywords:frequency", {"keyword": "rain", "frequency": 2, "relation": "less than"}, "Sun."),
    ("keywords:letter_frequency", {"letter": "z", "let_frequency": 2, "let_relation": "less than"}, "Sun."),
    ("change_case:capital_word_frequency", {"capital_frequency": 2, "capital_relation": "less than"}, "sun."),
    ("length_constraints:number_words", {"num_words": 5, "relation": "less than"}, "Two words."),
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": "less than"}, "One sentence."),
]


@pytest.mark.parametrize(("family", "kwargs", "good"), EMPTY_CASES, ids=[c[0] for c in EMPTY_CASES])
@pytest.mark.parametrize("blank", ["", " ", "\n\n", " \t\r\n "])
def test_empty_or_blank_response_fails(family, kwargs, good, blank):
    """IFEval: an instruction is followed only when `response.strip()` is non-empty."""
    ver = build(family, **kwargs)
    assert ver.verify(good).score == 1.0
    assert ver.verify(blank).score == 0.0
    assert ver.verify(blank).spans == ()


@pytest.mark.parametrize(("family", "kwargs", "good"), EMPTY_CASES[3:], ids=[c[0] for c in EMPTY_CASES[3:]])
def test_empty_response_fails_the_graded_variant_too(family, kwargs, good):
    ver = build(family, graded=True, **kwargs)
    assert ver.verify("").score == 0.0
    assert ver.verify(good).score == 1.0


# Capital words: IFEval tokenizes each sentence with NLTK's Treebank tokenizer, which splits a contraction off
# only before a sentence's final period. Hand-tokenized:
#   "A'S.\r0"         -> sentences "A'S." | "0"          -> A | 'S | . | 0        -> 2 capital words
#   "I WON'T. Never"  -> sentences "I WON'T." | "Never"  -> I | WO | N'T | . | Never -> 3 capital words
#   "HE'S HERE. ok"   -> sentences "HE'S HERE." | "ok"   -> HE | 'S | HERE | . | ok -> 3 capital words
CAPITAL_CASES = [
    ("A'S.\r0", 2, ["A", "'S"]),  # found by the property test (Hypothesis) on a fresh clone
    ("I WON'T. Never", 3, ["I", "WO", "N'T"]),
    ("HE'S HERE. ok", 3, ["HE", "'S", "HERE"]),
    ("DON'T stop, WELL-KNOWN I.", 4, ["DO", "N'T", "WELL-KNOWN", "I"]),
]


@pytest.mark.parametrize(("text", "count", "words"), CAPITAL_CASES)
def test_capital_words_follow_ifeval_per_sentence_tokens(text, count, words):
    from core.verifiers.shared.text import capital_words

    n, spans = capital_words(text)
    assert n == count
    assert [text[s:e] for s, e in spans] == words
    at_least = build("change_case:capital_word_frequency", capital_frequency=count, capital_relation="at least")
    less_than = build("change_case:capital_word_frequency", capital_frequency=count, capital_relation="less than")
    assert at_least.verify(text).score == 1.0
    assert less_than.verify(text).score == 0.0


# Response language: the texts are in the language asked for. py3langid's full model reads them as a regional
# language no prompt can ask for (shown on the right), so the reward failed them; the detector now chooses among
# the languages a prompt can ask for.
LANGUAGE_CASES = [
    ("ar", "شكرا جزيلا"),  # "thank you very much"; full model: ary (Moroccan Arabic)
    ("pt", "Bom dia"),  # full model: pcm (Nigerian Pidgin)
    ("en", "iPhone"),  # full model: zu (Zulu)
]


@pytest.mark.parametrize(("code", "text"), LANGUAGE_CASES)
def test_response_language_chooses_among_the_languages_a_prompt_can_ask_for(code, text):
    from core.verifiers.shared.language import LANGUAGE_NAMES, detect_language

    assert detect_language(text) == code
    assert build("language:response_language", language=code).verify(text).score == 1.0
    others = [c for c in LANGUAGE_NAMES if c != code]
    assert build("language:response_language", language=others[0]).verify(text).score == 0.0


def test_detector_answers_only_codes_a_prompt_can_ask_for():
    from core.verifiers.shared.language import LANGUAGE_NAMES, detect_language

    texts = ["Zulu", "Olá", "Hola amigo", "Kubernetes cluster", "Nintendo Switch", "Ngiyabonga kakhulu", "Moien"]
    assert all(detect_language(t) in LANGUAGE_NAMES for t in texts)


# Word counts: IFEval's RegexpTokenizer(r"\w+"), which NLTK >= 3.10 matches with the `regex` engine. Hand-counted:
WORD_CASES = [
    ("नमस्ते दुनिया", 2),  # Devanagari: vowel signs and the virama are combining marks inside the word
    ("வணக்கம் உலகம்", 2),  # Tamil, likewise
    ("Add ½ cup of flour.", 4),  # a vulgar fraction is not a word character: Add | cup | of | flour
    ("E = mc² today", 3),  # nor a superscript digit: E | mc | today
    ("It's 3.5 km.", 5),  # It | s | 3 | 5 | km
]


@pytest.mark.parametrize(("text", "count"), WORD_CASES)
def test_number_words_counts_like_current_nltk(text, count):
    from nltk.tokenize import RegexpTokenizer

    from core.verifiers import count_words

    assert count_words(text) == count
    assert len(RegexpTokenizer(r"\w+").tokenize(text)) == count  # the installed NLTK agrees
    assert build("length_constraints:number_words", num_words=count, relation="at least").verify(text).score == 1.0
    assert build("length_constraints:number_words", num_words=count, relation="less than").verify(text).score == 0.0


@pytest.mark.parametrize("text", ["To", "ok", "Hi", "A"])
def test_a_word_the_detector_cannot_read_follows_no_language(text):
    """A text with letters always gets a language from langdetect (IFEval), almost never the one asked for; a
    reward that passed it would pay for answering with one word. Only a text without letters passes."""
    for code in ("en", "ru", "ja"):
        assert build("language:response_language", language=code).verify(text).score == 0.0
    assert build("language:response_language", language="ru").verify("42 !").score == 1.0
