"""Routing that keeps each reward's advantage mass (docs/METHOD.md, "Keeping each reward's mass"): hand-made
tensors, the invariants, the legacy `clip` behaviour and how old run configs load."""

import json

import numpy as np
import pytest
import torch

from core.algos.routing import ROUTING_CLIPS, RoutingInputs, mass_keeping_clip, route_span, routing_weights
from core.config import ROUTING_CLIPS as CONFIG_ROUTING_CLIPS
from core.config import ConfigError, TrainConfig
from mrtpo_viz import specificity as viz


def test_all_relevance_on_one_token_keeps_the_mass_by_spreading_the_rest_evenly():
    # T = 10, lam = 1: u = 10 on token 3, 0 elsewhere. Clipped at 5 (the old rule) the reward kept 5 of 10.
    d = torch.zeros(1, 1, 10)
    d[0, 0, 3] = 1.0
    mask = torch.ones(1, 10)
    old = routing_weights(d, mask, w_max=5.0, clip="clip")
    assert old.sum().item() == pytest.approx(5.0) and old[0, 0, 3].item() == 5.0
    w = routing_weights(d, mask, w_max=5.0, clip="mass")
    # token 3 holds w_max; the other 5 of mass go evenly to the 9 tokens with no relevance: 5/9 each
    expected = torch.full((10,), 5.0 / 9.0)
    expected[3] = 5.0
    assert torch.allclose(w[0, 0], expected)
    assert w.sum().item() == pytest.approx(10.0)


def test_water_filling_by_hand():
    # v = [4, 3, 1, 1, 1, 0, 0, 0, 0, 0] (mean 1), w_max 3: 4 and 3 clip at 3 (6 of 10); the 3 tokens with v = 1
    # must hold 4: scale c = 4 / 3, each 4/3 < 3; the zeros stay 0 (the positive tokens can hold the mass).
    d = torch.tensor([[[4.0, 3, 1, 1, 1, 0, 0, 0, 0, 0]]])
    w = routing_weights(d, torch.ones(1, 10), w_max=3.0, clip="mass")
    assert torch.allclose(w[0, 0], torch.tensor([3.0, 3, 4 / 3, 4 / 3, 4 / 3, 0, 0, 0, 0, 0]))


def test_no_weight_above_the_cap_means_unchanged_weights():
    d = torch.tensor([[[1.0, 2.0, 3.0, 2.0]]])  # u = [0.5, 1, 1.5, 1] <= 5
    mask = torch.ones(1, 4)
    assert torch.equal(routing_weights(d, mask, clip="mass"), routing_weights(d, mask, clip="clip"))


def test_zero_relevance_and_lam_zero_stay_uniform_and_padding_stays_zero():
    mask = torch.tensor([[1.0, 1, 1, 0, 0]])
    d = torch.zeros(1, 2, 5)
    d[0, 1] = float("nan")  # does not apply
    w = routing_weights(d, mask, clip="mass")
    assert torch.equal(w, mask[:, None, :].expand(1, 2, 5))
    d = torch.rand(1, 2, 5)
    assert torch.allclose(routing_weights(d, mask, lam=0.0, clip="mass"), mask[:, None, :].expand(1, 2, 5))


@pytest.mark.parametrize("lam", [1.0, 0.7, 0.3])
@pytest.mark.parametrize("w_max", [1.0, 1.5, 2.0, 5.0])
def test_invariants_mean_one_and_cap_on_random_sparse_relevance(lam, w_max):
    g = torch.Generator().manual_seed(0)
    d = torch.rand(6, 5, 24, generator=g) ** 10  # a few tokens carry most of the relevance
    d[0, 0] = 0.0
    d[0, 0, 5] = 1.0  # all on one token
    d[1, 2] = float("nan")
    mask = torch.ones(6, 24)
    mask[2, 7:] = 0
    mask[3, 1:] = 0  # a one-token response
    w = routing_weights(d, mask, lam=lam, w_max=w_max, clip="mass")
    n = mask.sum(-1, keepdim=True).expand(6, 5)
    assert torch.allclose(w.sum(-1), n, atol=1e-4)  # mean 1 over the real tokens: all the mass kept
    assert float(w.max()) <= w_max + 1e-5 and float(w.min()) >= 0.0
    assert torch.all(w * (1 - mask[:, None, :]) == 0)
    clipped = routing_weights(d, mask, lam=lam, w_max=w_max, clip="clip")
    # the order of the tokens is kept: a token with more relevance never gets less weight
    order = torch.argsort(clipped[0, 1], descending=True)
    assert torch.all(w[0, 1][order][:-1] >= w[0, 1][order][1:] - 1e-5)


def test_the_iterative_rule_matches_the_water_filling_formula():
    # w = min(w_max, c v) with sum w = T: check c by solving it independently with bisection.
    g = torch.Generator().manual_seed(1)
    v = torch.rand(1, 1, 40, generator=g) ** 6
    v = v * 40 / v.sum()
    w = mass_keeping_clip(v, torch.ones(1, 40), w_max=3.0)
    lo, hi = 1.0, 1e6
    for _ in range(200):
        c = (lo + hi) / 2
        if torch.clamp(c * v, max=3.0).sum() < 40:
            lo = c
        else:
            hi = c
    assert torch.allclose(w, torch.clamp(lo * v, max=3.0), atol=1e-4)


def test_span_routing_takes_the_clip_option():
    span = torch.zeros(1, 1, 8, dtype=torch.bool)
    span[0, 0, 0] = True
    inputs = RoutingInputs(mask=torch.ones(1, 8), span_mask=span, applicable=torch.ones(1, 1, dtype=torch.bool),
                           clip="mass")
    w, _ = route_span(inputs)
    assert w.sum().item() == pytest.approx(8.0) and w[0, 0, 0].item() == 5.0


def test_unknown_clip_is_refused_and_the_lists_agree():
    with pytest.raises(ValueError, match="valid: mass, clip"):
        routing_weights(torch.rand(1, 1, 3), torch.ones(1, 3), clip="drop")
    assert tuple(ROUTING_CLIPS) == tuple(CONFIG_ROUTING_CLIPS)


def test_numpy_twin_matches():
    g = torch.Generator().manual_seed(2)
    d = torch.rand(4, 3, 30, generator=g) ** 8
    d[1, 1] = 0.0
    d[1, 1, 2] = 1.0
    mask = torch.ones(4, 30)
    mask[3, 12:] = 0
    for lam in (1.0, 0.5):
        a = routing_weights(d, mask, lam=lam, w_max=2.0, clip="mass").numpy()
        b = viz.routing_weights(d.numpy(), mask.numpy(), lam=lam, w_max=2.0, clip="mass")
        assert np.allclose(a, b, atol=1e-5)


def test_config_default_is_clip_and_a_run_recorded_before_the_field_loads_as_clip(tmp_path):
    assert TrainConfig().routing_clip == "clip"  # study v3: clip trained better than mass (docs/results/study-v3.md)
    recorded = {k: v for k, v in TrainConfig().to_dict().items() if k != "routing_clip"}
    recorded.update(schema_version=1, reward_names=["a"])
    path = tmp_path / "config.json"
    path.write_text(json.dumps(recorded))
    assert TrainConfig.from_json(path).routing_clip == "clip"
    # a config written by hand (not a run's record) without the field gets today's default
    assert TrainConfig.from_dict({"steps": 3}).routing_clip == "clip"
    assert TrainConfig.from_dict({"steps": 3, "routing_clip": "mass"}).routing_clip == "mass"
    with pytest.raises(ConfigError) as exc:
        TrainConfig(routing_clip="drop")
    assert exc.value.field == "routing_clip"
