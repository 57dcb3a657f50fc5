"""The run store of an `MRTPOTrainer` run: what one generation batch leaves, and how process 0 records it.

Each process keeps its rows of a generation batch as a `LocalBatch` (the `core.run.batch` dataclasses of its b
rows). `gather_to_main` brings them to process 0, `merge_batches` concatenates them in process order (global
sample index p b + i), and `RunRecorder` (a mixin of `MRTPOTrainer`) writes config.json, status.json,
metrics.jsonl, one credit Parquet per generation batch and the checkpoints with `core.run.store` /
`core.run.record`, exactly as the built-in trainer does, so the app shows TRL runs like built-in ones. Only
process 0 receives the batch (`gather_to_main`), with text only for the rows its credit map stores.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from accelerate.utils import gather_object
from torch import Tensor
from transformers import TrainerCallback
from transformers.utils import logging

from core.algos import advantages as adv_lib
from core.config import TrainConfig
from core.run import credit_choice, record
from core.run import names as names_lib
from core.run.batch import Advantages, Rollout, Routing, Scores
from core.run.lifecycle import divergence
from core.run.store import RunWriter, run_dir

logger = logging.get_logger(__name__)

# HF's TrainerState in a run-store checkpoint of a trl run (the run store's own trainer_state.json is {"step", "seed"})
TRL_TRAINER_STATE = "trl_trainer_state.json"

# TRL's per-update metrics -> the run store's keys (docs/CONTRACTS.md); what TRL does not measure is NaN.
TRL_LOSS_METRICS = {"entropy": "policy/entropy", "clip_ratio/region_mean": "policy/clip_frac", "kl": "loss/kl"}

# ----------------------------------------------------------------------------------------------- one batch


@dataclass(frozen=True)
class PromptView:
    """What a credit map records of a sample's prompt (`PromptItem.key`, `PromptItem.prompt()`), without the
    verifiers: it crosses processes (a custom verifier module need not be importable by pickle)."""

    key: str
    text: str

    def prompt(self) -> str:
        return self.text


@dataclass
class LocalBatch:
    """One process's b rows of a generation batch, as the record needs them (CPU tensors; `rollout.items` are
    `PromptView`s): gathered to process 0 and concatenated in process order by `merge_batches`. The tensors
    cover every row (the metrics line needs them); the text (`rollout.items`, `texts`, `tokens`, `offsets`)
    only the rows the credit map stores (`keep_text`): None for the others."""

    rollout: Rollout  # (b,) rows, ids and mask (b, T)
    span_mask: Tensor  # (b, K, T)
    routing: Routing  # weights, distances (b, K, T), replayed (b, K)
    token_adv: Tensor  # (b, T)
    credit: Tensor  # (b, K, T)

    def keep_text(self, rows: set[int]) -> LocalBatch:
        """This batch with the text of the local rows `rows` only (the others None): what crosses processes."""
        r = self.rollout

        def keep(values: list) -> list:
            return [v if i in rows else None for i, v in enumerate(values)]

        rollout = Rollout(keep(r.items), r.prompt_ids, r.response_ids, r.mask, None, keep(r.texts), keep(r.tokens),
                          keep(r.offsets))
        return LocalBatch(rollout, self.span_mask, self.routing, self.token_adv, self.credit)


def gather_to_main(local: LocalBatch) -> list[LocalBatch] | None:
    """Every process's batch on process 0, in process order (None on the others): `torch.distributed.gather_object`
    to rank 0, so the other processes receive nothing (TRL's `gather_object` copies every batch to every rank)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [local]
    main = dist.get_rank() == 0
    parts: list | None = [None] * dist.get_world_size() if main else None
    dist.gather_object(local, parts, dst=0)
    return parts


@dataclass
class PendingBatch:
    """The generation batch in training, from its generation until its last optimizer step records it."""

    parts: list[LocalBatch] | None  # every process's rows (process 0 only; None elsewhere)
    rewards: Tensor  # (B, K) the gathered rewards, identical on every process
    start: float  # perf_counter at the start of generation
    times: dict[str, float]  # time/generate, time/verify, time/replay, time/advantages
    losses: list[Tensor] = field(default_factory=list)  # this process's summed loss of each optimizer step
    metrics: dict[str, list[float]] = field(default_factory=dict)  # TRL's per-update metrics (TRL_LOSS_METRICS)
    stored: np.ndarray | None = None  # the rows whose credit map is stored (None: all)


def _pad_cat(parts: list[Tensor | None], width: int, fill: float = 0.0) -> Tensor | None:
    """Concatenate along dim 0 after right-padding the last dim to `width` (None when any part is None)."""
    if any(p is None for p in parts):
        return None
    padded = [torch.nn.functional.pad(p, (0, width - p.shape[-1]), value=fill) for p in parts]
    return torch.cat(padded, 0)


def merge_batches(parts: list[LocalBatch], rewards: Tensor, group_adv: Tensor
                  ) -> tuple[Rollout, Scores, Routing, Advantages]:
    """(Rollout, Scores, Routing, Advantages) of the whole batch from the processes' parts, in process order
    (global sample index p b + i), padded to the longest response of any process."""
    width = max(max(p.rollout.mask.shape[1] for p in parts), 1)
    rollouts = [p.rollout for p in parts]
    rollout = Rollout(
        items=[it for r in rollouts for it in r.items], prompt_ids=[x for r in rollouts for x in r.prompt_ids],
        response_ids=_pad_cat([r.response_ids for r in rollouts], width).long(),
        mask=_pad_cat([r.mask for r in rollouts], width).long(),
        texts=[x for r in rollouts for x in r.texts], tokens=[x for r in rollouts for x in r.tokens],
        offsets=[x for r in rollouts for x in r.offsets],
    )
    scores = Scores(rewards, _pad_cat([p.span_mask for p in parts], width).bool())
    replayed = [p.routing.replayed for p in parts]
    routable = [p.routing.routable for p in parts]
    routing = Routing(_pad_cat([p.routing.weights for p in parts], width),
                      _pad_cat([p.routing.distances for p in parts], width),
                      None if any(r is None for r in replayed) else torch.cat(replayed, 0),
                      routable=None if any(r is None for r in routable) else torch.cat(routable, 0))
    adv = Advantages(_pad_cat([p.token_adv for p in parts], width), _pad_cat([p.credit for p in parts], width),
                     group_adv)
    return rollout, scores, routing, adv


# ----------------------------------------------------------------------------------------------- the recorder


class RunRecorder:
    """The run-store half of `MRTPOTrainer` (a mixin: it reads the trainer's `args`, `accelerator`,
    `num_generations`, `reward_names`, `beta`, `state` and TRL's `_metrics`). Its steps run at the points of HF's
    loop through `RunStoreCallback`; process 0 writes, the other processes only join the reductions."""

    writer: RunWriter | None
    store_config: dict | None
    record_step: int
    stopped: bool
    diverged: str  # "diverged at step N: why" once a recorded step shows the run diverged (core.run.lifecycle rule)
    _batch: PendingBatch | None
    _loss_sum: Tensor | None
    _metric_marks: dict[str, int]

    def _init_recorder(self, store_config: dict | None) -> None:
        self.store_config = store_config
        self.writer = None
        self.record_step = 0
        self.stopped = False
        self.diverged = ""
        self._start_entropy: float | None = None
        self._batch = None
        self._loss_sum = None
        self._metric_marks = {}
        self.held_out: tuple[list, list[list[int]]] | None = None  # (PromptItems, token ids) of the held-out set
        self.resume_run: tuple[Path, int] | None = None  # (run folder, step of its checkpoint) when resuming

    def _mark_metrics(self) -> None:
        self._metric_marks = {k: len(v) for k, v in self._metrics["train"].items()}

    def _harvest_metrics(self) -> None:
        """Move TRL's per-update metrics logged since the last mark into the batch's lists."""
        if self._batch is None:
            return
        for key in TRL_LOSS_METRICS:
            values = self._metrics["train"].get(key, [])
            self._batch.metrics.setdefault(key, []).extend(values[self._metric_marks.get(key, 0):])
        self._mark_metrics()

    def default_store_config(self) -> dict[str, Any]:
        """config.json for a run started from Python: TrainConfig's keys, from this trainer's settings."""
        args = self.args
        model = self.accelerator.unwrap_model(self.model)
        unknown = dict.fromkeys(TrainConfig.__dataclass_fields__)  # e.g. the prompt set: the caller's dataset
        return {
            **unknown,
            "model": str(getattr(model.config, "_name_or_path", "") or type(model).__name__),
            "method": args.method, "routing": args.routing, "relevance": args.relevance,
            "auto_evidence": args.auto_evidence, "sharpen": args.sharpen,
            "lam": args.lam, "w_max": args.w_max, "reward_weights": dict(args.family_weights or {}), "eps": args.eps,
            "routing_clip": args.routing_clip, "routing_shuffle": args.routing_shuffle,
            "routing_shuffle_seed": args.routing_shuffle_seed, "entropy_q": args.entropy_q,
            "reward_scales": dict(args.reward_scales or {}),
            "group_size": self.num_generations, "prompts_per_step": args.generation_batch_size // self.num_generations,
            "max_new_tokens": args.max_completion_length, "temperature": args.temperature,
            "steps": self.total_record_steps(), "lr": args.learning_rate, "clip_range": args.epsilon,
            "kl_beta": args.beta, "inner_epochs": args.num_iterations, "max_grad_norm": args.max_grad_norm,
            "seed": args.seed, "replay_chunk": args.replay_chunk, "replay_pairs": args.replay_pairs,
            "replay_dtype": args.replay_dtype,
            "runs_dir": str(args.runs_dir),
            "run_name": args.run_name, "checkpoint_every": args.checkpoint_every,
            "keep_checkpoints": args.keep_checkpoints, "credit_samples": args.credit_samples,
            "credit_every": args.credit_every, "eval_samples": args.eval_samples, "eval_prompts": args.eval_prompts,
            "device": self.accelerator.device.type, "backend": "trl", "nproc": self.accelerator.num_processes,
        }

    def route_records(self) -> dict[str, dict]:
        """config.json's `reward_routes`: per reward, how it is routed (`routing`: replay / uniform, its `contrast`
        described, `rows_found` of `rows`) and whether its function reports spans (docs/CONTRACTS.md)."""
        return {r.name: {"routing": "replay" if r.replays else "uniform", "contrast": None if r.contrast is None
                         else r.contrast.describe(), "rows_found": r.rows_found, "rows": r.rows, "spans": r.spans}
                for r in self.routes}

    def total_record_steps(self) -> int:
        return max(self.state.max_steps // self.args.steps_per_batch, 1) if self.state.max_steps else 0

    def open_run(self) -> None:
        """Process 0: create the run folder (config.json, status running), or, resuming (`resume_run`), continue
        it after the checkpoint's step (later steps' metrics and credit maps dropped, as the built-in does)."""
        args = self.args
        if self.resume_run is not None:
            run, step = self.resume_run
            if self.state.global_step != step * args.steps_per_batch:
                raise RuntimeError(f"the checkpoint of step {step} holds optimizer step {self.state.global_step}, "
                                   f"not {step} x {args.steps_per_batch}; resume with the run's own settings")
            self.record_step = step
            self._skip_trained_passes()
        if args.runs_dir is None or not self.accelerator.is_main_process:
            return
        config = dict(self.store_config) if self.store_config is not None else self.default_store_config()
        if self.resume_run is not None:
            config.update(run_name=run.name, runs_dir=str(run.parent), reward_names=self.reward_names,
                          reward_routes=self.route_records())
            self.writer = RunWriter.reopen(run, config, step)
        else:
            name = args.run_name or names_lib.auto_run_name(args.method, lambda n: run_dir(args.runs_dir, n).exists())
            config.update(run_name=name, runs_dir=str(args.runs_dir), reward_names=self.reward_names,
                          reward_routes=self.route_records())
            self.writer = RunWriter.create(args.runs_dir, name, config)
        self.writer.set_status(state="running", pid=os.getpid(), step=self.record_step,
                               total_steps=self.total_record_steps(), error=None)
        self._say(f"resuming {run.name} from step {step}" if self.resume_run is not None
                  else f"run {name}: {self.writer.path}")

    def _skip_trained_passes(self) -> None:
        """Resuming: the data order continues where the run stopped. TRL's RepeatSampler draws one permutation per
        pass over the dataset from its own generator and has no `set_epoch`; HF's resume skips the batches of the
        current pass but starts the generator afresh, so the passes already trained are drawn (and dropped) here."""
        sampler = getattr(self, "_train_sampler", None)
        if sampler is None or not getattr(sampler, "shuffle", False):
            return
        for _ in range(int(self.state.epoch + 1e-6)):  # HF's epoch: passes done, a float
            torch.randperm(sampler.num_samples, generator=sampler.generator)

    def stored_rows(self, rewards: Tensor) -> np.ndarray:
        """The batch rows (global indices) whose token credit the coming record step stores: none when the step
        stores no credit map (`credit_every`), else `core.run.credit_choice.choose_samples` (`credit_samples`).
        The same on every process (the rewards are)."""
        step = self.record_step + 1  # the batch being made is recorded as the next step
        if not credit_choice.stores_credit(step, self.args.credit_every, self.total_record_steps() or None):
            return np.zeros(0, dtype=np.int64)
        return credit_choice.choose_samples(rewards.numpy(), self.num_generations, self.args.credit_samples)

    def begin_batch(self, parts: list[LocalBatch] | None, rewards: Tensor, start: float,
                    times: dict[str, float], stored: np.ndarray | None = None) -> None:
        """A new generation batch is in training (called after its token advantages are made)."""
        self._batch = PendingBatch(parts, rewards, start, times, stored=stored)
        self._mark_metrics()

    def add_loss(self, loss: Tensor) -> None:
        """Sum this process's micro-batch losses of the current optimizer step."""
        self._loss_sum = loss.detach() if self._loss_sum is None else self._loss_sum + loss.detach()

    def end_optimizer_step(self, control) -> None:
        """After every optimizer step, on every process: keep its loss, record a finished generation batch,
        and stop every process when any of them was asked to."""
        self._harvest_metrics()
        if self._batch is not None and self._loss_sum is not None:
            self._batch.losses.append(self._loss_sum)
        self._loss_sum = None
        if self._batch is not None and self._step % (self.args.steps_per_generation * self.num_iterations) == 0:
            self._record_batch(self._batch)
            self._batch = None
        if self.diverged:
            control.should_training_stop = True
        asked = float(self._guard is not None and self._guard.requested)
        if self.accelerator.num_processes > 1:
            asked = float(self.accelerator.reduce(torch.tensor([asked], device=self.accelerator.device), "sum").item())
        if asked:
            self.stopped = True
            control.should_training_stop = True

    def _record_batch(self, batch: PendingBatch) -> None:
        """Process 0 writes the batch's credit map and metrics line (the other processes only join the
        reductions). A step that shows the run diverged (`core.run.lifecycle.divergence`: a non-finite loss, or
        an entropy at the uniform distribution's) is recorded, its weights are not saved, every process stops
        after it and the run ends `failed`, as the built-in trainer's does."""
        losses = torch.stack(batch.losses).mean() if batch.losses else torch.tensor(float("nan"))
        loss = self.accelerator.reduce(losses.to(self.accelerator.device).float(), "mean").item()
        self.record_step += 1
        step = self.record_step
        loss_stats = {key: float(np.mean(v)) if v else float("nan") for key, v in
                      ((TRL_LOSS_METRICS[k], batch.metrics.get(k, [])) for k in TRL_LOSS_METRICS)}
        loss_stats["loss/kl"] = loss_stats["loss/kl"] if self.beta else 0.0
        loss_stats["loss/total"] = loss
        loss_stats["loss/policy"] = loss - self.beta * loss_stats["loss/kl"]
        loss_stats["policy/kl"] = float("nan")  # TRL does not measure KL(pi_old || pi) per update
        reason = self._divergence(loss_stats)
        if reason:
            self.diverged = f"diverged at step {step}: {reason}"
        elif self.args.checkpoint_every and step % self.args.checkpoint_every == 0:
            self.save_run_checkpoint(step)
        if batch.parts is None:  # not process 0: it only joined the reductions
            return
        times = dict(batch.times)
        times["time/update"] = time.perf_counter() - batch.start - sum(times.values())
        times["time/step"] = time.perf_counter() - batch.start
        group_adv = adv_lib.group_normalized(batch.rewards, self.num_generations, self.args.eps)  # (B, K)
        rollout, scores, routing, adv = merge_batches(batch.parts, batch.rewards, group_adv)
        rec = record.StepRecord(step, self.reward_names, self.num_generations, rollout, scores, routing, adv,
                                loss_stats, times, w_max=self.args.w_max,
                                span_rewards=[r.name for r in self.routes if r.spans],
                                satisfiable=all(hasattr(f, "family") for f in self.reward_funcs))
        metrics = record.step_metrics(rec)
        if not self.diverged and self.is_checkpoint_step(step):
            metrics.update(self.held_out_metrics())
        self.report_metrics(metrics)
        if self.writer is None:
            return
        if batch.stored is None or len(batch.stored):
            self.writer.write_credit(step, record.credit_step(rec, batch.stored))
        self.writer.append_metrics(metrics)
        if self.diverged:
            self.writer.set_status(state="failed", step=step, error=self.diverged)
            print(f"mrtpo train: {self.diverged}", file=sys.stderr, flush=True)
            return
        self.writer.set_status(state="running", step=step)
        self._say(record.summary_line(metrics, self.total_record_steps(), self.reward_names))

    def _say(self, line: str) -> None:
        """A progress line of process 0: on stdout with `print_steps` (mrtpo train), else to the transformers
        logger (info) only: a TRL user's stdout holds what TRL prints (its log dicts, where logging is on)."""
        if self.args.print_steps:
            print(line, flush=True)
        else:
            logger.info(line)

    def is_checkpoint_step(self, step: int) -> bool:
        """A step whose weights the run store keeps: every `checkpoint_every`-th and the last (the built-in
        trainer evaluates the held-out set at these steps too)."""
        every = self.args.checkpoint_every
        return step == self.total_record_steps() or bool(every and step % every == 0)

    def held_out_metrics(self) -> dict[str, float]:
        """Process 0: the built-in trainer's held-out evaluation (`core.run.step.held_out_metrics`:
        `eval/reward/<name>`, `eval/all_satisfied`) of the policy as it is now, on the held-out prompts tokenized
        as TRL tokenizes them; {} without a held-out set. The policy is sampled unwrapped and without dropout;
        the other processes go on to the next batch and wait for process 0 in its first collective."""
        if not self.held_out or not self.accelerator.is_main_process:
            return {}
        from core.run.step import held_out_metrics

        items, prompt_ids = self.held_out
        model = self.accelerator.unwrap_model(self.model)
        was_training = model.training
        model.eval()
        try:
            return held_out_metrics(model, self.processing_class, items, prompt_ids, self.reward_names,
                                    samples=self.args.eval_samples, max_new_tokens=self.args.max_completion_length,
                                    temperature=self.args.temperature, seed=self.args.seed,
                                    autocast=self.accelerator.autocast)
        finally:
            model.train(was_training)

    def report_metrics(self, metrics: dict[str, Any]) -> None:
        """The step's metrics line, named as in the run store (`reward/<name>`, `span/<name>/...`,
        `routing/...`, `replay/pass_share`, `time/replay`, ...), into TRL's own metric path: TRL averages
        `_metrics["train"]` at its next `log` and hands the result to `report_to` (TensorBoard, W&B, trackio)
        and `state.log_history`. Process 0 only (the only one that reports); `step` and non-finite values
        are left out (TRL's loggers take None, not NaN)."""
        for key, value in metrics.items():
            if key != "step" and isinstance(value, (int, float)) and np.isfinite(value):
                self._metrics["train"][key].append(float(value))

    def _divergence(self, loss_stats: dict[str, float]) -> str:
        """Why this step shows the run diverged ("" when it does not), by the built-in trainer's rule; every
        process gets the same answer (the loss is reduced, TRL's entropy gathered, and the verdict reduced too)."""
        if self._start_entropy is None and np.isfinite(loss_stats.get("policy/entropy", float("nan"))):
            self._start_entropy = loss_stats["policy/entropy"]
        vocab = int(self.accelerator.unwrap_model(self.model).get_output_embeddings().weight.shape[0])
        reason = divergence(loss_stats, vocab, self._start_entropy)
        if self.accelerator.num_processes > 1:
            flag = torch.tensor([float(bool(reason))], device=self.accelerator.device)
            if self.accelerator.reduce(flag, "sum").item() and not reason:
                reason = "another process saw it diverge"
        return reason

    def save_run_checkpoint(self, step: int) -> None:
        """A checkpoint that resumes: the policy and tokenizer (save_pretrained), and HF's optimizer, scheduler,
        scaler and per-process RNG states, into the run store's checkpoints/step_<step>
        (`RunWriter.begin_checkpoint` / `commit_checkpoint`; every process takes part: DeepSpeed gathers weights).
        The run store's `trainer_state.json` ({"step", "seed"}) marks it complete; HF's TrainerState is
        `TRL_TRAINER_STATE` beside it (`MRTPOTrainer.train(resume_from_checkpoint=...)` reads both)."""
        if self.args.runs_dir is None:
            return
        tmp = self.writer.begin_checkpoint(step) if self.writer is not None else None
        tmp_name = gather_object([str(tmp) if tmp is not None else None])[0]
        if tmp_name is None:
            return
        self.save_model(tmp_name, _internal_call=True)  # a run-store checkpoint: never a hub push of its own
        self._save_optimizer_and_scheduler(tmp_name)
        self._save_scaler(tmp_name)
        self._save_rng_state(tmp_name)
        self.accelerator.wait_for_everyone()
        if self.writer is not None:
            self.state.save_to_json(os.path.join(tmp_name, TRL_TRAINER_STATE))
            with open(os.path.join(tmp_name, "trainer_state.json"), "w", encoding="utf-8") as fh:
                fh.write(json.dumps({"step": step, "seed": self.args.seed, "global_step": self.state.global_step})
                         + "\n")
            self.writer.commit_checkpoint(step, self.args.keep_checkpoints)


class RunStoreCallback(TrainerCallback):
    """Calls the trainer's run-store steps at the points of HF's loop (kept out of the trainer's own methods so
    they read top to bottom)."""

    def __init__(self, trainer: RunRecorder):
        self.trainer = trainer

    def on_train_begin(self, args, state, control, **kwargs):
        self.trainer.open_run()

    def on_step_end(self, args, state, control, **kwargs):
        self.trainer.end_optimizer_step(control)

    def on_train_end(self, args, state, control, **kwargs):
        trainer = self.trainer
        step = trainer.record_step
        if step and not trainer.diverged and args.saves_final_checkpoint and (
                not args.checkpoint_every or step % args.checkpoint_every):
            trainer.save_run_checkpoint(step)  # the resumable final checkpoint: final_checkpoint / save_strategy
        if step and not trainer.diverged and args.save_final_model:
            trainer.save_model(args.output_dir, _internal_call=True)  # as TRL's scripts end; the push is the user's
