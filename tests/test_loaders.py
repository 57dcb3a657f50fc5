"""mrtpo_viz.loaders: the cached readers of the pages follow the run store as it changes."""

from __future__ import annotations

import shutil
import time

import numpy as np

from mrtpo_viz import loaders
from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, synthetic_metrics, write_synthetic_run


def test_credit_steps_are_listed_again_when_a_map_or_a_step_comes_or_goes(tmp_path):
    rewards = tuple(DEFAULT_REWARDS[:2])
    w = write_synthetic_run(tmp_path, "r", steps=3, rewards=rewards, n_tokens=4)
    credit = w.path / "credit"
    assert loaders.credit_steps(w.path) == loaders.credit_steps(str(w.path)) == [1, 2, 3]
    time.sleep(0.05)  # the folder's mtime is coarse (a few ms): each change below is later than the listing
    (credit / "step_000002.parquet").unlink()
    assert loaders.credit_steps(w.path) == [1, 3]
    time.sleep(0.05)
    shutil.copy(credit / "step_000003.parquet", credit / "step_000004.parquet")
    assert loaders.credit_steps(w.path) == [1, 3]  # step 4's metrics line is not written: not complete
    w.append_metrics(synthetic_metrics(4, rewards, np.random.default_rng(4)))
    assert loaders.credit_steps(w.path) == [1, 3, 4]
    steps = loaders.credit_steps(w.path)
    steps.append(99)  # a caller's list is its own
    assert loaders.credit_steps(w.path) == [1, 3, 4]
    time.sleep(0.05)
    shutil.rmtree(credit)
    assert loaders.credit_steps(w.path) == []
