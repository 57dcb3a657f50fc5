"""Specificity metrics (docs/METHOD.md, "Specificity"): routing overlap, mass-based control and lift, the
mass_in ceiling, AUC minus the entropy baseline and AUC by outcome, on a hand-computed case."""

from __future__ import annotations

import math

import pytest
import torch

from core.algos.span_metrics import mass_control, pairwise_overlap, specificity, token_shares

NAN = float("nan")
# two samples, two rewards, four tokens
W = torch.tensor([[[2.0, 2.0, 0.0, 0.0], [0.0, 1.0, 1.0, 2.0]],
                  [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]])
SPANS = torch.tensor([[[1, 0, 0, 0], [0, 1, 0, 1]],
                      [[0, 0, 0, 1], [0, 0, 0, 0]]], dtype=torch.bool)
MASK = torch.ones(2, 4)
D = torch.tensor([[[0.9, 0.1, 0.2, 0.3], [0.5, 0.5, 0.5, 0.5]],
                  [[0.4, 0.3, 0.2, 0.1], [0.5, 0.5, 0.5, 0.5]]])
REWARDS = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
ENTROPY = torch.tensor([[3.0, 2.0, 1.0, 0.0], [0.0, 1.0, 2.0, 3.0]])


def test_token_shares_and_overlap_hand_case():
    p = token_shares(W, MASK)
    assert p[0].tolist() == [[0.5, 0.5, 0.0, 0.0], [0.0, 0.25, 0.25, 0.5]]
    o = pairwise_overlap(p)
    assert o[0, 0, 1].item() == pytest.approx(0.25) and o[0, 1, 0].item() == pytest.approx(0.25)  # min summed
    assert o[1, 0, 1].item() == pytest.approx(1.0)  # identical (uniform) routing: GDPO
    assert math.isnan(o[0, 0, 0].item())
    dead = token_shares(torch.tensor([[[NAN] * 4, [1.0, 0, 0, 0]]]), torch.ones(1, 4))
    assert torch.isnan(dead[0, 0]).all() and math.isnan(pairwise_overlap(dead)[0, 0, 1].item())


def test_mass_control_and_lift_hand_case():
    lift, ctl = mass_control(token_shares(W, MASK), SPANS, MASK)
    # sample 0: k=0 span = token 0 (share 1/4): own 0.5 / 0.25 = 2, reward 1's 0 / 0.25 = 0
    #           k=1 span = tokens 1, 3 (share 1/2): own (0.25 + 0.5) / 0.5 = 1.5, reward 0's 0.5 / 0.5 = 1
    assert lift[0].tolist() == pytest.approx([2.0, 1.5])
    assert ctl[0, 0, 1].item() == pytest.approx(0.0) and ctl[0, 1, 0].item() == pytest.approx(1.0)
    # sample 1: k=0 span = token 3 under uniform routing: 1 for both; k=1 has an empty span: NaN
    assert lift[1, 0].item() == pytest.approx(1.0) and ctl[1, 0, 1].item() == pytest.approx(1.0)
    assert math.isnan(lift[1, 1].item()) and math.isnan(ctl[1, 1, 0].item())


def test_specificity_step_metrics_hand_case():
    m = specificity(W, D, SPANS, MASK, REWARDS, ["a", "b"], torch.ones(2, 2, dtype=torch.bool), ENTROPY)
    assert m["span/overlap"] == pytest.approx((0.25 + 1.0) / 2)
    assert m["span/a/overlap"] == pytest.approx(0.625)
    assert m["span/a/lift"] == pytest.approx((2.0 + 1.0) / 2) and m["span/b/lift"] == pytest.approx(1.5)
    assert m["span/a/mass_control"] == pytest.approx((0.0 + 1.0) / 2) and m["span/b/mass_control"] == pytest.approx(1.0)
    assert m["span/a/mass_in_ceiling"] == 1.0 and m["span/b/mass_in_ceiling"] == 0.5
    # reward a: span tokens score 0.9 (sample 0) and 0.1 (sample 1) against 0.1 0.2 0.3 0.4 0.3 0.2:
    # (6 + 0.5) / 12; the entropy scores both span tokens 3 against at most 2: AUC 1
    assert m["span/a/auc_vs_entropy"] == pytest.approx(6.5 / 12 - 1.0)
    assert m["span/a/auc_satisfied"] == 1.0 and m["span/a/auc_violated"] == 0.0
    no_d = specificity(W, None, SPANS, MASK, REWARDS, ["a", "b"], torch.ones(2, 2, dtype=torch.bool))
    assert math.isnan(no_d["span/a/auc_vs_entropy"]) and math.isnan(no_d["span/a/auc_satisfied"])
    assert no_d["span/overlap"] == m["span/overlap"]
    # a reward that does not apply to sample 1 leaves it out of every metric of that reward
    app = torch.tensor([[True, True], [True, False]])
    part = specificity(W, D, SPANS, MASK, REWARDS, ["a", "b"], app, ENTROPY)
    assert part["span/overlap"] == pytest.approx(0.25) and part["span/b/mass_in_ceiling"] == 1.0
    assert part["span/a/mass_control"] == pytest.approx(0.0)
