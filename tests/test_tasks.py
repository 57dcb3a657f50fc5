"""Prompt sets: native and IFEval loading, prompts and contrastive prompts, reward names, errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers import MICRO_PROMPTS, MICRO_REWARDS

from core.tasks import PromptItem, PromptSetError, contrastive_prompt, load_prompt_set, reward_names, save_prompt_set
from core.verifiers import build

DATA = Path(__file__).parent / "data"
IFEVAL = DATA / "ifeval_sample.jsonl"


def write_lines(tmp_path, lines, name="set.jsonl"):
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# native format


def test_native_load_prompt_and_reward_names(prompt_file):
    items = load_prompt_set(prompt_file)
    assert [i.key for i in items] == [r["key"] for r in MICRO_PROMPTS]
    assert reward_names(items) == MICRO_REWARDS
    assert items[0].prompt() == "Write a short note about rivers. Include the keyword steady. Do not use any commas."
    assert items[2].prompt() == "What is 3 plus 4? Use only lowercase letters."


def test_contrastive_prompt_removes_exactly_the_constraint_sentence(prompt_file):
    for item in load_prompt_set(prompt_file):
        full = item.prompt()
        for k, constraint in enumerate(item.constraints):
            start, end = item.constraint_part(k)
            part = constraint.sentence() if not constraint.is_task else item.task
            assert full[start:end] == part
            # removing the part and the one space that joined it gives the contrastive prompt
            expected = (full[:start] + full[end:]).replace("  ", " ").strip()
            assert item.contrastive_prompt(k) == expected == contrastive_prompt(item, k)
            assert part not in item.contrastive_prompt(k)


def test_task_verifier_ablates_the_task_text():
    item = PromptItem(
        "a", "What is 2 plus 5?", [build("task:arithmetic", answer=7), build("keywords:existence", keywords=["seven"])]
    )
    assert item.prompt() == "What is 2 plus 5? Include the keyword seven."
    assert item.contrastive_prompt(0) == "Include the keyword seven."
    assert item.contrastive_prompt(1) == "What is 2 plus 5?"
    with pytest.raises(IndexError):
        item.contrastive_prompt(2)


def test_scores_are_nan_for_unstated_rewards(prompt_file):
    items = load_prompt_set(prompt_file)
    scores = items[0].scores("A steady river, calm.", MICRO_REWARDS)
    assert scores[:2] == [1.0, 0.0]
    assert math.isnan(scores[2]) and math.isnan(scores[3])
    results = items[2].verify("it is 7.", MICRO_REWARDS)
    assert results[0] is None and results[2].score == 1.0 and results[3].spans == ((6, 7),)


def test_save_and_load_roundtrip(tmp_path, prompt_file):
    items = load_prompt_set(prompt_file)
    path = tmp_path / "copy.jsonl"
    save_prompt_set(items, path)
    again = load_prompt_set(path)
    assert [(i.key, i.prompt(), i.constraints) for i in again] == [(i.key, i.prompt(), i.constraints) for i in items]


# ---------------------------------------------------------------------------------------------
# IFEval format


UNKNOWN_ID = '{"key": 1009, "prompt": "Say hi twice.", "instruction_id_list": ["combination:say_twice"], "kwargs": [{}]}'


@pytest.fixture
def ifeval_with_unknown(tmp_path):
    """The IFEval sample plus a record of an id no IFEval version has (line 9)."""
    return write_lines(tmp_path, [*IFEVAL.read_text().splitlines(), UNKNOWN_ID], "ifeval.jsonl")


def test_ifeval_unknown_family_is_an_error_naming_file_line_and_choices(ifeval_with_unknown):
    with pytest.raises(PromptSetError) as info:
        load_prompt_set(ifeval_with_unknown)
    message = str(info.value)
    assert f"{ifeval_with_unknown}:9:" in message
    assert "combination:say_twice" in message and "detectable_format:multiple_sections" in message


def test_ifeval_loads_with_none_kwargs_dropped(ifeval_with_unknown):
    items = load_prompt_set(ifeval_with_unknown, skip_unknown=True)
    assert [i.key for i in items] == [str(k) for k in range(1001, 1009)]  # 1009 had no known constraint
    assert items[0].constraints == [
        build("length_constraints:number_sentences", num_sentences=5, relation="at least"),
        build("keywords:forbidden_words", forbidden_words=["storm", "wave"]),
    ]
    assert items[7].families() == ["change_case:english_capital", "detectable_format:multiple_sections"]
    raw = json.loads(IFEVAL.read_text().splitlines()[1])
    assert items[1].prompt() == raw["prompt"]  # the prompt is kept verbatim
    assert reward_names(items)[:3] == [
        "length_constraints:number_sentences",
        "keywords:forbidden_words",
        "change_case:english_lowercase",
    ]


IFEVAL_CONTRASTIVE = {
    ("1001", 0): "Write a short essay about the ocean. Do not include keywords storm, wave in the response.",
    ("1001", 1): "Write a short essay about the ocean. Your response should contain at least 5 sentences.",
    ("1002", 0): "Write a poem about a cat.\nInclude keywords whiskers, moon in the response.",
    ("1002", 1): (
        "Write a poem about a cat.\nYour entire response should be in English, and in all lowercase letters."
        " No capital letters are allowed."
    ),
    ("1003", 0): (
        "Give me advice on keeping bees. Finish your response with this exact phrase Any other questions?."
        " No other words should follow this phrase."
    ),
    ("1003", 1): "Give me advice on keeping bees. Answer with less than 120 words.",
    ("1004", 0): (
        "Describe a train journey, e.g. from Paris to Rome. Your answer must contain a title, wrapped in double"
        " angular brackets, such as <<poem of joy>>."
    ),
    ("1004", 1): (
        "Describe a train journey, e.g. from Paris to Rome. In your entire response, refrain from the use of any commas."
    ),
    ("1005", 0): (
        "List reasons to learn to cook.\nAt the end of your response, please explicitly add a postscript starting"
        " with P.S."
    ),
    ("1005", 1): (
        "List reasons to learn to cook. Your answer must contain exactly 3 bullet points. Use the markdown bullet"
        " points such as:\n* This is point 1. \n* This is point 2"
    ),
    ("1006", 0): (
        "Write a letter to a friend. The response must contain at least 1 placeholders represented by square"
        " brackets, such as [address]."
    ),
    ("1006", 1): (
        "Write a letter to a friend. Highlight at least 2 sections in your answer with markdown, i.e. *highlighted section*."
    ),
    ("1007", 0): (
        "Write a song about rain. Entire output should be wrapped in JSON format. You can use markdown ticks such as ```."
    ),
    ("1007", 1): "Write a song about rain. In your response, the word rain should appear at least 3 times.",
    ("1008", 0): (
        "Tell me about the history of Rome. Your response must have 2 sections. Mark the beginning of each section"
        " with SECTION X."
    ),
    ("1008", 1): "Tell me about the history of Rome. Your entire response should be in English, and in all capital letters.",
}


def test_ifeval_contrastive_prompts_remove_the_constraint_sentences():
    items = {i.key: i for i in load_prompt_set(IFEVAL, skip_unknown=True)}
    for (key, k), expected in IFEVAL_CONTRASTIVE.items():
        assert items[key].contrastive_prompt(k) == expected, (key, k)


IFEVAL_ALL = DATA / "ifeval_all25.jsonl"


def test_ifeval_file_with_all_25_ids_loads_and_finds_each_instruction():
    from helpers import IFEVAL_IDS

    items = load_prompt_set(IFEVAL_ALL)
    assert sorted(reward_names(items)) == sorted(IFEVAL_IDS)
    for item in items:
        for k in range(len(item.constraints)):
            start, end = item.constraint_part(k)  # every instruction's sentence is found (never None)
            assert item.contrastive_prompt(k) != item.prompt()
            assert len(item.contrastive_prompt(k)) < len(item.prompt()) - (end - start) + 2, (item.key, k)
    repeat = next(i for i in items if i.families() == ["combination:repeat_prompt"])
    assert repeat.constraints[0].kwargs["prompt_to_repeat"] == "Write a haiku about rain."


def test_ifeval_fallback_when_no_sentence_states_the_constraint():
    item = PromptItem("x", "Tell me a story.", [build("punctuation:no_comma")], text="Tell me a story.")
    assert item.constraint_part(0) is None
    assert item.contrastive_prompt(0) == "Tell me a story."


# ---------------------------------------------------------------------------------------------
# malformed files


@pytest.mark.parametrize(
    ("lines", "pattern"),
    [
        (['{"key": "a", "task": "t", "constraints": [{"family": "punctuation:no_comma"}]}', "{not json"], r":2: not valid JSON"),
        # regression: "Unterminated string starting at at column 2"
        (['{"key": "a'], r":1: not valid JSON: unterminated string starting at column 9$"),
        (['{"key": "a", "task": "t", "constraints": [{"family": "keywords:existence", "kwargs": {}}]}'],
         r":1: constraint 'keywords:existence': missing argument 'keywords'"),
        (['{"key": "a", "task": "t", "constraints": [{"family": "nope:x"}]}'], r":1: unknown constraint family 'nope:x'"),
        (['{"key": "a", "task": "t", "constraints": [{"family": "punctuation:no_comma"}]}', "", '{"key": "a", "task": "u", "constraints": [{"family": "punctuation:no_comma"}]}'],
         r":3: duplicate key 'a' \(first on line 1\)"),
        (['{"key": "a", "constraints": []}'], r":1: missing 'task'"),
        (["[1, 2]"], r":1: expected a JSON object"),
        (['{"key": 1, "prompt": "p", "instruction_id_list": ["punctuation:no_comma"], "kwargs": []}'],
         r":1: IFEval record: 'instruction_id_list' and 'kwargs' must be lists of the same length"),
        (["", "  "], r": no prompts"),
    ],
)  # fmt: skip
def test_malformed_lines_name_file_and_line(tmp_path, lines, pattern):
    path = write_lines(tmp_path, lines)
    with pytest.raises(PromptSetError, match=str(path).replace(".", r"\.") + pattern):
        load_prompt_set(path)


def test_missing_and_binary_files(tmp_path):
    with pytest.raises(PromptSetError, match="cannot read prompt set"):
        load_prompt_set(tmp_path / "missing.jsonl")
    bad = tmp_path / "bin.jsonl"
    bad.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(PromptSetError, match="not UTF-8"):
        load_prompt_set(bad)
