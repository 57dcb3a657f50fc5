"""Relevance variants (docs/METHOD.md, "Relevance variants"): the `logp` distance on hand-made numbers, the
`swap` counterfactual prompts per verifier family (removal where a family has no argument), `contrastive_distances`
with the `logp` distance against a direct computation, and one real training step on the shipped
tiny-instruct with every variant (built-in trainer) and with the two new kinds of pass on TRL."""

from __future__ import annotations

import importlib.util
import random

import pytest
import torch

from core.algos import routing as routing_lib
from core.algos.teacher_forcing import contrastive_distances, response_logprobs
from core.tasks import CONTRASTS, PromptItem, load_prompt_set
from core.verifiers import build
from core.verifiers.shared.base import swap_values

# ----------------------------------------------------------------------------- the registry and the formulas


def test_logp_distance_hand_case():
    lp = torch.tensor([-0.5, -2.0, -1.0, 0.0])
    lq = torch.tensor([-1.5, -0.5, -1.0, -3.0])
    assert routing_lib.logp_distance(lp, lq).tolist() == pytest.approx([1.0, 1.5, 0.0, 3.0])


def test_every_variant_names_a_known_contrast_and_distance():
    for name, variant in routing_lib.RELEVANCE.items():
        assert set(variant.contrasts) <= set(CONTRASTS) and variant.distance in routing_lib.DISTANCES, name
        assert variant.pairwise == (not name.endswith("_specific")), name
        assert (variant.merge is None) == (len(variant.contrasts) == 1), name
    assert set(routing_lib.RELEVANCE) == {"js", "js_specific", "swap", "swap_specific", "logp", "logp_specific", "auto",
                                          "neutral", "opposite", "key", "placebo", "average", "gradxinput"}


def test_specific_variants_subtract_the_other_rewards_mean():
    """swap_specific and logp_specific combine distances like js_specific: max(d_k - mean_{j != k} d_j, 0)."""
    d = torch.tensor([[[0.9, 0.1], [0.3, 0.5], [0.0, 0.2]]])  # (B=1, K=3, T=2)
    app = torch.tensor([[True, True, True]])
    expected = [0.75, 0.0, 0.0, 0.35, 0.0, 0.0]  # e.g. k=0, t=0: 0.9 - (0.3 + 0.0) / 2
    for name in ("js_specific", "swap_specific", "logp_specific"):
        assert routing_lib.get_relevance(name)(d, app).flatten().tolist() == pytest.approx(expected)
    for name in ("js", "swap", "logp"):
        assert torch.equal(routing_lib.get_relevance(name)(d, app), d)


# ----------------------------------------------------------------------------- swap prompts


def test_swap_values_replaces_every_occurrence_with_a_distinct_other_value():
    rng = random.Random(3)
    out = swap_values("Use Light and light, and stone.", ["light", "stone"], ["light", "stone", "warm", "calm"], rng)
    assert out is not None and "light" not in out.lower() and "stone" not in out
    words = out.rstrip(".").replace(",", "").split()
    assert words[1] == words[3] != words[5] and {words[1], words[5]} == {"warm", "calm"}
    assert swap_values("no keyword here", ["light"], ["warm"], rng) is None  # nothing to swap
    assert swap_values("light", ["light"], ["Light"], rng) is None  # no other value in the pool


def test_families_declare_their_counterfactual():
    rng = random.Random(0)
    keyword = build("keywords:existence", keywords=["light"])
    assert keyword.swap_kind == "keyword"
    swapped = keyword.counterfactual(keyword.sentence(), rng)
    assert swapped.startswith("Include the keyword ") and "light" not in swapped
    end = build("startend:end_checker", end_phrase="The end.")
    swapped = end.counterfactual(end.sentence(), rng)
    assert end.swap_kind == "phrase" and swapped.startswith("End your response with the phrase ")
    assert "The end" not in swapped and swapped.endswith(".")
    arith = build("task:arithmetic", answer=9)
    assert arith.swap_kind == "operands"
    for seed in range(30):  # operands change, one digit each, and their sum (the asked-for answer) too
        out = arith.counterfactual("What is 5 plus 4?", random.Random(seed))
        a, b = int(out.split()[2]), int(out.split()[4].rstrip("?"))
        assert 1 <= a <= 9 and 1 <= b <= 9 and a != 5 and b != 4 and a + b != 9
    assert arith.counterfactual("What is five plus four?", rng) is None
    for family in ("punctuation:no_comma", "change_case:english_lowercase"):
        assert build(family).swap_kind == "" and build(family).counterfactual(build(family).sentence(), rng) is None


def test_swap_prompt_native_item_is_deterministic_and_falls_back_to_removal():
    item = PromptItem("p9", "What is 5 plus 4?", [build("task:arithmetic", answer=9), build("punctuation:no_comma"),
                                                  build("keywords:existence", keywords=["green"])])
    task = item.contrastive_prompt(0, "swap")
    assert task.endswith(" Do not use any commas. Include the keyword green.") and not task.startswith("What is 5 plus 4")
    assert item.contrastive_prompt(1, "swap") == item.contrastive_prompt(1) == "What is 5 plus 4? Include the keyword green."
    kw = item.contrastive_prompt(2, "swap")
    assert kw.startswith("What is 5 plus 4? Do not use any commas. Include the keyword ") and "green" not in kw
    again = PromptItem("p9", item.task, list(item.constraints))
    assert [again.contrastive_prompt(k, "swap") for k in range(3)] == [item.contrastive_prompt(k, "swap") for k in range(3)]
    # other prompts (keys) draw on their own: over 20 keys, several different keywords, never the original
    draws = {PromptItem(f"q{n}", item.task, list(item.constraints)).contrastive_prompt(2, "swap") for n in range(20)}
    assert len(draws) > 3 and not any("green" in d for d in draws)
    with pytest.raises(ValueError, match="remove, swap"):
        item.contrastive_prompt(0, "shuffle")


def test_auto_prompt_swaps_only_the_families_whose_argument_the_policy_reads():
    from core.tasks import AUTO_SWAP_FAMILIES

    item = PromptItem("p9", "What is 5 plus 4?", [build("task:arithmetic", answer=9),
                                                  build("keywords:forbidden_words", forbidden_words=["green"]),
                                                  build("startend:end_checker", end_phrase="Is there more?")])
    assert "task:arithmetic" in AUTO_SWAP_FAMILIES and "keywords:forbidden_words" not in AUTO_SWAP_FAMILIES
    assert item.contrastive_prompt(0, "auto") == item.contrastive_prompt(0, "swap") != item.contrastive_prompt(0)
    assert item.contrastive_prompt(1, "auto") == item.contrastive_prompt(1, "remove") != item.contrastive_prompt(1, "swap")
    assert item.contrastive_prompt(2, "auto") == item.contrastive_prompt(2, "swap") != item.contrastive_prompt(2)
    assert routing_lib.RELEVANCE["auto"].contrast == "auto" and routing_lib.RELEVANCE["auto"].distance == "js"


def test_swap_prompt_ifeval_item_replaces_inside_the_located_part():
    text = "Write a poem about the sea. Include the keywords storm and salt. Do not use any commas."
    item = PromptItem("7", "", [build("keywords:existence", keywords=["storm", "salt"]),
                                build("punctuation:no_comma")], text=text)
    swapped = item.contrastive_prompt(0, "swap")
    assert swapped.startswith("Write a poem about the sea. Include the keywords ")
    assert swapped.endswith(" Do not use any commas.") and "storm" not in swapped and "salt" not in swapped
    assert item.contrastive_prompt(1, "swap") == item.contrastive_prompt(1)


def test_every_default_prompt_gets_a_swap_prompt_for_keyword_phrase_and_arithmetic():
    items = load_prompt_set("sample_data/prompts/default.jsonl")
    for item in items:
        for k, c in enumerate(item.constraints):
            swapped, removed = item.contrastive_prompt(k, "swap"), item.contrastive_prompt(k)
            if c.swap_kind:
                assert swapped != removed and swapped != item.prompt() and len(swapped) > len(removed), (item.key, k)
            else:
                assert swapped == removed, (item.key, k)


# ----------------------------------------------------------------------------- the logp pass on a tiny model


@pytest.fixture(scope="module")
def tiny():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=48, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      initializer_range=0.4, pad_token_id=0, bos_token_id=2, eos_token_id=1)
    return LlamaForCausalLM(cfg).eval()


def test_contrastive_logp_matches_a_direct_computation(tiny):
    prompts = [[2, 5, 9], [2, 7, 7, 11]]
    g = torch.Generator().manual_seed(4)
    resp = torch.randint(3, 48, (2, 6), generator=g)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]], dtype=torch.bool)
    resp[~mask] = 0
    contrastive = [[[2, 9], None], [[2, 11], [2, 7]]]
    d = contrastive_distances(tiny, prompts, contrastive, resp, mask, chunk_size=2, distance="logp")
    assert torch.isnan(d[0, 1]).all() and torch.all(d[1, :, 3:] == 0)
    for i, k in ((0, 0), (1, 0), (1, 1)):
        n = int(mask[i].sum())
        r = resp[i, :n].tolist()
        with torch.no_grad():
            lp = torch.log_softmax(tiny(input_ids=torch.tensor([prompts[i] + r])).logits[0], -1)
            lq = torch.log_softmax(tiny(input_ids=torch.tensor([contrastive[i][k] + r])).logits[0], -1)
        p_tok = lp[len(prompts[i]) - 1: len(prompts[i]) - 1 + n].gather(-1, torch.tensor(r)[:, None])[:, 0]
        q_tok = lq[len(contrastive[i][k]) - 1: len(contrastive[i][k]) - 1 + n].gather(-1, torch.tensor(r)[:, None])[:, 0]
        assert torch.allclose(d[i, k, :n], (p_tok - q_tok).abs(), atol=1e-4), (i, k)
    # the full-prompt side from the rollout's token log-probs (no vocabulary-sized tensor), or from logp_full
    full = response_logprobs(tiny, prompts, resp, mask, chunk=2)
    reused = contrastive_distances(tiny, prompts, contrastive, resp, mask, chunk_size=1, distance="logp",
                            token_logp=full.token_logp)
    from_full = contrastive_distances(tiny, prompts, contrastive, resp, mask, chunk_size=3, distance="logp",
                               logp_full=full.logp_full)
    ok = ~torch.isnan(d)
    assert torch.allclose(reused[ok], d[ok], atol=1e-4) and torch.allclose(from_full[ok], d[ok], atol=1e-4)
    with pytest.raises(ValueError, match="js, logp"):
        contrastive_distances(tiny, prompts, contrastive, resp, mask, distance="kl")


# ----------------------------------------------------------------------------- real training steps


@pytest.mark.parametrize("relevance", sorted(routing_lib.RELEVANCE))
def test_a_tiny_instruct_step_trains_with_every_variant(relevance, tmp_path):
    from core.config import TrainConfig
    from core.run import lifecycle
    from core.run import step as step_lib

    cfg = TrainConfig(relevance=relevance, runs_dir=str(tmp_path), group_size=4, prompts_per_step=2,
                      max_new_tokens=16, steps=1, checkpoint_every=0, device="cpu", lr=1e-3, replay_pairs="all")
    state = lifecycle.build_state(cfg)
    before = [p.detach().clone() for p in state.model.parameters()]
    result = step_lib.train_step(state, 1)
    metrics = result.metrics
    assert metrics["replay/pass_share"] == 1.0
    js = result.credit["distance"].dropna()
    assert len(js) > 0 and (js >= 0).all() and (js > 0).any()
    if routing_lib.RELEVANCE[relevance].distance == "js":
        assert (js <= 1).all()
    assert any(not torch.equal(a, p) for a, p in zip(before, state.model.parameters(), strict=True))


HAS_TRL = importlib.util.find_spec("trl") is not None


@pytest.mark.trl
@pytest.mark.skipif(not HAS_TRL, reason="TRL is not installed (make test installs it)")
@pytest.mark.parametrize("relevance", ["swap_specific", "logp", "auto"])
def test_trl_step_with_a_swap_and_a_logp_variant(relevance, tmp_path, capsys):
    from core.cli import main
    from core.run.store import RunStore

    code = main(["train", "--backend", "trl", "--steps", "1", "--runs-dir", str(tmp_path), "--run-name", "v",
                 "--device", "cpu", "--relevance", relevance, "--group-size", "4", "--prompts-per-step", "2",
                 "--max-new-tokens", "12", "--lr", "1e-3", "--replay-pairs", "all"])
    assert code == 0, capsys.readouterr()
    store = RunStore(tmp_path / "v")
    assert store.status()["state"] == "completed" and store.config()["relevance"] == relevance
    assert store.config()["routing_clip"] == "clip"  # MRTPOConfig's default, recorded like TrainConfig's
    credit = store.credit(1)
    assert credit["distance"].notna().any() and (credit["distance"].dropna() >= 0).all()
