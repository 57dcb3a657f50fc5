"""The controls of issue 42 (docs/METHOD.md, "Controls"): `shuffle`, `entropy` and scale-matched GDPO, by hand on
small tensors and end to end in the built-in trainer."""

from __future__ import annotations

import math

import pytest
import torch

from core.algos.advantages import gdpo_advantages, get_estimator, scale_matched_gdpo_estimator, scale_matched_weights
from core.algos.routing import (
    entropy_routing,
    routing_weights,
    shuffle_generator,
    shuffle_routing,
    top_entropy_tokens,
)
from core.config import ConfigError, TrainConfig

torch.set_num_threads(1)

# ------------------------------------------------------------------------------------------ shuffle


def _weights() -> tuple[torch.Tensor, torch.Tensor]:
    mask = torch.tensor([[1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0, 0]])
    w = torch.zeros(2, 2, 7)
    w[0, 0, :5] = torch.tensor([5.0, 0.0, 0.0, 0.0, 0.0])
    w[0, 1, :5] = torch.tensor([0.5, 1.0, 1.5, 2.0, 0.0])
    w[1, 0, :3] = torch.tensor([3.0, 0.0, 0.0])
    w[1, 1, :3] = torch.tensor([1.0, 1.0, 1.0])
    return w, mask


def test_shuffle_keeps_each_rows_weights_and_mass_and_leaves_padding():
    w, mask = _weights()
    out = shuffle_routing(w, mask, shuffle_generator(7, 1))
    for i, n in enumerate((5, 3)):
        for k in range(2):
            assert sorted(out[i, k, :n].tolist()) == sorted(w[i, k, :n].tolist())  # the same multiset
            assert out[i, k].sum().item() == pytest.approx(w[i, k].sum().item())  # the same mass
            assert torch.equal(out[i, k, n:], torch.zeros(7 - n))  # padding untouched


def test_shuffle_moves_positions_and_is_reproducible_by_seed():
    w, mask = _weights()
    a = shuffle_routing(w, mask, shuffle_generator(3, 2))
    assert torch.equal(a, shuffle_routing(w, mask, shuffle_generator(3, 2)))
    # over a few seeds the single weight 5 of row (0, 0) leaves token 0: positions change
    moved = [int(shuffle_routing(w, mask, shuffle_generator(s, 1))[0, 0, :5].argmax()) for s in range(8)]
    assert any(p != 0 for p in moved) and len(set(moved)) > 1
    # the generator is torch.randperm's, seeded with seed * 1000003 + step, rows in (i, k) order
    g = torch.Generator().manual_seed(3 * 1_000_003 + 2)
    perm = torch.randperm(5, generator=g)
    assert torch.equal(a[0, 0, :5], w[0, 0, :5][perm])
    assert not torch.equal(shuffle_routing(w, mask, shuffle_generator(3, 3)), a)  # another step, other draws


def test_shuffle_is_a_mrtpo_option_only():
    assert TrainConfig(routing_shuffle="on").routing_shuffle == "on"
    with pytest.raises(ConfigError, match="routing_shuffle"):
        TrainConfig(method="gdpo", routing_shuffle="on")
    with pytest.raises(ConfigError, match="routing_shuffle"):
        TrainConfig(routing_shuffle="yes")


# ------------------------------------------------------------------------------------------ entropy


def test_top_entropy_tokens_by_hand():
    # T_0 = 5: ceil(0.2 * 5) = 1 token, the highest entropy 2.0 at t = 3; T_1 = 6: ceil(1.2) = 2 tokens, 0.9 at t = 0
    # and the tie 0.5 at t = 2 and t = 4 goes to the earlier t = 2; padding (t = 5, 6 of row 0) never, even at 9.
    entropy = torch.tensor([[0.1, 0.2, 0.3, 2.0, 0.4, 9.0, 9.0], [0.9, 0.1, 0.5, 0.2, 0.5, 0.3, 9.0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1, 0]])
    s = top_entropy_tokens(entropy, mask, q=0.2)
    assert s.tolist() == [[0, 0, 0, 1, 0, 0, 0], [1, 0, 1, 0, 0, 0, 0]]


def test_entropy_routing_by_hand_same_for_every_reward_mass_as_routing():
    entropy = torch.tensor([[0.1, 0.2, 0.3, 2.0, 0.4, 9.0, 9.0], [0.9, 0.1, 0.5, 0.2, 0.5, 0.3, 9.0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1, 0]])
    # row 0: one token of 5 selected, u = 5 there (<= w_max 5), 0 elsewhere; row 1: 2 of 6, u = 3 each
    w = entropy_routing(entropy, mask, n_rewards=3, q=0.2, w_max=5.0, clip="clip")
    assert w.shape == (2, 3, 7)
    for k in range(3):
        assert w[0, k].tolist() == [0, 0, 0, 5, 0, 0, 0]
        assert w[1, k].tolist() == [3, 0, 3, 0, 0, 0, 0]
    # with w_max 4 clip drops row 0's excess 1 (mass 4 of 5), mass keeps it (spread over the other 4 tokens)
    clipped = entropy_routing(entropy, mask, 1, q=0.2, w_max=4.0, clip="clip")
    kept = entropy_routing(entropy, mask, 1, q=0.2, w_max=4.0, clip="mass")
    assert clipped[0, 0].sum().item() == pytest.approx(4.0)
    assert kept[0, 0].tolist() == pytest.approx([0.25, 0.25, 0.25, 4, 0.25, 0, 0])
    # lam mixes with uniform as routing_weights does: v = 0.5 + 0.5 u
    half = entropy_routing(entropy, mask, 1, q=0.2, lam=0.5)
    assert half[1, 0].tolist() == pytest.approx([2, 0.5, 2, 0.5, 0.5, 0.5, 0])
    assert torch.equal(half, routing_weights(top_entropy_tokens(entropy, mask, 0.2)[:, None], mask, lam=0.5))


def test_entropy_q_range():
    assert TrainConfig(routing="entropy", entropy_q=0.5).entropy_q == 0.5
    for bad in (0.0, 1.5):
        with pytest.raises(ConfigError, match="entropy_q"):
            TrainConfig(entropy_q=bad)


# ------------------------------------------------------------------------------------------ scale-matched GDPO

# 2 groups of 3, 2 rewards
REWARDS = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0]])


def test_reward_weights_are_not_scales_gdpo_normalises_them_away():
    # uniform factors: reward_weights (0.5, 0.5) give GDPO's advantages unchanged (the batch std absorbs them)
    mask = torch.ones(6, 4)
    gdpo = get_estimator("gdpo")
    plain = gdpo(REWARDS, None, mask, 3).advantages
    weighted = gdpo(REWARDS, None, mask, 3, weights=[0.5, 0.5]).advantages
    assert torch.allclose(weighted, plain, atol=1e-3)  # up to eps (1e-4 on a std of about 0.5)
    # reward_scales (0.5, 0.5) halve them (mu = 0 here, every a[k] has mean 0 per group)
    scaled = scale_matched_gdpo_estimator(REWARDS, scale_matched_weights([0.5, 0.5], mask), mask, 3).advantages
    assert torch.allclose(scaled, 0.5 * plain, atol=1e-6)
    assert not torch.allclose(scaled, weighted, atol=1e-3)


def test_scale_matched_gdpo_by_hand():
    # group 1 rewards (1, 0, 0) and (0, 1, 0): a = (2, -1, -1) / sqrt(3) and (-1, 2, -1) / sqrt(3) (std 1/sqrt(3));
    # group 2 (1, 1, 0) and (1, 0, 1): a = (1, 1, -2) / sqrt(3) and (1, -2, 1) / sqrt(3).
    # s = a_1 + a_2 = (1, 1, -2, 2, -1, -1) / sqrt(3); mu = 0, sigma = sqrt(12 / 5) / sqrt(3) = sqrt(4 / 5).
    # with c = (1, 0.25): A_i = (a_1 + 0.25 a_2) / sigma
    r3 = math.sqrt(3.0)
    a1 = torch.tensor([2.0, -1, -1, 1, 1, -2]) / r3
    a2 = torch.tensor([-1.0, 2, -1, 1, -2, 1]) / r3
    sigma = math.sqrt(4.0 / 5.0)
    expected = (a1 + 0.25 * a2) / (sigma + 1e-4)
    mask = torch.tensor([[1, 1, 0]] * 6)
    got = scale_matched_gdpo_estimator(REWARDS, scale_matched_weights([1.0, 0.25], mask), mask, 3)
    ones = scale_matched_gdpo_estimator(REWARDS, scale_matched_weights([1.0, 1.0], mask), mask, 3).advantages
    assert torch.equal(ones, get_estimator("gdpo")(REWARDS, None, mask, 3).advantages)  # c = 1: gdpo exactly
    a_eps = lambda a: a * (1 / r3) / (1 / r3 + 1e-4)  # noqa: E731 (a's own eps: std + 1e-4)
    expected = (a_eps(a1) + 0.25 * a_eps(a2)) / (sigma * (1 / r3) / (1 / r3 + 1e-4) + 1e-4)
    assert torch.allclose(got.advantages[:, 0], expected, atol=1e-4)
    assert torch.equal(got.advantages[:, 2], torch.zeros(6))  # padding
    # the weights route (0.5, 0.5) as scales only: equal factors on both rewards are a plain multiple of GDPO
    assert torch.allclose(got.advantages[:, 0], got.advantages[:, 1])
    # reward_weights (1, 0.25) give a different answer: sigma is recomputed from the weighted sums
    weighted = gdpo_advantages(REWARDS, 3, weights=[1.0, 0.25])
    assert not torch.allclose(weighted, got.advantages[:, 0], atol=1e-3)


def test_reward_scales_are_a_gdpo_option():
    assert TrainConfig(method="gdpo", reward_scales={"a": 0.5}).reward_scale_vector(["b", "a"]) == [1.0, 0.5]
    assert TrainConfig(method="gdpo").reward_scale_vector(["a"]) is None
    with pytest.raises(ConfigError, match="reward_scales"):
        TrainConfig(reward_scales={"a": 0.5})  # mrtpo
    with pytest.raises(ConfigError, match="reward_scales"):
        TrainConfig(method="gdpo", reward_scales={"a": -1.0})
    with pytest.raises(ConfigError, match="reward_scales"):
        TrainConfig(method="gdpo", reward_scales={"a": 0.5}).validate_against(["b"])


# ------------------------------------------------------------------------------------------ the built-in trainer


@pytest.mark.train
def test_shuffle_trains_and_permutes_the_replay_weights(make_cfg):
    from core.run import lifecycle
    from core.run import step as step_lib

    state = lifecycle.build_state(make_cfg())
    rollout = step_lib.collect_rollout(state, 1)
    scores = step_lib.verify(state, rollout)
    logprobs = step_lib.rollout_logprobs(state, rollout)
    plain = step_lib.route(state, rollout, scores, logprobs, 1).weights
    state.cfg = make_cfg(routing_shuffle="on", routing_shuffle_seed=5)
    shuffled = step_lib.route(state, rollout, scores, logprobs, 1).weights
    assert torch.equal(shuffled, shuffle_routing(plain, rollout.mask, shuffle_generator(5, 1)))
    state = lifecycle.build_state(make_cfg(routing_shuffle="on"))
    results = [step_lib.train_step(state, s) for s in (1, 2)]
    assert all(math.isfinite(r.metrics["loss/total"]) for r in results)


@pytest.mark.train
def test_entropy_routing_trains_with_the_same_weights_for_every_reward(make_cfg):
    from core.run import lifecycle
    from core.run import step as step_lib

    state = lifecycle.build_state(make_cfg(routing="entropy", entropy_q=0.3))
    result = step_lib.train_step(state, 1)
    assert math.isfinite(result.metrics["loss/total"])
    frame = result.credit
    assert frame["distance"].isna().all()  # no replay ran
    per_sample = frame.groupby(["sample", "reward"])["weight"].apply(lambda w: (w > 0).sum())
    assert (per_sample > 0).all()
    weights = frame.pivot_table(index=["sample", "t"], columns="reward", values="weight")
    assert weights.nunique(axis=1).max() == 1  # the same for every reward


@pytest.mark.train
def test_scale_matched_gdpo_trains_and_scales_the_advantages(make_cfg):
    from core.run import lifecycle
    from core.run import step as step_lib

    plain = step_lib.train_step(lifecycle.build_state(make_cfg(method="gdpo")), 1)
    half = step_lib.train_step(lifecycle.build_state(make_cfg(method="gdpo", reward_scales={"test:letters": 0.5})), 1)
    assert math.isfinite(half.metrics["loss/total"])
    assert half.metrics["adv/abs_mean"] == pytest.approx(0.5 * plain.metrics["adv/abs_mean"], rel=1e-5)


def test_shuffle_of_a_later_process_takes_its_own_keys():
    # a multi-process run: process p passes rows_before = p * b and permutes its rows as the rows after the others'
    # in one draw, so two processes holding the same rows do not permute them alike
    torch.manual_seed(0)
    w = torch.rand(3, 2, 6)
    mask = torch.ones(3, 6)
    both = shuffle_routing(torch.cat([w, w]), torch.cat([mask, mask]), shuffle_generator(5, 2))
    first = shuffle_routing(w, mask, shuffle_generator(5, 2))
    second = shuffle_routing(w, mask, shuffle_generator(5, 2), rows_before=3)
    assert torch.equal(first, both[:3]) and torch.equal(second, both[3:])
    assert not torch.equal(first, second)  # the same rows, other permutations
    assert torch.equal(second.sort(-1).values, w.sort(-1).values)  # each row keeps its weights
