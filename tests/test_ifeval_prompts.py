"""The project's own IFEval-format prompt set (core/tools/ifeval_prompts.py, sample_data/prompts/ifeval-style.jsonl)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from core.evaluate import ifeval
from core.tasks import load_prompt_set
from core.tools import ifeval_prompts
from core.tools.ifeval_prompts import CONFLICTS, IFEVAL_IDS, generate

SHIPPED = Path(__file__).resolve().parent.parent / "sample_data" / "prompts" / "ifeval-style.jsonl"


def test_shipped_set_is_the_generated_one_and_the_eval_default(tmp_path):
    written = ifeval_prompts.write(tmp_path / "p.jsonl")
    assert written.read_text(encoding="utf-8") == SHIPPED.read_text(encoding="utf-8")
    assert ifeval.DEFAULT_PROMPT_SET == SHIPPED
    assert generate(30, seed=1) == generate(30, seed=1) != generate(30, seed=2)


def test_all_25_ids_at_least_100_prompts_and_no_conflicting_pair():
    records = [json.loads(line) for line in SHIPPED.read_text(encoding="utf-8").splitlines()]
    assert len(records) >= 100 and len(set(IFEVAL_IDS)) == 25
    counts = Counter(f for r in records for f in r["instruction_id_list"])
    assert set(counts) == set(IFEVAL_IDS) and min(counts.values()) >= 4
    for r in records:
        ids = r["instruction_id_list"]
        assert len(set(ids)) == len(ids) and 1 <= len(ids) <= 3
        assert not [(a, b) for a in ids for b in ids if (a, b) in CONFLICTS], r["key"]
        assert set(r) == {"key", "prompt", "instruction_id_list", "kwargs"}
    items = load_prompt_set(SHIPPED)
    assert len(items) == len(records)


def test_repeat_prompt_asks_for_the_request_before_its_own_sentence():
    records = [r for r in generate(125) if "combination:repeat_prompt" in r["instruction_id_list"]]
    assert records
    for r in records:
        assert r["instruction_id_list"][-1] == "combination:repeat_prompt"
        request = r["kwargs"][-1]["prompt_to_repeat"]
        assert r["prompt"] == request + " First repeat the request word for word without change, then give your answer."


def test_a_written_response_follows_a_generated_prompt():
    """Hand-written answer to the first generated prompt (keyword, at least 120 words, JSON)."""
    record = generate(1)[0]
    assert record["instruction_id_list"] == ["keywords:existence", "length_constraints:number_words",
                                             "detectable_format:json_format"]
    keyword, words = record["kwargs"][0]["keywords"][0], record["kwargs"][1]["num_words"]
    response = json.dumps({"invitation": " ".join([keyword] + ["picnic"] * words)})
    items = load_prompt_set_from([record])
    assert ifeval.judge(items[0], response).strict == [True, True, True]
    assert ifeval.judge(items[0], "picnic").strict == [False, False, False]  # a bare word is not JSON
    assert ifeval.judge(items[0], '"picnic"').strict == [False, False, True]  # a JSON string


def load_prompt_set_from(records):
    from core.tasks import item_from_record

    return [item_from_record(r) for r in records]
