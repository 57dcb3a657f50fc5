"""MRTPO on TRL (core.integrations.trl): MRTPOTrainer against TRL's own GDPO on the same batch, its run store
(same schema as a built-in run, opened by the app), two processes against one, stopping, and bad input.

Needs `trl` (installed by `make test`); the tests that check the errors without TRL run everywhere.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import html_tables, require

from core.choices import DEFAULT_RELEVANCE
from core.config import ConfigError, TrainConfig
from core.run import credit_choice
from core.run.store import RunStore, credit_path, list_runs

pytestmark = pytest.mark.trl  # the TRL integration (core.integrations.trl), most tests train with TRL

ROOT = Path(__file__).resolve().parent.parent
HAS_TRL = importlib.util.find_spec("trl") is not None
needs_trl = pytest.mark.skipif(not HAS_TRL, reason="TRL is not installed (make test installs it)")
CLI_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
MICRO = dict(group_size=4, max_new_tokens=12, lr=1e-3, replay_chunk=5)  # 4 prompts x G = 4


def trl_fields(tmp_path, **overrides) -> dict:
    """GRPOConfig fields of the micro setting: one generation batch of 4 prompts x G = 4 per optimizer step."""
    fields = dict(output_dir=str(tmp_path / "hf"), use_cpu=True, bf16=False, seed=0, per_device_train_batch_size=16,
                  num_generations=4, max_completion_length=12, max_steps=2, learning_rate=1e-3,
                  lr_scheduler_type="constant", save_strategy="no", logging_strategy="no", report_to=[],
                  activation_checkpointing=False, disable_tqdm=True, multi_objective_aggregation="normalize_then_sum")
    fields.update(overrides)
    return fields


def trl_args(tmp_path, **overrides):
    from core.integrations.trl import MRTPOConfig

    return MRTPOConfig(**trl_fields(tmp_path, **overrides))


@pytest.fixture(scope="module")
def micro(micro_model, prompt_file):
    """(model path, tokenizer, dataset of the micro prompts)."""
    pytest.importorskip("trl")
    from transformers import AutoTokenizer

    from core.integrations.trl import prompt_dataset
    from core.tasks import load_prompt_set

    tok = AutoTokenizer.from_pretrained(micro_model)
    tok.padding_side = "left"
    return micro_model, tok, prompt_dataset(load_prompt_set(prompt_file), tok)


def one_batch(trainer, dataset):
    """One generation batch (4 prompts x 4, the same random draws for every trainer), its loss and gradient."""
    import torch

    torch.manual_seed(123)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # what HF's loop sets before the first step
    out = trainer._generate_and_score_completions([dataset[i] for i in range(4) for _ in range(4)])
    trainer.model.zero_grad()
    loss = trainer.compute_loss(trainer.model, out)
    loss.backward()
    return out, loss.detach(), [p.grad.clone() for p in trainer.model.parameters()]


@needs_trl
def test_uniform_routing_reproduces_trl_gdpo_loss_and_gradient(micro, tmp_path):
    """routing=uniform through MRTPOTrainer equals TRL's own normalize_then_sum (GDPO) on the same batch: the same
    advantages on every token, the same loss, the same gradient."""
    import torch
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    from core.integrations.trl import MRTPOTrainer, verifier_rewards

    path, tok, ds = micro
    gdpo = GRPOTrainer(AutoModelForCausalLM.from_pretrained(path), reward_funcs=verifier_rewards(ds),
                       args=GRPOConfig(**trl_fields(tmp_path)), train_dataset=ds, processing_class=tok)
    mrtpo = MRTPOTrainer(AutoModelForCausalLM.from_pretrained(path), args=trl_args(tmp_path, routing="uniform",
                         runs_dir=None), train_dataset=ds, processing_class=tok)
    out_g, loss_g, grad_g = one_batch(gdpo, ds)
    out_m, loss_m, grad_m = one_batch(mrtpo, ds)
    assert torch.equal(out_g["completion_ids"], out_m["completion_ids"])  # the same batch
    assert out_g["advantages"].shape == (16,) and out_m["advantages"].shape == out_m["completion_ids"].shape
    broadcast = out_g["advantages"][:, None] * out_m["completion_mask"]
    assert out_g["advantages"].abs().max() > 0.5  # a batch with signal in it
    # Float rounding is the only freedom: TRL's nanstd and ours round the same sums in a different order.
    torch.testing.assert_close(out_m["advantages"], broadcast, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(loss_m, loss_g, rtol=1e-6, atol=1e-8)
    for a, b in zip(grad_m, grad_g, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-8)


@needs_trl
def test_verifiers_run_once_per_batch_and_trls_table_shows_mrtpos_advantages(micro, tmp_path, monkeypatch):
    """The verifiers run once per (sample, reward) pair, as TRL's reward functions, and the spans MRTPO routes with
    are theirs (the built-in verify on the same texts gives the same masks); TRL's completions table (its logged
    advantage per completion) shows MRTPO's: the mean token advantage over the completion's tokens."""
    import torch
    from transformers import AutoModelForCausalLM

    from core.integrations.trl import MRTPOTrainer, prompt_row
    from core.run import batch as batch_lib
    from core.tasks import PromptItem

    path, tok, ds = micro
    trainer = MRTPOTrainer(AutoModelForCausalLM.from_pretrained(path), args=trl_args(tmp_path, runs_dir=None),
                           train_dataset=ds, processing_class=tok)
    calls = []
    real = PromptItem.verifier_for

    class Counting:
        def __init__(self, verifier):
            self.verifier = verifier

        def verify(self, text):
            calls.append(text)
            return self.verifier.verify(text)

    monkeypatch.setattr(PromptItem, "verifier_for", lambda self, name: None if real(self, name) is None
                        else Counting(real(self, name)))
    out, _, _ = one_batch(trainer, ds)
    rewards = trainer._captured.rewards  # (16, K)
    assert len(calls) == int((~torch.isnan(rewards)).sum()) > 0  # once per applicable pair (twice before)
    monkeypatch.setattr(PromptItem, "verifier_for", real)
    texts, _, offsets = batch_lib.decode_responses(tok, trainer._captured.completion_ids)
    items = [prompt_row(ds[i]).item for i in range(4) for _ in range(4)]
    expected = batch_lib.verify(items, texts, offsets, trainer.reward_names, out["completion_ids"].shape[1])
    kept = trainer._batch.parts[0].span_mask
    assert kept.any() and torch.equal(kept, expected.span_mask)
    mask = out["completion_mask"].float()
    mean_adv = ((out["advantages"] * mask).sum(1) / mask.sum(1).clamp(min=1)).tolist()
    assert list(trainer._logs["advantages"])[-16:] == pytest.approx(mean_adv, abs=1e-6)


@needs_trl
def test_a_trl_users_run_prints_nothing_of_its_own_and_leaves_the_final_model_in_output_dir(micro, tmp_path, capfd):
    """From Python, MRTPOTrainer's stdout is TRL's (nothing here: logging is off); the step lines go to the
    transformers logger (`print_steps` puts them on stdout, as mrtpo train does). The final policy is saved in
    output_dir as TRL's scripts save it, besides the run store's checkpoint."""
    from transformers import AutoModelForCausalLM

    from core.integrations.trl import MRTPOTrainer

    path, tok, ds = micro
    trainer = MRTPOTrainer(AutoModelForCausalLM.from_pretrained(path), train_dataset=ds, processing_class=tok,
                           args=trl_args(tmp_path, runs_dir=str(tmp_path / "runs"), run_name="quiet", max_steps=1))
    trainer.train()
    out = capfd.readouterr().out
    assert "step 1/1" not in out and "run quiet" not in out, out
    assert RunStore(tmp_path / "runs" / "quiet").status()["state"] == "completed"
    saved = {p.name for p in (tmp_path / "hf").iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "training_args.bin"} <= saved, saved
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    for a, b in zip(reloaded.parameters(), trainer.model.parameters(), strict=True):
        assert bool((a == b.detach()).all())


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory):
    """One runs directory for the TRL run and the built-in one (the app lists both)."""
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="module")
def trl_run(micro, runs_root, tmp_path_factory):
    """A two-step MRTPOTrainer run (replay routing) written to a run store; the advantage shapes it produced."""
    from transformers import AutoModelForCausalLM, TrainerCallback

    from core.integrations.trl import MRTPOTrainer

    path, tok, ds = micro
    tmp = tmp_path_factory.mktemp("trl-run")

    class Recording(MRTPOTrainer):
        shapes: list = []
        saves: list = []  # (output_dir, _internal_call) of every save_model call

        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            self.shapes.append((tuple(out["advantages"].shape), tuple(out["completion_ids"].shape)))
            return out

        def save_model(self, output_dir=None, _internal_call=False):
            self.saves.append((output_dir, _internal_call))
            return super().save_model(output_dir, _internal_call)

    class Logs(TrainerCallback):  # what TRL's metric path hands report_to (W&B, TensorBoard, trackio)
        def on_log(self, args, state, control, logs=None, **kwargs):
            trl_run_logs.append((state.global_step, dict(logs or {})))

    # TRL logs every optimizer step; the first 2 prompts x 2 samples are the held-out set, scored at the last step
    trainer = Recording(AutoModelForCausalLM.from_pretrained(path),
                        args=trl_args(tmp, runs_dir=str(runs_root), run_name="trl-two", replay_chunk=5, final_checkpoint=True,
                                      logging_strategy="steps", logging_steps=1, eval_prompts=2, eval_samples=2),
                        train_dataset=ds, processing_class=tok, held_out_dataset=ds, callbacks=[Logs()])
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    changed = any(not bool((a == b.detach()).all()) for a, b in zip(before, trainer.model.parameters(), strict=True))
    trl_run_saves.extend(Recording.saves)
    trl_run_trainer.append(trainer)
    return trainer.writer.path, Recording.shapes, changed


trl_run_saves: list = []  # the trl_run fixture's save_model calls
trl_run_logs: list = []  # (global_step, logs) of every on_log of the trl_run fixture
trl_run_trainer: list = []  # the trl_run fixture's trainer


@needs_trl
def test_mrtpo_metrics_reach_trls_loggers_named_as_in_the_run_store(trl_run):
    """Every finite number of a step's metrics line (per-reward credit metrics, routing overlap, replayed pairs,
    replay time, held-out evaluation) arrives through TRL's own metric path (on_log, what report_to gets) under
    the run store's name, with the run store's value, beside TRL's own metrics."""
    metrics = RunStore(trl_run[0]).metrics()
    assert [step for step, _ in trl_run_logs if "loss" in _] == [1, 2]
    for step, logs in trl_run_logs:
        if "loss" not in logs:  # HF's end-of-training summary
            continue
        row = metrics[metrics["step"] == step].iloc[0]
        line = {k: float(v) for k, v in row.items() if k != "step" and np.isfinite(v)}
        ours = {k: v for k, v in logs.items() if "/" in k and k in row.index}
        assert set(ours) == set(line), set(line) ^ set(ours)
        for key, value in line.items():
            assert logs[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key
        assert "reward" in logs and "entropy" in logs  # TRL's own stay
    last = [logs for _, logs in trl_run_logs if "loss" in logs][-1]
    for key in ("replay/pass_share", "time/replay", "routing/clipped_share", "span/retained", "eval/all_satisfied",
                "span/change_case:english_lowercase/mass_in", "eval/reward/punctuation:no_comma"):
        assert key in last, key
    assert trl_run_trainer[0].state.log_history[1]["replay/pass_share"] == last["replay/pass_share"]


@needs_trl
def test_report_to_tensorboard_writes_mrtpo_metrics_to_the_event_file(micro, tmp_path):
    """report_to="tensorboard": the event file holds every finite number of the run store's step line (credit
    metrics, routing overlap, replayed pairs, replay time, held-out evaluation) under HF's train/ prefix, with
    the run store's value. `tensorboard` is in the test extra; under CI=true its absence fails the test."""
    require(importlib.util.find_spec("tensorboard") is not None, "tensorboard is not installed",
            "make test installs it (the test extra)")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from transformers import AutoModelForCausalLM

    from core.integrations.trl import MRTPOTrainer

    path, tok, ds = micro
    trainer = MRTPOTrainer(AutoModelForCausalLM.from_pretrained(path), train_dataset=ds, processing_class=tok,
                           held_out_dataset=ds,
                           args=trl_args(tmp_path, runs_dir=str(tmp_path / "runs"), run_name="tb", max_steps=1,
                                         eval_prompts=2, eval_samples=2, report_to=["tensorboard"],
                                         logging_strategy="steps", logging_steps=1))
    trainer.train()
    line = RunStore(tmp_path / "runs" / "tb").metrics().iloc[0]
    ours = {k: float(v) for k, v in line.items() if k != "step" and np.isfinite(v)}
    assert {"replay/pass_share", "time/replay", "routing/clipped_share", "eval/all_satisfied"} <= set(ours)
    events = sorted((tmp_path / "hf").rglob("events.out.tfevents*"))
    assert len(events) == 1, events
    acc = EventAccumulator(str(events[0].parent), size_guidance={"scalars": 0})
    acc.Reload()
    assert {"train/loss", "train/reward"} <= set(acc.Tags()["scalars"])  # TRL's own stay
    for key, value in ours.items():
        (event,) = acc.Scalars(f"train/{key}")  # one step, one value
        assert event.step == 1 and event.value == pytest.approx(value, rel=1e-6, abs=1e-7), key  # float32 in the file


@needs_trl
def test_held_out_evaluation_on_trl_is_the_built_in_evaluation_of_the_saved_weights(trl_run, micro):
    """The trl backend scores the held-out set at its checkpoint steps (here the last), `eval/*` as the built-in
    trainer writes them: the built-in evaluation of the final checkpoint's weights gives the same numbers."""
    from transformers import AutoModelForCausalLM

    from core.integrations.trl import dataset_rows
    from core.model import encode_prompt
    from core.run.step import held_out_metrics

    _, tok, ds = micro
    store = RunStore(trl_run[0])
    metrics = store.metrics()
    assert metrics["eval/all_satisfied"].isna().tolist() == [True, False]  # step 2 only (the checkpoint step)
    items = [r.item for r in dataset_rows(ds)][:2]
    model = AutoModelForCausalLM.from_pretrained(store.checkpoints()[-1]).eval()
    expected = held_out_metrics(model, tok, items, [encode_prompt(tok, it.prompt()) for it in items],
                                store.reward_names(), samples=2, max_new_tokens=12, temperature=1.0, seed=0)
    assert set(expected) == set(metrics.filter(like="eval/").columns)
    for key, value in expected.items():
        got = metrics[key].iloc[-1]
        assert (np.isnan(value) and np.isnan(got)) or got == pytest.approx(value, abs=1e-9), key


@pytest.fixture(scope="module")
def builtin_run(micro_model, prompt_file, runs_root):
    """A one-step built-in run of the same micro setting (the schema reference)."""
    from core.run import lifecycle

    cfg = TrainConfig(model=str(micro_model), prompt_set=str(prompt_file), steps=1, runs_dir=str(runs_root),
                      run_name="builtin-one", eval_prompt_set=str(prompt_file), eval_prompts=2, eval_samples=2,
                      **MICRO)
    return lifecycle.train(cfg, out=io.StringIO())


@needs_trl
def test_two_steps_token_advantages_and_a_complete_run_store(trl_run):
    path, shapes, changed = trl_run
    assert len(shapes) == 2 and all(adv == ids for adv, ids in shapes) and all(len(a) == 2 for a, _ in shapes)
    assert changed  # two optimizer steps moved the policy
    store = RunStore(path)
    assert store.status()["state"] == "completed" and store.status()["step"] == 2
    assert store.config()["relevance"] == DEFAULT_RELEVANCE == "js"  # MRTPOConfig's default is the project's
    metrics = store.metrics()
    assert metrics["step"].tolist() == [1, 2] and store.credit_steps() == [1, 2]
    frame = store.credit(2)
    assert frame["sample"].tolist() == sorted(frame["sample"].tolist()) and frame["sample"].max() == 15
    # replay ran for the stated rewards whose group advantage is nonzero, the others are marked skipped
    replayed = frame["score"].notna() & ~frame["distance_skipped"]
    assert replayed.any() and np.isfinite(frame.loc[replayed, "distance"]).all() and frame.loc[~replayed, "distance"].isna().all()
    assert (frame.loc[frame["distance_skipped"], "group_adv"] == 0).all()
    assert 0 < metrics["replay/pass_share"].iloc[-1] <= 1
    assert (frame["weight"] >= 0).all()
    # the credit terms add up to the token advantage (docs/METHOD.md): sum_k credit - mu / (sigma + eps) = A
    per_token = frame.groupby(["sample", "t"]).agg(credit=("credit", "sum"), adv=("token_adv", "first"))
    offset = (per_token["credit"] - per_token["adv"]).to_numpy()
    assert np.ptp(offset) < 1e-4
    assert store.checkpoints() and (store.checkpoints()[-1] / "config.json").exists()


@needs_trl
def test_run_store_checkpoints_are_internal_saves_never_a_hub_push(trl_run):
    """Every checkpoint the run store takes calls save_model with _internal_call=True: with push_to_hub, HF's
    save_model(_internal_call=False) pushes the folder to the Hub each time."""
    assert trl_run_saves and all(internal for _, internal in trl_run_saves), trl_run_saves
    # the run store's checkpoints, then the final model into output_dir (save_final_model), as TRL's scripts end
    assert all("checkpoints" in str(folder) for folder, _ in trl_run_saves[:-1])
    assert Path(trl_run_saves[-1][0]).name == "hf"


@needs_trl
def test_end_process_group_releases_the_trainer_and_destroys_the_group(tmp_path):
    """end_process_group: barrier (finished runs), the DDP wrapper and accelerate's prepared objects released,
    then the group destroyed; a no-op without a group."""
    import torch.distributed as dist

    from core.integrations.trl import end_process_group

    class Accel:
        freed = 0

        def free_memory(self):
            self.freed += 1

    class Trainer:
        model = object()
        model_wrapped = object()
        accelerator = Accel()

    end_process_group(Trainer())  # no group: nothing happens
    assert Trainer.accelerator.freed == 0
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    trainer = Trainer()
    end_process_group(trainer, finished=True)
    assert not dist.is_initialized()
    assert trainer.model_wrapped is trainer.model and trainer.accelerator.freed == 1


@needs_trl
def test_trl_run_store_has_the_built_in_schema(trl_run, builtin_run):
    trl, ref = RunStore(trl_run[0]), RunStore(builtin_run)
    assert set(trl.config()) == set(ref.config()) and trl.config()["backend"] == "trl"
    assert set(trl.status()) == set(ref.status())
    assert trl.credit(1).dtypes.map(lambda d: d.name).to_dict() == ref.credit(1).dtypes.map(lambda d: d.name).to_dict()
    # both trainers' credit is weight x the pair's scale and their tokens slices of the response: schema 3 gives
    # them back, so neither file stores them
    for store in (trl, ref):
        names = pq.ParquetFile(credit_path(store.path, 1)).schema_arrow.names
        assert "credit_scale" in names and not {"credit", "token", "start"} & set(names)
    # every metric of a built-in step except the phase TRL does not have (docs/CONTRACTS.md)
    assert set(ref.metrics().columns) - set(trl.metrics().columns) == {"time/logprobs"}
    assert set(trl.metrics().columns) <= set(ref.metrics().columns)


@needs_trl
def test_the_app_shows_a_trl_run_like_a_built_in_one(trl_run, builtin_run):
    """Every inspect page opens on the TRL run and draws the panels it draws for the built-in run."""
    from streamlit.testing.v1 import AppTest

    def open_page(name: str, run: str, runs: list[str]) -> AppTest:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
        at.session_state["mrtpo_run"] = run
        at.session_state["mrtpo_runs"] = runs
        at.run()
        assert not at.exception, at.exception
        if name != "runs":
            at.switch_page(f"mrtpo_viz/pages/{name}.py").run()
            assert not at.exception, (name, at.exception)
        return at

    def charts(at: AppTest) -> list[str]:
        return [c.key for c in at.get("plotly_chart")]

    trl, ref = str(trl_run[0]), str(builtin_run)
    os.environ["MRTPO_RUNS_DIR"] = str(Path(trl).parent)
    try:
        assert "trl-two" in open_page("runs", trl, [trl]).dataframe[0].value["run"].tolist()
        for name in ("curves", "js", "debugger"):
            shown = charts(open_page(name, trl, [trl]))
            assert shown and shown == charts(open_page(name, ref, [ref])), name
        html = "".join(h.proto.body for h in open_page("credit", trl, [trl]).get("html"))
        assert html.count('<span class="tok" ') > 0 and "credit of " in html
        compare = open_page("compare", trl, [trl, ref])
        assert html_tables(compare)[0]["run"].tolist() == ["trl-two", "builtin-one"]
    finally:
        os.environ.pop("MRTPO_RUNS_DIR", None)


@needs_trl
@pytest.mark.slow
def test_two_processes_give_the_one_process_token_advantages_and_only_rank_0_writes(micro_model, prompt_file,
                                                                                    tmp_path):
    """The same fixed batches (tests/trl_fixed_batch.py) on one process and on two gloo processes."""
    script = ROOT / "tests" / "trl_fixed_batch.py"
    common = ["--model", str(micro_model), "--prompts", str(prompt_file), "--runs-dir", str(tmp_path)]
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          str(script), *common, "--run-name", "two"], cwd=ROOT, env=CLI_ENV, capture_output=True,
                         text=True, timeout=600)
    assert two.returncode == 0, two.stderr[-3000:]
    spec = importlib.util.spec_from_file_location("trl_fixed_batch", script)  # one process: this one
    fixed_batch = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixed_batch)
    fixed_batch.main([*common, "--run-name", "one"])
    # each rank prints "rank R pid P" (other output, e.g. torch.distributed's, may also start with "rank")
    pids = dict(m.groups() for m in re.finditer(r"^rank (\d+) pid (\d+)$", two.stdout, re.M))
    assert set(pids) == {"0", "1"}
    assert sorted(r.name for r in list_runs(tmp_path)) == ["one", "two"]  # one folder per run, whatever the ranks
    a, b = RunStore(tmp_path / "one"), RunStore(tmp_path / "two")
    assert b.status()["state"] == "completed" and str(b.status()["pid"]) == pids["0"]
    assert len(b.metrics()) == 2 and b.credit_steps() == [1, 2]
    for step in (1, 2):
        x, y = a.credit(step), b.credit(step)
        keys = ["sample", "reward", "t", "token_id"]
        assert x[keys].equals(y[keys])  # the same rows, global sample index p * b + i
        assert x["sample"].max() == 15
        np.testing.assert_allclose(y["token_adv"], x["token_adv"], atol=1e-4)
        np.testing.assert_allclose(y["distance"], x["distance"], atol=1e-4)

    # Storing fewer samples (whole groups, both outcomes of each reward) and only every 2nd batch: process 0
    # receives the text of those rows alone, writes them, and the metrics are those of the whole batch.
    three = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                            str(script), *common, "--run-name", "few", "--steps", "3", "--credit-samples", "8",
                            "--credit-every", "2"], cwd=ROOT, env=CLI_ENV, capture_output=True, text=True,
                           timeout=600)
    assert three.returncode == 0, three.stderr[-3000:]
    c = RunStore(tmp_path / "few")
    assert c.credit_steps() == [1, 3] and len(c.metrics()) == 3  # step 1, every 2nd after it, the last
    m_all, m_few = a.metrics(), c.metrics()
    for key in ("reward/all_satisfied", "adv/std", "response/length"):
        np.testing.assert_allclose(m_few[key].iloc[:2], m_all[key], atol=1e-4)
    names = c.reward_names()
    index = c.credit_index(1)
    whole = a.credit(1)
    rewards = whole.groupby(["sample", "reward"], sort=False)["score"].first().unstack()[names].to_numpy()
    chosen = credit_choice.choose_samples(rewards, 4, 8)
    assert sorted(set(index["sample"])) == chosen.tolist() and len(chosen) == 8
    y = c.credit(1)
    x = whole[whole["sample"].isin(chosen)].reset_index(drop=True)
    assert x[["sample", "reward", "t", "token_id", "token"]].astype(str).equals(
        y[["sample", "reward", "t", "token_id", "token"]].astype(str))


@needs_trl
def test_gradient_accumulation_trains_as_one_micro_batch(micro_model, prompt_file, tmp_path):
    """The same fixed batches with the optimizer step over 2 micro-batches of 8 (gradient_accumulation_steps=2,
    one generation batch per step) and over 1 of 16: the same token advantages and, dapo normalising by the whole
    batch's tokens, the same weights after two steps (float rounding apart)."""
    from safetensors.torch import load_file

    spec = importlib.util.spec_from_file_location("trl_fixed_batch", ROOT / "tests" / "trl_fixed_batch.py")
    fixed_batch = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixed_batch)
    common = ["--model", str(micro_model), "--prompts", str(prompt_file), "--runs-dir", str(tmp_path)]
    fixed_batch.main([*common, "--run-name", "one"])
    fixed_batch.main([*common, "--run-name", "accum", "--grad-accum", "2"])
    a, b = RunStore(tmp_path / "one"), RunStore(tmp_path / "accum")
    assert b.status()["state"] == "completed" and b.metrics()["step"].tolist() == [1, 2]
    for step in (1, 2):
        np.testing.assert_allclose(b.credit(step)["token_adv"], a.credit(step)["token_adv"], atol=1e-5)
    wa, wb = (load_file(s.checkpoints()[-1] / "model.safetensors") for s in (a, b))
    assert max(float((wa[k] - wb[k]).abs().max()) for k in wa) < 1e-5


def wait_for(predicate, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


@needs_trl
@pytest.mark.slow
def test_sigterm_stops_both_processes_and_marks_the_run_stopped(micro_model, prompt_file, tmp_path):
    """`mrtpo train --backend trl --nproc 2`; SIGTERM to process 0 (the pid in status.json, as the app's Stop
    button sends it) stops both processes after the current step."""
    argv = [sys.executable, "-m", "core.cli", "train", "--backend", "trl", "--nproc", "2", "--model",
            str(micro_model), "--prompt-set", str(prompt_file), "--steps", "200", "--runs-dir", str(tmp_path),
            "--run-name", "stop-me", "--device", "cpu", *[f"--{k.replace('_', '-')}={v}" for k, v in MICRO.items()]]
    proc = subprocess.Popen(argv, cwd=ROOT, env=CLI_ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    run = tmp_path / "stop-me"
    try:
        wait_for(lambda: len(RunStore(run).metrics()) >= 1 or proc.poll() is not None, 300, "the first step")
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        os.kill(RunStore(run).status()["pid"], signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out[-3000:]
    status = RunStore(run).status()
    assert status["state"] == "stopped" and 1 <= status["step"] < 200
    assert len(RunStore(run).metrics()) == status["step"] and RunStore(run).checkpoints()
    assert f"run stop-me: stopped ({run})" in out


# ------------------------------------------------------------------------------------------ bad input


def cli(*args: str, env=None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "core.cli", "train", *args], cwd=ROOT, env=env or CLI_ENV,
                          capture_output=True, text=True, timeout=timeout)


def test_nproc_larger_than_the_groups_is_one_clear_error(prompt_file, tmp_path):
    if not HAS_TRL:
        pytest.skip("the trl backend check comes first without TRL")
    out = cli("--backend", "trl", "--nproc", "5", "--prompts-per-step", "4", "--prompt-set", str(prompt_file),
              "--runs-dir", str(tmp_path / "runs"))
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "nproc: 5 processes for 4 prompt groups" in out.stderr
    assert not (tmp_path / "runs").exists()
    with pytest.raises(ConfigError, match="single-process reference") as err:
        TrainConfig(nproc=2)
    assert err.value.field == "nproc"
    with pytest.raises(ConfigError, match="does not split evenly"):
        TrainConfig(backend="trl", nproc=3, prompts_per_step=4, group_size=2)


def test_trl_missing_is_one_clear_error_and_writes_nothing(prompt_file, tmp_path):
    blocked = "import sys; sys.modules['trl'] = None\nfrom core.cli import main\nsys.exit(main(sys.argv[1:]))"
    out = subprocess.run([sys.executable, "-c", blocked, "train", "--backend", "trl", "--prompt-set",
                          str(prompt_file), "--runs-dir", str(tmp_path / "runs")], cwd=ROOT, env=CLI_ENV,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "backend: the trl backend needs TRL, which is not installed; install it with pip install " \
           "'trl>=1.16,<1.17'" in out.stderr
    assert not (tmp_path / "runs").exists()
    code = "import sys; sys.modules['trl'] = None\nimport core.integrations.trl"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=CLI_ENV, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode != 0 and "ImportError: core.integrations.trl: the trl backend needs TRL" in out.stderr


def test_a_constraint_without_a_verifier_is_one_clear_error(prompt_file, tmp_path):
    bad = tmp_path / "bad.jsonl"
    record = {"key": "x", "task": "Write a note.", "constraints": [{"family": "no:such_family", "kwargs": {}}]}
    bad.write_text(prompt_file.read_text() + json.dumps(record) + "\n")
    out = cli("--backend", "trl" if HAS_TRL else "builtin", "--prompt-set", str(bad),
              "--runs-dir", str(tmp_path / "runs"))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "no:such_family" in out.stderr
    assert not (tmp_path / "runs").exists()


@needs_trl
def test_trainer_refuses_bad_rows_and_config_values_before_writing(micro, tmp_path):
    from transformers import AutoModelForCausalLM

    from core.integrations.trl import MRTPOConfig, MRTPOTrainer, prompt_row

    path, tok, ds = micro
    row = {"prompt": [{"role": "user", "content": "Write a note."}], "key": "bad", "task": "",
           "constraints": '[{"family": "no:such_family", "kwargs": {}}]'}
    with pytest.raises(ConfigError, match="train_dataset: row 4: unknown .*no:such_family"):
        MRTPOTrainer(AutoModelForCausalLM.from_pretrained(path), args=trl_args(tmp_path, runs_dir=str(tmp_path / "r")),
                     train_dataset=ds.add_item(row), processing_class=tok)
    assert not (tmp_path / "r").exists()
    with pytest.raises(ConfigError, match="routing: unknown value 'replayy'"):
        trl_args(tmp_path, routing="replayy")
    with pytest.raises(ConfigError, match="loss_type: vespo"):
        trl_args(tmp_path, loss_type="vespo")
    with pytest.raises(ConfigError, match="family_weights: unknown reward name"):
        MRTPOTrainer(AutoModelForCausalLM.from_pretrained(path), args=trl_args(tmp_path, family_weights={"nope": 2}),
                     train_dataset=ds, processing_class=tok)
    with pytest.raises(TypeError, match="MRTPOConfig"):
        MRTPOTrainer(AutoModelForCausalLM.from_pretrained(path), args=None, train_dataset=ds)
    # a native row whose prompt is not its task + constraint sentences cannot give contrastive prompts
    with pytest.raises(ValueError, match="does not contain the task"):
        prompt_row({"prompt": "Something else.", "task": "Write a note.", "constraints": "[]"})
    assert isinstance(MRTPOConfig, type)


@needs_trl
@pytest.mark.parametrize("fields, field", [
    (dict(use_vllm=True), "use_vllm"),  # colocate, TRL's default vllm_mode
    (dict(use_vllm=True, vllm_mode="server"), "use_vllm"),
    (dict(deepspeed={"zero_optimization": {"stage": 3}}), "deepspeed"),
], ids=["vllm-colocate", "vllm-server", "zero3"])
def test_untested_trl_features_are_refused_in_one_line(tmp_path, fields, field):
    """vLLM generation and ZeRO-3 could not be tested here (README, "TRL features"): MRTPOConfig refuses them with
    one line naming the field, before TRL's own checks import vLLM or DeepSpeed."""
    with pytest.raises(ConfigError) as err:
        trl_args(tmp_path, **fields)
    assert err.value.field == field and "not supported yet: untested" in str(err.value)
    assert "\n" not in str(err.value)


@needs_trl
def test_contrastive_prompts_keep_the_row_template(micro):
    from core.integrations.trl import prompt_row

    row = prompt_row({"prompt": "Q: Write a note. Do not use any commas.\nA:", "task": "Write a note.",
                      "constraints": [{"family": "punctuation:no_comma", "kwargs": {"unused": None}}]})
    assert row.contrastive("punctuation:no_comma") == "Q: Write a note.\nA:"
    assert row.contrastive("keywords:existence") is None
    chat = prompt_row({"prompt": [{"role": "system", "content": "Be brief."},
                                  {"role": "user", "content": "What is 3 plus 4? Use only lowercase letters."}],
                       "constraints": [{"family": "task:arithmetic", "kwargs": {"answer": 7}},
                                       {"family": "change_case:english_lowercase", "kwargs": {}}], "task": "What is 3 plus 4?"})
    assert chat.contrastive("task:arithmetic") == [{"role": "system", "content": "Be brief."},
                                                   {"role": "user", "content": "Use only lowercase letters."}]
    # the one-message prompts of `prompt_dataset` tokenize as the built-in trainer encodes its prompts
    from core.model import encode_prompt

    _, tok, ds = micro
    assert tok.apply_chat_template(ds[0]["prompt"], add_generation_prompt=True, tokenize=True,
                                   return_dict=True)["input_ids"] == encode_prompt(tok, ds[0]["prompt"][0]["content"])


def test_launch_form_offers_backend_and_process_count():
    from mrtpo_viz import form, launcher

    fields = {f.name: f for f in form.form_fields()}
    assert fields["backend"].kind == "select" and fields["backend"].options == ("builtin", "trl")
    assert fields["nproc"].kind == "int" and fields["nproc"].default == 1
    _, errors = launcher.validate({"backend": "builtin", "nproc": 2}, check_prompts=False)
    assert "single-process reference" in errors["nproc"]


@needs_trl
def test_the_example_script_trains_and_writes_a_run_store(micro_model, tmp_path):
    spec = importlib.util.spec_from_file_location("trl_mrtpo_example", ROOT / "examples" / "trl_mrtpo.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    trainer = example.main(["--model", str(micro_model), "--max-steps", "1", "--per-device-batch", "8",
                            "--num-generations", "4", "--max-completion-length", "8", "--output-dir",
                            str(tmp_path / "hf"), "--runs-dir", str(tmp_path / "runs"), "--run-name", "example"])
    store = RunStore(tmp_path / "runs" / "example")
    assert store.status()["state"] == "completed" and store.credit_steps() == [1]
    assert store.config()["reward_weights"] == {"task:arithmetic": 2.0} and store.config()["backend"] == "trl"
    assert trainer.reward_names == ["keywords:existence", "punctuation:no_comma", "task:arithmetic",
                                    "change_case:english_lowercase", "startend:end_checker"]


@needs_trl
def train_trl_cli(model, prompts, runs_dir, name: str, flags: list[str]) -> int:
    """`mrtpo train --backend trl` for 2 steps on CPU with the micro settings (MICRO) and `flags`: its exit code."""
    from core.cli import main

    return main(["train", "--backend", "trl", "--model", str(model), "--prompt-set", str(prompts), "--steps", "2",
                 "--runs-dir", str(runs_dir), "--run-name", name, "--device", "cpu", *flags,
                 *[f"--{k.replace('_', '-')}={v}" for k, v in MICRO.items()]])


@pytest.mark.parametrize("flags", [
    ["--method", "grpo"],
    ["--routing", "span", "--checkpoint-every", "1", "--keep-checkpoints", "1"],
    ["--relevance", "js_specific", "--kl-beta", "0.1", "--inner-epochs", "2"],
], ids=["grpo", "span", "js_specific-kl-inner2"])
def test_cli_backend_trl_runs_every_method_and_option(micro_model, prompt_file, tmp_path, flags, capsys):
    code = train_trl_cli(micro_model, prompt_file, tmp_path, "opt", flags)
    assert code == 0, capsys.readouterr()
    store = RunStore(tmp_path / "opt")
    assert store.status()["state"] == "completed" and store.metrics()["step"].tolist() == [1, 2]
    cfg = store.config()
    assert cfg["backend"] == "trl" and cfg["nproc"] == 1 and set(cfg) >= set(TrainConfig.__dataclass_fields__)
    metrics = store.metrics()
    if "--kl-beta" in flags:
        assert (metrics["loss/kl"] > 0).all()  # TRL's k3 KL to the frozen reference
    if "--checkpoint-every" in flags:
        assert [p.name for p in store.checkpoints()] == ["step_000002"]  # step 1's was pruned (keep 1)
    has_js = metrics.filter(like="js/").notna().any().any() if metrics.filter(like="js/").size else False
    assert has_js == ("--routing" not in flags and "--method" not in flags)


@needs_trl
@pytest.mark.parametrize("backend", ["builtin", "trl"])
def test_a_diverging_run_ends_failed_on_both_backends_and_saves_no_weights(tmp_path, backend, capsys):
    """lr 1 with a huge KL weight makes step 1's loss NaN on the shipped tiny-instruct: the step is recorded, no
    checkpoint is saved (the trl backend used to save all-NaN weights and fail at step 2) and the run ends
    failed, saying why."""
    from core.cli import main

    code = main(["train", "--backend", backend, "--steps", "4", "--group-size", "2", "--prompts-per-step", "2", "--max-new-tokens", "8",
                 "--lr", "1", "--max-grad-norm", "0", "--kl-beta", "1e30", "--inner-epochs", "4",
                 "--checkpoint-every", "1", "--runs-dir", str(tmp_path), "--run-name", "nan", "--device", "cpu"])
    assert code == 1
    store = RunStore(tmp_path / "nan")
    status = store.status()
    assert status["state"] == "failed" and status["step"] == 1
    assert status["error"].startswith("diverged at step 1: loss/total is nan")
    assert store.metrics()["step"].tolist() == [1] and store.checkpoints() == []
    assert "mrtpo train: diverged at step 1" in capsys.readouterr().err


@needs_trl
@pytest.mark.slow
def test_resume_continues_a_trl_run_as_if_it_had_not_stopped(micro_model, prompt_file, tmp_path):
    """`mrtpo train --resume` of a trl run from its step-2 checkpoint (weights, optimizer and scheduler state, RNG
    states, the data order) gives step 3 exactly as the run that went on: the same prompts and responses, the same
    token advantages, the same weights after step 3; the run store continues after step 2. Each FutureWarning of
    the run is shown once, with a checkpoint every step (they came back after each save)."""
    from safetensors.torch import load_file

    from core.cli import main

    common = ["train", "--backend", "trl", "--model", str(micro_model), "--prompt-set", str(prompt_file),
              "--runs-dir", str(tmp_path), "--device", "cpu", "--checkpoint-every", "1", "--keep-checkpoints", "0",
              *[f"--{k.replace('_', '-')}={v}" for k, v in MICRO.items()]]
    assert main([*common, "--steps", "3", "--run-name", "whole"]) == 0
    part = subprocess.run([sys.executable, "-m", "core.cli", *common, "--steps", "2", "--run-name", "part"], cwd=ROOT,
                          env=CLI_ENV, capture_output=True, text=True, timeout=600)
    assert part.returncode == 0, part.stderr[-3000:]
    future = [line for line in part.stderr.splitlines() if "FutureWarning" in line]
    assert len(future) == len(set(future)), future
    ckpt = tmp_path / "part" / "checkpoints" / "step_000002"
    assert {"optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json", "trl_trainer_state.json"} <= {
        p.name for p in ckpt.iterdir()}
    assert main(["train", "--resume", str(tmp_path / "part"), "--steps", "3"]) == 0
    whole, resumed = RunStore(tmp_path / "whole"), RunStore(tmp_path / "part")
    assert resumed.status()["state"] == "completed" and resumed.status()["step"] == 3
    assert resumed.metrics()["step"].tolist() == [1, 2, 3] and resumed.credit_steps() == [1, 2, 3]
    x, y = whole.credit(3), resumed.credit(3)
    keys = ["sample", "prompt_key", "reward", "t", "token_id", "in_span"]
    assert x[keys].astype(str).equals(y[keys].astype(str))
    np.testing.assert_allclose(y["token_adv"], x["token_adv"], atol=1e-6)
    a = load_file(whole.checkpoints()[-1] / "model.safetensors")
    b = load_file(resumed.checkpoints()[-1] / "model.safetensors")
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-6


@needs_trl
@pytest.mark.slow
def test_two_processes_resume_after_the_last_complete_checkpoint_and_only_rank_0_writes(micro_model, prompt_file,
                                                                                        tmp_path):
    """`mrtpo train --backend trl --nproc 2 --resume`: a 3-step two-process run whose step-3 checkpoint was cut off
    (the hidden folder a kill during its save leaves) resumes from step 2's (weights, optimizer, scheduler, both
    processes' RNG states, the data order) and gives step 3 again as the run first made it; the run store goes on
    after step 2 to step 4, one metrics line and one credit map per step, written by process 0 alone."""
    common = ["--runs-dir", str(tmp_path), "--checkpoint-every", "1", "--keep-checkpoints", "0"]
    first = cli("--backend", "trl", "--nproc", "2", "--model", str(micro_model), "--prompt-set", str(prompt_file),
                "--device", "cpu", "--steps", "3", "--run-name", "r", *common,
                *[f"--{k.replace('_', '-')}={v}" for k, v in MICRO.items()], timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    run = tmp_path / "r"
    store = RunStore(run)
    ckpt = run / "checkpoints" / "step_000002"
    assert {"optimizer.pt", "scheduler.pt", "rng_state_0.pth", "rng_state_1.pth", "trl_trainer_state.json"} <= {
        p.name for p in ckpt.iterdir()}  # every process saved its RNG state
    step_3 = store.credit(3)
    (run / "checkpoints" / "step_000003").rename(run / "checkpoints" / ".step_000003.tmp")  # cut off mid-save

    resumed = cli("--resume", str(run), "--steps", "4", timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert [p.name for p in tmp_path.iterdir()] == ["r"]  # one run folder, whatever the ranks
    status = store.status()
    assert status["state"] == "completed" and status["step"] == 4 and store.config()["nproc"] == 2
    lines = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert lines == [1, 2, 3, 4]  # step 3's first line dropped at resume, no step twice, none missing
    assert store.credit_steps() == [1, 2, 3, 4]
    assert sorted(p.name for p in store.checkpoints()) == [f"step_{i:06d}" for i in (1, 2, 3, 4)]
    assert not list(run.rglob(".*.tmp"))  # the cut-off save is gone
    again = store.credit(3)
    keys = ["sample", "prompt_key", "reward", "t", "token_id", "in_span"]
    assert again["sample"].max() == 15  # both processes' rows, global sample index p * b + i
    assert step_3[keys].astype(str).equals(again[keys].astype(str))
    np.testing.assert_allclose(again["token_adv"], step_3["token_adv"], atol=1e-6)
    # only process 0 speaks: the launcher's two lines and one resume line
    assert resumed.stdout.count("resuming r from step 2") == 1, resumed.stdout


@needs_trl
def test_resume_from_a_checkpoint_without_optimizer_state_is_one_clear_error(micro_model, prompt_file, tmp_path):
    """A trl run whose checkpoint has no optimizer state (written before resume existed) is refused in one line."""
    from core.run.store import RunWriter

    cfg = TrainConfig(model=str(micro_model), prompt_set=str(prompt_file), backend="trl", runs_dir=str(tmp_path),
                      run_name="old", **MICRO)
    writer = RunWriter.create(tmp_path, "old", cfg.to_dict())
    writer.set_status(state="stopped", step=1)
    ckpt = tmp_path / "old" / "checkpoints" / "step_000001"
    ckpt.mkdir(parents=True)
    (ckpt / "trainer_state.json").write_text('{"step": 1, "seed": 0}\n')
    out = cli("--resume", str(tmp_path / "old"))
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "resume: " in out.stderr and "trl_trainer_state.json" in out.stderr


def start_two_processes(micro_model, prompt_file, runs) -> subprocess.Popen:
    """`mrtpo train --backend trl --nproc 2` of 200 micro steps into `runs`/k, in its own session, output dropped."""
    return subprocess.Popen([sys.executable, "-m", "core.cli", "train", "--backend", "trl", "--nproc", "2",
                             "--model", str(micro_model), "--prompt-set", str(prompt_file), "--steps", "200",
                             "--runs-dir", str(runs), "--run-name", "k", "--device", "cpu",
                             *[f"--{k.replace('_', '-')}={v}" for k, v in MICRO.items()]],
                            cwd=ROOT, env=CLI_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


@needs_trl
@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")
@pytest.mark.parametrize("victim", ["parent", "agent"])
def test_killing_the_launcher_or_torchrun_stops_both_processes(micro_model, prompt_file, tmp_path, victim):
    """SIGKILL to `mrtpo train --nproc 2` (the parent) or to the torchrun agent under it: both ranks stop after
    their current step and the run ends `stopped` (they trained on to the end and the run said `completed`)."""
    runs = tmp_path / "runs"
    parent = start_two_processes(micro_model, prompt_file, runs)

    def ours() -> list[int]:
        out = subprocess.run(["pgrep", "-f", str(runs)], capture_output=True, text=True).stdout.split()
        return [int(p) for p in out]

    try:
        wait_for(lambda: (runs / "k" / "metrics.jsonl").exists(), 240, "the first step")
        pid = parent.pid if victim == "parent" else int(
            subprocess.run(["pgrep", "-P", str(parent.pid)], capture_output=True, text=True).stdout.split()[0])
        assert len(ours()) >= 3  # the parent, torchrun and its two ranks
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not ours(), 90, "every process of the run to end")
        status = RunStore(runs / "k").status()
        assert status["state"] == "stopped" and 1 <= status["step"] < 200, (status, (runs / "k" / "status.json").read_text())
    finally:
        for pid in ours():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@needs_trl
@pytest.mark.slow
def test_killing_process_0_ends_the_run_failed_on_disk(micro_model, prompt_file, tmp_path):
    """SIGKILL to process 0 of `mrtpo train --nproc 2` (the pid in status.json): the launcher writes the run's end
    into status.json itself (`failed`, with why), instead of leaving `running` there for good."""
    runs = tmp_path / "runs"
    parent = start_two_processes(micro_model, prompt_file, runs)
    try:
        wait_for(lambda: (runs / "k" / "metrics.jsonl").exists(), 240, "the first step")
        os.kill(int(json.loads((runs / "k" / "status.json").read_text())["pid"]), signal.SIGKILL)
        assert parent.wait(timeout=180) == 1
        on_disk = json.loads((runs / "k" / "status.json").read_text())
        assert on_disk["state"] == "failed" and on_disk["step"] >= 1 and "killed" in on_disk["error"], on_disk
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(parent.pid, signal.SIGKILL)
