"""Replay precision (docs/METHOD.md, "Replay precision"): `replay_dtype` picks the compute precision of the
contrastive passes; bf16 keeps the relevance of the embedded tiny-instruct within about 2% of fp32."""

from __future__ import annotations

import contextlib
import dataclasses

import pytest
import torch

from core.algos import teacher_forcing as tf_lib
from core.config import ConfigError, TrainConfig
from core.run import lifecycle
from core.run import step as step_lib


def test_replay_precision_contexts():
    run = contextlib.nullcontext()
    assert tf_lib.replay_precision("cpu", "auto", run) is run
    with tf_lib.replay_precision("cpu", "bfloat16", run):
        assert torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
    with torch.autocast("cpu", dtype=torch.bfloat16), tf_lib.replay_precision("cpu", "float32", run):
        assert not torch.is_autocast_enabled("cpu")  # float32 turns the run's autocast off
    with pytest.raises(ValueError, match="replay_dtype"):
        tf_lib.replay_precision("cpu", "float16", run)


def test_config_checks_replay_dtype():
    assert TrainConfig().replay_dtype == "auto"
    with pytest.raises(ConfigError, match="replay_dtype"):
        TrainConfig(replay_dtype="half")


@pytest.fixture(scope="module")
def batch():
    """A rollout of the embedded tiny-instruct (4 prompts x G=4, every applicable pair replayed)."""
    torch.manual_seed(0)
    cfg = TrainConfig(model="tiny-instruct", group_size=4, prompts_per_step=4, max_new_tokens=32, device="cpu",
                      replay_pairs="all", runs_dir="unused", steps=1)
    state = lifecycle.build_state(cfg)
    rollout = step_lib.collect_rollout(state, 1, keep_logits=True)
    scores = step_lib.verify(state, rollout)
    return state, rollout, scores, step_lib.rollout_logprobs(state, rollout)


def _relevance(batch, replay_dtype: str) -> torch.Tensor:
    state, rollout, scores, logprobs = batch
    state.cfg = dataclasses.replace(state.cfg, replay_dtype=replay_dtype)
    return step_lib.route(state, rollout, scores, logprobs).distances


def test_bf16_replay_stays_close_to_fp32_on_a_real_model(batch):
    d32, d_auto, d16 = (_relevance(batch, dt) for dt in ("float32", "auto", "bfloat16"))
    assert torch.equal(d_auto.nan_to_num(-1), d32.nan_to_num(-1))  # auto is fp32 on CPU
    real = ~torch.isnan(d32) & batch[1].mask[:, None, :].bool()
    assert torch.equal(real, ~torch.isnan(d16) & batch[1].mask[:, None, :].bool())  # the same pairs replayed
    a, b = d32[real].double(), d16[real].double()
    assert not torch.equal(a, b)  # bf16 did run
    corr = torch.corrcoef(torch.stack([a, b]))[0, 1]
    rel_err = (a - b).abs().mean() / a.mean()
    assert corr > 0.999 and rel_err < 0.05, (float(corr), float(rel_err))
