"""Advantage estimators: hand-computed cases, NaN rewards, edge cases, the MRTPO -> GDPO reduction,
a slow loop reference checked against the vectorised code, and local rows (data-parallel) equal to
slices of the full computation."""

import math
import statistics

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from core.algos.advantages import (
    ESTIMATORS,
    batch_statistics,
    gdpo_advantages,
    get_estimator,
    group_normalized,
    grpo_advantages,
    mrtpo_token_advantages,
    rows_token_advantages,
    token_broadcast,
)

# Case A: 2 groups x 3 samples, 2 rewards (columns), reward weights w = (1, 2).
#   group 1: r1 = (0, .5, 1)  -> mean .5, deviations (-.5, 0, .5), var = (.25 + 0 + .25) / 2 = .25, std .5
#            r2 = (1, 1, 1)   -> zero spread -> a2 = 0
#   group 2: r1 = (.5, 1, 0)  -> mean .5, std .5
#            r2 = (0, .25, .5) -> mean .25, deviations (-.25, 0, .25), var = .0625, std .25
R_A = torch.tensor([[0.0, 1.0], [0.5, 1.0], [1.0, 1.0], [0.5, 0.0], [1.0, 0.25], [0.0, 0.5]])
W_A = [1.0, 2.0]


def test_group_normalized_by_hand():
    a = group_normalized(R_A, group_size=3, eps=0.0)
    expected = torch.tensor([[-1.0, 0.0], [0.0, 0.0], [1.0, 0.0], [0.0, -1.0], [1.0, 0.0], [-1.0, 1.0]])
    assert torch.allclose(a, expected, atol=1e-6)
    # with the default eps = 1e-4 added to the std: -.5 / (.5 + 1e-4)
    a_eps = group_normalized(R_A, group_size=3)
    assert a_eps[0, 0].item() == pytest.approx(-0.5 / 0.5001, rel=1e-6)
    assert a_eps[3, 1].item() == pytest.approx(-0.25 / 0.2501, rel=1e-6)


def test_gdpo_by_hand():
    # s = a1 + 2 a2 = (-1, 0, 1, -2, 1, 1); batch mean 0; var = (1+0+1+4+1+1)/5 = 1.6
    adv = gdpo_advantages(R_A, group_size=3, weights=W_A, eps=0.0)
    expected = torch.tensor([-1.0, 0.0, 1.0, -2.0, 1.0, 1.0]) / math.sqrt(1.6)
    assert torch.allclose(adv, expected, atol=1e-6)


def test_grpo_by_hand():
    # s = r1 + 2 r2: group 1 (2, 2.5, 3) -> mean 2.5, std .5 -> (-1, 0, 1)
    #                group 2 (.5, 1.5, 1) -> mean 1, std .5  -> (-1, 1, 0)
    adv = grpo_advantages(R_A, group_size=3, weights=W_A, eps=0.0)
    assert torch.allclose(adv, torch.tensor([-1.0, 0.0, 1.0, -1.0, 1.0, 0.0]), atol=1e-6)


def test_mrtpo_by_hand():
    # routing weights over T = 2 tokens: reward 1 -> (2, 0) for every sample, reward 2 -> (.5, 1.5)
    rw = torch.zeros(6, 2, 2)
    rw[:, 0] = torch.tensor([2.0, 0.0])
    rw[:, 1] = torch.tensor([0.5, 1.5])
    adv, credit = mrtpo_token_advantages(R_A, rw, group_size=3, weights=W_A, eps=0.0)
    sigma = math.sqrt(1.6)  # mu = 0 (see test_gdpo_by_hand)
    # sample 3: a1 = 0, a2 = -1 -> t0: 1*2*0 + 2*.5*(-1) = -1; t1: 0 + 2*1.5*(-1) = -3
    assert adv[3].tolist() == pytest.approx([-1.0 / sigma, -3.0 / sigma], rel=1e-6)
    # sample 5: a1 = -1, a2 = 1 -> t0: -2 + 1 = -1; t1: 0 + 3 = 3
    assert adv[5].tolist() == pytest.approx([-1.0 / sigma, 3.0 / sigma], rel=1e-6)
    # sample 2: a1 = 1, a2 = 0 -> t0: 2; t1: 0
    assert adv[2].tolist() == pytest.approx([2.0 / sigma, 0.0], abs=1e-6)
    assert credit[5, 0].tolist() == pytest.approx([-2.0 / sigma, 0.0], abs=1e-6)
    assert credit[5, 1].tolist() == pytest.approx([1.0 / sigma, 3.0 / sigma], rel=1e-6)


# Case B: 2 groups x 4 samples; reward 2 does not apply to group 2's prompt (NaN).
#   group 1: r1 = (1, 0, 1, 0), r2 = (1, 1, 0, 0): mean .5, var = 4 * .25 / 3 = 1/3 -> a = +-.5 sqrt(3)
#   group 2: r1 = (1, 1, 1, 0): mean .75, var = (3 * .0625 + .5625) / 3 = .25 -> a = (.5, .5, .5, -1.5)
NAN = float("nan")
R_B = torch.tensor(
    [[1.0, 1.0], [0.0, 1.0], [1.0, 0.0], [0.0, 0.0], [1.0, NAN], [1.0, NAN], [1.0, NAN], [0.0, NAN]]
)


def test_nan_rewards_contribute_nothing():
    a = group_normalized(R_B, group_size=4, eps=0.0)
    h = 0.5 * math.sqrt(3.0)
    expected = torch.tensor([[h, h], [-h, h], [h, -h], [-h, -h], [0.5, 0], [0.5, 0], [0.5, 0], [-1.5, 0]])
    assert torch.allclose(a, expected, atol=1e-6)
    assert not torch.isnan(a).any()
    # GRPO: group 2's s is r1 alone (the NaN reward is left out of the sum)
    g = grpo_advantages(R_B, group_size=4, eps=0.0)
    assert g[4:].tolist() == pytest.approx([0.5, 0.5, 0.5, -1.5], rel=1e-6)
    # group 1: s = (2, 1, 1, 0): mean 1, var = (1 + 0 + 0 + 1) / 3 -> std sqrt(2/3)
    assert g[:4].tolist() == pytest.approx([x / math.sqrt(2 / 3) for x in (1, 0, 0, -1)], rel=1e-6)
    # GDPO: s = a1 + a2 = (2h, 0, 0, -2h, .5, .5, .5, -1.5), mean 0
    s = torch.tensor([2 * h, 0, 0, -2 * h, 0.5, 0.5, 0.5, -1.5])
    gd = gdpo_advantages(R_B, group_size=4, eps=0.0)
    assert torch.allclose(gd, s / s.std(), atol=1e-6)


def test_zero_spread_and_degenerate_groups_give_zero():
    r = torch.full((6, 2), 0.1)  # every reward constant everywhere (0.1 is not exact in binary)
    assert torch.equal(group_normalized(r, 3), torch.zeros(6, 2))
    assert torch.equal(grpo_advantages(r, 3), torch.zeros(6))
    assert torch.equal(gdpo_advantages(r, 3), torch.zeros(6))
    adv, credit = mrtpo_token_advantages(r, torch.rand(6, 2, 5), 3, None)
    assert torch.equal(adv, torch.zeros(6, 5)) and torch.equal(credit, torch.zeros(6, 2, 5))
    # a group where only one sample has the reward applicable: std undefined -> 0
    r1 = torch.tensor([[1.0], [NAN], [NAN], [0.0], [1.0], [1.0]])
    assert group_normalized(r1, 3)[:3].tolist() == [[0.0], [0.0], [0.0]]
    # group size 1: nothing to compare against
    assert torch.equal(grpo_advantages(torch.tensor([[1.0], [0.0]]), 1), torch.zeros(2))


def test_reduction_mrtpo_equals_gdpo_exactly():
    torch.manual_seed(0)
    for trial in range(5):
        b, k, t, g = 12, 3, 7, 4
        # binary rewards (many zero-spread groups) on odd trials, continuous ones on even trials
        r = (torch.rand(b, k) < 0.5).float() if trial % 2 else torch.rand(b, k)
        r[g:2 * g, 1] = NAN  # one group without reward 2
        w = torch.rand(k) + 0.5
        adv, _ = mrtpo_token_advantages(r, torch.ones(b, k, t), g, w)
        ref = gdpo_advantages(r, g, w)
        assert torch.equal(adv, ref[:, None].expand(b, t)), f"trial {trial}"


def test_credit_decomposes_the_advantage():
    torch.manual_seed(1)
    r = torch.rand(8, 3)
    r[4:, 2] = NAN
    rw = torch.rand(8, 3, 5) * 3
    w = torch.tensor([1.0, 0.5, 2.0])
    adv, credit = mrtpo_token_advantages(r, rw, 4, w)
    a = group_normalized(r, 4)
    s = (a * w).sum(1)
    mu, sigma = s.mean(), s.std()
    assert torch.allclose(credit.sum(1) - mu / (sigma + 1e-4), adv, atol=1e-5)


def _slow_group_normalized(rows, g, eps):
    """Loop reference with the statistics module (stdev is Bessel-corrected)."""
    out = [[0.0] * len(rows[0]) for _ in rows]
    for start in range(0, len(rows), g):
        for k in range(len(rows[0])):
            vals = [(i, rows[i][k]) for i in range(start, start + g) if not math.isnan(rows[i][k])]
            if len(vals) < 2 or len({v for _, v in vals}) == 1:
                continue
            mean = statistics.fmean(v for _, v in vals)
            sd = statistics.stdev(v for _, v in vals)
            for i, v in vals:
                out[i][k] = (v - mean) / (sd + eps)
    return out


def _slow_mrtpo(rows, rw, g, w, eps):
    a = _slow_group_normalized(rows, g, eps)
    s = [sum(w[k] * a[i][k] for k in range(len(w))) for i in range(len(rows))]
    if len(set(s)) == 1:
        return [[0.0] * len(rw[0][0]) for _ in rows]
    mu, sd = statistics.fmean(s), statistics.stdev(s)
    return [
        [(sum(w[k] * rw[i][k][t] * a[i][k] for k in range(len(w))) - mu) / (sd + eps) for t in range(len(rw[i][0]))]
        for i in range(len(rows))
    ]


def _slow_grpo(rows, g, w, eps):
    s = [[sum(w[k] * v for k, v in enumerate(row) if not math.isnan(v))] for row in rows]
    return [x[0] for x in _slow_group_normalized(s, g, eps)]


reward_value = st.one_of(st.just(NAN), st.sampled_from([0.0, 0.5, 1.0]), st.floats(0, 1, width=32))


@settings(max_examples=60, deadline=None)
@given(
    g=st.integers(1, 4),
    n_groups=st.integers(1, 3),
    k=st.integers(1, 3),
    t=st.integers(1, 4),
    data=st.data(),
)
def test_vectorised_matches_slow_loop(g, n_groups, k, t, data):
    b = g * n_groups
    rows = [[data.draw(reward_value) for _ in range(k)] for _ in range(b)]
    rw = [[[data.draw(st.floats(0, 5, width=32)) for _ in range(t)] for _ in range(k)] for _ in range(b)]
    w = [data.draw(st.floats(0.125, 2, width=32)) for _ in range(k)]
    r = torch.tensor(rows, dtype=torch.float64)
    a = group_normalized(r, g, 1e-4)
    assert torch.allclose(a, torch.tensor(_slow_group_normalized(rows, g, 1e-4), dtype=torch.float64), atol=1e-9)
    grpo = grpo_advantages(r, g, w, 1e-4)
    assert torch.allclose(grpo, torch.tensor(_slow_grpo(rows, g, w, 1e-4), dtype=torch.float64), atol=1e-9)
    adv, _ = mrtpo_token_advantages(r, torch.tensor(rw, dtype=torch.float64), g, w, 1e-4)
    assert torch.allclose(adv, torch.tensor(_slow_mrtpo(rows, rw, g, w, 1e-4), dtype=torch.float64), atol=1e-7)


def test_registry_same_signature_and_masking():
    torch.manual_seed(2)
    r = torch.rand(6, 2)
    mask = torch.ones(6, 5, dtype=torch.bool)
    mask[1, 3:] = False
    rw = torch.rand(6, 2, 5) * mask[:, None, :]
    outs = {name: get_estimator(name)(r, rw, mask, 3, [1.0, 1.0]) for name in ESTIMATORS}
    for name, out in outs.items():
        assert out.advantages.shape == (6, 5) and out.credit.shape == (6, 2, 5), name
        assert torch.all(out.advantages[~mask] == 0) and torch.all(out.credit.permute(0, 2, 1)[~mask] == 0), name
        assert torch.allclose(out.credit.sum(1) * mask, out.advantages, atol=1e-4), name
    assert torch.equal(outs["gdpo"].advantages, token_broadcast(gdpo_advantages(r, 3, [1.0, 1.0]), mask))
    assert torch.equal(outs["grpo"].advantages, token_broadcast(grpo_advantages(r, 3, [1.0, 1.0]), mask))
    with pytest.raises(ValueError, match="gdpo, grpo, mrtpo"):
        get_estimator("ppo")


def test_shape_errors():
    with pytest.raises(ValueError, match="groups of 4"):
        group_normalized(torch.rand(6, 2), 4)
    with pytest.raises(ValueError, match="reward weights"):
        gdpo_advantages(torch.rand(6, 2), 3, [1.0])


@settings(max_examples=40, deadline=None)
@given(
    g=st.integers(2, 4),
    n_groups=st.integers(1, 4),
    k=st.integers(1, 3),
    t=st.integers(1, 5),
    processes=st.integers(1, 4),
    data=st.data(),
)
def test_local_rows_equal_slices_of_the_full_computation_bitwise(g, n_groups, k, t, processes, data):
    """Data-parallel: each process passes the gathered rewards with its own rows' routing weights and mask;
    every estimator returns exactly (bitwise) those rows of the full computation, whatever the split, also
    when a group spans two processes."""
    b = g * n_groups
    rewards = torch.tensor([[data.draw(reward_value) for _ in range(k)] for _ in range(b)], dtype=torch.float32)
    lengths = torch.tensor([data.draw(st.integers(0, t)) for _ in range(b)])
    mask = torch.arange(t)[None, :] < lengths[:, None]  # (B, T)
    rw = torch.rand(b, k, t, generator=torch.Generator().manual_seed(data.draw(st.integers(0, 99)))) * 3 * mask[:, None]
    w = [data.draw(st.sampled_from([0.5, 1.0, 2.0])) for _ in range(k)]
    cuts = sorted({0, b, *(data.draw(st.integers(0, b)) for _ in range(processes - 1))})
    for name in ESTIMATORS:
        full = get_estimator(name)(rewards, rw, mask, g, w)
        for lo, hi in zip(cuts, cuts[1:], strict=False):
            part = get_estimator(name)(rewards, rw[lo:hi], mask[lo:hi], g, w, rows=slice(lo, hi))
            assert torch.equal(part.advantages, full.advantages[lo:hi]), (name, lo, hi)
            assert torch.equal(part.credit, full.credit[lo:hi]), (name, lo, hi)


def test_rows_token_advantages_uses_the_given_statistics():
    # Case A's batch statistics (mu = 0, sigma = sqrt(1.6), eps = 0) applied to rows 3..5 only.
    stats = batch_statistics(R_A, group_size=3, weights=W_A, eps=0.0)
    assert stats.mu.item() == pytest.approx(0.0, abs=1e-7) and stats.sigma.item() == pytest.approx(math.sqrt(1.6))
    rw = torch.ones(3, 2, 1)
    adv, _ = rows_token_advantages(stats, rw, slice(3, 6), W_A, eps=0.0)
    assert adv[:, 0].tolist() == pytest.approx([-2 / math.sqrt(1.6), 1 / math.sqrt(1.6), 1 / math.sqrt(1.6)])
    with pytest.raises(ValueError, match="do not match"):
        rows_token_advantages(stats, rw, slice(0, 2), W_A)
    with pytest.raises(ValueError, match="contiguous range"):
        rows_token_advantages(stats, rw, slice(4, 7), W_A)


# ----------------------------------------------------------------------------- TRL's sum_then_normalize, routed


def test_sum_then_normalize_credit_hand_computed_for_each_scale():
    """G = 2, w = (2, 1). Group 0: rewards (1, 0), (0, 1) -> R = 2, 1, mean 1.5, group std 0.7071;
    c[0] = (2 (1 - 0.5), 1 (0 - 0.5)) / D = (1, -0.5) / D. Group 1: (1, 1), (0, 0) -> R = 3, 0, c = (1, 0.5) / D.
    Batch std of R = (2, 1, 3, 0): sqrt(5 / 3) = 1.29099."""
    from core.algos.advantages import sum_then_normalize_credit

    r = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    w = [2.0, 1.0]
    none = sum_then_normalize_credit(r, 2, w, "none")
    torch.testing.assert_close(none, torch.tensor([[1.0, -0.5], [-1.0, 0.5], [1.0, 0.5], [-1.0, -0.5]]))
    group = sum_then_normalize_credit(r, 2, w, "group")
    torch.testing.assert_close(group[0], torch.tensor([1.0, -0.5]) / (0.5**0.5 + 1e-4))
    torch.testing.assert_close(group[2], torch.tensor([1.0, 0.5]) / ((4.5**0.5) + 1e-4))
    batch = sum_then_normalize_credit(r, 2, w, "batch")
    torch.testing.assert_close(batch, none / ((5 / 3) ** 0.5 + 1e-4))


def test_sum_then_normalize_unscorable_rows_and_lone_samples_get_zero():
    """A sample every reward skips (all NaN) is left out of its group's mean and gets 0; a group with one scorable
    sample has no std ("group") and gets 0; under "none" that lone sample's deviation is 0 anyway."""
    from core.algos.advantages import sum_then_normalize_credit

    nan = float("nan")
    r = torch.tensor([[nan, nan], [1.0, nan], [1.0, 0.0], [0.0, 0.0]])
    for scale in ("group", "batch", "none"):
        c = sum_then_normalize_credit(r, 2, None, scale)
        assert torch.equal(c[0], torch.zeros(2)) and torch.equal(c[1], torch.zeros(2))
    torch.testing.assert_close(sum_then_normalize_credit(r, 2, None, "none")[2:], torch.tensor([[0.5, 0.0], [-0.5, 0.0]]))


def test_routed_sum_estimator_sums_its_credit_and_reduces_to_the_sequence_advantage():
    """A[i, t] = sum_k w[k, i, t] c[i, k]; with routing weights 1 every token carries sum_k c[i, k] (TRL's A_i)."""
    from core.algos.advantages import routed_sum_estimator, sum_then_normalize_credit, trl_estimator

    g = torch.Generator().manual_seed(0)
    r = torch.randint(0, 2, (8, 3), generator=g).float()
    mask = torch.tensor([[1, 1, 1, 0]] * 8)
    omega = torch.rand(8, 3, 4, generator=g) * mask[:, None, :]
    adv, credit = routed_sum_estimator("group")(r, omega, mask, 4, [2.0, 1.0, 0.5])
    torch.testing.assert_close(adv, credit.sum(1))
    seq = sum_then_normalize_credit(r, 4, [2.0, 1.0, 0.5], "group").sum(1)
    uniform, _ = trl_estimator("grpo", "sum_then_normalize", "group")(r, omega, mask, 4, [2.0, 1.0, 0.5])
    torch.testing.assert_close(uniform, seq[:, None] * mask)
    with pytest.raises(ValueError):
        trl_estimator("gdpo", "sum_then_normalize")
