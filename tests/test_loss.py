"""Policy loss: PPO clipped surrogate, k3 KL, aggregation, stats, gradient direction."""

import math

import pytest
import torch

from core.algos.loss import aggregate, clipped_surrogate, entropy_from_logits, k3_kl, policy_loss, token_logprobs


def _batch():
    g = torch.Generator().manual_seed(0)
    adv = torch.randn(3, 5, generator=g)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0]], dtype=torch.bool)
    logp = -torch.rand(3, 5, generator=g) * 3
    return adv, mask, logp


def test_ratio_one_gives_minus_mean_advantage_and_no_clipping():
    adv, mask, logp = _batch()
    loss, stats = policy_loss(logp, logp.clone(), adv, mask, clip_range=0.2)
    assert loss.item() == pytest.approx(-adv[mask].mean().item(), rel=1e-6)
    assert stats["policy/clip_frac"] == 0.0 and stats["policy/kl"] == 0.0 and stats["loss/kl"] == 0.0
    assert stats["loss/total"] == stats["loss/policy"] == pytest.approx(loss.item())
    assert math.isnan(stats["policy/entropy"])


def test_clipped_surrogate_hand_case():
    # A = +1, ratio e^0.5 = 1.6487 > 1.2: clipped term -1.2 is larger than -1.6487 -> clipped
    # A = -1, ratio e^0.5: unclipped 1.6487 > clipped 1.2 -> not clipped (pessimistic bound)
    # A = +1, ratio e^-0.5 = .6065 < .8: unclipped -.6065 > clipped -.8 -> not clipped
    logp = torch.tensor([0.5, 0.5, -0.5])
    old = torch.zeros(3)
    adv = torch.tensor([1.0, -1.0, 1.0])
    per_token, clipped = clipped_surrogate(logp, old, adv, 0.2)
    assert per_token.tolist() == pytest.approx([-1.2, math.exp(0.5), -math.exp(-0.5)], rel=1e-6)
    assert clipped.tolist() == [1.0, 0.0, 0.0]


def test_gradient_direction():
    adv, mask, logp0 = _batch()
    logp = logp0.clone().requires_grad_(True)
    loss, _ = policy_loss(logp, logp0, adv, mask, clip_range=0.2)
    loss.backward()
    # at ratio 1: dL/dlogp = -A / N on real tokens, 0 on padding: descent raises logp where A > 0
    n = mask.sum()
    assert torch.allclose(logp.grad, torch.where(mask, -adv / n, 0.0), atol=1e-7)
    # beyond the clip in the advantage's direction the gradient vanishes
    logp = (logp0 + 1.0).requires_grad_(True)
    policy_loss(logp, logp0, torch.ones(3, 5), mask, clip_range=0.2)[0].backward()
    assert torch.all(logp.grad == 0)


def test_k3_kl_and_reference_penalty():
    adv, mask, logp = _batch()
    assert torch.all(k3_kl(logp, logp) == 0)
    ref = logp - 0.3
    kl = k3_kl(logp, ref)
    assert torch.allclose(kl, torch.full_like(kl, math.exp(-0.3) + 0.3 - 1.0))
    loss, stats = policy_loss(logp, logp, adv, mask, ref_logp=ref, kl_beta=0.5)
    assert stats["loss/kl"] == pytest.approx(math.exp(-0.3) + 0.3 - 1.0, rel=1e-5)
    assert loss.item() == pytest.approx(stats["loss/policy"] + 0.5 * stats["loss/kl"], rel=1e-6)
    assert torch.isfinite(k3_kl(torch.zeros(1), torch.tensor([-1e4]))).all()


def test_aggregation_modes():
    per_token = torch.tensor([[1.0, 1.0, 1.0, 1.0], [4.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]])
    assert aggregate(per_token, mask, "token-mean").item() == pytest.approx(8 / 5)
    assert aggregate(per_token, mask, "seq-mean-token-mean").item() == pytest.approx((1 + 4) / 2)
    with pytest.raises(ValueError, match="seq-mean-token-mean"):
        aggregate(per_token, mask, "sum")


def test_token_logprobs_entropy_and_stats():
    logits = torch.randn(2, 3, 7)
    ids = torch.randint(0, 7, (2, 3))
    expected = torch.log_softmax(logits, -1).gather(-1, ids[..., None]).squeeze(-1)
    assert torch.allclose(token_logprobs(logits, ids), expected, atol=1e-6)
    assert torch.allclose(entropy_from_logits(torch.zeros(1, 1, 8)), torch.tensor([[math.log(8)]]), atol=1e-6)
    probs = torch.softmax(logits, -1)
    assert torch.allclose(entropy_from_logits(logits), -(probs * probs.log()).sum(-1), atol=1e-5)
    mask = torch.ones(2, 3, dtype=torch.bool)
    _, stats = policy_loss(expected + 0.1, expected, torch.ones(2, 3), mask, logits=logits)
    assert stats["policy/entropy"] == pytest.approx(entropy_from_logits(logits).mean().item(), rel=1e-5)
    assert stats["policy/kl"] == pytest.approx(math.exp(0.1) - 0.1 - 1, rel=1e-4)
