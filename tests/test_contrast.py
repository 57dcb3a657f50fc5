"""core.contrast: each way a reward declares the prompt without what it checks (x^-k), on hand-written rows, and the
errors that keep replay from being silently uniform."""

from __future__ import annotations

import pytest

from core.contrast import Contrast, ContrastError, contrastive_prompt, located_text, parse, prompt, text

CHAT = [{"role": "system", "content": "Think inside <think></think> tags."},
        {"role": "user", "content": "What is 3 plus 4? Put the answer in \\boxed{}. Use only lowercase letters."}]


def user(x):
    return x if isinstance(x, str) else x[-1]["content"]


@pytest.mark.parametrize(("spec", "expected"), [
    ("column:hint", "What is 3 plus 4? Use only lowercase letters."),
    ("match:lowercase", "What is 3 plus 4? Put the answer in \\boxed{}."),
    ("match:\\\\boxed", "What is 3 plus 4? Use only lowercase letters."),
    ("last_sentence", "What is 3 plus 4? Put the answer in \\boxed{}."),
])
def test_text_contrasts_remove_one_sentence_of_the_user_turn_in_either_prompt_format(spec, expected):
    row = {"prompt": CHAT, "hint": "Put the answer in \\boxed{}."}
    out = contrastive_prompt(parse(spec), row)
    assert user(out) == expected and out[0] == CHAT[0]  # the system message kept, the format kept
    plain = contrastive_prompt(parse(spec), {**row, "prompt": user(CHAT)})
    assert plain == expected


def test_system_removes_the_system_message_and_finds_nothing_without_one():
    assert contrastive_prompt(parse("system"), {"prompt": CHAT}) == CHAT[1:]
    assert contrastive_prompt(parse("system"), {"prompt": CHAT[1:]}) is None
    assert contrastive_prompt(parse("system"), {"prompt": "a plain prompt"}) is None


def test_question_keeps_only_the_other_rewards_instructions_in_prompt_order():
    row = {"prompt": CHAT, "hint": "Put the answer in \\boxed{}."}
    others = [parse("match:lowercase"), parse("column:hint"), parse("system"), Contrast("verifier")]
    out = contrastive_prompt(parse("question"), row, others)
    assert user(out) == "Put the answer in \\boxed{}. Use only lowercase letters."
    assert user(contrastive_prompt(parse("question"), row)) == ""  # no other instruction: the question alone goes


def test_functions_give_the_text_or_the_whole_contrastive_prompt():
    row = {"prompt": "Say hi. Be brief.", "n": 1}
    assert contrastive_prompt(text(lambda r: "Be brief."), row) == "Say hi."
    assert contrastive_prompt(prompt(lambda r: "Say hi."), row) == "Say hi."
    assert contrastive_prompt(text(lambda r: None), row) is None  # nothing in this row: uniform there


def test_a_contrast_that_finds_nothing_in_a_row_gives_none():
    assert contrastive_prompt(parse("column:hint"), {"prompt": "Say hi.", "hint": ""}) is None
    assert contrastive_prompt(parse("match:lowercase"), {"prompt": "Say hi. Be brief."}) is None
    assert contrastive_prompt(parse("last_sentence"), {"prompt": "Say hi."}) is None  # the question alone


@pytest.mark.parametrize(("contrast", "row", "message"), [
    (parse("column:hint"), {"prompt": "Say hi.", "hint": "Be brief."}, "does not contain"),
    (parse("column:hint"), {"prompt": "Say hi."}, "no column 'hint'"),
    (text(lambda r: 3), {"prompt": "Say hi."}, "not the instruction's text"),
    (prompt(lambda r: r["prompt"]), {"prompt": "Say hi."}, "equal to the prompt"),
])
def test_a_declared_text_missing_from_the_prompt_or_no_difference_is_an_error(contrast, row, message):
    with pytest.raises(ContrastError, match=message):
        contrastive_prompt(contrast, row)


@pytest.mark.parametrize(("spec", "message"), [
    ("colum:hint", "unknown contrast"), ("match:(", "not a regular expression"), ("column:", "unknown contrast"),
    (lambda row: "x", "ambiguous"), (3, "a string"),
])
def test_bad_specs_are_refused_with_the_valid_forms(spec, message):
    with pytest.raises(ContrastError, match=message):
        parse(spec)


def test_located_text_names_the_part_a_text_contrast_points_at():
    assert located_text(parse("match:boxed"), {}, user(CHAT)) == "Put the answer in \\boxed{}."
    assert parse("uniform").replays is False and parse("verifier").replays


def test_the_built_in_trainers_declared_contrasts_on_a_prompt_set_item():
    """TrainConfig.reward_contrasts: a declared contrast replaces the verifier's rule for that reward; `question`
    keeps the other constraints' sentences; `uniform` has none; the others keep their verifier's."""
    from core.contrast import check_declared, declared_contrasts, item_contrastive
    from core.tasks import PromptItem
    from core.verifiers import build

    item = PromptItem("p", "What is 3 plus 4?", [build("task:arithmetic", answer=7), build("punctuation:no_comma"),
                                                 build("change_case:english_lowercase")])
    names = ["task:arithmetic", "punctuation:no_comma", "change_case:english_lowercase", "keywords:existence"]
    declared = declared_contrasts({"task:arithmetic": "question", "punctuation:no_comma": "match:comma",
                                   "change_case:english_lowercase": "uniform"})
    assert item_contrastive(item, names, declared, 0) == "Do not use any commas. Use only lowercase letters."
    assert item_contrastive(item, names, declared, 1) == "What is 3 plus 4? Use only lowercase letters."
    assert item_contrastive(item, names, declared, 2) is None
    assert item_contrastive(item, names, declared, 3) is None  # the prompt does not state it
    assert item_contrastive(item, names, {}, 1) == item.contrastive_prompt(1)  # undeclared: the verifier's rule
    assert "finds nothing" in check_declared([item], names, {"punctuation:no_comma": "match:zebra"})
    assert check_declared([item], names, {"punctuation:no_comma": "match:comma"}) == ""


def test_the_built_in_trainer_refuses_contrasts_its_prompts_cannot_have():
    from core.config import ConfigError, TrainConfig
    from core.prompt_sets import load_prompts

    with pytest.raises(ConfigError, match="reward_contrasts.*no columns"):
        TrainConfig(reward_contrasts={"punctuation:no_comma": "column:hint"})
    with pytest.raises(ConfigError, match="unknown contrast"):
        TrainConfig(reward_contrasts={"punctuation:no_comma": "remove"})
    cfg = TrainConfig(reward_contrasts={"nope": "question"})
    with pytest.raises(ConfigError, match="'nope' is not a reward of the prompt set"):
        load_prompts(cfg)


def test_the_verifiers_rule_has_one_home_that_both_trainers_read():
    """x^-k by a workbench verifier is `core.contrast.verifier_contrastive`: what `PromptItem.contrastive_prompt`
    gives (the built-in trainer, through `item_contrastive`) and what a TRL row's `PromptRow.contrastive` puts in
    the row's own chat format; `core.tasks` keeps its old names of the rule's constants."""
    from core import contrast, tasks
    from core.contrast import item_contrastive, verifier_contrastive
    from core.integrations.trl.dataset import prompt_row
    from core.tasks import PromptItem
    from core.verifiers import build

    assert tasks.CONTRASTS is contrast.CONTRASTS and tasks.AUTO_SWAP_FAMILIES is contrast.AUTO_SWAP_FAMILIES
    item = PromptItem("p", "What is 3 plus 4?", [build("task:arithmetic", answer=7),
                                                 build("keywords:existence", keywords=["green"])])
    names = item.reward_names()
    row = prompt_row({"prompt": [{"role": "system", "content": "Be brief."},
                                 {"role": "user", "content": item.prompt()}],
                      "key": "p", "task": item.task, "constraints": [c.to_spec() for c in item.constraints]})
    for k in range(2):
        for kind in contrast.CONTRASTS:
            expected = verifier_contrastive(item, k, kind)
            assert item.contrastive_prompt(k, kind) == expected == item_contrastive(item, names, {}, k, kind)
            chat = row.contrastive(names[k], kind)
            assert chat[0] == {"role": "system", "content": "Be brief."} and chat[1]["content"] == expected
    assert verifier_contrastive(item, 1, "swap") != verifier_contrastive(item, 1, "remove")
    with pytest.raises(IndexError):
        verifier_contrastive(item, 2)
