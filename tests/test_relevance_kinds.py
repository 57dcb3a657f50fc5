"""The newer relevance variants (docs/METHOD.md, "Relevance variants"): the rewrites of a constraint's part
(`core.contrast_kinds`: neutral, placebo, opposite, key) on hand-written prompts, the placebo and average merges on
hand-made numbers, `auto`'s choice from a model's evidence (`core.auto_evidence`), and `relevance_distances` on the
shipped tiny-instruct: a merged variant is its passes merged, auto takes each reward's columns from its variant."""

from __future__ import annotations

import json
import random

import pytest
import torch

from core import auto_evidence, contrast_kinds
from core.algos import routing as routing_lib
from core.contrast import verifier_contrastive
from core.tasks import PromptItem
from core.verifiers import build


def _item() -> PromptItem:
    return PromptItem("p7", "Write a short note about rivers.", [
        build("change_case:english_lowercase"), build("punctuation:no_comma"),
        build("keywords:existence", keywords=["morning"]), build("startend:end_checker", end_phrase="The end."),
        build("length_constraints:number_words", num_words=50, relation="at least")])


# ----------------------------------------------------------------------------- the rewrites


def test_neutral_text_has_the_parts_word_count_and_no_checked_content():
    for n in (1, 3, 7, 25):
        part = " ".join(["word"] * n)
        for seed in range(6):
            text = contrast_kinds.neutral_text(part, random.Random(seed))
            assert len(text.split()) == n and text.endswith(".") and text[0].isupper()
            assert "," not in text and not any(w in text.lower() for w in ("end", "morning", "lowercase", "capital"))
    assert contrast_kinds.neutral_text("", random.Random(0)).count(" ") == 0  # at least one word


def test_each_rewrite_of_a_native_prompt_by_hand():
    item = _item()
    x = item.prompt()
    assert x == ("Write a short note about rivers. Use only lowercase letters. Do not use any commas. Include the "
                 "keyword morning. End your response with the phrase The end. Answer with at least 50 words.")
    # opposite: the opposite constraint's own sentence in its place
    assert verifier_contrastive(item, 0, "opposite") == x.replace("Use only lowercase letters.", "Use only capital letters.")
    assert verifier_contrastive(item, 1, "opposite") == x.replace("Do not use any commas.", "Use many commas.")
    assert "Do not include the word morning." in verifier_contrastive(item, 2, "opposite")
    assert "Do not end your response with the phrase The end." in verifier_contrastive(item, 3, "opposite")
    assert verifier_contrastive(item, 4, "opposite") == x.replace("at least 50", "less than 50")
    # key: the argument strings and cue words cut, the frame kept
    assert verifier_contrastive(item, 0, "key") == x.replace("Use only lowercase letters.", "Use only letters.")
    assert verifier_contrastive(item, 4, "key") == x.replace("Answer with at least 50 words.", "Answer with.")
    # neutral: the same number of words in the same place; placebo: the constraint kept and as many words added after
    for k, sentence in enumerate(["Use only lowercase letters.", "Do not use any commas."]):
        neutral = verifier_contrastive(item, k, "neutral")
        assert sentence not in neutral and len(neutral.split()) == len(x.split())
        placebo = verifier_contrastive(item, k, "placebo")
        assert sentence in placebo and len(placebo.split()) == len(x.split()) + len(sentence.split())
        assert placebo.index(sentence) == x.index(sentence)
    # deterministic per prompt (the G responses of a group share one prompt state)
    assert verifier_contrastive(_item(), 1, "neutral") == verifier_contrastive(item, 1, "neutral")


def test_a_family_without_an_opposite_or_key_words_falls_back_to_removal():
    item = PromptItem("q1", "Tell me about owls.", [build("detectable_format:title"), build("punctuation:no_comma")])
    assert contrast_kinds.opposite_sentence(build("detectable_format:title")) is None
    assert verifier_contrastive(item, 0, "opposite") == verifier_contrastive(item, 0, "remove")
    assert contrast_kinds.key_removed("Tell me about owls.", build("punctuation:no_comma")) is None


# ----------------------------------------------------------------------------- the merges


def test_placebo_merge_hand_case():
    d_remove = torch.tensor([[[0.30, 0.10, 0.05, float("nan")]]])
    d_placebo = torch.tensor([[[0.10, 0.20, 0.05, 0.10]]])
    out = routing_lib.placebo_merge([d_remove, d_placebo])
    assert out[0, 0, :3].tolist() == pytest.approx([0.20, 0.0, 0.0]) and torch.isnan(out[0, 0, 3])


def test_average_merge_hand_case():
    ds = [torch.tensor([[[0.1, 0.4]]]), torch.tensor([[[0.3, 0.0]]]), torch.tensor([[[0.2, 0.2]]])]
    assert routing_lib.mean_merge(ds)[0, 0].tolist() == pytest.approx([0.2, 0.2])
    assert routing_lib.RELEVANCE["average"].contrasts == ("remove", "swap", "neutral", "opposite", "key")
    assert routing_lib.RELEVANCE["placebo"].contrasts == ("remove", "placebo")


# ----------------------------------------------------------------------------- auto from evidence


def _row(relevance, reward, gap, gap_lo, over_entropy_lo, over_position_lo):
    return {"relevance": relevance, "reward": reward, "gap": gap, "gap_lo": gap_lo,
            "gap_over_entropy_lo": over_entropy_lo, "gap_over_position_lo": over_position_lo}


def test_choose_takes_the_largest_gap_whose_intervals_are_all_above_zero():
    rows = [
        _row("js", "a", 1.0, 0.2, 0.1, 0.1), _row("swap", "a", 2.0, 0.5, -0.1, 0.3),  # swap: not above entropy
        _row("placebo", "a", 1.5, 0.1, 0.05, 0.02),
        _row("js", "b", 0.5, -0.1, 0.2, 0.2),  # b: nothing qualifies
        _row("key", "c", 0.4, 0.1, 0.1, 0.1), {**_row("key", "c", 0.8, 0.2, 0.1, 0.1), "set": "other"},
        _row("random", "c", 9.0, 5.0, 5.0, 5.0),  # not a candidate
        _row("js", "*", 9.0, 5.0, 5.0, 5.0),
    ]
    chosen = auto_evidence.choose(rows)
    assert set(chosen) == {"a", "c"}
    assert chosen["a"]["variant"] == "placebo" and chosen["a"]["gap"] == 1.5
    assert chosen["c"]["variant"] == "key" and chosen["c"]["gap"] == pytest.approx(0.6)  # mean over both sets
    assert chosen["c"]["gap_lo"] == 0.1  # the weaker set's bound
    # a qualifying variant in one set that fails in another set does not qualify
    assert "c" not in auto_evidence.choose([*rows, {**_row("key", "c", 0.8, -0.2, 0.1, 0.1), "set": "third"}])


def test_evidence_files_and_the_config_records_the_one_used(tmp_path):
    from core.config import ConfigError, TrainConfig

    tiny = auto_evidence.load("tiny-multi")
    assert auto_evidence.variant_for(tiny, "task:arithmetic") == "swap"
    assert auto_evidence.variant_for(tiny, "punctuation:no_comma") == "js"
    assert auto_evidence.for_model("tiny-instruct") == "tiny-multi"
    assert TrainConfig(relevance="auto").auto_evidence == "tiny-multi"
    assert TrainConfig(relevance="js").auto_evidence == ""
    with pytest.raises(ConfigError, match="no auto evidence 'nope'"):
        TrainConfig(relevance="auto", auto_evidence="nope")
    # a file naming a variant auto cannot pick is refused
    bad = auto_evidence.FOLDER / "test-bad-evidence.json"
    bad.write_text(json.dumps({"model": "m", "default": "js", "families": {"x": "logp_specific"}}))
    try:
        with pytest.raises(ValueError, match="auto may pick only"):
            auto_evidence.load("test-bad-evidence")
    finally:
        bad.unlink()


def test_evidence_from_faithfulness_csvs(tmp_path):
    import pandas as pd

    a, b = tmp_path / "faith-a.csv", tmp_path / "faith-b.csv"
    pd.DataFrame([_row("js", "k1", 1.0, 0.2, 0.1, 0.1), _row("neutral", "k1", 1.2, 0.3, 0.2, 0.1)]).to_csv(a, index=False)
    pd.DataFrame([_row("opposite", "k2", 0.7, 0.1, 0.1, 0.1)]).to_csv(b, index=False)
    data = auto_evidence.evidence_from_csvs("m", [str(a), str(b)])
    assert data["families"] == {"k1": "neutral", "k2": "opposite"} and data["default"] == "js"
    assert data["measured"]["k2"]["sets"] == ["faith-b"]


# ----------------------------------------------------------------------------- on the shipped tiny model


@pytest.fixture(scope="module")
def batch():
    from core.config import TrainConfig
    from core.run import lifecycle
    from core.run import step as step_lib

    torch.set_num_threads(1)
    cfg = TrainConfig(group_size=2, prompts_per_step=2, max_new_tokens=8, steps=1, checkpoint_every=0, device="cpu",
                      replay_pairs="all", runs_dir="runs")
    state = lifecycle.build_state(cfg)
    rollout = step_lib.collect_rollout(state, 1, keep_logits=True)
    scores = step_lib.verify(state, rollout)
    logprobs = step_lib.rollout_logprobs(state, rollout)
    return state, rollout, scores, logprobs


def test_merged_variants_are_their_passes_merged(batch):
    from core.run import replay as replay_lib

    state, rollout, scores, logprobs = batch
    chosen = scores.applicable.bool()
    passes: dict = {}
    remove = replay_lib.relevance_distances(state, rollout, logprobs, chosen, "js", passes)
    placebo_pass = replay_lib.contrast_distances(state, rollout, logprobs, chosen, "placebo")
    placebo = replay_lib.relevance_distances(state, rollout, logprobs, chosen, "placebo", passes)
    ok = ~torch.isnan(remove)
    assert torch.allclose(placebo[ok], (remove - placebo_pass).clamp(min=0)[ok], atol=1e-6)
    average = replay_lib.relevance_distances(state, rollout, logprobs, chosen, "average", passes)
    each = [passes[(c, "js", bytes(chosen.numpy().tobytes()))] for c in ("remove", "swap", "neutral", "opposite", "key")]
    assert torch.allclose(average[ok], torch.stack(each).mean(0)[ok], atol=1e-6)
    # without a cache the same numbers (up to the order of the batched passes)
    alone = replay_lib.relevance_distances(state, rollout, logprobs, chosen, "placebo")
    assert torch.allclose(alone[ok], placebo[ok], atol=1e-5)
    assert torch.isnan(placebo[~ok]).all()


def test_auto_takes_each_rewards_columns_from_its_evidence_variant(batch, monkeypatch):
    from core.run import replay as replay_lib

    state, rollout, scores, logprobs = batch
    chosen = scores.applicable.bool()
    names = state.reward_names
    picks = ["opposite" if j % 2 else "js" for j in range(len(names))]
    monkeypatch.setattr(replay_lib, "auto_variants", lambda s: picks)
    auto = replay_lib.relevance_distances(state, rollout, logprobs, chosen, "auto")
    for j, v in enumerate(picks):
        own = replay_lib.relevance_distances(state, rollout, logprobs, chosen, v)
        ok = ~torch.isnan(own[:, j])
        assert torch.allclose(auto[:, j][ok], own[:, j][ok], atol=1e-5) and torch.isnan(auto[:, j][~ok]).all(), v


# ----------------------------------------------------------------------------- MRTPOTrainer


def test_mrtpo_config_refuses_a_variant_of_several_passes_and_resolves_auto_per_reward():
    pytest.importorskip("trl")
    from types import SimpleNamespace

    from core.config import ConfigError
    from core.integrations.trl.config import one_pass_error
    from core.integrations.trl.routes import contrast_of, relevance_contrasts

    assert "placebo merges 2 contrastive passes" in one_pass_error("placebo")
    assert one_pass_error("average").startswith("average merges 5") and one_pass_error("opposite") == ""
    assert one_pass_error("gradxinput").startswith("gradxinput differentiates the policy")
    args = SimpleNamespace(relevance="auto", auto_evidence="")
    out = relevance_contrasts(args, ["task:arithmetic", "punctuation:no_comma"], "some/tiny-instruct")
    assert out == {"task:arithmetic": "swap", "punctuation:no_comma": "remove"} and args.auto_evidence == "tiny-multi"
    assert contrast_of(out, "other") == "remove" and contrast_of("key", "other") == "key"
    assert relevance_contrasts(SimpleNamespace(relevance="neutral", auto_evidence=""), ["a"], "m") == "neutral"
    # SmolLM2's own evidence picks logp for keywords:existence: TRL's js replay cannot run it, and says so
    with pytest.raises(ConfigError, match='smollm2-135m picks logp for keywords:existence.*auto_evidence="tiny-multi"'):
        relevance_contrasts(SimpleNamespace(relevance="auto", auto_evidence=""), ["keywords:existence"],
                            "/cache/smollm2-135m")
    bad = auto_evidence.FOLDER / "test-two-pass.json"
    bad.write_text(json.dumps({"model": "m", "default": "placebo", "families": {}}))
    try:
        with pytest.raises(ConfigError, match=r"picks placebo for a: placebo merges 2 contrastive passes per reward \(remove, placebo\)"):
            relevance_contrasts(SimpleNamespace(relevance="auto", auto_evidence="test-two-pass"), ["a"], "m")
    finally:
        bad.unlink()


def test_one_rule_says_which_variants_one_no_gradient_pass_runs():
    """The trl backend's config rule, MRTPOConfig's and auto's per-family check all read
    `routing.one_pass_reason`: one contrast, a pass distance (and js for auto)."""
    from core import auto_evidence
    from core.algos.routing import RELEVANCE, one_pass_reason
    from core.config import _trl_one_pass

    runs_once = {n for n, v in RELEVANCE.items() if len(v.contrasts) == 1 and v.distance in ("js", "logp")}
    assert {"js", "swap", "logp", "neutral", "opposite", "key", "auto"} <= runs_once
    assert not runs_once & {"placebo", "average", "gradxinput"}
    for name in RELEVANCE:
        assert (one_pass_reason(name) == "") == (name in runs_once), name
        assert (_trl_one_pass(name) == "") == (name in runs_once), name
        if name != "auto":
            js_once = name in runs_once and RELEVANCE[name].distance == "js"
            assert (auto_evidence.one_pass_reason(name) == "") == js_once, name
    assert one_pass_reason("logp", distance="js") == "logp uses distance logp, not js"
    assert one_pass_reason("average") == "average merges 5 contrastive passes per reward (remove, swap, neutral, opposite, key)"
    with pytest.raises(ValueError, match="unknown relevance"):
        one_pass_reason("nope")


def test_train_config_refuses_a_several_pass_variant_on_the_trl_backend():
    from core.config import ConfigError, TrainConfig

    with pytest.raises(ConfigError, match=r"placebo merges 2 contrastive passes per reward \(remove, placebo\); the trl backend"):
        TrainConfig(backend="trl", relevance="placebo")
    assert TrainConfig(backend="trl", relevance="opposite").relevance == "opposite"
    assert TrainConfig(backend="builtin", relevance="average").relevance == "average"
    with pytest.raises(ConfigError, match="gradxinput differentiates the policy.*the trl backend replays one no-gradient pass"):
        TrainConfig(backend="trl", relevance="gradxinput")


def test_gradxinput_variant_is_the_attribution_of_the_removed_tokens(batch):
    from core.algos.attribution import gradxinput_relevance
    from core.run import replay as replay_lib
    from core.run import step as step_lib

    state, rollout, scores, logprobs = batch
    chosen = scores.applicable.bool()
    d = replay_lib.relevance_distances(state, rollout, logprobs, chosen, "gradxinput")
    ids = step_lib.contrastive_prompt_ids(state, rollout, chosen, "remove")
    want = gradxinput_relevance(state.model, rollout.prompt_ids, ids, rollout.response_ids, rollout.mask)
    ok = ~torch.isnan(want)
    assert ok.any() and torch.allclose(d[ok], want[ok], atol=1e-5) and (d[ok] >= 0).all()
    assert all(p.grad is None for p in state.model.parameters())


@pytest.mark.train
def test_an_auto_run_says_and_records_whose_evidence_it_used(tmp_path, capsys):
    from core.cli import main
    from core.run.store import RunStore

    code = main(["train", "--steps", "1", "--runs-dir", str(tmp_path), "--run-name", "a", "--device", "cpu",
                 "--relevance", "auto", "--group-size", "2", "--prompts-per-step", "2", "--max-new-tokens", "8"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "relevance auto: the tiny-multi evidence (core/evidence/tiny-multi.json): " in out
    assert "task:arithmetic -> swap" in out and "punctuation:no_comma -> js" in out
    assert RunStore(tmp_path / "a").config()["auto_evidence"] == "tiny-multi"


def test_the_shipped_smollm2_evidence_is_what_its_faithfulness_reports_give():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "docs" / "results"
    csvs = [str(root / f"faithfulness-smollm2-135m-clip-{s}.csv") for s in ("default", "ifeval-style")]
    shipped = auto_evidence.load("smollm2-135m")
    assert shipped["families"] == auto_evidence.evidence_from_csvs("smollm2-135m", csvs)["families"]
    assert auto_evidence.for_model("smollm2-135m") == "smollm2-135m"
    assert set(shipped["families"].values()) <= set(auto_evidence.CANDIDATES)


def test_the_trl_backend_refuses_auto_when_the_models_evidence_needs_the_built_in_trainer():
    from core.config import ConfigError, TrainConfig

    assert auto_evidence.for_model("/somewhere/smollm2-135m-instruct") == "smollm2-135m"  # the converted folder
    with pytest.raises(ConfigError, match="smollm2-135m evidence picks gradxinput, logp"):
        TrainConfig(model="smollm2-135m", backend="trl", relevance="auto")
    assert TrainConfig(model="smollm2-135m", backend="trl", relevance="auto",
                       auto_evidence="tiny-multi").auto_evidence == "tiny-multi"
    assert TrainConfig(model="smollm2-135m", relevance="auto").auto_evidence == "smollm2-135m"
