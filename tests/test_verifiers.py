"""Hand-written cases per verifier family: pass, fail, edge (empty, unicode, very long text),
the inspected spans, graded variants and bad specs."""

from __future__ import annotations

import pytest
from helpers import IFEVAL_IDS, VERIFIER_SPECS, assert_well_formed

from core.verifiers import (
    VerifierSpecError,
    VerifyResult,
    build,
    count_sentences,
    count_words,
    families,
    family_class,
)

LONG = "the river runs by the stone. " * 4000  # ~116k characters


def v(family, **kwargs):
    return build(family, **kwargs)


def spans_text(text, result):
    return [text[s:e] for s, e in result.spans]


# ---------------------------------------------------------------------------------------------
# keywords


def test_keyword_existence_case_insensitive_substring_and_all_occurrences():
    ver = v("keywords:existence", keywords=["light"])
    text = "Light falls. The lighthouse."
    result = ver.verify(text)
    assert result == VerifyResult(1.0, ((0, 5), (17, 22)))
    assert spans_text(text, result) == ["Light", "light"]
    assert ver.verify("dark night") == VerifyResult(0.0, ())
    assert ver.verify("") == VerifyResult(0.0, ())


def test_keyword_existence_needs_all_keywords_graded_counts_share():
    text = "green river"
    assert v("keywords:existence", keywords=["green", "stone"]).verify(text).score == 0.0
    assert v("keywords:existence", keywords=["green", "stone"], graded=True).verify(text).score == 0.5
    assert v("keywords:existence", keywords=["green", "river"]).verify(text).score == 1.0


def test_keyword_is_matched_literally_not_as_regex():
    ver = v("keywords:existence", keywords=["a.b"])
    assert ver.verify("axb").score == 0.0
    assert ver.verify("a.b").score == 1.0


def test_keyword_unicode_and_long_text():
    ver = v("keywords:existence", keywords=["café"])
    assert ver.verify("Un CAFÉ noir").spans == ((3, 7),)
    result = v("keywords:existence", keywords=["stone"]).verify(LONG)
    assert result.score == 1.0 and len(result.spans) == 4000


def test_forbidden_words_whole_words_spans_only_when_broken():
    ver = v("keywords:forbidden_words", forbidden_words=["bad", "ugly"])
    assert ver.verify("a badge of honour") == VerifyResult(1.0, ())  # \b: 'badge' is not 'bad'
    text = "Bad and BAD, not ugly?"
    result = ver.verify(text)
    assert result.score == 0.0
    assert spans_text(text, result) == ["Bad", "BAD", "ugly"]
    graded = v("keywords:forbidden_words", forbidden_words=["bad", "ugly", "mean"], graded=True)
    assert graded.verify("bad").score == pytest.approx(2 / 3)
    assert ver.verify("") == VerifyResult(0.0, ())  # an empty response follows no instruction (IFEval)


def test_keyword_frequency_relations():
    text = "Rain, rain, go away; RAIN."
    at_least_3 = v("keywords:frequency", keyword="rain", frequency=3, relation="at least")
    less_than_3 = v("keywords:frequency", keyword="rain", frequency=3, relation="less than")
    assert at_least_3.verify(text).score == 1.0
    assert len(at_least_3.verify(text).spans) == 3
    assert less_than_3.verify(text).score == 0.0
    assert less_than_3.verify("rain rain").score == 1.0
    graded = v("keywords:frequency", keyword="rain", frequency=4, relation="at least", graded=True)
    assert graded.verify(text).score == 0.75
    graded_lt = v("keywords:frequency", keyword="rain", frequency=2, relation="less than", graded=True)
    assert graded_lt.verify(text).score == pytest.approx(1 / 3)  # (N - 1) / count


# ---------------------------------------------------------------------------------------------
# start / end


def test_end_checker_ifeval_normalisation_and_span():
    ver = v("startend:end_checker", end_phrase="That is all.")
    text = "Rivers run. that is ALL.  \n"
    result = ver.verify(text)
    assert result.score == 1.0
    assert spans_text(text, result) == ["that is ALL."]
    # IFEval strips double quotes after whitespace
    assert ver.verify('"Rivers run. That is all."').score == 1.0
    failed = ver.verify("That is all. More.")
    assert failed.score == 0.0
    # the compared tail: as many characters as the phrase
    assert spans_text("That is all. More.", failed) == ["s all. More."]
    assert ver.verify("") == VerifyResult(0.0, ())
    assert ver.verify("all.") == VerifyResult(0.0, ((0, 4),))


def test_end_checker_unicode_lowercase_that_grows():
    # 'İ'.lower() is two characters: the span must still map into the original text.
    ver = v("startend:end_checker", end_phrase="The end.")
    text = "İİİ the end."
    result = ver.verify(text)
    assert result.score == 1.0
    assert spans_text(text, result) == ["the end."]
    assert v("startend:end_checker", end_phrase="x").verify("İ").spans == ((0, 1),)


def test_start_checker():
    ver = v("startend:start_checker", start_phrase="Dear friend")
    text = "  dear Friend, hello."
    result = ver.verify(text)
    assert result.score == 1.0 and spans_text(text, result) == ["dear Friend"]
    assert ver.verify("Hello dear friend").score == 0.0


# ---------------------------------------------------------------------------------------------
# case


def test_lowercase_spans_offenders_or_whole_text():
    ver = v("change_case:english_lowercase")
    assert ver.verify("all lower, 123.") == VerifyResult(1.0, ((0, 15),))
    text = "Some UPPER words"
    result = ver.verify(text)
    assert result.score == 0.0
    assert spans_text(text, result) == ["S", "UPPER"]
    assert ver.verify("") == VerifyResult(0.0, ())  # ''.islower() is False
    assert ver.verify("123 !") == VerifyResult(0.0, ((0, 5),))  # no cased letter: fails, whole text inspected
    assert ver.verify("ǅ").score == 0.0  # title-case letter


def test_lowercase_unicode_and_graded():
    ver = v("change_case:english_lowercase")
    assert ver.verify("ça va très bien").score == 1.0
    assert ver.verify("ça va TRÈS bien").spans == ((6, 10),)
    graded = v("change_case:english_lowercase", graded=True)
    assert graded.verify("abC").score == pytest.approx(2 / 3)
    assert graded.verify("123").score == 0.0
    assert ver.verify(LONG).score == 1.0


def test_capital():
    ver = v("change_case:english_capital")
    assert ver.verify("ALL CAPS, OK!").score == 1.0
    text = "ALL Caps"
    result = ver.verify(text)
    assert result.score == 0.0 and spans_text(text, result) == ["aps"]
    assert v("change_case:english_capital", graded=True).verify("ABc").score == pytest.approx(2 / 3)


# ---------------------------------------------------------------------------------------------
# length


def test_number_words_counts_word_runs_like_ifeval():
    assert count_words("Hello, world! It's 3.5 km.") == 7  # Hello world It s 3 5 km
    ver = v("length_constraints:number_words", num_words=3, relation="less than")
    assert ver.verify("one two").score == 1.0
    assert ver.verify("one two three").score == 0.0
    at_least = v("length_constraints:number_words", num_words=3, relation="at least")
    assert at_least.verify("one two three") == VerifyResult(1.0, ((0, 3), (4, 7), (8, 13)))
    assert at_least.verify("") == VerifyResult(0.0, ())
    graded = v("length_constraints:number_words", num_words=4, relation="at least", graded=True)
    assert graded.verify("one two three").score == 0.75
    assert v("length_constraints:number_words", num_words=100, relation="at least").verify(LONG).score == 1.0


@pytest.mark.parametrize(
    ("text", "n"),
    [
        ("", 0),
        ("   ", 0),
        ("One sentence", 1),
        ("One. Two! Three? Four", 4),
        ("Mr. Smith went to Washington. He left.", 2),
        ("It costs 3.5 dollars. Cheap.", 2),
        ('He said "stop." Then left.', 2),
        ("Wait... What happened?", 2),
        ("Wait... and then", 1),
        ("Title\n\nBody text here.", 1),
        ("e.g. this one. And J. Smith too.", 2),
        ("Ça va. Très bien.", 2),
    ],
)
def test_sentence_counter(text, n):
    assert count_sentences(text) == n


def test_number_sentences_spans_each_sentence():
    text = "One. Two! Three"
    result = v("length_constraints:number_sentences", num_sentences=3, relation="at least").verify(text)
    assert result.score == 1.0
    assert spans_text(text, result) == ["One.", "Two!", "Three"]
    assert v("length_constraints:number_sentences", num_sentences=3, relation="less than").verify(text).score == 0.0


# ---------------------------------------------------------------------------------------------
# format


def test_json_format_with_and_without_fences():
    ver = v("detectable_format:json_format")
    text = '  ```json\n{"a": [1, 2]}\n```  '
    result = ver.verify(text)
    assert result.score == 1.0
    assert spans_text(text, result) == ['{"a": [1, 2]}']
    assert ver.verify('{"a": 1}').score == 1.0
    assert ver.verify("```\n[1, 2]\n```").score == 1.0
    assert ver.verify("not json").score == 0.0
    assert ver.verify('{"a": 1} trailing').score == 0.0
    assert ver.verify("") == VerifyResult(0.0, ())
    assert ver.verify("[" * 100000).score == 0.0  # deep nesting: no RecursionError escapes


def test_bullets_exact_count_both_markers():
    ver = v("detectable_format:number_bullet_lists", num_bullets=3)
    text = "Intro\n* one\n  * two\n- three\n**bold** not a bullet"
    result = ver.verify(text)
    assert result.score == 1.0
    assert spans_text(text, result) == ["* one", "* two", "- three"]
    assert ver.verify("* one\n* two").score == 0.0
    assert v("detectable_format:number_bullet_lists", num_bullets=4, graded=True).verify(text).score == 0.75
    assert v("detectable_format:number_bullet_lists", num_bullets=0).verify("no bullets") == VerifyResult(1.0, ())


def test_no_comma_spans_are_the_commas():
    ver = v("punctuation:no_comma")
    assert ver.verify("no commas here.") == VerifyResult(1.0, ())
    assert ver.verify("one, two, three") == VerifyResult(0.0, ((3, 4), (8, 9)))
    assert ver.verify("fullwidth，comma") == VerifyResult(1.0, ())  # IFEval checks ',' only
    assert v("punctuation:no_comma", graded=True).verify("a, b, c").score == pytest.approx(1 / 3)
    assert ver.verify("") == VerifyResult(0.0, ())  # an empty response follows no instruction (IFEval)


def test_title():
    ver = v("detectable_format:title")
    text = "<<A River Song>>\nThe river sings."
    result = ver.verify(text)
    assert result.score == 1.0 and spans_text(text, result) == ["<<A River Song>>"]
    assert ver.verify("<<   >> no title").score == 0.0
    assert ver.verify("<<broken\ntitle>>").score == 0.0
    assert ver.verify("no title") == VerifyResult(0.0, ())


def test_highlighted_sections():
    ver = v("detectable_format:number_highlighted_sections", num_highlights=2)
    text = "*one* and **two** and * * empty"
    result = ver.verify(text)
    assert result.score == 1.0
    assert spans_text(text, result) == ["*one*", "**two**"]
    assert ver.verify("*only one*").score == 0.0
    assert v("detectable_format:number_highlighted_sections", num_highlights=4, graded=True).verify(text).score == 0.5


# ---------------------------------------------------------------------------------------------
# content


def test_placeholders():
    ver = v("detectable_content:number_placeholders", num_placeholders=2)
    text = "Dear [name], at [address]."
    assert ver.verify(text) == VerifyResult(1.0, ((5, 11), (16, 25)))
    assert ver.verify("Dear [name]").score == 0.0


def test_postscript_markers():
    ps = v("detectable_content:postscript", postscript_marker="P.S.")
    text = "Hello.\n\np. s. see you"
    result = ps.verify(text)
    assert result.score == 1.0 and spans_text(text, result) == ["p. s. see you"]
    assert ps.verify("Hello. PS see you").score == 0.0
    pps = v("detectable_content:postscript", postscript_marker="P.P.S")
    assert pps.verify("Hi\nP.P.S bye").score == 1.0
    custom = v("detectable_content:postscript", postscript_marker="Note:")
    assert custom.verify("Body\nNOTE: x").score == 1.0
    assert custom.verify("Body\nNotes x").score == 0.0


# ---------------------------------------------------------------------------------------------
# task correctness


def test_arithmetic_first_integer():
    ver = v("task:arithmetic", answer=12)
    assert ver.sentence() == "" and ver.is_task
    assert ver.verify("the answer is 12.") == VerifyResult(1.0, ((14, 16),))
    assert ver.verify("3 plus 9 is 12") == VerifyResult(0.0, ((0, 1),))  # the first integer is read
    assert ver.verify("twelve") == VerifyResult(0.0, ((0, 6),))  # no integer: whole text searched
    assert ver.verify("") == VerifyResult(0.0, ())
    assert v("task:arithmetic", answer=-3).verify("It is -3.").score == 1.0
    assert ver.verify("1" * 10000).score == 0.0  # longer than int() accepts: no exception
    assert ver.verify("١٢").score == 1.0  # Arabic-Indic digits are integers too


# ---------------------------------------------------------------------------------------------
# the rest of IFEval's ids


def builtin_families():
    """The families this package registers (other tests register custom ones in the same session)."""
    return {f for f in families() if family_class(f).__module__.startswith("core.verifiers.ifeval.")
            or family_class(f).__module__ == "core.verifiers.task"}


def test_all_25_ifeval_ids_are_registered():
    assert len(IFEVAL_IDS) == len(set(IFEVAL_IDS)) == 25
    assert builtin_families() - set(IFEVAL_IDS) == {"startend:start_checker", "task:arithmetic"}
    assert set(IFEVAL_IDS) <= builtin_families()


def test_letter_frequency_counts_the_lowercased_letter():
    ver = v("keywords:letter_frequency", letter="A", let_frequency=3, let_relation="at least")
    assert ver.kwargs["letter"] == "a"  # IFEval lower-cases the argument
    text = "A banana"
    result = ver.verify(text)
    assert result.score == 1.0 and spans_text(text, result) == ["A", "a", "a", "a"]
    assert ver.verify("a cat").score == 0.0
    less = v("keywords:letter_frequency", letter="a", let_frequency=2, let_relation="less than")
    assert less.verify("a cat").score == 0.0 and less.verify("one").score == 1.0
    assert v("keywords:letter_frequency", letter="i", let_frequency=1, let_relation="at least").verify("İ").spans == (
        (0, 1),
    )  # 'İ'.lower() is 'i' + a combining dot: IFEval counts an i
    graded = v("keywords:letter_frequency", letter="a", let_frequency=8, let_relation="at least", graded=True)
    assert graded.verify(text).score == 0.5
    assert ver.sentence() == "Use the letter a at least 3 times."
    with pytest.raises(VerifierSpecError, match="single letter"):
        build("keywords:letter_frequency", letter="ab", let_frequency=1, let_relation="at least")


def test_capital_word_frequency_uses_treebank_tokens():
    ver = v("change_case:capital_word_frequency", capital_frequency=4, capital_relation="at least")
    text = "DON'T stop, WELL-KNOWN I."
    result = ver.verify(text)
    # Treebank: DO | N'T | stop | , | WELL-KNOWN | I | .  -> four capital words
    assert result.score == 1.0 and spans_text(text, result) == ["DO", "N'T", "WELL-KNOWN", "I"]
    assert ver.verify("Mixed Case Words only").score == 0.0
    less = v("change_case:capital_word_frequency", capital_frequency=2, capital_relation="less than")
    assert less.verify('He said "NO" twice.').score == 1.0
    assert less.verify('He said "NO" and "NEVER".').score == 0.0
    assert v("change_case:capital_word_frequency", capital_frequency=0, capital_relation="at least").verify("") == (
        VerifyResult(0.0, ())  # an empty response follows no instruction (IFEval)
    )


def test_response_language_detects_and_passes_featureless_text():
    fr = v("language:response_language", language="fr")
    text = "Le chat dort sur le canapé depuis ce matin et ne veut pas bouger."
    assert fr.verify(text) == VerifyResult(1.0, ((0, len(text)),))
    en = v("language:response_language", language="en")
    assert en.verify(text).score == 0.0
    assert en.verify("The river runs past the old mill every single morning.").score == 1.0
    assert en.verify("123 456 !!") == VerifyResult(1.0, ((0, 10),))  # nothing to detect: followed, as IFEval
    assert en.verify("To") == VerifyResult(0.0, ((0, 2),))  # letters the model cannot read: not followed
    assert en.verify("") == VerifyResult(0.0, ())  # an empty response follows no instruction (IFEval)
    assert fr.sentence() == "Your entire response should be in French, no other language."
    with pytest.raises(VerifierSpecError, match="valid choices: 'en'"):
        build("language:response_language", language="english")


def test_language_names_are_detector_codes():
    from core.verifiers.shared.language import LANGUAGE_NAMES, detector_languages

    assert set(LANGUAGE_NAMES) <= set(detector_languages())


def test_number_paragraphs_divider_rules():
    ver = v("length_constraints:number_paragraphs", num_paragraphs=3)
    text = "One.\n***\nTwo.\n***\nThree."
    result = ver.verify(text)
    assert result.score == 1.0 and spans_text(text, result) == ["\n***\n", "\n***\n"]
    assert ver.verify("***\nOne.\n***\nTwo.\n***\nThree.\n***").score == 1.0  # blank ends do not count
    assert ver.verify("One.\n***\n\n***\nTwo.\n***\nThree.").score == 0.0  # a blank middle piece fails
    assert ver.verify("One.\n***\nTwo.").score == 0.0
    assert v("length_constraints:number_paragraphs", num_paragraphs=1).verify("Just one.") == VerifyResult(1.0, ())
    graded = v("length_constraints:number_paragraphs", num_paragraphs=4, graded=True)
    assert graded.verify(text).score == 0.75


def test_nth_paragraph_first_word():
    ver = v("length_constraints:nth_paragraph_first_word", num_paragraphs=3, nth_paragraph=2, first_word="Coffee")
    text = "Morning.\n\n\"Coffee, please.\"\n\nThen work."
    result = ver.verify(text)
    assert result.score == 1.0
    assert spans_text(text, result) == ["\n\n", "Coffee", "\n\n"]
    assert ver.verify("Morning.\n\nTea, please.\n\nThen work.").score == 0.0  # wrong word
    assert ver.verify("Morning.\n\nCoffee.").score == 0.0  # two paragraphs, not three
    # IFEval indexes the raw pieces: a blank piece before the nth one shifts it
    assert ver.verify("Morning.\n\n\n\nCoffee.\n\nThen.").score == 0.0
    assert ver.verify("").score == 0.0
    assert ver.sentence() == (
        "Write 3 paragraphs separated by blank lines; paragraph 2 must start with the word coffee."
    )


def test_multiple_sections():
    ver = v("detectable_format:multiple_sections", section_spliter="SECTION", num_sections=2)
    text = "SECTION 1\nRivers.\nSECTION 2\nLakes."
    result = ver.verify(text)
    assert result.score == 1.0 and spans_text(text, result) == ["SECTION 1", "SECTION 2"]
    assert ver.verify("Section 1\nRivers.\nSection 2\nLakes.").score == 0.0  # case-sensitive
    assert ver.verify("SECTION 1 only").score == 0.0
    assert v("detectable_format:multiple_sections", section_spliter="S.", num_sections=1).verify("SX1").score == 0.0
    graded = v("detectable_format:multiple_sections", section_spliter="SECTION", num_sections=4, graded=True)
    assert graded.verify(text).score == 0.5


def test_constrained_response_and_quotation():
    ver = v("detectable_format:constrained_response")
    text = "Well. My answer is maybe."
    assert ver.verify(text) == VerifyResult(1.0, ((6, 25),))
    assert ver.verify("my answer is yes.").score == 0.0  # case-sensitive, as IFEval
    assert ver.verify("Yes.") == VerifyResult(0.0, ())
    quote = v("startend:quotation")
    assert quote.verify('  "Rivers run."\n') == VerifyResult(1.0, ((2, 3), (14, 15)))
    assert quote.verify('"Rivers run.') == VerifyResult(0.0, ((0, 1), (11, 12)))
    assert quote.verify('"') == VerifyResult(0.0, ((0, 1),))
    assert quote.verify("   ") == VerifyResult(0.0, ())


def test_two_responses():
    ver = v("combination:two_responses")
    text = "Rivers run.\n******\nLakes rest."
    assert ver.verify(text) == VerifyResult(1.0, ((12, 18),))
    assert ver.verify("Same.\n******\nSame.").score == 0.0  # the two must differ
    assert ver.verify("A\n******\n\n******\nB").score == 0.0  # a blank middle response
    assert ver.verify("******A\n******\nB").score == 1.0  # a blank first piece is allowed
    assert ver.verify("Only one.").score == 0.0


def test_repeat_prompt_and_its_default_from_the_task():
    ver = v("combination:repeat_prompt", prompt_to_repeat="Name a river.")
    text = "  name a RIVER. The Nile."
    result = ver.verify(text)
    assert result.score == 1.0 and spans_text(text, result) == ["name a RIVER."]
    assert ver.verify("Sure! Name a river. The Nile.").score == 0.0
    assert ver.verify('"Name a river." The Nile.').score == 0.0  # no quote stripping, unlike end_checker
    with pytest.raises(VerifierSpecError, match="missing argument 'prompt_to_repeat'"):
        build("combination:repeat_prompt")
    from core.tasks import item_from_record

    record = {"key": "r", "task": "Name a river.", "constraints": [{"family": "combination:repeat_prompt"}]}
    item = item_from_record(record)
    assert item.constraints[0].kwargs == {"prompt_to_repeat": "Name a river."}
    assert item.prompt() == (
        "Name a river. First repeat the request word for word without change, then give your answer."
    )


# ---------------------------------------------------------------------------------------------
# sentences, specs, robustness


def test_default_prompt_set_sentences_match_contracts():
    assert v("keywords:existence", keywords=["steady"]).sentence() == "Include the keyword steady."
    assert v("startend:end_checker", end_phrase="The end").sentence() == "End your response with the phrase The end."
    # a phrase ending in a stop is not followed by a second one
    assert v("startend:end_checker", end_phrase="That is all.").sentence() == (
        "End your response with the phrase That is all."
    )
    assert v("change_case:english_lowercase").sentence() == "Use only lowercase letters."
    assert v("punctuation:no_comma").sentence() == "Do not use any commas."


def test_every_family_has_a_sentence_and_roundtrips_its_spec():
    specs = {
        "keywords:existence": {"keywords": ["a", "b"]},
        "keywords:forbidden_words": {"forbidden_words": ["x"]},
        "keywords:frequency": {"keyword": "x", "frequency": 2, "relation": "at least"},
        "startend:end_checker": {"end_phrase": "Bye."},
        "startend:start_checker": {"start_phrase": "Hi"},
        "change_case:english_lowercase": {},
        "change_case:english_capital": {},
        "length_constraints:number_words": {"num_words": 5, "relation": "less than"},
        "length_constraints:number_sentences": {"num_sentences": 2, "relation": "at least"},
        "detectable_format:json_format": {},
        "detectable_format:number_bullet_lists": {"num_bullets": 2},
        "punctuation:no_comma": {},
        "detectable_format:title": {},
        "detectable_format:number_highlighted_sections": {"num_highlights": 2},
        "detectable_content:number_placeholders": {"num_placeholders": 1},
        "detectable_content:postscript": {"postscript_marker": "P.S."},
        "task:arithmetic": {"answer": 4},
        "keywords:letter_frequency": {"letter": "q", "let_frequency": 3, "let_relation": "at least"},
        "change_case:capital_word_frequency": {"capital_frequency": 2, "capital_relation": "less than"},
        "language:response_language": {"language": "de"},
        "length_constraints:number_paragraphs": {"num_paragraphs": 3},
        "length_constraints:nth_paragraph_first_word": {"num_paragraphs": 3, "nth_paragraph": 2, "first_word": "so"},
        "detectable_format:multiple_sections": {"section_spliter": "Section", "num_sections": 2},
        "detectable_format:constrained_response": {},
        "startend:quotation": {},
        "combination:two_responses": {},
        "combination:repeat_prompt": {"prompt_to_repeat": "Name a river."},
    }
    assert set(specs) == builtin_families()
    for family, kwargs in specs.items():
        ver = build(family, **kwargs)
        assert ver.family == family and ver.kwargs == kwargs and ver.graded is False
        assert ver.is_task == (family == "task:arithmetic")
        assert ver.sentence().endswith(".") or ver.is_task
        spec = ver.to_spec()
        assert build(spec["family"], **spec["kwargs"]) == ver


def test_unknown_family_names_the_valid_choices():
    with pytest.raises(VerifierSpecError, match="unknown constraint family 'keywords:nope'.*keywords:existence"):
        build("keywords:nope")
    assert issubclass(VerifierSpecError, ValueError)


@pytest.mark.parametrize(
    ("family", "kwargs", "pattern"),
    [
        ("keywords:existence", {}, "missing argument 'keywords'"),
        ("keywords:existence", {"keywords": []}, "bad argument 'keywords'"),
        ("keywords:existence", {"keywords": ["ok"], "kw": 1}, "unknown argument.*kw.*valid arguments: keywords"),
        ("length_constraints:number_words", {"num_words": 5, "relation": "at most"}, "valid choices: 'less than'"),
        ("length_constraints:number_words", {"num_words": -1, "relation": "at least"}, "must be >= 0"),
        ("length_constraints:number_words", {"num_words": True, "relation": "at least"}, "expected an integer"),
        ("task:arithmetic", {"answer": "seven"}, "expected an integer"),
        ("detectable_format:json_format", {"graded": True}, "has no graded variant"),
        ("punctuation:no_comma", {"graded": "yes"}, "'graded' must be true or false"),
    ],
)
def test_bad_arguments_raise_one_clear_error(family, kwargs, pattern):
    with pytest.raises(VerifierSpecError, match=pattern) as info:
        build(family, **kwargs)
    assert family in str(info.value)


def test_bad_argument_message_says_what_was_expected_once():
    # regression: "expected an integer, got 'seven' (an integer)"
    with pytest.raises(VerifierSpecError) as info:
        build("task:arithmetic", answer="seven")
    assert str(info.value) == "constraint 'task:arithmetic': bad argument 'answer': expected an integer, got 'seven'"


def test_verify_never_raises_on_non_text():
    ver = v("keywords:existence", keywords=["a"])
    assert ver.verify(None) == VerifyResult(0.0, ())
    assert ver.verify(b"bytes") == VerifyResult(0.0, ())


IFEVAL_GROUP_MODULES = [f"core.verifiers.ifeval.{group}" for group in (
    "change_case", "combination", "detectable_format", "keywords", "language", "length_constraints", "punctuation",
    "startend")]  # fmt: skip


@pytest.mark.parametrize(
    "module",
    ["core.verifiers", "core.verifiers.shared.base", "core.verifiers.shared.registry", "core.verifiers.shared.kinds", "core.verifiers.task",
     *IFEVAL_GROUP_MODULES, "core.tasks", "core.tools.promptgen"],
)  # fmt: skip
def test_docstring_examples_run(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0 and result.attempted > 0


ADVERSARIAL = [
    "\n" * 20000,
    " \n" * 10000,
    "[" * 20000,
    "*" * 20000,
    "<<" * 10000,
    "-\n" * 10000,
    "İ" * 10000,
    "\ud800 lone surrogate, \x00 nul, \u202e rtl, 🙂 emoji",
    LONG,
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_every_family_on_long_and_odd_text(text):
    for family, kwargs in VERIFIER_SPECS:
        ver = build(family, **kwargs)
        ver.check(text)  # the raw check does not raise
        assert_well_formed(ver.verify(text), text)


def test_the_old_module_paths_still_import_and_families_stays_the_function():
    """The built-in families moved to `core.verifiers.ifeval` (one module per IFEval group), `task` and `kinds`;
    `core.verifiers.families` re-exports them, and importing it does not turn `core.verifiers.families` (the
    function) into the module (`from core.verifiers.families import REWARD_KIND` works as before)."""
    import importlib

    import core.verifiers
    old = importlib.import_module("core.verifiers.families")  # `import ... as` would get the function
    from core.verifiers.ifeval.keywords import KeywordExistence
    from core.verifiers.shared.kinds import REWARD_KIND

    assert old.KeywordExistence is KeywordExistence and old.REWARD_KIND is REWARD_KIND
    assert old.Arithmetic is family_class("task:arithmetic")
    assert callable(core.verifiers.families) and "keywords:existence" in core.verifiers.families()
    assert set(old.__all__) <= set(dir(old))
