"""`mrtpo eval` (core/evaluate/ifeval.py): IFEval's loose variants, the four accuracies and the per-instruction
table on prompts and responses written for the test (hand-computed), the command line, and a model's greedy run."""

from __future__ import annotations

import json
import math

import pytest

from core.evaluate import ifeval
from core.tasks import item_from_record

PROMPTS = [
    {"key": 1, "prompt": "Greet me. Do not use any commas. End your response with Bye.",
     "instruction_id_list": ["punctuation:no_comma", "startend:end_checker"], "kwargs": [{}, {"end_phrase": "Bye."}]},
    {"key": 2, "prompt": "Give a title in double angular brackets.",
     "instruction_id_list": ["detectable_format:title"], "kwargs": [{}]},
    {"key": 3, "prompt": "Write about rain in lowercase, with the keyword rain.",
     "instruction_id_list": ["change_case:english_lowercase", "keywords:existence"],
     "kwargs": [{}, {"keywords": ["rain"]}]},
    {"key": 4, "prompt": "Finish with the phrase Any other questions?",
     "instruction_id_list": ["startend:end_checker"], "kwargs": [{"end_phrase": "Any other questions?"}]},
]  # fmt: skip
RESPONSES = {
    1: "Sure, here it is:\nHello friend\nBye.",  # strict: comma in line 1 -> no_comma fails; loose: line 1 cut
    2: "No title here.",  # fails both ways
    3: "rain falls softly.",  # holds both ways
    4: "Done. **Any other questions?**",  # strict: ends with '**'; loose: '*' removed
}
# Hand-computed verdicts (strict, loose) per instruction:
#   1: no_comma (F, T), end_checker (T, T) | 2: title (F, F) | 3: lowercase (T, T), keyword (T, T) | 4: end (F, T)
# strict: instructions 3/6, prompts {3} 1/4; loose: instructions 5/6, prompts {1, 3, 4} 3/4
EXPECTED = {"prompt_level_strict": 0.25, "instruction_level_strict": 0.5,
            "prompt_level_loose": 0.75, "instruction_level_loose": 5 / 6}  # fmt: skip


def write_files(tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps({"prompt": p["prompt"], "response": RESPONSES[p["key"]]}) + "\n"
                                 for p in reversed(PROMPTS)))  # matched by prompt text, not by order
    return prompts, responses


def test_loose_variants_are_ifevals_eight():
    variants = ifeval.loose_variants("Sure:\n*A* b\nThanks")
    assert variants == ["Sure:\n*A* b\nThanks", "*A* b\nThanks", "Sure:\n*A* b", "*A* b",
                        "Sure:\nA b\nThanks", "A b\nThanks", "Sure:\nA b", "A b"]  # fmt: skip
    assert ifeval.loose_variants("one line") == ["one line", "", "", "", "one line", "", "", ""]


def test_a_blank_variant_follows_nothing():
    """A one-line response has blank 'first line removed' variants; they must not pass 'no comma'."""
    item = item_from_record({"key": 9, "prompt": "p", "instruction_id_list": ["punctuation:no_comma"],
                             "kwargs": [{}]})
    verdict = ifeval.judge(item, "a, b")
    assert (verdict.strict, verdict.loose) == ([False], [False])


def test_the_four_numbers_and_the_table_by_hand(tmp_path):
    prompts, responses = write_files(tmp_path)
    from core.tasks import load_prompt_set

    verdicts = ifeval.evaluate_responses(load_prompt_set(prompts), ifeval.read_responses(responses))
    assert [v.strict for v in verdicts] == [[False, True], [False], [True, True], [False]]
    assert [v.loose for v in verdicts] == [[True, True], [False], [True, True], [True]]
    assert ifeval.accuracies(verdicts) == pytest.approx(EXPECTED)
    table = ifeval.per_instruction(verdicts)
    assert table["startend:end_checker"] == {"n": 2, "strict": 0.5, "loose": 1.0}
    assert table["punctuation:no_comma"] == {"n": 1, "strict": 0.0, "loose": 1.0}
    assert table["detectable_format:title"] == {"n": 1, "strict": 0.0, "loose": 0.0}
    assert list(table) == sorted(table)
    assert all(math.isnan(x) for x in ifeval.accuracies([]).values())


def test_repeated_instructions_count_each_statement():
    item = item_from_record({"key": 5, "prompt": "Between 2 and 3 sentences.",
                             "instruction_id_list": ["length_constraints:number_sentences"] * 2,
                             "kwargs": [{"relation": "at least", "num_sentences": 2},
                                        {"relation": "less than", "num_sentences": 4}]})  # fmt: skip
    v = ifeval.judge(item, "One. Two. Three. Four.")
    assert v.instruction_ids == ["length_constraints:number_sentences"] * 2
    assert v.strict == [True, False]
    assert ifeval.per_instruction([v])["length_constraints:number_sentences"] == {"n": 2, "strict": 0.5, "loose": 0.5}


def test_graded_specs_are_judged_by_their_binary_verdict():
    item = item_from_record({"key": "g", "task": "t", "constraints": [
        {"family": "punctuation:no_comma", "kwargs": {"graded": True}}]})  # fmt: skip
    assert ifeval.judge(item, "a, b").strict == [False]  # graded score 0.5, binary verdict False


def test_cli_writes_json_and_markdown(tmp_path, capsys):
    prompts, responses = write_files(tmp_path)
    out_json, out_md = tmp_path / "r.json", tmp_path / "r.md"
    rc = ifeval.main(["--prompt-set", str(prompts), "--responses", str(responses), "--out-json", str(out_json),
                      "--out-md", str(out_md)])
    assert rc == 0
    report = json.loads(out_json.read_text())
    assert {k: report[k] for k in EXPECTED} == pytest.approx(EXPECTED)
    assert (report["n_prompts"], report["n_instructions"], report["source"]) == (4, 6, "responses")
    assert report["per_instruction"]["startend:end_checker"] == {"n": 2, "strict": 0.5, "loose": 1.0}
    assert report["prompts"][0]["loose"] == [True, True]
    md = out_md.read_text()
    assert "| prompt-level | 0.2500 | 0.7500 |" in md
    assert "| instruction-level | 0.5000 | 0.8333 |" in md
    assert "| `startend:end_checker` | 2 | 0.500 | 1.000 |" in md
    assert "prompt strict 0.2500" in capsys.readouterr().out


@pytest.mark.parametrize(("change", "message"), [
    ("missing", r"1 of 4 prompts have no response \(first: key '2'\)"),
    ("bad-json", r"responses.jsonl:2: not valid JSON"),
    ("bad-shape", r"responses.jsonl:1: expected \{\"prompt\""),
])  # fmt: skip
def test_cli_bad_responses_exit_2_with_one_line(tmp_path, capsys, change, message):
    prompts, responses = write_files(tmp_path)
    lines = responses.read_text().splitlines()
    if change == "missing":
        lines = [line for line in lines if json.loads(line)["prompt"] != PROMPTS[1]["prompt"]]
    elif change == "bad-json":
        lines[1] = "{nope"
    else:
        lines[0] = json.dumps({"prompt": "x"})
    responses.write_text("\n".join(lines) + "\n")
    assert ifeval.main(["--prompt-set", str(prompts), "--responses", str(responses)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("mrtpo eval: error: ")
    import re

    assert re.search(message, err)


def test_cli_needs_a_source_and_a_loadable_model(tmp_path, capsys):
    prompts, _ = write_files(tmp_path)
    with pytest.raises(SystemExit) as exc:
        ifeval.main(["--prompt-set", str(prompts)])
    assert exc.value.code == 2
    assert ifeval.main(["--prompt-set", str(prompts), "--model", str(tmp_path / "no-model")]) == 2
    assert "neither a preset nor an existing folder" in capsys.readouterr().err


def test_a_model_answers_greedily_and_its_responses_rescore_the_same(micro_model, tmp_path):
    prompts, _ = write_files(tmp_path)
    runs = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.json"
        saved = tmp_path / f"{name}.responses.jsonl"
        assert ifeval.main(["--prompt-set", str(prompts), "--model", str(micro_model), "--max-new-tokens", "5",
                            "--batch-size", "3", "--out-json", str(out), "--out-responses", str(saved)]) == 0
        runs.append(json.loads(out.read_text()))
    first, second = runs
    assert first["source"] == "model" and first["decoding"]["temperature"] == 0.0
    assert [p["response"] for p in first["prompts"]] == [p["response"] for p in second["prompts"]]  # greedy
    assert first["n_prompts"] == 4 and first["generate_seconds"] > 0
    rescored = tmp_path / "rescored.json"
    assert ifeval.main(["--prompt-set", str(prompts), "--responses", str(tmp_path / "a.responses.jsonl"),
                        "--out-json", str(rescored)]) == 0
    again = json.loads(rescored.read_text())
    assert {k: again[k] for k in EXPECTED} == {k: first[k] for k in EXPECTED}


@pytest.mark.parametrize("module", ["core.evaluate.ifeval", "core.verifiers.shared.text", "core.verifiers.shared.language"])
def test_docstring_examples_run(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0 and result.attempted > 0


def test_scoring_a_responses_file_never_loads_torch(tmp_path):
    """The responses half of `mrtpo eval` runs without torch (a laptop scoring another model's answers)."""
    import subprocess
    import sys

    prompts, responses = write_files(tmp_path)
    code = ("import sys\nfrom core.cli import main\n"
            f"assert main(['eval', '--prompt-set', {str(prompts)!r}, '--responses', {str(responses)!r}]) == 0\n"
            "assert 'torch' not in sys.modules and 'transformers' not in sys.modules\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=str(ifeval.REPO_ROOT))
    assert out.returncode == 0, out.stderr
    assert "prompt strict 0.2500" in out.stdout
