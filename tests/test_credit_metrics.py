"""Credit metrics a useless router cannot flatter (core/algos/span_metrics.py: retained mass, clipped share, the
label-rotation control), on hand-made tensors, and logged by a real training step for GDPO and MRTPO alike."""

import math

import pytest
import torch

from core.algos import span_metrics as sm
from core.algos.routing import routing_weights

NAMES = ["a", "b", "c"]


def test_retained_mass_by_hand():
    # one sample, T = 4; reward a: |adv| 2, weights [3, 0, 0, 0] (all on one token, clipped at 3: keeps 3 of 4);
    # reward b: weights 1 (GDPO): keeps all; reward c: advantage 0, not active: NaN.
    w = torch.tensor([[[3.0, 0, 0, 0], [1, 1, 1, 1], [4, 0, 0, 0]]])
    adv = torch.tensor([[2.0, -1.0, 0.0]])
    mask = torch.ones(1, 4)
    active = sm.active_pairs(adv, torch.ones(1, 3, dtype=torch.bool))
    assert active.tolist() == [[True, True, False]]
    kept = sm.retained_mass(w, adv, mask, active)
    assert kept[0].item() == pytest.approx(0.75) and kept[1].item() == pytest.approx(1.0) and math.isnan(kept[2])
    m = sm.credit_mass(w, adv, mask, torch.ones(1, 3, dtype=torch.bool), NAMES, w_max=3.0)
    # pooled with |adv| T weights: (2 * 3 + 1 * 4) / (2 * 4 + 1 * 4) = 10 / 12
    assert m["span/retained"] == pytest.approx(10 / 12)
    assert m["routing/clipped_share"] == pytest.approx(0.5)  # a hits the cap 3, b does not, c is not active


def test_clipping_loses_mass_and_mass_routing_keeps_it():
    d = torch.zeros(2, 1, 10)
    d[:, 0, 2] = 1.0  # every sample's relevance on one token
    mask = torch.ones(2, 10)
    adv = torch.tensor([[1.0], [-1.0]])
    active = torch.ones(2, 1, dtype=torch.bool)
    clipped = routing_weights(d, mask, w_max=5.0, clip="clip")
    kept = routing_weights(d, mask, w_max=5.0, clip="mass")
    assert sm.retained_mass(clipped, adv, mask, active).item() == pytest.approx(0.5)
    assert sm.retained_mass(kept, adv, mask, active).item() == pytest.approx(1.0)
    assert sm.clipped_share(clipped, 5.0, active) == 1.0 and sm.clipped_share(kept, 5.0, active) == 1.0


def test_rotate_labels_among_applicable_rewards():
    x = torch.arange(12, dtype=torch.float32).reshape(1, 3, 4)
    app = torch.tensor([[True, False, True]])
    r = sm.rotate_labels(x, app)
    assert r[0, 0].tolist() == x[0, 2].tolist() and r[0, 2].tolist() == x[0, 0].tolist()
    assert torch.isnan(r[0, 1]).all()
    assert torch.isnan(sm.rotate_labels(x, torch.tensor([[True, False, False]]))).all()  # nothing to rotate to


def _spans():
    # three rewards with disjoint spans on a 9-token response: a on 0-2, b on 3-5, c on 6-8
    span = torch.zeros(1, 3, 9, dtype=torch.bool)
    for k in range(3):
        span[0, k, 3 * k: 3 * k + 3] = True
    return span, torch.ones(1, 9), torch.ones(1, 3, dtype=torch.bool)


def test_a_useless_router_scores_no_gap_between_lift_and_its_rotation():
    # issue 28: a router that sends each reward to one distinct token outside its own span (here: inside another
    # reward's span) has overlap 0; its lift and its rotated lift are both 0, no gap.
    span, mask, active = _spans()
    useless = torch.zeros(1, 3, 9)
    useless[0, 0, 4], useless[0, 1, 7], useless[0, 2, 1] = 9.0, 9.0, 9.0
    m = sm.specificity(useless, None, span, mask, torch.ones(1, 3), NAMES, active)
    assert m["span/overlap"] == pytest.approx(0.0)  # overlap alone would call it perfectly specific
    rot = sm.rotated_controls(useless, span, mask, active, NAMES)
    assert m["span/a/lift"] == pytest.approx(0.0) and rot["span/a/lift_rotated"] == pytest.approx(0.0)
    # a position prior (every reward on the first token) is just as blind: lift == lift_rotated
    prior = torch.zeros(1, 3, 9)
    prior[0, :, 0] = 9.0
    m, rot = sm.specificity(prior, None, span, mask, torch.ones(1, 3), NAMES, active), \
        sm.rotated_controls(prior, span, mask, active, NAMES)
    for k in NAMES:
        assert m[f"span/{k}/lift"] == pytest.approx(rot[f"span/{k}/lift_rotated"])
    # a specific router (each reward on its own span) has lift 3 and rotated lift 0
    specific = span.float() * 3.0
    m, rot = sm.specificity(specific, None, span, mask, torch.ones(1, 3), NAMES, active), \
        sm.rotated_controls(specific, span, mask, active, NAMES)
    assert m["span/a/lift"] == pytest.approx(3.0) and rot["span/a/lift_rotated"] == pytest.approx(0.0)
    assert rot["span/a/mass_in_rotated"] == pytest.approx(0.0)


def test_a_training_step_logs_the_credit_metrics_on_the_same_pairs_for_gdpo_and_mrtpo(tmp_path):
    from core.config import TrainConfig
    from core.run import lifecycle
    from core.run import step as step_lib

    out = {}
    for method, clip in (("gdpo", "mass"), ("mrtpo", "clip"), ("mrtpo", "mass")):
        cfg = TrainConfig(method=method, routing_clip=clip, relevance="js", runs_dir=str(tmp_path), group_size=4,
                          prompts_per_step=2, max_new_tokens=16, steps=1, checkpoint_every=0, device="cpu", seed=3)
        out[(method, clip)] = step_lib.train_step(lifecycle.build_state(cfg), 1).metrics
    gdpo, clipped, kept = out[("gdpo", "mass")], out[("mrtpo", "clip")], out[("mrtpo", "mass")]
    assert gdpo["span/retained"] == pytest.approx(1.0) and gdpo["routing/clipped_share"] == 0.0
    assert kept["span/retained"] == pytest.approx(1.0, abs=1e-5)
    assert clipped["span/retained"] <= 1.0 + 1e-6
    for m in (gdpo, clipped, kept):
        assert any(k.endswith("/lift_rotated") for k in m) and "routing/clipped_share" in m
