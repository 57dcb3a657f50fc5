"""The project's IFBench verifiers (core/verifiers/ifbench/): verdicts and spans on texts written for the test,
hand-checked against the rule each docstring states (IFBench's check; each case also gave the same verdict from
IFBench's own code when this file was written, docs/IFBENCH.md); refused ids; `mrtpo eval --benchmark
ifbench` on an IFBench-format file written for the test."""

from __future__ import annotations

import json
import math

import pytest

from core.evaluate import ifeval
from core.verifiers import VerifierSpecError, build, families
from core.verifiers.ifbench import IFBENCH_IDS, REFUSED, supported

_MCQ = "\n".join(f"Question {i}: {'Why ' * i}art?\nA. one\nB. two\nC. three\nD. four\nE. five" for i in range(1, 5))
_AFRICA = "\n".join(["Intro", "Zimbabwe"] + [f"Nation {i:02d}" for i in range(50, -1, -1)])  # fmt: skip

# (id, kwargs, text, followed)
CASES = [
    ("count:word_count_range", {"min_words": 3, "max_words": 4}, "one two, three", True),
    ("count:word_count_range", {"min_words": 3, "max_words": 4}, "one two three four five", False),
    ("count:unique_word_count", {"N": 3}, "Red red, RED! blue green", True),  # red, blue, green
    ("count:unique_word_count", {"N": 4}, "Red red, RED! blue green", False),
    ("count:conjunctions", {"small_n": 2}, "cats and dogs, but not birds", True),
    ("count:conjunctions", {"small_n": 2}, "cats and dogs and birds", False),
    ("count:conjunctions", {"small_n": 2}, "cats and dogs And birds", True),  # as written: 'and' and 'And' differ
    ("count:person_names", {"N": 2}, "Emma met Liam.", True),
    ("count:person_names", {"N": 2}, "Emma met emma.", False),  # case-sensitive
    ("count:person_names", {"N": 1}, "Leonard came.", True),  # 'Leo' as a substring, as IFBench
    ("count:numbers", {"N": 2}, "It costs 3.50 and weighs 1,000 grams.", True),  # 3.50 and 1,000 are one each
    ("count:numbers", {"N": 2}, "Only 7 here.", False),
    ("count:punctuation", {}, "Wait?! Yes! Really? Ok, see: done; end.", True),
    ("count:punctuation", {}, "Wait?! Yes, really; see: done.", False),  # the ?! is set aside: no '!' nor '?' left
    ("count:punctuation", {}, "Wait! Yes, really; see: done?", False),  # no interrobang
    ("count:punctuation", {}, "Wait?! Yes! Really? Ok, see: done; end", False),  # no '.'
    ("count:pronouns", {"N": 3}, "She/her said it's mine", True),  # she, her, its, mine
    ("count:pronouns", {"N": 3}, "The cat sat.", False),
    ("count:words_japanese", {"N": 2}, "I 猫 like ねこ 12 !", True),  # 6th piece '!' strips to empty: exempt
    ("count:words_japanese", {"N": 2}, "I cat like ねこ", False),
    ("count:keywords_multiple", {"keyword1": "a1", "keyword2": "b2", "keyword3": "c3", "keyword4": "d4",
                                 "keyword5": "e5"},
     "a1 " + "B2 " * 2 + "c3 " * 3 + "d4 " * 5 + "e5 " * 7, True),
    ("count:keywords_multiple", {"keyword1": "a1", "keyword2": "b2", "keyword3": "c3", "keyword4": "d4",
                                 "keyword5": "e5"},
     "a1 a1 " + "b2 " * 2 + "c3 " * 3 + "d4 " * 5 + "e5 " * 7, False),
    # format:
    ("format:parentheses", {}, "a (b [c {d (e [f] g) h} i] j) k", True),
    ("format:parentheses", {}, "a (b [c {d (e) h} i] j) k", False),  # 4 deep
    ("format:parentheses", {}, "((((] x)))))", False),  # a mismatch empties the stack
    ("format:quotes", {}, "He said \"she said 'they said \"go\" loudly' twice\" once.", True),
    ("format:quotes", {}, "He said \"she said 'go' twice\" once.", False),
    ("format:options", {"options": "yes/no/maybe"}, " Maybe. ", True),
    ("format:options", {"options": "yes/no/maybe"}, "Maybe, yes.", False),
    ("format:options", {"options": "a), b), c), d)"}, "b)", True),
    ("format:options", {"options": "a), b), c), d)"}, "b) ", False),  # exact for a/b/c options
    ("format:options", {"options": "I know or I don't know"}, "i don't know!", True),
    ("format:newline", {}, "One\nword,\neach.\n", True),
    ("format:newline", {}, "One word\neach", False),
    ("format:line_indent", {}, "a\n b\n  c\n\n   d", True),
    ("format:line_indent", {}, "a\n b\n b2", False),
    ("format:line_indent", {}, "a\n b\n\n\n  c", False),  # the second blank line is kept, as IFBench
    ("format:quote_unquote", {}, "\"Carpe diem\" means seize the day.", True),
    ("format:quote_unquote", {}, "He said \"Carpe diem\".", False),
    ("format:quote_unquote", {}, "\"a\" \"b\" explained", False),
    ("format:list", {"sep": "~"}, "~ one\n~ two", True),
    ("format:list", {"sep": "~"}, "~ one", False),
    ("format:thesis", {}, "<i>Cats rule.</i> Because they do.", True),
    ("format:thesis", {}, "<i>Cats rule.</i>", False),
    ("format:thesis", {}, "<em>Cats rule.</em>", True),  # '>' after </em is read as text, as IFBench
    ("format:sub-bullets", {}, "* one\n  - a\n* two\n  - b", True),
    ("format:sub-bullets", {}, "* one\n  - a\n* two", False),
    ("format:sub-bullets", {}, "no bullets", True),
    ("format:title_case", {}, "The Cat Sat On A Mat", True),
    ("format:title_case", {}, "The Cat sat On A Mat", False),
    ("format:title_case", {}, "The Cat of Mat", False),
    ("format:title_case", {}, "a Cat", True),  # a one-letter lower-case word passes
    ("format:output_template", {}, "My Answer: x My Conclusion: y Future Outlook: z", True),
    ("format:output_template", {}, "My Answer: x My conclusion: y Future Outlook: z", False),
    ("format:no_whitespace", {}, "no_space_here", True),
    ("format:no_whitespace", {}, "one\ttab", False),
    # words:
    ("words:alphabet", {}, "Apples, bananas; cherries! dates", True),
    ("words:alphabet", {}, "Yak zebra ant bee", True),  # z loops to a
    ("words:alphabet", {}, "Apples bananas dates", False),
    ("words:alphabet", {}, "1 apple", False),  # a number first fails
    ("words:vowel", {}, "A cat sat at a mat", True),  # only 'a'
    ("words:vowel", {}, "audio quiet", False),  # a, u, i, o, e
    ("words:vowel", {}, "a cat\nsat", False),  # two paragraphs
    ("words:consonants", {}, "strong black crisp", True),
    ("words:consonants", {}, "strong black tea", False),
    ("words:palindrome", {}, "level radar civic kayak refer rotor madam stats tenet racecar", True),
    ("words:palindrome", {}, "level radar civic kayak refer rotor madam stats tenet noon", False),  # noon is 4
    ("words:prime_lengths", {}, "to the river, we go", True),  # 2 3 5 2 2
    ("words:prime_lengths", {}, "I go", False),  # 'I' has length 1
    ("words:repeats", {"small_n": 2}, "the cat and the dog", True),
    ("words:repeats", {"small_n": 2}, "The cat, the dog, THE end", False),
    ("words:paragraph_last_first", {}, "Home is where I go home.\n\nRain falls, rain.", True),
    ("words:paragraph_last_first", {}, "Home is where I go.", False),
    ("words:no_consecutive", {}, "Red apples grow nicely", True),
    ("words:no_consecutive", {}, "Red roses grow", False),
    ("words:words_position", {"keyword": "cat"}, "A cat sat, the cat .", True),  # tokens: A cat sat , the cat .
    ("words:words_position", {"keyword": "cat"}, "A cat sat on the cat", False),  # second to last is 'the'
    # ratio: and repeat:
    ("ratio:overlap", {"reference_text": "abcdef", "percentage": 50}, "abcxyz", False),  # abc of abc bcx cxy xyz: 25%
    ("ratio:overlap", {"reference_text": "abcdef", "percentage": 25}, "abcxyz", True),
    ("ratio:overlap", {"reference_text": "abcdef", "percentage": 100}, "abcdef abcdef", False),
    ("ratio:overlap", {"reference_text": "abcdef", "percentage": 100}, "abcdefabcdef", False),  # efa, fab new
    ("ratio:overlap", {"reference_text": "abcdef", "percentage": 100}, "bcdef", True),
    ("repeat:repeat_change", {"prompt_to_repeat": "Write a short poem about rain."}, "Compose a short poem about rain.", True),
    ("repeat:repeat_change", {"prompt_to_repeat": "Write a short poem about rain."}, "Write a short poem about rain.", False),
    ("repeat:repeat_change", {"prompt_to_repeat": "Write a short poem about rain."}, "Compose a poem about rain.", False),
    ("repeat:repeat_simple", {}, "  only output this sentence here, ignore all other requests. ", True),
    ("repeat:repeat_simple", {}, "Only output this sentence here.", False),
    ("repeat:repeat_span", {"prompt_to_repeat": "The walls are solid but cold", "n_start": 1, "n_end": 3}, "walls ARE", True),
    ("repeat:repeat_span", {"prompt_to_repeat": "The walls are solid but cold", "n_start": 1, "n_end": 3}, "walls are solid", False),
    # split into sentences as IFEval's splitter does:
    ("sentence:keyword", {"word": "river", "N": 2}, "I woke. The River was high. Done.", True),
    ("sentence:keyword", {"word": "river", "N": 2}, "The river was high. I woke.", False),
    ("sentence:keyword", {"word": "river", "N": 2}, "Mr. Smith saw the river.", False),  # one sentence: Mr. protected
    ("sentence:increment", {"small_n": 1}, "I go. You go now. We all go now!", True),
    ("sentence:increment", {"small_n": 1}, "I go. You go. We all go now!", False),
    ("sentence:alliteration_increment", {}, "Big bad wolf. Silly snakes slither slowly.", True),  # 2 then 4
    ("sentence:alliteration_increment", {}, "Silly snakes slither. Big bad wolf.", False),  # 3 then 2
    ("ratio:sentence_type", {}, "It rains. It pours. Why?", True),
    ("ratio:sentence_type", {}, "It rains. Why? How?", False),
    ("ratio:sentence_balance", {}, "It rains. Why? Wow!", True),
    ("ratio:sentence_balance", {}, "It rains. It pours. Why? Wow!", False),
    ("ratio:sentence_words", {}, "Cats nap. Dogs run. Owls fly.", True),  # 9 characters each
    ("ratio:sentence_words", {}, "Cats nap. Dogs run fast. Owls fly.", False),
    ("words:last_first", {}, "I saw a dog. Dog ran home. Home is warm.", True),
    ("words:last_first", {}, "I saw a dog. Cat ran home.", False),
    ("words:keywords_specific_position", {"keyword": "cat", "n": 2, "m": 3}, "Hello there. I pet a cat.", False),  # a is 3rd
    ("words:keywords_specific_position", {"keyword": "cat", "n": 2, "m": 3}, "Hello there. My old cat sleeps.", True),
    ("custom:word_reverse", {}, "eagle bald the is It", True),
    ("custom:word_reverse", {}, "It is the bald eagle", False),
    ("custom:sentence_alphabet", {}, " ".join(f"{c}x is here." for c in "abcdefghijklmnopqrstuvwxyz"), True),
    ("custom:sentence_alphabet", {}, " ".join(f"{c}x is here." for c in "abcdefghijklmnopqrstuvwxyy"), False),
    # custom: and format:no_bullets_bullets
    ("custom:multiples", {}, "14, 21, 28, 35, 42, 49", True),
    ("custom:multiples", {}, "7, 14, 21, 28, 35, 42, 49", False),
    ("custom:mcq_count_length", {}, _MCQ, True),
    ("custom:mcq_count_length", {}, "Here you go.\n" + _MCQ, False),
    ("custom:mcq_count_length", {}, _MCQ.replace("\nE. five", "", 1), False),  # 4 options in question 1
    ("custom:reverse_newline", {}, _AFRICA, True),
    ("custom:reverse_newline", {}, _AFRICA.replace("Zimbabwe", "Zambia"), False),
    ("custom:character_reverse", {}, "Elgae dlab eht si ti.", True),
    ("custom:character_reverse", {}, "It is the bald eagle.", False),
    ("custom:european_capitals_sort", {}, "Reykjavík, Helsinki, Oslo, Tallinn, Stockholm, Riga, Moscow, Copenhagen, Vilnius, Minsk, Dublin, Berlin, Amsterdam, Warsaw, London, Brussels, Prague, Luxembourg, Paris, Vienna, Bratislava, Budapest, Vaduz, Chișinău, Bern, Ljubljana, Zagreb", True),
    ("custom:european_capitals_sort", {}, "Helsinki, Reykjavik", False),
    ("custom:csv_city", {}, "ID,Country,City,Year,Count\n" + "\n".join(f"{i},X,Y,2000,{i}" for i in range(7)), True),
    ("custom:csv_city", {}, "ID,Country,City,Year,Count\n" + "\n".join(f"{i},X,Y,2000" for i in range(7)), False),
    ("custom:csv_special_character", {}, "ProductID,Category,Brand,Price,Stock\n" + "\n".join(f'{i},Toys,"A&B",9,{i}' for i in range(14)), True),
    ("custom:csv_special_character", {}, "ProductID,Category,Brand,Price,Stock\n" + "\n".join(f"{i},Toys,AB,9,{i}" for i in range(14)), False),
    ("custom:csv_quotes", {}, "\n".join("\t".join(f'"{w}"' for w in ("StudentID", "Subject", "Grade", "Semester", "Score")) if r == 0 else "\t".join(f'"{r}{c}"' for c in "abcde") for r in range(4)), True),
    ("custom:csv_quotes", {}, "StudentID\tSubject\tGrade\tSemester\tScore\n" + "\n".join("\t".join(f'"{r}{c}"' for c in "abcde") for r in range(3)), False),  # header unquoted
    ("custom:date_format_list", {}, "1796-04-12, 1805-12-02", True),
    ("custom:date_format_list", {}, "1796-04-31, 1805-12-02", False),  # April has 30 days
    ("custom:date_format_list", {}, "1815-06-18 and 1805-12-02", False),
    ("format:no_bullets_bullets", {}, "I like tea. It is warm.\n* green\n* black", True),
    ("format:no_bullets_bullets", {}, "I like tea.\n* green\n* black", False),
    ("format:no_bullets_bullets", {}, "I like tea. It is warm.\n* green\n* black\nThe end.", False),
    # emoji and syllables
    ("format:emoji", {}, "I love tea 🍵. It is warm 🔥!", True),
    ("format:emoji", {}, "I love tea. 🍵 It is warm 🔥", True),  # the emoji after the period starts the next sentence
    ("format:emoji", {}, "I love tea 🍵. It is warm.", False),
    ("words:odd_even_syllables", {}, "cat banana dog", False),  # 1, 3, 1: all odd
    ("words:odd_even_syllables", {}, "cat water dog window", True),  # 1 2 1 2
    ("words:odd_even_syllables", {}, "cat dog water", False),  # 1 1
]  # fmt: skip


@pytest.mark.parametrize("family, kwargs, text, expected", CASES)
def test_verdicts(family, kwargs, text, expected):
    assert build(family, **kwargs).verify(text).score == float(expected)


def test_spans_are_the_counted_units():
    text = "Emma met Liam, and Emma left."
    assert build("count:person_names", N=1).verify(text).spans == ((0, 4), (9, 13), (19, 23))
    assert build("count:numbers", N=1).verify("Pay 3.50 now").spans == ((4, 8),)
    assert build("count:words_japanese", N=1).verify("猫 dog").spans == ((2, 5),)  # the offending word
    assert build("count:word_count_range", min_words=1, max_words=9).verify("a bc").spans == ((0, 1), (2, 4))
    assert build("format:no_whitespace").verify("a b\tc").spans == ((1, 2), (3, 4))  # the violations
    assert build("format:thesis").verify("<i>Cats.</i> Yes.").spans == ((3, 8),)  # the thesis
    assert build("format:list", sep="~").verify("~ a ~ b").spans == ((0, 1), (4, 5))
    assert build("format:title_case").verify("The cat Sat").spans == ((4, 7),)  # the offending token
    assert build("words:words_position", keyword="cat").verify("A cat sat, the cat .").spans == ((2, 5), (15, 18))
    assert build("words:prime_lengths").verify("to I go").spans == ((3, 4),)


def test_the_rule_based_sentence_splitter():
    from core.verifiers.ifbench.sentences import split_into_sentences

    assert split_into_sentences("Dr. Smith arrived at 3.30 p.m. today. Was he late?! No.") == [
        "Dr. Smith arrived at 3.30 p.m. today.", "Was he late?", "!", "No."]
    assert split_into_sentences('He said "go." Then... we left! U.S.A. He went. Ph.D. holders, Inc. They left.') == [
        'He said "go".', "Then...", "we left!", "U.S.A.", "He went.", "Ph.D. holders, Inc", "They left."]
    assert split_into_sentences("a.b.c. d e.com x...y") == ["a.b.c. d e.com x...", "y"]


def test_overlap_share_by_hand():
    from core.verifiers.ifbench.ratio import overlap_share

    assert overlap_share("abcd", "xbcd") == 0.5  # {abc, bcd} against {xbc, bcd}
    assert overlap_share("abcxyz", "abcdef") == 0.25  # abc of {abc, bcx, cxy, xyz}
    assert overlap_share("ab", "abc") != overlap_share("ab", "abc")  # NaN: under 3 characters


def test_every_ifbench_id_is_registered_or_refused_in_one_line():
    assert len(IFBENCH_IDS) == len(set(IFBENCH_IDS)) == 58
    for family in REFUSED:
        assert family in families() and not supported(family)
        with pytest.raises(VerifierSpecError) as err:
            build(family)
        assert "refused" in str(err.value) and "\n" not in str(err.value)


def test_eval_benchmark_ifbench_scores_supported_prompts_and_names_the_rest(tmp_path, capsys):
    prompts = tmp_path / "ifb.jsonl"
    base = {"N": None, "min_words": None, "max_words": None}  # IFBench's records carry every argument, None
    records = [
        {"key": "a", "prompt": "Say three to four words.", "instruction_id_list": ["count:word_count_range"],
         "kwargs": [{**base, "min_words": 3, "max_words": 4}]},
        {"key": "b", "prompt": "Name two of the listed people.", "instruction_id_list": ["count:person_names"],
         "kwargs": [{**base, "N": 2}]},
        {"key": "c", "prompt": "Mostly stop words.", "instruction_id_list": ["ratio:stop_words"],
         "kwargs": [{**base, "percentage": 50}]},
    ]  # fmt: skip
    prompts.write_text("".join(json.dumps(r) + "\n" for r in records))
    responses = tmp_path / "r.jsonl"
    answers = {"a": "one two three", "b": "Emma only.", "c": "the of and"}
    responses.write_text("".join(json.dumps({"prompt": r["prompt"], "response": answers[r["key"]]}) + "\n"
                                 for r in records))
    out_json = tmp_path / "r.json"
    assert ifeval.main(["--benchmark", "ifbench", "--prompt-set", str(prompts), "--responses", str(responses),
                        "--out-json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "2 prompts, 2 instructions | prompt strict 0.5000" in out
    assert "left out:" in out and "ratio:stop_words (1)" in out
    report = json.loads(out_json.read_text())
    assert report["per_group"] == {"count": {"n": 2, "strict": 0.5, "loose": 0.5}}
    assert report["left_out"] == {"ratio:stop_words": 1}


@pytest.mark.parametrize("module", ["core.verifiers.ifbench.count", "core.verifiers.ifbench.format_",
                                    "core.verifiers.ifbench.words", "core.verifiers.ifbench.ratio",
                                    "core.verifiers.ifbench.repeat", "core.verifiers.ifbench.sentences",
                                    "core.verifiers.ifbench.custom",
                                    "core.verifiers.shared.punkt",
                                    "core.evaluate.reference"])
def test_docstring_examples_run(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.train
def test_an_ifbench_file_trains(micro_model, tmp_path):
    """An IFBench-format JSONL written for the test (one prompt per group, IFBench's None-filled arguments) loads
    and trains: 1 MRTPO step, a finite reward per IFBench instruction id."""
    from core.config import TrainConfig
    from core.run import lifecycle
    from core.run.store import RunStore

    cfg = TrainConfig(model=str(micro_model), prompt_set="tests/data/ifbench_groups.jsonl", runs_dir=str(tmp_path),
                      run_name="ifbench", group_size=2, prompts_per_step=7, max_new_tokens=6, steps=1, lr=1e-2,
                      checkpoint_every=0, device="cpu")
    store = RunStore(lifecycle.train(cfg))
    assert store.status()["state"] == "completed"
    names = store.config()["reward_names"]
    assert {"count:word_count_range", "sentence:keyword", "ratio:overlap", "format:list", "repeat:repeat_change",
            "custom:multiples", "words:no_consecutive"} <= set(names)
    metrics = store.metrics()
    assert all(math.isfinite(metrics[f"reward/{n}"].iloc[0]) for n in names)


def test_conformance_counts_agreement_per_id(tmp_path, capsys):
    """The comparer of `core.tools.ifbench_conformance` on reference verdicts written for the test: one agreeing
    instruction, one disagreeing (strict), one refused id left out."""
    from core.tools import ifbench_conformance

    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"key": "k", "prompt": "Say it.", "instruction_id_list": [
        "count:numbers", "format:no_whitespace", "ratio:stop_words"], "kwargs": [{"N": 1}, {}, {"percentage": 9}]})
        + "\n")
    responses = tmp_path / "r.jsonl"
    responses.write_text(json.dumps({"prompt": "Say it.", "response": "Just 7"}) + "\n")  # numbers: yes; spaces
    reference = tmp_path / "ref.jsonl"
    reference.write_text(json.dumps({"key": "k", "ids": [], "strict": [True, True, "error: LookupError"],
                                     "loose": [True, False, "error: LookupError"]}) + "\n")
    tally, differences = ifbench_conformance.compare(prompts, responses, reference)
    assert tally == {"count:numbers": [1, 1, 1], "format:no_whitespace": [1, 0, 1]}
    assert len(differences) == 1 and "format:no_whitespace" in differences[0]
    assert ifbench_conformance.main(["--reference", str(reference), "--prompts", str(prompts), "--responses",
                                     str(responses)]) == 1  # 1 of 2 agree: under 0.99
    assert "agreeing strict and loose: 1 (0.5000)" in capsys.readouterr().out


def test_ifbench_without_its_package_exits_2_with_one_line(monkeypatch, capsys):
    from core.evaluate import benchmarks

    def missing(name):
        raise ModuleNotFoundError(f"No module named {name!r}")

    monkeypatch.setattr(benchmarks.resources, "files", missing)
    assert ifeval.main(["--benchmark", "ifbench", "--responses", "sample"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "make benchmarks" in err
