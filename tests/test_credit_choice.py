"""What a run stores: `credit_every` steps, `credit_samples` samples chosen as whole groups keeping both outcomes
of each reward (`core.run.credit_choice`), and the disk estimate (`core.resources.disk_estimate`)."""

from __future__ import annotations

import numpy as np
import pytest

from core.config import ConfigError, TrainConfig
from core.resources import disk_estimate, stored_samples
from core.run.credit_choice import choose_samples, stores_credit

NAN = float("nan")


def test_steps_that_store_a_credit_map():
    assert [s for s in range(1, 26) if stores_credit(s, 10, 25)] == [1, 11, 21, 25]
    assert [s for s in range(1, 6) if stores_credit(s, 1, 5)] == [1, 2, 3, 4, 5]


def test_a_small_batch_is_stored_whole():
    r = np.zeros((8, 2))
    assert choose_samples(r, 4, 0).tolist() == list(range(8)) == choose_samples(r, 4, 8).tolist()
    assert choose_samples(r, 4, 100).tolist() == list(range(8))


def test_whole_groups_keep_both_outcomes_of_each_reward():
    # 6 groups of 2; reward 0 mixed only in group 4; reward 1 satisfied only in group 2 and unsatisfied in group 5;
    # reward 2 does not apply to groups 0-3 and is satisfied everywhere else.
    r = np.array([
        [0, 0, NAN], [0, 0, NAN],
        [0, 0, NAN], [0, 0, NAN],
        [0, 1, NAN], [0, 1, NAN],
        [0, 0.5, NAN], [0, 0.5, NAN],
        [1, 0.5, 1], [0, 0.5, 1],
        [0, 0, 1], [0, 0, 1],
    ], dtype=float)
    rows = choose_samples(r, 2, 6)  # 3 groups
    groups = sorted(set((rows // 2).tolist()))
    assert groups == [0, 2, 4]  # reward 0: group 4 (both outcomes); reward 1: already unsatisfied in 4, so 2
    assert rows.tolist() == [0, 1, 4, 5, 8, 9]  # whole groups, sorted
    for k in range(3):
        kept = r[rows, k]
        for outcome in (kept >= 1, kept < 1):
            batch_has = (r[:, k] >= 1).any() if outcome is (kept >= 1) else (r[:, k] < 1).any()
            assert outcome.any() or not batch_has, k
    assert choose_samples(r, 2, 6).tolist() == rows.tolist()  # deterministic


def test_fewer_than_a_group_keeps_one_group_and_the_fill_is_in_order():
    r = np.zeros((8, 1))
    assert choose_samples(r, 4, 3).tolist() == [0, 1, 2, 3]  # no outcome to seek: the first groups
    r[6, 0] = 1.0
    assert choose_samples(r, 4, 3).tolist() == [4, 5, 6, 7]  # the only group with both outcomes


def test_credit_fields_are_checked():
    with pytest.raises(ConfigError) as err:
        TrainConfig(credit_every=0)
    assert err.value.field == "credit_every"
    with pytest.raises(ConfigError) as err:
        TrainConfig(credit_samples=-1)
    assert err.value.field == "credit_samples"


def test_disk_estimate_by_hand():
    cfg = TrainConfig(prompts_per_step=8, group_size=4, credit_samples=10, credit_every=5, steps=12,
                      max_new_tokens=20, checkpoint_every=4, keep_checkpoints=2)
    assert stored_samples(cfg) == 8  # 10 rounded down to whole groups of 4
    est = disk_estimate(cfg, 3, parameters=100)
    # steps 1, 6, 11, 12 store credit: 4 x 8 x 20 x (7 x 3 + 8); checkpoints at 4, 8, 12, two kept
    assert est == {"credit": 4 * 8 * 20 * 29, "metrics": 12 * 8192, "checkpoints": 2 * 4 * 100 * 3,
                   "total": 4 * 8 * 20 * 29 + 12 * 8192 + 2400}
