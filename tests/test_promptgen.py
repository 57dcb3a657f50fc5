"""The default prompt set generator and the shipped prompt files."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from core.tasks import item_from_record, load_prompt_set, reward_names
from core.tools import promptgen
from core.tools.promptgen import END_PHRASES, HELDOUT_KEYWORDS, HELDOUT_TOPICS, KEYWORDS, TOPICS, generate_prompts
from core.verifiers import families
from core.verifiers.shared.kinds import OTHER_KIND, REWARD_KIND, REWARD_KINDS, reward_kind

PROMPTS = Path(__file__).resolve().parent.parent / "sample_data" / "prompts"
DEFAULT_FAMILIES = {
    "keywords:existence",
    "startend:end_checker",
    "change_case:english_lowercase",
    "punctuation:no_comma",
    "task:arithmetic",
}


def test_deterministic_and_seed_dependent():
    assert generate_prompts(50, seed=3) == generate_prompts(50, seed=3)
    assert generate_prompts(50, seed=3) != generate_prompts(50, seed=4)
    assert generate_prompts(50, seed=3, split="heldout") != generate_prompts(50, seed=3)


@pytest.mark.parametrize("split", ["train", "heldout"])
def test_prompt_distribution(split):
    records = generate_prompts(200, seed=0, split=split)
    topics, keywords = (TOPICS, KEYWORDS) if split == "train" else (HELDOUT_TOPICS, HELDOUT_KEYWORDS)
    assert len({r["key"] for r in records}) == 200
    arithmetic = [r for r in records if r["constraints"][0]["family"] == "task:arithmetic"]
    assert len(arithmetic) == 40  # round(200 * 0.2)
    for r in records:
        item = item_from_record(r)
        families = item.families()
        assert set(families) <= DEFAULT_FAMILIES and len(set(families)) == len(families)
        if r in arithmetic:
            a, b = map(int, re.fullmatch(r"What is (\d) plus (\d)\?", r["task"]).groups())
            assert item.constraints[0].kwargs == {"answer": a + b}
            assert 1 <= len(families) - 1 <= 3
        else:
            topic = re.fullmatch(r"Write a short note about (.+)\.", r["task"]).group(1)
            assert topic in topics
            assert 2 <= len(families) <= 4
        for c in item.constraints:
            if c.family == "keywords:existence":
                assert c.kwargs["keywords"][0] in keywords
                assert c.kwargs["keywords"][0] not in r["task"]
            if c.family == "startend:end_checker":
                assert c.kwargs["end_phrase"] in END_PHRASES


def test_heldout_uses_other_topics_and_keywords():
    assert not set(TOPICS) & set(HELDOUT_TOPICS)
    assert not set(KEYWORDS) & set(HELDOUT_KEYWORDS)
    assert 10 <= len(KEYWORDS) <= 12
    assert all(1 < len(p.split()) <= 4 for p in END_PHRASES)


def test_constraint_count_options_for_the_bootstrap_corpus():
    records = generate_prompts(300, seed=1, arithmetic_share=0.0, writing_constraints=(0, 3))
    counts = Counter(len(r["constraints"]) for r in records)
    assert set(counts) == {0, 1, 2, 3}
    with pytest.raises(ValueError, match="writing_constraints"):
        generate_prompts(3, writing_constraints=(3, 5))
    with pytest.raises(ValueError, match="split"):
        generate_prompts(3, split="test")


def test_shipped_files_are_the_generator_output(tmp_path):
    promptgen.main(["--out", str(tmp_path)])
    for name in ("default.jsonl", "heldout.jsonl", "multi.jsonl", "multi-heldout.jsonl", "multi-heldout-128.jsonl"):
        assert (tmp_path / name).read_text() == (PROMPTS / name).read_text(), f"regenerate {name}"
    default = load_prompt_set(PROMPTS / "default.jsonl")
    heldout = load_prompt_set(PROMPTS / "heldout.jsonl")
    assert len(default) == 200 and len(heldout) == 60
    assert set(reward_names(default)) == DEFAULT_FAMILIES == set(reward_names(heldout))
    first = json.loads((PROMPTS / "default.jsonl").read_text().splitlines()[0])
    assert set(first) == {"key", "task", "constraints"}


# ---------------------------------------------------------------------------------------------
# the multi setting


def _kind(family):
    return next(kind for kind, fams in promptgen.KINDS.items() if family in fams)


def test_every_built_in_family_has_one_reward_kind():
    assert set(REWARD_KIND) == set(families())  # a new built-in family must be given a kind
    assert set(REWARD_KIND.values()) == set(REWARD_KINDS)
    assert reward_kind("keywords:existence") == "content"  # the decision documented in kinds.py
    assert reward_kind("some:custom_family") == OTHER_KIND


@pytest.mark.parametrize("name", ["multi.jsonl", "multi-heldout.jsonl", "default.jsonl", "heldout.jsonl"])
def test_shipped_prompt_sets_use_only_families_with_a_kind(name):
    names = reward_names(load_prompt_set(PROMPTS / name))
    assert all(reward_kind(f) in REWARD_KINDS for f in names)
    if name.startswith("multi"):  # the four kinds at once, plus content (the keyword)
        assert {reward_kind(f) for f in names} == set(REWARD_KINDS)
    # promptgen's kinds are the same table, not a second one
    assert all(_kind(f) == reward_kind(f) for f in names if f in promptgen.MULTI_FAMILIES)


@pytest.mark.parametrize("split", ["train", "heldout"])
def test_multi_prompts_carry_four_to_six_constraints_of_several_kinds(split):
    records = generate_prompts(300, seed=0, split=split, setting="multi")
    assert records == generate_prompts(300, seed=0, split=split, setting="multi")
    assert records != generate_prompts(300, seed=0, split=split)  # not the tiny set
    topics = TOPICS if split == "train" else HELDOUT_TOPICS
    conflicts = writing = 0
    for r in records:
        item = item_from_record(r)
        families = item.families()
        assert 4 <= len(families) <= 6 and len(set(families)) == len(families)
        kinds = {_kind(f) for f in families}
        assert {"format", "safety", "style"} <= kinds  # every prompt: format, safety and style at once
        arithmetic = families[0] == "task:arithmetic"
        assert arithmetic == ("correctness" in kinds)
        forbidden = item.verifier_for("keywords:forbidden_words").kwargs["forbidden_words"]
        if arithmetic:
            assert forbidden == ["sum"]  # what an answer to "What is a plus b?" invites
        else:
            writing += 1
            topic = re.fullmatch(r"Write a short note about (.+)\.", r["task"]).group(1)
            assert topic in topics and forbidden == [promptgen.INVITED_WORDS[topic]]
            conflicts += set(promptgen.CONFLICT) <= set(families)
        limit = item.verifier_for("length_constraints:number_words")
        if limit is not None:
            assert limit.kwargs["relation"] == "less than" and limit.kwargs["num_words"] in promptgen.WORD_LIMITS
        start = item.verifier_for("startend:start_checker")
        assert start is None or start.kwargs["start_phrase"] in promptgen.START_PHRASES
    assert 0.2 <= conflicts / writing <= 0.45  # the word limit against keyword + end phrase: about 30%
    assert {_kind(f) for r in records for f in item_from_record(r).families()} == set(promptgen.KINDS)


def test_invited_words_cover_every_topic_and_are_no_keyword():
    assert set(promptgen.INVITED_WORDS) == set(TOPICS) | set(HELDOUT_TOPICS)
    words = list(promptgen.INVITED_WORDS.values()) + [promptgen.ARITHMETIC_INVITED]
    assert len(set(words)) == len(words)
    assert not any(k in w or w in k for k in KEYWORDS + HELDOUT_KEYWORDS for w in words)


def test_shipped_multi_files():
    train = load_prompt_set(PROMPTS / "multi.jsonl")
    heldout = load_prompt_set(PROMPTS / "multi-heldout.jsonl")
    large = load_prompt_set(PROMPTS / "multi-heldout-128.jsonl")  # study v3's 128 held-out prompts
    assert len(train) == 200 and len(heldout) == 60 and len(large) == 128
    expected = set(promptgen.MULTI_FAMILIES) | {"task:arithmetic"}
    assert set(reward_names(train)) == expected == set(reward_names(heldout)) == set(reward_names(large))
    assert not {item.task for item in large if "about" in item.task} & {item.task for item in train}


def test_unknown_setting_names_the_choices():
    with pytest.raises(ValueError, match="valid choices: tiny, multi"):
        generate_prompts(3, setting="hard")
