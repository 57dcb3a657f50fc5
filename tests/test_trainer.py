"""The training loop on the micro model: parameters move, the run store is complete, seeds reproduce."""

from __future__ import annotations

import json
import math
import os
import signal

import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from core.config import TrainConfig
from core.run import lifecycle
from core.run.store import CREDIT_COLUMNS, SCHEMA_VERSION, RunStore, credit_path

pytestmark = pytest.mark.train  # whole training runs of the micro model in this process

torch.set_num_threads(1)

CONTRACT_KEYS = [
    "reward/all_satisfied", "adv/mean", "adv/std", "adv/abs_mean", "loss/policy", "loss/kl", "loss/total",
    "policy/clip_frac", "policy/kl", "policy/entropy", "time/generate", "time/verify", "time/replay", "time/update",
    "time/step", "span/overlap",
]  # fmt: skip
PER_REWARD = ["reward/{}", "js/{}/mean", "js/{}/max", "span/{}/mass_in", "span/{}/auc", "span/{}/auc_control",
              "span/{}/overlap", "span/{}/lift", "span/{}/mass_control", "span/{}/mass_in_ceiling",
              "span/{}/auc_vs_entropy", "span/{}/auc_satisfied", "span/{}/auc_violated"]


def test_two_training_steps_change_the_parameters(make_cfg):
    from core.run import lifecycle
    from core.run import step as step_lib

    state = lifecycle.build_state(make_cfg())
    before = {n: p.detach().clone() for n, p in state.model.named_parameters()}
    results = [step_lib.train_step(state, step) for step in (1, 2)]
    assert all(r.metrics["adv/std"] > 0 for r in results)  # test:letters varies inside every group
    changed = [n for n, p in state.model.named_parameters() if not torch.equal(before[n], p.detach())]
    assert len(changed) == len(before), f"unchanged: {set(before) - set(changed)}"
    # First pass is on-policy: the ratio starts at 1, so nothing is clipped on the first micro-batch.
    assert results[0].metrics["policy/clip_frac"] < 0.5
    assert all(math.isfinite(r.metrics["loss/total"]) for r in results)


def test_three_step_run_writes_a_complete_readable_store(make_cfg, tmp_path):
    from core import model as model_lib
    from core.run import lifecycle

    cfg = make_cfg(run_name="full", checkpoint_every=2, eval_prompt_set=make_cfg().prompt_set)
    path = lifecycle.train(cfg)
    store = RunStore(path)
    assert store.warnings == []
    config = store.config()
    assert config["schema_version"] == SCHEMA_VERSION and config["steps"] == 3 and config["method"] == "mrtpo"
    names = config["reward_names"]
    assert names == ["keywords:existence", "punctuation:no_comma", "test:letters", "change_case:english_lowercase",
                     "task:arithmetic"]
    assert TrainConfig.from_dict(config) == cfg  # the recorded config rebuilds the run's config
    status = store.status()
    assert status["state"] == "completed" and status["step"] == 3 and status["error"] is None

    metrics = store.metrics()
    assert metrics["step"].tolist() == [1, 2, 3]
    for key in CONTRACT_KEYS + [t.format(n) for n in names for t in PER_REWARD]:
        assert key in metrics.columns, key
    row = metrics.iloc[0]
    assert row["reward/test:letters"] == pytest.approx(row["reward/test:letters"])  # not NaN
    assert 0 < row["js/test:letters/mean"] <= row["js/test:letters/max"] <= 1
    overlap = metrics["span/overlap"].dropna()
    assert len(overlap) and overlap.between(0, 1 + 1e-6).all()
    assert (metrics["span/test:letters/mass_in_ceiling"] == 1.0).all()  # every letters span is non-empty
    assert metrics["span/test:letters/auc_vs_entropy"].between(-1, 1).all()  # replay gives the entropy baseline
    assert -1 <= row["span/test:letters/auc_vs_entropy"] <= 1  # the replay run has the entropy baseline
    assert row["time/step"] >= row["time/generate"]
    # The held-out set is scored at checkpoints only (steps 2 and 3).
    assert metrics["eval/reward/test:letters"].notna().tolist() == [False, True, True]
    assert 0 <= metrics["eval/all_satisfied"].iloc[-1] <= 1

    assert store.credit_steps() == [1, 2, 3]
    for step in (1, 2, 3):
        frame = store.credit(step)
        assert tuple(frame.columns) == CREDIT_COLUMNS and len(frame) > 0
        assert (frame["step"] == step).all()
        check_credit_frame(frame, cfg, names)
        # credit = weight x the pair's scale and tokens are slices of the response: given back, not stored
        stored = pq.ParquetFile(credit_path(path, step)).schema_arrow.names
        assert "credit_scale" in stored and not {"credit", "token", "start"} & set(stored)

    assert [p.name for p in store.checkpoints()] == ["step_000002", "step_000003"]
    ckpt = store.checkpoints()[-1]
    assert (ckpt / "optimizer.pt").is_file() and json.loads((ckpt / "trainer_state.json").read_text())["step"] == 3
    model, tokenizer, _ = model_lib.load_policy(str(ckpt), device="cpu")
    trained, _, _ = model_lib.load_policy(cfg.model, device="cpu")
    assert any(not torch.equal(a, b) for a, b in zip(model.parameters(), trained.parameters(), strict=True))


def check_credit_frame(frame: pd.DataFrame, cfg: TrainConfig, names: list[str]) -> None:
    """Invariants of one step's credit map."""
    b = cfg.group_size * cfg.prompts_per_step
    assert sorted(frame["sample"].unique()) == list(range(b))
    assert (frame["group"] == frame["sample"] // cfg.group_size).all()
    for (_sample, reward), rows in frame.groupby(["sample", "reward"]):
        assert reward in names
        assert rows["t"].tolist() == list(range(len(rows)))
        response = rows["response"].iloc[0]
        # Offsets tile the response: consecutive, from 0 to its end; token texts are its slices.
        assert rows["start"].iloc[0] == 0 and rows["end"].iloc[-1] == len(response)
        assert (rows["start"].to_numpy()[1:] <= rows["end"].to_numpy()[:-1]).all()
        assert all(response[s:e] == tok for s, e, tok in zip(rows["start"], rows["end"], rows["token"], strict=True))
        if math.isnan(rows["score"].iloc[0]):
            assert (rows["credit"] == 0).all() and (rows["group_adv"] == 0).all()
    # token_adv is per (sample, token): the same for every reward.
    assert (frame.groupby(["sample", "t"])["token_adv"].nunique() == 1).all()
    # The spans of the letters reward are its letters.
    letters = frame[frame["reward"] == "test:letters"]
    assert (letters["in_span"] == letters["token"].map(lambda s: any(c.isascii() and c.isalpha() for c in s))).all()


def _run_metrics(cfg) -> tuple[pd.DataFrame, pd.DataFrame]:
    from core.run import lifecycle

    store = RunStore(lifecycle.train(cfg))
    return store.metrics(), store.credit(1)


def test_same_seed_gives_the_same_metrics(make_cfg, tmp_path):
    a, credit_a = _run_metrics(make_cfg(steps=2, run_name="a"))
    b, credit_b = _run_metrics(make_cfg(steps=2, run_name="b"))
    c, _ = _run_metrics(make_cfg(steps=2, run_name="c", seed=1))
    keep = [k for k in a.columns if not k.startswith("time/")]
    pd.testing.assert_frame_equal(a[keep], b[keep])
    pd.testing.assert_frame_equal(credit_a, credit_b)
    assert not a[keep].equals(c[keep])


@pytest.mark.parametrize("relevance", ["js", "swap_specific"])
def test_mrtpo_with_lam_zero_gives_gdpo_token_advantages(make_cfg, relevance):
    from core.run import lifecycle
    from core.run import step as step_lib

    gdpo = step_lib.train_step(lifecycle.build_state(make_cfg(method="gdpo")), 1).credit
    mrtpo = step_lib.train_step(lifecycle.build_state(make_cfg(method="mrtpo", lam=0.0, relevance=relevance)), 1).credit
    assert gdpo["response"].tolist() == mrtpo["response"].tolist()  # same seed: same rollout
    assert gdpo["token_adv"].tolist() == mrtpo["token_adv"].tolist()
    assert gdpo["distance"].isna().all() and (gdpo["weight"] == 1).all()
    applies, skipped = mrtpo["score"].notna(), mrtpo["distance_skipped"]
    assert mrtpo.loc[applies & ~skipped, "distance"].notna().all() and mrtpo.loc[~applies | skipped, "distance"].isna().all()
    assert not mrtpo.loc[~applies, "distance_skipped"].any()
    # js (pairwise): skipped exactly where the reward's group advantage is 0; a *_specific variant reads every
    # applicable reward of a sample, so it skips a sample's rewards only when none of them is active (replay_pairs)
    active = applies & (mrtpo["group_adv"] != 0)
    if relevance != "js":
        active = applies & active.groupby(mrtpo["sample"]).transform("any")
    assert (mrtpo.loc[applies, "distance_skipped"] == ~active[applies]).all()


@pytest.mark.parametrize(
    "overrides",
    [
        {"method": "grpo"},
        {"routing": "span"},
        {"routing": "uniform"},
        {"relevance": "js_specific", "sharpen": 2.0},
        {"kl_beta": 0.1, "inner_epochs": 2, "replay_chunk": 3},
    ],
)
def test_every_method_and_option_runs_a_step(make_cfg, overrides):
    from core.run import lifecycle
    from core.run import step as step_lib

    cfg = make_cfg(**overrides)
    result = step_lib.train_step(lifecycle.build_state(cfg), 1)
    m = result.metrics
    assert math.isfinite(m["loss/total"]) and math.isfinite(m["policy/entropy"])
    frame = result.credit
    if cfg.kl_beta > 0:
        assert m["loss/kl"] >= 0 and m["loss/total"] != m["loss/policy"] or m["loss/kl"] == 0
    if cfg.routing == "span" and cfg.method == "mrtpo":
        letters = frame[(frame["reward"] == "test:letters")]
        inside, outside = letters[letters["in_span"]], letters[~letters["in_span"]]
        if len(inside) and len(outside):
            assert inside["weight"].mean() > outside["weight"].mean()
        assert m["span/test:letters/mass_in"] >= 0.5
    if cfg.method == "grpo" or cfg.routing != "replay":
        assert frame["distance"].isna().all()
        assert "js/test:letters/mean" not in m


def test_an_exception_marks_the_run_failed_with_the_traceback(make_cfg):
    from core.run import lifecycle

    def boom(state, metrics):
        raise RuntimeError("hook exploded")

    with pytest.raises(RuntimeError):
        lifecycle.train(make_cfg(run_name="boom"), hooks=[boom])
    status = RunStore(make_cfg().runs_dir + "/boom").status()
    assert status["state"] == "failed" and "hook exploded" in status["error"] and "Traceback" in status["error"]
    assert status["step"] == 1


def test_sigterm_marks_the_run_stopped_and_checkpoints(make_cfg):
    from core.run import lifecycle

    def sigterm_after_first(state, metrics):
        os.kill(os.getpid(), signal.SIGTERM)  # what the app's stop button sends

    before = signal.getsignal(signal.SIGTERM)
    path = lifecycle.train(make_cfg(run_name="halt", steps=5), hooks=[sigterm_after_first])
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is removed again
    store = RunStore(path)
    status = store.status()
    assert status["state"] == "stopped" and status["step"] == 1 and status["error"] is None
    assert store.metrics()["step"].tolist() == [1]
    assert [p.name for p in store.checkpoints()] == ["step_000001"]


def test_prompt_sampling_is_seeded_and_covers_every_prompt():
    from core.run.step import sample_prompts

    items = list(range(5))
    epoch = sample_prompts(items, 5, seed=0, step=1)
    assert sorted(epoch) == items
    assert sample_prompts(items, 2, seed=0, step=3) == sample_prompts(items, 2, seed=0, step=3)
    first_two_steps = sample_prompts(items, 2, 0, 1) + sample_prompts(items, 2, 0, 2)
    assert len(set(first_two_steps)) == 4
    assert sample_prompts(items, 5, seed=1, step=1) != epoch


def test_span_token_mask_overlap_rule():
    from core.run.batch import span_token_mask

    offsets = [(0, 3), (3, 4), (4, 4), (4, 9)]
    assert span_token_mask(offsets, [(2, 3)], 6).tolist() == [True, False, False, False, False, False]
    assert span_token_mask(offsets, [(3, 5)], 4).tolist() == [False, True, False, True]
    assert span_token_mask(offsets, [], 4).tolist() == [False] * 4


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_two_steps_on_cuda_under_bf16_autocast(make_cfg):
    from core.run import lifecycle
    from core.run import step as step_lib

    state = lifecycle.build_state(make_cfg(device="cuda"))
    assert state.device.type == "cuda" and next(state.model.parameters()).dtype == torch.float32
    for step in (1, 2):
        m = step_lib.train_step(state, step).metrics
        assert math.isfinite(m["loss/total"]) and math.isfinite(m["policy/entropy"])
        assert 0 <= m["js/test:letters/mean"] <= 1


@pytest.mark.parametrize("method", ["grpo", "gdpo", "mrtpo"])
def test_no_separate_logprob_pass_and_ratio_one_on_the_first_pass(make_cfg, monkeypatch, method):
    """log pi_old is the first update pass's log-prob (detached): no method runs the no-gradient pass under x
    (replay takes p_t from the sampling's logits), and on-policy the ratio is exactly 1."""
    from core.algos import teacher_forcing as tf_lib
    from core.run import lifecycle
    from core.run import step as step_lib

    def no_pass(*args, **kwargs):
        raise AssertionError("the separate log-prob pass ran")

    monkeypatch.setattr(tf_lib, "response_logprobs", no_pass)
    m = step_lib.train_step(lifecycle.build_state(make_cfg(method=method)), 1).metrics
    assert m["policy/clip_frac"] == 0.0 and m["policy/kl"] == 0.0
    assert math.isfinite(m["loss/total"]) and m["policy/entropy"] > 0


def test_replay_p_t_from_sampling_logits_equals_a_teacher_forced_pass(make_cfg):
    from core.run import lifecycle
    from core.run import step as step_lib

    state = lifecycle.build_state(make_cfg(method="mrtpo"))
    rollout = step_lib.collect_rollout(state, 1)
    assert rollout.logits is not None and rollout.logits.shape[:2] == rollout.response_ids.shape
    from_sampling = step_lib.rollout_logprobs(state, rollout)
    rollout.logits = None
    from_pass = step_lib.rollout_logprobs(state, rollout)
    m = rollout.mask.bool()
    assert torch.allclose(from_sampling.logp_full[m], from_pass.logp_full[m], atol=1e-5)
    assert torch.allclose(from_sampling.token_logp, from_pass.token_logp, atol=1e-5)
    assert step_lib.collect_rollout(lifecycle.build_state(make_cfg(method="gdpo")), 1).logits is None


def test_an_ifeval_file_with_all_25_ids_trains(micro_model, tmp_path):
    """An IFEval-format JSONL with every one of IFEval's 25 instruction ids loads and trains (2 MRTPO steps)."""
    from helpers import IFEVAL_IDS

    from core.run import lifecycle

    cfg = TrainConfig(model=str(micro_model), prompt_set="tests/data/ifeval_all25.jsonl", runs_dir=str(tmp_path),
                      run_name="ifeval", group_size=2, prompts_per_step=13, max_new_tokens=6, steps=2, lr=1e-2,
                      checkpoint_every=0, device="cpu")
    store = RunStore(lifecycle.train(cfg))
    assert store.status()["state"] == "completed"
    assert sorted(store.config()["reward_names"]) == sorted(IFEVAL_IDS)
    metrics = store.metrics()
    assert list(metrics["step"]) == [1, 2]
    for name in IFEVAL_IDS:
        assert math.isfinite(metrics[f"reward/{name}"].iloc[0]), name
    credit = store.credit(2)
    assert set(credit["reward"]) == set(IFEVAL_IDS)


# ---- the loop's guards (issue 16): a diverging run stops as failed, old checkpoints are pruned

@pytest.mark.parametrize(("metrics", "start", "expected"), [
    ({"loss/total": math.nan}, None, "loss/total is nan"),
    ({"loss/total": 0.1, "loss/policy": -math.inf}, 1.0, "loss/policy is -inf"),
    # V = 100: ln V = 4.6052; 0.99 ln V = 4.5591, 0.9 ln V = 4.1447
    ({"loss/total": 0.1, "policy/entropy": 4.56}, 2.0, "policy entropy 4.56 is 99.0%"),
    ({"loss/total": 0.1, "policy/entropy": 4.55}, 2.0, ""),  # just below 0.99 ln V
    ({"loss/total": 0.1, "policy/entropy": 4.59}, 4.15, ""),  # started near uniform (>= 0.9 ln V)
    ({"loss/total": 0.1, "policy/entropy": 4.59}, 4.14, "policy entropy 4.59"),
    ({"loss/total": 0.1, "policy/entropy": 4.59}, None, ""),  # no first step recorded yet
])
def test_divergence_rule_hand_cases(metrics, start, expected):
    reason = lifecycle.divergence(metrics, 100, start)
    assert (reason == "") == (expected == "")
    assert reason.startswith(expected)


def test_a_non_finite_loss_stops_the_run_as_failed_and_keeps_the_recorded_steps(make_cfg, monkeypatch):
    real = lifecycle.train_step

    def poisoned(state, step):  # the real step; its loss reads NaN from step 2 on (as after an overflow)
        result = real(state, step)
        if step >= 2:
            result.metrics["loss/total"] = math.nan
        return result

    monkeypatch.setattr(lifecycle, "train_step", poisoned)
    path = lifecycle.train(make_cfg(run_name="nan", steps=5, checkpoint_every=1))
    store = RunStore(path)
    status = store.status()
    assert status["state"] == "failed" and status["step"] == 2
    assert status["error"] == "diverged at step 2: loss/total is nan"
    assert store.metrics()["step"].tolist() == [1, 2]
    assert [p.name for p in store.checkpoints()] == ["step_000001"]  # the diverged step's weights are not saved


@pytest.mark.parametrize(("keep", "left"), [(2, ["step_000003", "step_000004"]),
                                            (0, [f"step_00000{i}" for i in range(1, 5)])])
def test_only_the_newest_checkpoints_are_kept(make_cfg, keep, left):
    path = lifecycle.train(make_cfg(run_name=f"keep{keep}", steps=4, checkpoint_every=1, keep_checkpoints=keep))
    assert [p.name for p in RunStore(path).checkpoints()] == left
    assert RunStore(path).latest_checkpoint()[0] == 4


@pytest.mark.parametrize("final", ["completed", "stopped", "failed"])
def test_a_final_status_releases_the_writer_lock(tmp_path, final):
    from core.run.store import RunWriter, writer_lock_held

    w = RunWriter.create(tmp_path, "r", {"steps": 2})
    w.set_status(state="running", step=1)
    assert writer_lock_held(tmp_path / "r")
    w.set_status(state=final, step=1)
    assert not writer_lock_held(tmp_path / "r")


def test_credit_every_and_credit_samples_choose_what_the_built_in_trainer_stores(make_cfg):
    """Metrics every step; credit maps of step 1, every 2nd after it and the last; one whole group of the
    batch per stored step (credit_samples = G; which group: tests/test_credit_choice.py)."""
    from core.run import lifecycle

    store = RunStore(lifecycle.train(make_cfg(steps=4, credit_every=2, credit_samples=4, run_name="sparse")))
    assert list(store.metrics()["step"]) == [1, 2, 3, 4] and store.credit_steps() == [1, 3, 4]
    for step in store.credit_steps():
        index = store.credit_index(step)
        samples = sorted(set(index["sample"]))
        assert len(samples) == 4 and samples[0] % 4 == 0 and samples == list(range(samples[0], samples[0] + 4))
        assert store.credit(step)["sample"].isin(samples).all()
