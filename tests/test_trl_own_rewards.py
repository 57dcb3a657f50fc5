"""MRTPO for the rewards TRL users already have (docs/TRL.md, "Bring your own rewards"): the three setups of TRL's
documentation trained with `MRTPOTrainer`, each routing the user's own reward functions by contrastive replay;
TRL's aggregations against TRL's own numbers; every reward's route said in one line; the refusals.

Needs `trl` (installed by `make test`).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from test_trl import micro, needs_trl, one_batch, trl_args, trl_fields  # noqa: F401 (micro: a fixture)

from core.config import ConfigError
from core.run.store import RunStore

pytestmark = pytest.mark.trl

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "own_rewards"


def example(name: str):
    sys.path.insert(0, str(EXAMPLES))
    try:
        spec = importlib.util.spec_from_file_location(f"own_rewards_{name}", EXAMPLES / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(EXAMPLES))


@needs_trl
@pytest.mark.parametrize("name", ["quickstart", "math_reasoning", "multi_task"])
def test_each_trl_documentation_setup_routes_the_users_own_rewards_by_replay(name, tmp_path, caplog):
    """Two steps on tiny-instruct with only `reward_contrasts` added: every reward is routed by replay (its routing
    weights vary over the response's tokens, not all 1), said in one line each; no span metric is written for a
    reward that reports no spans; save_strategy="no" leaves no run-store checkpoint."""
    trainer = example(name).main(["--max-steps", "2", "--runs-dir", str(tmp_path / "runs"), "--run-name", name,
                                  "--output-dir", str(tmp_path / "hf"), "--replay-pairs", "all",
                                  "--max-completion-length", "12"])
    err = caplog.text  # a warning of the library's logger: on stderr where logging is not configured
    store = RunStore(tmp_path / "runs" / name)
    assert store.status()["state"] == "completed"
    routes = store.config()["reward_routes"]
    assert set(routes) == set(trainer.reward_names) and all(r["routing"] == "replay" for r in routes.values())
    for reward in trainer.reward_names:
        assert f"MRTPO routing: {reward}: replay, contrast " in err, err
    credit = store.credit(2)
    for reward in trainer.reward_names:
        spread = credit[credit["reward"] == reward].groupby("sample")["weight"].std().max()
        assert spread > 0.05, (reward, spread)  # routed: not the uniform weight 1 on every token
    metrics = store.metrics().iloc[-1]
    for reward, route in routes.items():
        assert (f"span/{reward}/overlap" in metrics) == route["spans"]
        assert f"span/{reward}/retained" in metrics  # retained mass reads no spans
    assert store.checkpoints() == []
    assert "reward/all_satisfied" not in metrics  # the user's scores have no "satisfied"


@needs_trl
def test_the_users_task_column_reaches_their_rewards_untouched(tmp_path):
    """TRL's multi-task example: the rewards read `task` and return None on the other task's rows; MRTPO does not
    take the column for its own (the math reward applies to the math rows only, the haiku reward to the poems)."""
    trainer = example("multi_task").main(["--max-steps", "1", "--runs-dir", str(tmp_path), "--run-name", "mt",
                                          "--output-dir", str(tmp_path / "hf"), "--max-completion-length", "8"])
    rewards = trainer._captured.rewards.numpy()  # (16, 3): 2 math and 2 poem prompts x G = 4, in sampler order
    math, poem = ~np.isnan(rewards[:, 0]), ~np.isnan(rewards[:, 1])
    assert math.sum() == poem.sum() == 8 and not (math & poem).any() and not np.isnan(rewards[:, 2]).any()
    assert trainer.reward_weights.tolist() == [2.0, 1.0, 0.5]


@needs_trl
@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_uniform_sum_then_normalize_reproduces_trls_own_advantages(micro, tmp_path, scale):  # noqa: F811
    """multi_objective_aggregation="sum_then_normalize" is implemented, not overridden: with routing="uniform",
    MRTPOTrainer's token advantages are TRL's own GRPO advantages for each scale_rewards, on the same batch."""
    import torch
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    from core.integrations.trl import MRTPOTrainer, verifier_rewards

    path, tok, ds = micro
    fields = trl_fields(tmp_path, multi_objective_aggregation="sum_then_normalize", scale_rewards=scale)
    grpo = GRPOTrainer(AutoModelForCausalLM.from_pretrained(path), reward_funcs=verifier_rewards(ds),
                       args=GRPOConfig(**fields), train_dataset=ds, processing_class=tok)
    mrtpo = MRTPOTrainer(AutoModelForCausalLM.from_pretrained(path), train_dataset=ds, processing_class=tok,
                         args=trl_args(tmp_path, multi_objective_aggregation="sum_then_normalize",
                                       scale_rewards=scale, routing="uniform", runs_dir=None))
    out_g, loss_g, _ = one_batch(grpo, ds)
    out_m, loss_m, _ = one_batch(mrtpo, ds)
    assert torch.equal(out_g["completion_ids"], out_m["completion_ids"])
    assert out_g["advantages"].abs().max() > 0.1
    torch.testing.assert_close(out_m["advantages"], out_g["advantages"][:, None] * out_m["completion_mask"],
                               rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(loss_m, loss_g, rtol=1e-5, atol=1e-6)


@needs_trl
def test_mask_truncated_completions_trains_and_keeps_the_truncated_tokens_with_zero_advantage(micro, tmp_path):  # noqa: F811
    """mask_truncated_completions=True crashed the run-store write; now a truncated response is stored with its
    tokens and zero advantage (TRL leaves it out of the loss)."""
    from transformers import AutoModelForCausalLM

    from core.integrations.trl import MRTPOTrainer

    path, tok, ds = micro
    trainer = MRTPOTrainer(AutoModelForCausalLM.from_pretrained(path), train_dataset=ds, processing_class=tok,
                           args=trl_args(tmp_path, runs_dir=str(tmp_path / "runs"), run_name="trunc", max_steps=1,
                                         max_completion_length=3, mask_truncated_completions=True,
                                         credit_samples=0))
    trainer.train()
    store = RunStore(tmp_path / "runs" / "trunc")
    assert store.status()["state"] == "completed"
    credit = store.credit(1)
    lengths = credit.groupby("sample")["t"].max() + 1
    truncated = [s for s, n in lengths.items() if n == 3]
    assert truncated, "the batch should hold truncated responses"
    assert (credit[credit["sample"].isin(truncated)]["token_adv"] == 0).all()


@needs_trl
def test_a_reward_reporting_spans_gets_span_overlays_and_metrics(micro, tmp_path):  # noqa: F811
    """`reward_with_spans`: the spans a user's reward reports become the credit map's in_span for that reward."""
    from transformers import AutoModelForCausalLM

    from core.integrations.trl import MRTPOTrainer, reward_with_spans
    from core.integrations.trl.dataset import completion_text

    path, tok, ds = micro

    @reward_with_spans
    def first_letter(completions, **kwargs):
        texts = [completion_text(c) for c in completions]
        return [(float(bool(t) and t[0].isupper()), [(0, 1)] if t else []) for t in texts]

    trainer = MRTPOTrainer(AutoModelForCausalLM.from_pretrained(path), train_dataset=ds, processing_class=tok,
                           reward_funcs=[first_letter], args=trl_args(
                               tmp_path, runs_dir=str(tmp_path / "runs"), run_name="spans", max_steps=1,
                               credit_samples=0, reward_contrasts={"first_letter": "question"}))
    trainer.train()
    store = RunStore(tmp_path / "runs" / "spans")
    credit = store.credit(1)
    first = credit[(credit["start"] == 0) & (credit["end"] > 0)]  # the token holding character 0
    assert first["in_span"].all() and not credit[credit["start"] >= 1]["in_span"].any()
    assert "span/first_letter/overlap" in store.metrics().columns
    assert store.config()["reward_routes"]["first_letter"]["spans"] is True


def reward_a(completions, **kwargs):
    return [float(len(c) > 3) for c in completions]


def reward_b(completions, **kwargs):
    return [float("a" in c) for c in completions]


@needs_trl
@pytest.mark.parametrize(("funcs", "fields", "message"), [
    ([lambda completions, **kw: [0.0] * len(completions), lambda completions, **kw: [1.0] * len(completions)],
     {}, "two reward functions are named '<lambda>'"),
    ([reward_a], {"reward_contrasts": {"reward_c": "question"}}, "'reward_c' is not a reward function's name"),
    ([reward_a, reward_b], {}, "no reward has a contrast"),
    ([reward_a], {"reward_contrasts": {"reward_a": "match:zebra"}}, "finds nothing to remove in any of the 4 rows"),
    ([reward_a], {"reward_contrasts": {"reward_a": "column:nope"}}, "row 0: the row has no column 'nope'"),
    ([reward_a], {"reward_contrasts": {"reward_a": "verifier"}}, "'verifier' needs a workbench verifier family"),
])
def test_what_would_route_silently_or_clash_is_refused_in_one_line(micro, tmp_path, funcs, fields, message):  # noqa: F811
    from transformers import AutoModelForCausalLM

    from core.integrations.trl import MRTPOTrainer

    path, tok, _ = micro
    from datasets import Dataset

    plain = Dataset.from_list([{"prompt": [{"role": "user", "content": f"Write about {t}. Be brief."}]}
                               for t in ("rivers", "cats", "snow", "bread")])
    with pytest.raises(ConfigError, match=message):
        MRTPOTrainer(AutoModelForCausalLM.from_pretrained(path), reward_funcs=funcs, train_dataset=plain,
                     processing_class=tok, args=trl_args(tmp_path, runs_dir=None, **fields))


@needs_trl
def test_a_reward_left_without_a_contrast_is_uniform_and_says_so(micro, tmp_path, caplog):  # noqa: F811
    from datasets import Dataset
    from transformers import AutoModelForCausalLM

    from core.integrations.trl import MRTPOTrainer

    path, tok, _ = micro
    plain = Dataset.from_list([{"prompt": f"Write about {t}. Be brief."} for t in ("rivers", "cats", "snow", "bread")])
    trainer = MRTPOTrainer(AutoModelForCausalLM.from_pretrained(path), reward_funcs=[reward_a, reward_b],
                           train_dataset=plain, processing_class=tok,
                           args=trl_args(tmp_path, runs_dir=None, reward_contrasts={"reward_a": "last_sentence"}))
    err = caplog.text
    assert "MRTPO routing: reward_a: replay, contrast last_sentence (4 of 4 rows)" in err
    assert "MRTPO routing: reward_b: uniform: no contrast declared" in err
    assert [r.replays for r in trainer.routes] == [True, False]


@pytest.mark.parametrize(("fields", "message"), [
    ({"method": "gdpo", "multi_objective_aggregation": "sum_then_normalize"}, "method 'gdpo' is normalize_then_sum"),
    ({"method": "grpo", "multi_objective_aggregation": "normalize_then_sum"}, "method 'grpo' is sum_then_normalize"),
    ({"multi_objective_aggregation": "mean"}, "not one of"),
    ({"reward_contrasts": {"r": "colum:x"}}, "r: unknown contrast"),
    ({"reward_contrasts": "{not json"}, "not a JSON object"),
])
@needs_trl
def test_contradicting_aggregations_and_bad_contrasts_are_refused_by_the_config(tmp_path, fields, message):
    with pytest.raises(ConfigError, match=message):
        trl_args(tmp_path, **{**fields, "multi_objective_aggregation": fields.get("multi_objective_aggregation")})


@needs_trl
def test_the_config_resolves_the_aggregation_by_method_and_pickles_function_contrasts(tmp_path):
    import pickle

    from core import contrast

    assert trl_args(tmp_path, method="grpo", multi_objective_aggregation=None).multi_objective_aggregation == \
        "sum_then_normalize"
    args = trl_args(tmp_path, multi_objective_aggregation=None,
                    reward_contrasts={"a": contrast.text(lambda row: "x"), "b": "column:hint"})
    assert args.multi_objective_aggregation == "normalize_then_sum"
    back = pickle.loads(pickle.dumps(args))  # HF saves training_args.bin
    assert back.reward_contrasts["a"] == "text(<lambda>)" and back.reward_contrasts["b"].kind == "column"


@needs_trl
def test_replay_reuses_the_sampling_logits_and_gets_the_recomputed_distances(micro, tmp_path, monkeypatch):  # noqa: F811
    """Generation keeps its next-token logits (p_t under x), so the replay runs its contrastive passes only, as the
    built-in trainer does; the token advantages equal those of a replay that recomputes p_t by a full-prompt pass."""
    import torch
    from transformers import AutoModelForCausalLM

    from core.algos import teacher_forcing
    from core.integrations.trl import MRTPOTrainer

    path, tok, ds = micro
    seen = []
    real = teacher_forcing.contrastive_distances

    def spy(*args, **kwargs):
        seen.append(kwargs.get("logp_full"))
        return real(*args, **kwargs)

    monkeypatch.setattr(teacher_forcing, "contrastive_distances", spy)
    results = []
    for keep in (True, False):
        trainer = MRTPOTrainer(AutoModelForCausalLM.from_pretrained(path), train_dataset=ds, processing_class=tok,
                               args=trl_args(tmp_path, runs_dir=None, replay_pairs="all"))
        if not keep:
            monkeypatch.setattr(trainer, "_keeps_sampling_logits", lambda: False)
        results.append(one_batch(trainer, ds)[0])
    assert seen[0] is not None and seen[0].shape[:2] == results[0]["completion_ids"].shape and seen[1] is None
    assert torch.equal(results[0]["completion_ids"], results[1]["completion_ids"])
    torch.testing.assert_close(results[0]["advantages"], results[1]["advantages"], rtol=1e-4, atol=1e-4)


def lora():
    from peft import LoraConfig

    return LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")


# TRL's documented features, each trained one step by MRTPOTrainer (README / docs/TRL.md, "What TRL offers")
FEATURES = {
    "gradient_checkpointing": dict(activation_checkpointing=True),
    "loss_grpo": dict(loss_type="grpo"), "loss_bnpo": dict(loss_type="bnpo"), "loss_dr_grpo": dict(loss_type="dr_grpo"),
    "loss_cispo": dict(loss_type="cispo"), "loss_sapo": dict(loss_type="sapo"),
    "gspo": dict(importance_sampling_level="sequence", loss_type="grpo"),
    "top_entropy_quantile": dict(top_entropy_quantile=0.2),
    "beta": dict(beta=0.04, max_steps=2),
    "log_completions": dict(log_completions=True),
    "peft": dict(),
    "reward_model": dict(),
}


@needs_trl
@pytest.mark.parametrize("feature", list(FEATURES))
def test_trls_documented_features_train_with_mrtpo(feature, micro, tmp_path):  # noqa: F811
    """Each feature of TRL's GRPO documentation trains a step with MRTPO's token advantages and writes its run store:
    LoRA (only the adapter trains, the replay runs on the adapted policy), gradient checkpointing, the loss types,
    GSPO, top_entropy_quantile, a KL term, the completions table, and a reward model routed by replay."""
    import torch
    from transformers import AutoModelForCausalLM

    from core.integrations.trl import MRTPOTrainer, verifier_rewards

    path, tok, ds = micro
    model = AutoModelForCausalLM.from_pretrained(path)
    kwargs, fields = {}, dict(FEATURES[feature])
    funcs = verifier_rewards(ds)
    if feature == "peft":
        pytest.importorskip("peft")
        kwargs["peft_config"] = lora()
    if feature == "reward_model":  # a sequence classifier (random head) from the micro model's folder, as TRL loads one
        funcs = [*funcs, str(path)]
        fields["reward_contrasts"] = {Path(path).name: "question"}
    fields = {"max_steps": 1, **fields}
    trainer = MRTPOTrainer(model, reward_funcs=funcs, train_dataset=ds, processing_class=tok,
                           args=trl_args(tmp_path, runs_dir=str(tmp_path / "runs"), run_name="f",
                                         final_checkpoint=True, **fields), **kwargs)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    store = RunStore(tmp_path / "runs" / "f")
    assert store.status()["state"] == "completed" and store.credit_steps() == list(range(1, fields["max_steps"] + 1))
    assert np.isfinite(store.metrics()["loss/total"]).all() and store.credit(1)["token_adv"].abs().max() > 0
    changed = {n for n, p in trainer.model.named_parameters() if not torch.equal(before[n], p.detach())}
    assert changed
    if feature == "peft":
        assert changed and all("lora_" in n for n in changed)
        assert (store.checkpoints()[-1] / "adapter_model.safetensors").exists()
    if feature == "gradient_checkpointing":
        assert trainer.model.is_activation_checkpointing
    if feature == "log_completions":
        assert len(trainer._logs["advantages"]) > 0
    if feature == "beta":
        assert store.metrics()["loss/kl"].iloc[-1] > 0
    if feature == "reward_model":
        name = Path(path).name
        assert trainer.reward_names[-1] == name and store.config()["reward_routes"][name]["routing"] == "replay"


@pytest.mark.parametrize("backend", ["builtin", "trl"])
def test_both_trainers_route_declared_contrasts_the_same_way(backend, micro_model, prompt_file, tmp_path, capsys):
    """`mrtpo train --reward-contrasts` on either backend: the declared rewards take their contrast (task:arithmetic
    its question, so its weights vary), a reward declared uniform is not replayed (weight 1 on every token), the
    config records them; replay/pass_share counts only the pairs that have a contrast."""
    from test_trl import MICRO

    from core.cli import main

    if backend == "trl" and not importlib.util.find_spec("trl"):
        pytest.skip("TRL is not installed")
    code = main(["train", "--backend", backend, "--model", str(micro_model), "--prompt-set", str(prompt_file),
                 "--steps", "1", "--runs-dir", str(tmp_path), "--run-name", "rc", "--device", "cpu",
                 "--replay-pairs", "all", "--reward-contrasts", "task:arithmetic=question,punctuation:no_comma=uniform",
                 *[f"--{k.replace('_', '-')}={v}" for k, v in MICRO.items()]])
    assert code == 0, capsys.readouterr()
    store = RunStore(tmp_path / "rc")
    assert store.config()["reward_contrasts"] == {"task:arithmetic": "question", "punctuation:no_comma": "uniform"}
    credit = store.credit(1)
    comma = credit[credit["reward"] == "punctuation:no_comma"]
    assert len(comma) and (comma["weight"] == 1).all() and comma["distance"].isna().all()
    arithmetic = credit[credit["reward"] == "task:arithmetic"]
    assert arithmetic.groupby("sample")["weight"].std().max() > 0.05
    assert store.metrics()["replay/pass_share"].iloc[-1] == 1.0  # replay_pairs all: every pair with a contrast


@needs_trl
@pytest.mark.app
def test_the_app_opens_a_run_of_a_users_own_rewards_and_says_which_report_no_spans(tmp_path, monkeypatch):
    """Every page opens on a run of TRL's reasoning setup (two of its three rewards report no spans, no
    all-satisfied rate); Token credit and the Verifier debugger name the rewards without spans."""
    from streamlit.testing.v1 import AppTest

    example("math_reasoning").main(["--max-steps", "1", "--runs-dir", str(tmp_path), "--run-name", "own",
                                    "--output-dir", str(tmp_path / "hf"), "--max-completion-length", "8"])
    monkeypatch.setenv("MRTPO_RUNS_DIR", str(tmp_path))
    run = str(tmp_path / "own")
    said = {}
    for name in ("runs", "curves", "credit", "js", "debugger", "compare"):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
        at.session_state["mrtpo_run"] = run
        at.session_state["mrtpo_runs"] = [run]
        at.run()
        if name != "runs":
            at.switch_page(f"mrtpo_viz/pages/{name}.py").run()
        assert not at.exception, (name, at.exception)
        said[name] = " ".join([c.value for c in at.caption] + [i.value for i in at.info])
    for name in ("credit", "debugger"):
        assert "No spans reported by think_format_reward, lowercase_reward" in said[name], said[name]


@needs_trl
def test_sampling_logits_are_kept_only_while_they_fit():
    """At a GPU batch's size the kept logits would not fit (64 rows x 1,024 tokens x 49,152 words, bf16: 6 GiB +
    its fp32 log-softmax): the replay recomputes p_t instead; a CPU-sized batch keeps them."""
    import torch

    from core.integrations.trl.trainer import SAMPLING_LOGITS_MAX_BYTES, sampling_logits_bytes

    big = torch.nn.Linear(8, 49_152, bias=False).to(torch.bfloat16)
    assert sampling_logits_bytes(64, 1024, big) == 64 * 1024 * 49_152 * 6 > SAMPLING_LOGITS_MAX_BYTES
    small = torch.nn.Linear(8, 300, bias=False)
    assert sampling_logits_bytes(32, 48, small) < SAMPLING_LOGITS_MAX_BYTES
