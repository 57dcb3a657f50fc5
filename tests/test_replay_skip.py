"""Replay only where it can matter: skipping the contrastive passes of (sample, reward) pairs whose group
advantage is 0 leaves every token advantage and credit bitwise unchanged; the skipped pairs are recorded
as not computed (NaN JS, `distance_skipped`), and the step logs the share of passes run."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from core.algos import advantages as adv_lib
from core.algos import routing as routing_lib

torch.set_num_threads(1)
G = 4


def mixed_rewards() -> torch.Tensor:
    """(B=16, K=3) rewards in 4 groups of 4: saturated, partly saturated and unsaturated groups, a reward
    that does not apply to one group, and a graded reward whose group mean equals one sample's score."""
    nan = float("nan")
    return torch.tensor([
        # group 0: every reward saturated (all 1, all 0, all 1)
        [1, 0, 1], [1, 0, 1], [1, 0, 1], [1, 0, 1],
        # group 1: reward 0 saturated, reward 1 varies, reward 2 does not apply
        [1, 0, nan], [1, 1, nan], [1, 0, nan], [1, 1, nan],
        # group 2: everything varies
        [0, 1, 0], [1, 0, 1], [0, 0, 1], [1, 1, 0],
        # group 3: graded reward 1 with the mean (0.5) scored by samples 13 and 14 (a = 0 there)
        [0, 0.0, 1], [0, 0.5, 1], [0, 0.5, 1], [0, 1.0, 1],
    ], dtype=torch.float32)


def test_replay_pairs_hand_case():
    r = mixed_rewards()
    a = adv_lib.group_normalized(r, G)
    applicable = ~torch.isnan(r)
    pairs = routing_lib.replay_pairs(a, applicable, "js")
    expected = torch.zeros_like(applicable)
    expected[4:8, 1] = True  # group 1, reward 1
    expected[8:12, :] = True  # group 2, all
    expected[[12, 15], 1] = True  # group 3, reward 1 away from the mean
    assert torch.equal(pairs, expected)
    # a variant that reads the other rewards keeps every applicable reward of a sample with an active pair
    wide = routing_lib.replay_pairs(a, applicable, "js_specific")
    expected_wide = expected.clone()
    expected_wide[4:8, 0] = True
    expected_wide[[12, 15], :] = True
    assert torch.equal(wide, expected_wide)
    assert set(routing_lib.PAIRWISE_RELEVANCE) <= set(routing_lib.RELEVANCE)


def _fake_replay(d_full: torch.Tensor, calls: list):
    """A contrastive_distances callable returning fixed distances for the requested pairs (NaN elsewhere)."""

    def contrastive_distances(pairs: torch.Tensor) -> torch.Tensor:
        calls.append(pairs.clone())
        return torch.where(pairs[:, :, None], d_full, torch.full_like(d_full, float("nan")))

    return contrastive_distances


@pytest.mark.parametrize("relevance", sorted(routing_lib.RELEVANCE))
@pytest.mark.parametrize("lam,sharpen", [(1.0, 1.0), (0.7, 2.0)])
def test_skipping_leaves_token_advantages_and_credit_bitwise_equal(relevance, lam, sharpen):
    """The maths alone: given the same distances for the pairs that run, every relevance variant gives
    bitwise equal advantages and credit with and without the skip."""
    torch.manual_seed(0)
    r = mixed_rewards()
    b, k = r.shape
    t = 9
    lengths = torch.randint(3, t + 1, (b,))
    mask = (torch.arange(t)[None, :] < lengths[:, None]).long()
    d_full = torch.rand(b, k, t) ** 3 * mask[:, None, :]
    applicable = ~torch.isnan(r)
    weights = torch.tensor([1.0, 2.0, 0.5])
    a = adv_lib.group_normalized(r, G)
    results, calls = {}, []
    for skip in (False, True):
        inputs = routing_lib.RoutingInputs(
            mask=mask, span_mask=torch.zeros(b, k, t, dtype=torch.bool), applicable=applicable, lam=lam,
            sharpen=sharpen, relevance=relevance, distances=_fake_replay(d_full, calls),
            replay=routing_lib.replay_pairs(a, applicable, relevance) if skip else None,
        )
        w, d = routing_lib.route_replay(inputs)
        results[skip] = adv_lib.get_estimator("mrtpo")(r, w, mask, G, weights)
    assert calls[1].sum() < calls[0].sum()  # fewer passes
    assert torch.equal(results[True].advantages, results[False].advantages)
    assert torch.equal(results[True].credit, results[False].credit)


def test_a_sample_wide_variant_treated_as_pairwise_would_change_the_credit():
    """Why `replay_pairs` keeps a sample's other rewards for js_specific: dropping them changes it."""
    torch.manual_seed(1)
    r = mixed_rewards()
    b, k = r.shape
    mask = torch.ones(b, 6, dtype=torch.long)
    d_full = torch.rand(b, k, 6)
    applicable = ~torch.isnan(r)
    a = adv_lib.group_normalized(r, G)
    out = []
    for replay in (None, routing_lib.replay_pairs(a, applicable, "js")):  # pairwise selection: wrong here
        inputs = routing_lib.RoutingInputs(mask=mask, span_mask=torch.zeros(b, k, 6, dtype=torch.bool),
                                           applicable=applicable, relevance="js_specific",
                                           distances=_fake_replay(d_full, []), replay=replay)
        out.append(adv_lib.get_estimator("mrtpo")(r, routing_lib.route_replay(inputs)[0], mask, G).credit)
    assert not torch.equal(out[0], out[1])


@pytest.fixture
def step_setup(micro_model, letters_setup, tmp_path):
    """A state on the micro model, one rollout, and its scores with saturated groups forced in."""
    from core.config import TrainConfig
    from core.run import lifecycle
    from core.run import step as step_lib

    prompts, verifier = letters_setup
    cfg = TrainConfig(model=str(micro_model), prompt_set=str(prompts), custom_verifiers=str(verifier),
                      runs_dir=str(tmp_path), group_size=G, prompts_per_step=3, max_new_tokens=10, steps=1,
                      checkpoint_every=0, device="cpu", replay_chunk=1)
    state = lifecycle.build_state(cfg)
    rollout = step_lib.collect_rollout(state, 1)
    scores = step_lib.verify(state, rollout)
    rewards = scores.rewards.clone()
    rewards[:G] = torch.where(torch.isnan(rewards[:G]), rewards[:G], torch.ones_like(rewards[:G]))  # saturated
    rewards[G:2 * G, 0] = torch.where(torch.isnan(rewards[G:2 * G, 0]), rewards[G:2 * G, 0], 0.0)  # one reward
    assert (rewards[2 * G:].nan_to_num(-1).std(0) > 0).any()  # and a group that varies (test:letters is graded)
    return state, rollout, dataclasses.replace(scores, rewards=rewards)


@pytest.mark.parametrize("relevance", ["js", "js_specific"])
def test_real_replay_with_and_without_the_skip_is_bitwise_equal(step_setup, relevance):
    """The real contrastive passes on the micro model (one row per forward pass, so a pair's pass does not
    depend on which other pairs run): same token advantages and credit, fewer passes."""
    from core.run import record
    from core.run import step as step_lib

    state, rollout, scores = step_setup
    base = state.cfg
    logprobs = step_lib.rollout_logprobs(state, rollout)
    out = {}
    for pairs in ("all", "nonzero_adv"):
        state.cfg = dataclasses.replace(base, replay_pairs=pairs, relevance=relevance)
        routing = step_lib.route(state, rollout, scores, logprobs)
        out[pairs] = (routing, step_lib.compute_advantages(state, rollout, scores, routing))
    (r_all, a_all), (r_skip, a_skip) = out["all"], out["nonzero_adv"]
    assert torch.equal(a_all.token_adv, a_skip.token_adv)
    assert torch.equal(a_all.credit, a_skip.credit)
    assert torch.equal(r_all.replayed, scores.applicable)
    assert 0 < int(r_skip.replayed.sum()) < int(scores.applicable.sum())
    # computed pairs: the same distances; skipped pairs: NaN (not computed), never 0
    ran = r_skip.replayed[:, :, None].expand_as(r_skip.distances) & rollout.mask.bool()[:, None, :]
    assert torch.equal(r_skip.distances[ran], r_all.distances[ran])
    assert torch.isnan(r_skip.distances[~r_skip.replayed]).all()
    share = record.replay_pass_share(r_skip.replayed, scores.applicable, rollout.mask)
    assert share == pytest.approx(float(r_skip.replayed.sum()) / float(scores.applicable.sum()))
    assert record.replay_pass_share(r_all.replayed, scores.applicable, rollout.mask) == 1.0


def test_skipped_pairs_are_marked_in_the_credit_map_and_metrics(step_setup):
    from core.run import record
    from core.run import step as step_lib

    state, rollout, scores = step_setup
    logprobs = step_lib.rollout_logprobs(state, rollout)
    routing = step_lib.route(state, rollout, scores, logprobs)
    adv = step_lib.compute_advantages(state, rollout, scores, routing)
    rec = record.StepRecord(1, state.reward_names, G, rollout, scores, routing, adv, {}, {})
    frame = record.credit_frame(rec)
    metrics = record.step_metrics(rec)
    applies = frame["score"].notna()
    skipped = frame["distance_skipped"]
    assert skipped.any() and (~skipped & applies).any()
    assert not skipped[~applies].any()  # not applicable is not "skipped"
    assert frame.loc[skipped, "distance"].isna().all() and frame.loc[applies & ~skipped, "distance"].notna().all()
    assert (frame.loc[skipped, "credit"] == 0).all()  # its advantage is 0, so is its credit
    assert 0 < metrics["replay/pass_share"] < 1
