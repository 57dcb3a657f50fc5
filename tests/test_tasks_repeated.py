"""A prompt that states one family more than once (IFEval: "between 5 and 10 sentences" is two `number_sentences`
instructions): each statement is its own reward with a stable, distinct name, in both shapes of IFEval's file.
Records written for the test (IFEval's own file is not in the repository)."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

from core.tasks import family_of, item_from_record, load_prompt_set, reward_name, reward_names
from core.verifiers import VerifierSpecError, register
from core.verifiers.shared.kinds import reward_kind

# google-research's shape: each kwargs object holds the arguments its instruction uses.
RANGE = {
    "key": 7001,
    "prompt": "Describe a harbour at dawn in between 2 and 3 sentences. Wrap your entire response with double "
    "quotation marks. Wrap it in quotation marks again.",
    "instruction_id_list": ["length_constraints:number_sentences", "startend:quotation",
                            "length_constraints:number_sentences", "startend:quotation"],
    "kwargs": [{"relation": "at least", "num_sentences": 2}, {}, {"relation": "less than", "num_sentences": 4}, {}],
}  # fmt: skip
CAPS = {
    "key": 7002,
    "prompt": "Write a slogan. Use words in all capital letters at least once, and fewer than 3 times.",
    "instruction_id_list": ["change_case:capital_word_frequency", "change_case:capital_word_frequency"],
    "kwargs": [{"capital_relation": "at least", "capital_frequency": 1},
               {"capital_relation": "less than", "capital_frequency": 3}],
}  # fmt: skip
# Every argument name IFEval uses, as the Hugging Face copy of the data set writes each kwargs object.
ALL_ARGS = (
    "capital_frequency", "capital_relation", "end_phrase", "first_word", "forbidden_words", "frequency", "keyword",
    "keywords", "language", "let_frequency", "let_relation", "letter", "nth_paragraph", "num_bullets",
    "num_highlights", "num_paragraphs", "num_placeholders", "num_sections", "num_sentences", "num_words",
    "postscript_marker", "prompt_to_repeat", "relation", "section_spliter",
)  # fmt: skip


def with_every_arg(record):
    return {**record, "kwargs": [{name: kw.get(name) for name in ALL_ARGS} for kw in record["kwargs"]]}


def write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.mark.parametrize("shape", ["used-only", "every-arg"])
def test_repeated_families_load_as_distinct_rewards(tmp_path, shape):
    records = [RANGE, CAPS] if shape == "used-only" else [with_every_arg(RANGE), with_every_arg(CAPS)]
    items = load_prompt_set(write(tmp_path / "p.jsonl", records))
    assert [len(i.constraints) for i in items] == [4, 2]
    assert items[0].reward_names() == [
        "length_constraints:number_sentences", "startend:quotation",
        "length_constraints:number_sentences#2", "startend:quotation#2",
    ]  # fmt: skip
    assert reward_names(items) == [
        "length_constraints:number_sentences", "startend:quotation", "length_constraints:number_sentences#2",
        "startend:quotation#2", "change_case:capital_word_frequency", "change_case:capital_word_frequency#2",
    ]  # fmt: skip
    first, second = items[0].verifier_for("length_constraints:number_sentences"), items[0].verifier_for(
        "length_constraints:number_sentences#2")
    assert first.kwargs == {"relation": "at least", "num_sentences": 2}
    assert second.kwargs == {"relation": "less than", "num_sentences": 4}
    assert items[0].verifier_for("length_constraints:number_sentences#3") is None


def test_each_statement_scores_on_its_own():
    item = item_from_record(RANGE)
    names = item.reward_names()
    # 1 sentence: "at least 2" fails, "less than 4" holds; both quotation rewards hold
    assert item.scores('"The boats sleep."', names) == [0.0, 1.0, 1.0, 1.0]
    # 4 sentences: "at least 2" holds, "less than 4" fails
    assert item.scores('"One. Two. Three. Four."', names) == [1.0, 1.0, 0.0, 1.0]
    caps = item_from_record(CAPS)
    # capital words: NOW | GO | HOME -> 3: at least 1 holds, fewer than 3 fails
    assert caps.scores("NOW we GO HOME.", caps.reward_names()) == [1.0, 0.0]
    assert caps.scores("Now we GO home.", caps.reward_names()) == [1.0, 1.0]
    other = item_from_record({"key": "n", "task": "t", "constraints": [{"family": "punctuation:no_comma"}]})
    assert math.isnan(other.scores("a", ["startend:quotation#2"])[0])


def test_native_records_may_repeat_a_family_and_round_trip():
    record = {"key": "n1", "task": "Write about rain.", "constraints": [
        {"family": "keywords:frequency", "kwargs": {"keyword": "rain", "frequency": 2, "relation": "at least"}},
        {"family": "keywords:frequency", "kwargs": {"keyword": "rain", "frequency": 4, "relation": "less than"}},
    ]}  # fmt: skip
    item = item_from_record(record)
    assert item.reward_names() == ["keywords:frequency", "keywords:frequency#2"]
    assert item.prompt() == "Write about rain. Use the word rain at least 2 times. Use the word rain less than 4 times."
    assert item.contrastive_prompt(1) == "Write about rain. Use the word rain at least 2 times."
    assert item_from_record(item.to_dict()).reward_names() == item.reward_names()


def test_reward_name_helpers_and_kind():
    assert reward_name("keywords:frequency", 1) == "keywords:frequency"
    assert reward_name("keywords:frequency", 3) == "keywords:frequency#3"
    assert family_of("keywords:frequency#3") == "keywords:frequency"
    assert family_of("keywords:frequency") == "keywords:frequency"
    assert reward_kind("length_constraints:number_words#2") == reward_kind("length_constraints:number_words") == "style"
    with pytest.raises(VerifierSpecError, match="without '#'"):
        register("test:bad#id")(lambda text: 1.0)


@pytest.fixture(scope="module")
def repeated_run(micro_model, tmp_path_factory):
    """(run folder, prompt file): one MRTPO step of the micro model on prompts that repeat families."""
    from core.config import TrainConfig
    from core.run import lifecycle

    root = tmp_path_factory.mktemp("repeated")
    path = write(root / "p.jsonl", [RANGE, with_every_arg(CAPS)])
    cfg = TrainConfig(model=str(micro_model), prompt_set=str(path), runs_dir=str(root / "runs"), run_name="repeat",
                      group_size=2, prompts_per_step=2, max_new_tokens=6, steps=1, lr=1e-2, checkpoint_every=0,
                      device="cpu")
    return lifecycle.train(cfg), path


def test_a_run_on_repeated_families_records_each_reward(repeated_run):
    """Each repeated statement is a reward of its own in the run store (config, metrics, credit maps) and in what
    the app reads from it."""
    from core.run.store import RunStore
    from mrtpo_viz import loaders

    run, path = repeated_run
    store = RunStore(run)
    assert store.status()["state"] == "completed"
    names = reward_names(load_prompt_set(path))
    assert store.config()["reward_names"] == names
    assert loaders.reward_names(store.path) == names
    metrics = store.metrics()
    for name in names:
        assert math.isfinite(metrics[f"reward/{name}"].iloc[0]), name
    assert set(store.credit(1)["reward"]) == set(names)


def test_every_page_shows_a_run_with_repeated_rewards(repeated_run, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from mrtpo_viz import ui

    run, _ = repeated_run
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(run.parent))
    app = str(Path(__file__).resolve().parent.parent / "app.py")
    for name in ("runs", "curves", "credit", "js", "compare", "debugger"):
        at = AppTest.from_file(app, default_timeout=60)
        at.session_state[ui.RUN_KEY] = str(run)
        at.run()
        if name != "runs":
            at.switch_page(f"mrtpo_viz/pages/{name}.py").run()
        assert not at.exception, (name, at.exception)
        if name == "credit":
            assert "number_sentences#2" in "".join(h.proto.body for h in at.get("html"))


def test_the_terminal_summary_keeps_repeated_rewards_apart():
    from core.run.record import summary_line

    names = ["length_constraints:number_words", "length_constraints:number_words#2"]
    m = {"step": 1, "reward/length_constraints:number_words": 1.0, "reward/length_constraints:number_words#2": 0.0,
         "reward/all_satisfied": 0.0, "adv/std": 1.0, "loss/total": 0.0, "policy/kl": 0.0, "policy/clip_frac": 0.0,
         "policy/entropy": 1.0, "time/step": 1.0}
    assert "| number_wor 1.00 number_wor#2 0.00 |" in summary_line(m, 1, names)


@pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="TRL is not installed (make test installs it)")
def test_the_trl_backend_trains_on_repeated_families(micro_model, tmp_path, capsys):
    """`mrtpo train --backend trl`: one TRL reward function per reward name, the repeated ones included."""
    from core.cli import main
    from core.run.store import RunStore

    path = write(tmp_path / "p.jsonl", [RANGE, CAPS])
    code = main(["train", "--backend", "trl", "--model", str(micro_model), "--prompt-set", str(path), "--steps", "1",
                 "--runs-dir", str(tmp_path / "runs"), "--run-name", "trl-repeat", "--device", "cpu",
                 "--group-size", "4", "--prompts-per-step", "2", "--max-new-tokens", "6"])
    assert code == 0, capsys.readouterr()
    store = RunStore(tmp_path / "runs" / "trl-repeat")
    names = reward_names(load_prompt_set(path))
    assert store.status()["state"] == "completed" and store.config()["reward_names"] == names
    assert set(store.credit(1)["reward"]) == set(names)
