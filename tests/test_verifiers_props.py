"""Property tests: every verifier on arbitrary text returns a score in [0, 1] and sorted,
non-overlapping spans inside the text, without raising; and the verdicts equal a plain
re-statement of IFEval's strict checks (string operations, no span bookkeeping)."""

from __future__ import annotations

import collections
import functools
import json
import re

import pytest
from helpers import VERIFIER_SPECS, assert_well_formed
from hypothesis import given, settings
from hypothesis import strategies as st

from core.verifiers import build, count_words

SPECS = VERIFIER_SPECS
GRADED = [(f, k) for f, k in SPECS if build(f, **k).has_graded]

# Text built from the characters the checks care about, plus arbitrary unicode.
SPECIAL = list("aAbB lightLIGHT,.!?*-<>[]{}\n\t\"':PpSs70İǅ") + ["```json", "That is all.", "P.S.", "**", "* ", "- "] + [
    "***", "******", "\n\n", "SECTION 1", "Section 2", "My answer is yes.", "DON'T", "AB ", "ab", "Say a b.",
    "le chat dort ", "the river runs ",
]
texts = st.one_of(
    st.text(max_size=80),
    st.lists(st.sampled_from(SPECIAL), max_size=40).map("".join),
    st.lists(st.one_of(st.sampled_from(SPECIAL), st.text(max_size=3)), max_size=30).map("".join),
)


@pytest.mark.parametrize(("family", "kwargs"), SPECS + [(f, {**k, "graded": True}) for f, k in GRADED])
@settings(max_examples=30, deadline=None)
@given(text=texts)
def test_scores_and_spans_are_well_formed(family, kwargs, text):
    ver = build(family, **kwargs)
    ver.check(text)  # the raw check itself never raises (verify would hide an exception)
    result = ver.verify(text)
    assert_well_formed(result, text)
    if not ver.graded:
        assert result.score in (0.0, 1.0)


# ---------------------------------------------------------------------------------------------
# IFEval's strict checks, restated as plain string operations (semantics of instructions.py)


def _nltk_words(text):
    """IFEval's `count_words` tokens: NLTK's `RegexpTokenizer(r"\\w+")`, as the installed NLTK matches it."""
    from nltk.tokenize import RegexpTokenizer

    return RegexpTokenizer(r"\w+").tokenize(text)


@functools.lru_cache(maxsize=1)
def _restricted_langid(codes):
    """py3langid choosing among the languages a prompt can ask for (`codes`)."""
    from py3langid import langid

    identifier = langid.LanguageIdentifier.from_model_file(langid.MODEL_FILE)
    identifier.set_languages(list(codes))
    return identifier


def _word_tokenize(text):
    """`nltk.word_tokenize` as IFEval calls it (Treebank tokens of each sentence), with the project's sentence
    splitter standing in for Punkt's English model (NLTK data that is not installed)."""
    from nltk.tokenize import word_tokenize

    from core.verifiers.shared.text import sentence_spans

    return [w for s, e in sentence_spans(text) for w in word_tokenize(text[s:e], preserve_line=True)]


def ifeval_reference(family, kwargs, value):
    if family == "keywords:existence":
        return all(re.search(re.escape(k), value, flags=re.IGNORECASE) for k in kwargs["keywords"])
    if family == "keywords:forbidden_words":
        return not any(
            re.search(r"\b" + re.escape(w) + r"\b", value, flags=re.IGNORECASE) for w in kwargs["forbidden_words"]
        )
    if family == "keywords:frequency":
        n = len(re.findall(re.escape(kwargs["keyword"]), value, flags=re.IGNORECASE))
        return n < kwargs["frequency"] if kwargs["relation"] == "less than" else n >= kwargs["frequency"]
    if family == "startend:end_checker":
        return value.strip().strip('"').lower().endswith(kwargs["end_phrase"].strip().lower())
    if family == "change_case:english_lowercase":
        return value.islower()
    if family == "change_case:english_capital":
        return value.isupper()
    if family == "length_constraints:number_words":
        n = len(_nltk_words(value))
        return n < kwargs["num_words"] if kwargs["relation"] == "less than" else n >= kwargs["num_words"]
    if family == "detectable_format:json_format":
        value = (
            value.strip()
            .removeprefix("```json")
            .removeprefix("```Json")
            .removeprefix("```JSON")
            .removeprefix("```")
            .removesuffix("```")
            .strip()
        )
        try:
            json.loads(value)
        except ValueError:
            return False
        return True
    if family == "detectable_format:number_bullet_lists":
        n = len(re.findall(r"^\s*\*[^\*].*$", value, flags=re.MULTILINE))
        n += len(re.findall(r"^\s*-.*$", value, flags=re.MULTILINE))
        return n == kwargs["num_bullets"]
    if family == "punctuation:no_comma":
        return "," not in value
    if family == "detectable_format:title":
        return any(t.lstrip("<").rstrip(">").strip() for t in re.findall(r"<<[^\n]+>>", value))
    if family == "detectable_format:number_highlighted_sections":
        n = sum(1 for h in re.findall(r"\*[^\n\*]*\*", value) if h.strip("*").strip())
        n += sum(1 for h in re.findall(r"\*\*[^\n\*]*\*\*", value) if h.removeprefix("**").removesuffix("**").strip())
        return n >= kwargs["num_highlights"]
    if family == "detectable_content:number_placeholders":
        return len(re.findall(r"\[.*?\]", value)) >= kwargs["num_placeholders"]
    if family == "detectable_content:postscript":
        marker = kwargs["postscript_marker"]
        pattern = {"P.P.S": r"\s*p\.\s?p\.\s?s.*$", "P.S.": r"\s*p\.\s?s\..*$"}.get(
            marker, r"\s*" + re.escape(marker.lower()) + r".*$"
        )
        return bool(re.findall(pattern, value.lower(), flags=re.MULTILINE))
    if family == "keywords:letter_frequency":
        n = collections.Counter(value.lower())[kwargs["letter"]]
        return n < kwargs["let_frequency"] if kwargs["let_relation"] == "less than" else n >= kwargs["let_frequency"]
    if family == "change_case:capital_word_frequency":
        n = len([w for w in _word_tokenize(value) if w.isupper()])
        target = kwargs["capital_frequency"]
        return n < target if kwargs["capital_relation"] == "less than" else n >= target
    if family == "language:response_language":
        from py3langid import langid

        from core.verifiers.shared.language import LANGUAGE_NAMES

        if not any(c.isalpha() for c in value):  # langdetect finds no features: IFEval counts it followed
            return True
        code, score = _restricted_langid(tuple(LANGUAGE_NAMES)).classify(value)
        return code == kwargs["language"] and score > langid.RAW_FLOOR  # letters but no known feature: not followed
    if family == "length_constraints:number_paragraphs":
        paragraphs = re.split(r"\s?\*\*\*\s?", value)
        n = len(paragraphs)
        for i, paragraph in enumerate(paragraphs):
            if not paragraph.strip():
                if i in (0, len(paragraphs) - 1):
                    n -= 1
                else:
                    return False
        return n == kwargs["num_paragraphs"]
    if family == "length_constraints:nth_paragraph_first_word":
        paragraphs = re.split(r"\n\n", value)
        n = sum(1 for p in paragraphs if p.strip())
        if kwargs["nth_paragraph"] > n:
            return False
        paragraph = paragraphs[kwargs["nth_paragraph"] - 1].strip()
        if not paragraph:
            return False
        word = paragraph.split()[0].strip().lstrip("'").lstrip('"')
        first = ""
        for letter in word:
            if letter in {".", ",", "?", "!", "'", '"'}:
                break
            first += letter.lower()
        return n == kwargs["num_paragraphs"] and first == kwargs["first_word"]
    if family == "detectable_format:multiple_sections":
        sections = re.split(r"\s?" + re.escape(kwargs["section_spliter"]) + r"\s?\d+\s?", value)
        return len(sections) - 1 >= kwargs["num_sections"]
    if family == "detectable_format:constrained_response":
        return any(o in value.strip() for o in ("My answer is yes.", "My answer is no.", "My answer is maybe."))
    if family == "startend:quotation":
        value = value.strip()
        return len(value) > 1 and value[0] == '"' and value[-1] == '"'
    if family == "combination:two_responses":
        valid = []
        responses = value.split("******")
        for i, response in enumerate(responses):
            if not response.strip():
                if i not in (0, len(responses) - 1):
                    return False
            else:
                valid.append(response)
        return len(valid) == 2 and valid[0].strip() != valid[1].strip()
    if family == "combination:repeat_prompt":
        return value.strip().lower().startswith(kwargs["prompt_to_repeat"].strip().lower())
    return None


IFEVAL_SPECS = [(f, k) for f, k in SPECS if ifeval_reference(f, k, "") is not None]


@pytest.mark.parametrize(("family", "kwargs"), IFEVAL_SPECS)
@settings(max_examples=40, deadline=None)
@given(text=texts)
def test_verdicts_equal_ifeval_strict(family, kwargs, text):
    # IFEval's test_instruction_following_strict: `response.strip() and instruction.check_following(response)`
    expected = bool(text.strip()) and ifeval_reference(family, kwargs, text)
    assert build(family, **kwargs).verify(text).score == float(expected)


@settings(max_examples=100, deadline=None)
@given(text=texts)
def test_capital_words_are_counted_per_sentence(text):
    """IFEval runs the Treebank tokenizer on each sentence (`nltk.word_tokenize`); the verifier does too, with
    `sentence_spans` for Punkt. Every counted word has its span (a capital token is verbatim in the text)."""
    from core.verifiers.shared.text import capital_words

    expected = sum(1 for w in _word_tokenize(text) if w.isupper())
    count, spans = capital_words(text)
    assert count == expected
    assert len(spans) == count


# ---------------------------------------------------------------------------------------------
# span semantics


@settings(max_examples=100, deadline=None)
@given(text=texts)
def test_negative_rules_have_spans_only_when_broken(text):
    for family, kwargs in [("punctuation:no_comma", {}), ("keywords:forbidden_words", {"forbidden_words": ["a"]})]:
        result = build(family, **kwargs).verify(text)
        if not text.strip():  # a blank response fails every instruction and inspects nothing
            assert result == (0.0, ())
            continue
        assert (result.score == 1.0) == (result.spans == ())


@settings(max_examples=100, deadline=None)
@given(text=texts)
def test_case_rules_span_whole_text_when_they_hold(text):
    result = build("change_case:english_lowercase").verify(text)
    if result.score == 1.0:
        assert result.spans == ((0, len(text)),)
    else:
        for start, end in result.spans:
            if (start, end) != (0, len(text)):
                assert all(c.isupper() or c.istitle() for c in text[start:end])


@settings(max_examples=100, deadline=None)
@given(text=texts)
def test_counting_spans_hold_the_counted_units(text):
    letters = build("keywords:letter_frequency", letter="a", let_frequency=1, let_relation="at least").verify(text)
    assert all(text[s:e].lower() == "a" for s, e in letters.spans)
    capitals = build("change_case:capital_word_frequency", capital_frequency=1, capital_relation="at least")
    assert all(text[s:e].isupper() for s, e in capitals.verify(text).spans)
    dividers = build("length_constraints:number_paragraphs", num_paragraphs=1).verify(text)
    assert all(text[s:e].strip() == "***" for s, e in dividers.spans)
    sections = build("detectable_format:multiple_sections", section_spliter="SECTION", num_sections=1).verify(text)
    assert all(re.fullmatch(r"SECTION\s?\d+", text[s:e]) for s, e in sections.spans)


@settings(max_examples=100, deadline=None)
@given(text=texts)
def test_word_spans_are_the_counted_words(text):
    result = build("length_constraints:number_words", num_words=1, relation="at least").verify(text)
    assert len(result.spans) == count_words(text) == len(_nltk_words(text))
    assert [text[s:e] for s, e in result.spans] == (_nltk_words(text) if text.strip() else [])


@settings(max_examples=100, deadline=None)
@given(text=texts)
def test_keyword_spans_hold_the_keyword(text):
    result = build("keywords:existence", keywords=["light"]).verify(text)
    assert all(text[s:e].lower() == "light" for s, e in result.spans)
    assert (result.score == 1.0) == bool(result.spans)


# ---------------------------------------------------------------------------------------------
# the linear-time scanners find exactly the matches of IFEval's regexes

SCAN_TEXT = st.lists(st.sampled_from(list(" \n\t*-[]<>ab") + ["<<", ">>", "**", "\n\n"]), max_size=40).map("".join)


@settings(max_examples=150, deadline=None)
@given(text=SCAN_TEXT)
def test_scanners_equal_the_regexes(text):
    from core.verifiers.ifeval.scan import _bracket_matches, _bullet_matches, _title_matches

    def spans(pattern, flags=0):
        return [m.span() for m in re.finditer(pattern, text, flags)]

    assert _bullet_matches(text, "*") == spans(r"^\s*\*[^\*].*$", re.MULTILINE)
    assert _bullet_matches(text, "-") == spans(r"^\s*-.*$", re.MULTILINE)
    assert _bracket_matches(text) == spans(r"\[.*?\]")
    assert _title_matches(text) == spans(r"<<[^\n]+>>")


@settings(max_examples=200, deadline=None)
@given(text=st.lists(st.sampled_from(list(" \nPpSs.:x") + ["P.S.", "p. s.", "P.P.S", "İ"]), max_size=30).map("".join))
def test_postscript_spans_are_the_ifeval_matches_trimmed(text):
    for marker, pattern in [("P.S.", r"\s*p\.\s?s\..*$"), ("P.P.S", r"\s*p\.\s?p\.\s?s.*$")]:
        result = build("detectable_content:postscript", postscript_marker=marker).verify(text)
        expected = []
        if "İ" not in text:  # lower() keeps positions: compare spans directly
            for m in re.finditer(pattern, text.lower(), flags=re.MULTILINE):
                start = m.start() + len(m.group()) - len(m.group().lstrip())
                if start < m.end():
                    expected.append((start, m.end()))
            assert list(result.spans) == expected
