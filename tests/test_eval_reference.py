"""IFEval's reference scoring (core/evaluate/reference.py) on hand-written records of each kind of disagreement
between IFEval's own code and the project's verifiers found on IFEval's released GPT-4 and PaLM 2 responses
(docs/IFEVAL.md, "Reference scoring"): records written for this test, each with the reference's verdict and the
project's, which differ."""

from __future__ import annotations

import pytest

from core.evaluate import ifeval, reference
from core.tasks import item_from_record

# (instruction id, kwargs, response, strict verdicts (reference, project), loose verdicts (reference, project))
CASES = [
    # langdetect does not read short or capitalised English as English (the case rules' English check)
    ("change_case:english_lowercase", {}, "quiet harbour lights", (False, True), (False, True)),  # 'fr'
    ("change_case:english_lowercase", {}, "pebbles", (False, True), (False, True)),  # one word: 'ca'
    ("change_case:english_lowercase", {}, '"silver lantern studios"', (False, True), (False, True)),  # 'es'
    ("change_case:english_capital", {}, "SURE", (False, True), (False, True)),  # 'de'
    ("change_case:english_capital", {}, "OKAY", (False, True), (False, True)),  # 'pt'
    ("change_case:english_capital", {}, "NO", (False, True), (False, True)),  # 'vi'
    ("change_case:english_capital", {}, "B", (False, True), (False, True)),  # one letter: 'de'
    ("change_case:english_capital", {}, "1. *MARTHA GREEN*\n2. OSCAR BLAKE\n3. NINA FROST",
     (False, True), (False, True)),  # a list of names in capitals: 'de'
    ("change_case:english_capital", {}, "HANS MEYER\nLUKAS WEBER\nPAUL KLEIN", (False, True), (False, True)),
    ("change_case:english_capital", {}, "DNS STANDS FOR DOMAIN NAME SYSTEM.", (False, True), (False, True)),
    # Marathi in bold that langdetect reads as Nepali (without the '*', a loose variant, as Marathi)
    ("language:response_language", {"language": "mr"}, "**धावत आलो**\n**थकलो खूप**", (False, True), (True, True)),
    # Punkt does not count list numbers ("1.") as sentences: 4 sentences, not 8
    ("length_constraints:number_sentences", {"relation": "less than", "num_sentences": 6},
     "1. plant seeds early.\n2. water them daily.\n3. pick the ripe ones.\n4. share the harvest.",
     (True, False), (True, True)),  # loose: the cut variants have fewer items
    # Punkt makes a sentence of the "**" closing a bold sentence: 3 sentences, not 2
    ("length_constraints:number_sentences", {"relation": "less than", "num_sentences": 3},
     "**Call us today.**\n\n* **We care.**", (False, True), (True, True)),  # loose: without the '*', 2
    # Punkt splits after a one-letter word ("in o."), which the project reads as an initial: 4 sentences, not 2 (the
    # loose variant without '*'; with the '*' both count 4)
    ("length_constraints:number_sentences", {"relation": "less than", "num_sentences": 3},
     "Hello! You are in *o*. The sky in *o* is *o*. Stay warm in *o*.", (False, False), (False, True)),
]


def _item(family, kwargs):
    return item_from_record({"key": 1, "prompt": "p", "instruction_id_list": [family], "kwargs": [kwargs]})


@pytest.mark.parametrize("family, kwargs, response, strict, loose", CASES)
def test_reference_scoring_gives_ifevals_verdict_where_the_project_differs(family, kwargs, response, strict, loose):
    item = _item(family, kwargs)
    ref, proj = ifeval.judge(item, response, "reference"), ifeval.judge(item, response, "project")
    assert (ref.strict[0], proj.strict[0]) == strict
    assert (ref.loose[0], proj.loose[0]) == loose


def test_langdetect_is_seeded_and_no_feature_counts_as_followed():
    texts = ["SURE", "quiet harbour lights", "The river runs past the old mill every morning."]
    assert [reference.langdetect_language(t) for t in texts] == [reference.langdetect_language(t) for t in texts]
    assert reference.langdetect_language("123 !") is None
    item = _item("language:response_language", {"language": "ja"})
    assert ifeval.judge(item, "123 !", "reference").strict == [True]  # the reference's LangDetectException branch
    assert ifeval.judge(item, "123 !", "project").strict == [True]


def test_arguments_are_regular_expressions_in_the_reference():
    item = _item("keywords:existence", {"keywords": ["colou?r"]})
    assert ifeval.judge(item, "A bright color.", "reference").strict == [True]
    assert ifeval.judge(item, "A bright color.", "project").strict == [False]  # matched literally
    broken = _item("keywords:existence", {"keywords": ["C["]})  # not a pattern: the reference raises
    assert ifeval.judge(broken, "I write C[0].", "reference").strict == [False]
    assert ifeval.judge(broken, "I write C[0].", "project").strict == [True]


def test_a_letter_outside_a_z_is_a_random_draw_scored_by_most_draws():
    kw = {"letter": "#", "let_relation": "at least", "let_frequency": 2}
    # letters occurring >= 2 times in "aab bcc dd": a, b, c, d -> 4 of 26 lower-case letters, 8 of 52 draws
    assert reference.letter_draw_share(kw, "aab bcc dd") == pytest.approx(8 / 52)
    item = _item("keywords:letter_frequency", kw)
    verdict = ifeval.judge(item, "aab bcc dd ##", "reference")
    assert verdict.strict == [False] and verdict.drawn == [True]
    assert ifeval.judge(item, "aab bcc dd ##", "project").strict == [True]  # counts '#', as the prompt asks
    less = _item("keywords:letter_frequency", {**kw, "let_relation": "less than"})  # 44 of 52 draws follow
    assert ifeval.judge(less, "aab bcc dd", "reference").strict == [True]
    letter = _item("keywords:letter_frequency", {**kw, "letter": "a"})
    assert ifeval.judge(letter, "aab", "reference").drawn == [False]
    # an argument of 0: lm-eval's task drops it (`if v`) and draws a value; flagged, scored with the value given
    zero = _item("detectable_format:number_highlighted_sections", {"num_highlights": 0})
    assert ifeval.judge(zero, "plain", "reference").drawn == [True]
    assert ifeval.judge(_item("punctuation:no_comma", {}), "plain", "reference").drawn == [False]


def test_the_report_names_its_scoring_and_the_draws(tmp_path, capsys):
    prompts = tmp_path / "p.jsonl"
    responses = tmp_path / "r.jsonl"
    prompts.write_text('{"key": 7, "prompt": "Use # twice.", "instruction_id_list": ["keywords:letter_frequency"],'
                       ' "kwargs": [{"letter": "#", "let_relation": "at least", "let_frequency": 2}]}\n')
    responses.write_text('{"prompt": "Use # twice.", "response": "## aab"}\n')
    assert ifeval.main(["--prompt-set", str(prompts), "--responses", str(responses)]) == 0
    out = capsys.readouterr().out
    assert "scoring: reference" in out and "draws at random (keys 7)" in out
    assert ifeval.main(["--prompt-set", str(prompts), "--responses", str(responses), "--scoring", "project"]) == 0
    out = capsys.readouterr().out
    assert "scoring: project" in out and "at random" not in out
