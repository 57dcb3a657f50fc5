"""Hostile and odd JSONL input to `mrtpo eval` and to prompt sets (issue 45, class 5): each bad file is exit 2 with
one line naming the file and line, never a traceback; a line holding a raw U+2028, U+2029 or U+0085 (which JSON
allows inside strings) is one line, so a responses file `mrtpo eval` wrote reads back; duplicate prompts with
different responses are refused naming both lines."""

from __future__ import annotations

import json
import re

import pytest

from core.evaluate import ifeval
from core.tasks import PromptSetError, load_prompt_set, save_prompt_set

PROMPTS = [
    {"key": "a", "prompt": "Write about rain in lowercase.", "instruction_id_list": ["change_case:english_lowercase"],
     "kwargs": [{}]},
    {"key": "b", "prompt": "Give a title in double angular brackets.", "instruction_id_list": ["detectable_format:title"],
     "kwargs": [{}]},
]  # fmt: skip
RESPONSES = {"a": "rain falls softly.", "b": "<<Rain>> falls."}
BIG_INT = "9" * 5000
DEEP = "[" * 100_000 + "]" * 100_000


def _files(tmp_path, prompts=PROMPTS, responses=None):
    p = tmp_path / "prompts.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in prompts), encoding="utf-8")
    r = tmp_path / "responses.jsonl"
    rows = responses if responses is not None else [
        json.dumps({"prompt": x["prompt"], "response": RESPONSES[x["key"]]}) for x in prompts]
    r.write_text("".join(line + "\n" for line in rows), encoding="utf-8")
    return p, r


def _one_line_exit_2(capsys, argv, pattern):
    assert ifeval.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("mrtpo eval: error: "), err
    assert re.search(pattern, err), err
    return err


@pytest.mark.parametrize(("line", "pattern"), [
    ('{"prompt": "x", "response": "y", "n": ' + BIG_INT + "}", r"responses\.jsonl:2: .*4300 digits"),
    (DEEP, r"responses\.jsonl:2: .*nest"),
])  # fmt: skip
def test_a_hostile_responses_line_is_exit_2_naming_the_line(tmp_path, capsys, line, pattern):
    p, r = _files(tmp_path)
    r.write_text(r.read_text().splitlines()[0] + "\n" + line + "\n")
    _one_line_exit_2(capsys, ["--prompt-set", str(p), "--responses", str(r)], pattern)


@pytest.mark.parametrize(("record", "pattern"), [
    ('{"key": "c", "prompt": "p", "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{"n": ' + BIG_INT
     + "}]}", r"prompts\.jsonl:3: .*4300 digits"),
    (DEEP, r"prompts\.jsonl:3: .*nest"),
    ('{"key": "c", "prompt": "p", "instruction_id_list": ["punctuation:no_comma"], "kwargs": [[1, 2]]}',
     r"prompts\.jsonl:3: .*kwargs"),
    ('{"key": "c", "prompt": "p", "instruction_id_list": [["punctuation:no_comma"]], "kwargs": [{}]}',
     r"prompts\.jsonl:3: .*(instruction id|unknown constraint family)"),
    ('{"key": "c", "task": "p", "constraints": [{"family": "punctuation:no_comma", "kwargs": [1]}]}',
     r"prompts\.jsonl:3: .*kwargs"),
])  # fmt: skip
def test_a_hostile_prompt_set_line_is_exit_2_naming_the_line(tmp_path, capsys, record, pattern):
    p, r = _files(tmp_path)
    p.write_text(p.read_text() + record + "\n")
    _one_line_exit_2(capsys, ["--prompt-set", str(p), "--responses", str(r)], pattern)
    with pytest.raises(PromptSetError, match=pattern):  # `mrtpo train --prompt-set` reads it the same way
        load_prompt_set(p)


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\x85"])
def test_a_line_holding_a_unicode_line_separator_is_one_line(tmp_path, capsys, char):
    """JSON allows these raw inside a string (json.dumps(ensure_ascii=False) writes them so), and str.splitlines
    splits at them: a file `mrtpo eval --out-responses` wrote is read back whole."""
    prompts = [{**PROMPTS[0], "prompt": f"Write about rain{char}in lowercase."}, PROMPTS[1]]
    p, _ = _files(tmp_path, prompts)
    items = load_prompt_set(p)
    assert [i.prompt() for i in items] == [x["prompt"] for x in prompts]
    verdicts = [ifeval.judge(item, f"rain{char}falls softly." if item.key == "a" else RESPONSES["b"])
                for item in items]
    out = tmp_path / "written.jsonl"
    ifeval.write_responses(verdicts, out)
    assert char in out.read_text(encoding="utf-8")
    assert ifeval.read_responses(out) == {v.prompt: v.response for v in verdicts}
    assert ifeval.main(["--prompt-set", str(p), "--responses", str(out), "--out-json", str(tmp_path / "r.json")]) == 0
    assert json.loads((tmp_path / "r.json").read_text())["prompt_level_strict"] == 1.0
    native = tmp_path / "native.jsonl"  # a native prompt set with the character in its task reads back too
    save_prompt_set(items, native)
    assert [i.prompt() for i in load_prompt_set(native)] == [i.prompt() for i in items]


def test_duplicate_prompts_with_different_responses_are_refused_naming_the_lines(tmp_path, capsys):
    a = json.dumps({"prompt": PROMPTS[0]["prompt"], "response": RESPONSES["a"]})
    b = json.dumps({"prompt": PROMPTS[1]["prompt"], "response": RESPONSES["b"]})
    other = json.dumps({"prompt": PROMPTS[0]["prompt"], "response": "RAIN, LOUDLY."})
    p, r = _files(tmp_path, responses=[a, b, other])
    _one_line_exit_2(capsys, ["--prompt-set", str(p), "--responses", str(r)],
                     r"responses\.jsonl:3: .*same prompt as line 1")
    p, r = _files(tmp_path, responses=[a, b, a])  # the same pair twice: nothing is ambiguous
    assert ifeval.main(["--prompt-set", str(p), "--responses", str(r)]) == 0
