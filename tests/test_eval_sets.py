"""Study v4's evaluation sets (issue 42): the clean held-out set and the out-of-template set share nothing with
the training set that a model could copy, and the out-of-template set never uses the training wording."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from core.tasks import PromptItem, item_from_record, load_prompt_set, reward_names
from core.tools import promptgen
from core.verifiers import build

PROMPTS = Path(__file__).resolve().parent.parent / "sample_data" / "prompts"
TRAIN = "multi.jsonl"
EVAL_FILES = ("multi-heldout-clean.jsonl", "multi-ood.jsonl")
# Arguments that are not values a model could copy: the arithmetic answer (the question is checked instead) and a
# word limit's relation ("less than" in every set: the limit is the value).
NOT_VALUES = {"answer", "relation"}


def _question(item: PromptItem) -> tuple[int, ...] | None:
    """The operands of an arithmetic prompt, in order (any wording), None for a writing prompt."""
    if not any(c.family == "task:arithmetic" for c in item.constraints):
        return None
    return tuple(int(x) for x in re.findall(r"\d+", item.task))


def _values(items: list[PromptItem]) -> set[str]:
    out = set()
    for item in items:
        for c in item.constraints:
            for name, value in c.kwargs.items():
                if name in NOT_VALUES or value is None:
                    continue
                for v in value if isinstance(value, list) else [value]:
                    out.add(str(v).strip().lower())
    return out


def _template(text: str, item: PromptItem, c=None) -> str:
    """`text` with the constraint's (or the task's) arguments masked, so a wording is compared, not its values."""
    values = [str(v) for k, v in (c.kwargs.items() if c else []) if v is not None]
    values = [x for v in values for x in (v.strip("[]'").split("', '"))]
    for v in sorted(values, key=len, reverse=True):
        text = text.replace(v, "{}")
    return re.sub(r"\d+", "{}", text.replace("{} plus {}", "{} plus {}"))


def _same(item: PromptItem) -> tuple[str, frozenset[str]]:
    """What makes two prompts the same: the task and the stated constraints in any order (their wording too)."""
    return item.task, frozenset(f"{c!r} {c.sentence()}" for c in item.constraints)


def leaks(train: list[PromptItem], other: list[PromptItem]) -> list[str]:
    """What `other` shares with `train`: prompts, arithmetic questions, argument values; and its own duplicates."""
    problems = []
    train_prompts = {_same(item) for item in train}
    problems += [f"prompt {i.key} is in training" for i in other if _same(i) in train_prompts]
    questions = {_question(i) for i in train} - {None}
    problems += [f"question {i.task!r} ({i.key}) is in training" for i in other if _question(i) in questions]
    problems += [f"argument value {v!r} is in training" for v in sorted(_values(train) & _values(other))]
    counts = Counter(_same(i) for i in other)
    problems += [f"prompt {p[0][:40]!r}... appears {n} times" for p, n in counts.items() if n > 1]
    return problems


def wordings(items: list[PromptItem]) -> set[str]:
    """Every constraint sentence's and task's wording (arguments masked)."""
    out = set()
    for item in items:
        out.add(_template(item.task, item))
        out |= {_template(c.sentence(), item, c) for c in item.constraints if not c.is_task}
    return out


@pytest.mark.parametrize("name", EVAL_FILES)
def test_eval_set_shares_nothing_with_training(name):
    train, other = load_prompt_set(PROMPTS / TRAIN), load_prompt_set(PROMPTS / name)
    assert len(other) == 128
    assert leaks(train, other) == []
    # the same constraint kinds as training
    assert set(reward_names(other)) == set(reward_names(train))


def test_the_check_finds_what_the_old_heldout_shares():
    """multi-heldout-128.jsonl (study v3's) shares questions, argument values and holds a duplicate: the check
    above must see each kind of leak."""
    found = leaks(load_prompt_set(PROMPTS / TRAIN), load_prompt_set(PROMPTS / "multi-heldout-128.jsonl"))
    assert any(p.startswith("question") for p in found)
    assert any(p.startswith("argument value 'the end.'") for p in found)
    assert any("appears 2 times" in p for p in found)


def test_ood_never_uses_the_training_wording():
    train, ood = load_prompt_set(PROMPTS / TRAIN), load_prompt_set(PROMPTS / "multi-ood.jsonl")
    def sentences(items):
        return {c.sentence() for i in items for c in i.constraints if not c.is_task} | {i.task for i in items}

    assert not sentences(train) & sentences(ood)
    assert wordings(train) & wordings(ood) == set()
    train_topics = {i.task.split(" about ")[-1] for i in train} | set(promptgen.HELDOUT_TOPICS)
    assert not any(i.task.rstrip(".").endswith(" " + t) for i in ood for t in train_topics)
    for item in ood:  # every paraphrase still states its arguments, so the constraint can be followed
        for c in item.constraints:
            for name, value in c.kwargs.items():
                if name not in NOT_VALUES:
                    assert all(str(v) in c.sentence() for v in (value if isinstance(value, list) else [value]))


def test_sentence_override_is_read_written_and_only_wording():
    record = {"key": "k", "task": "Say hi.", "constraints": [
        {"family": "punctuation:no_comma", "kwargs": {}, "sentence": "Leave out every comma."}]}
    item = item_from_record(record)
    assert item.prompt() == "Say hi. Leave out every comma."
    assert item.to_dict() == record
    assert item.contrastive_prompt(0) == "Say hi."
    plain = build("punctuation:no_comma")
    assert item.constraints[0].verify("a, b") == plain.verify("a, b") and plain.sentence() == "Do not use any commas."
    with pytest.raises(ValueError, match="non-empty string"):
        item_from_record({**record, "constraints": [{"family": "punctuation:no_comma", "sentence": " "}]})
    with pytest.raises(ValueError, match="task verifier"):
        item_from_record({"key": "k", "task": "What is 1 plus 2?", "constraints": [
            {"family": "task:arithmetic", "kwargs": {"answer": 3}, "sentence": "Three."}]})


def test_shipped_eval_sets_are_the_generators():
    for split, (name, n) in promptgen.EVAL_SETS.items():
        shipped = [item.to_dict() for item in load_prompt_set(PROMPTS / name)]
        assert shipped == [item_from_record(r).to_dict() for r in promptgen.generate_eval_prompts(n, split)]
