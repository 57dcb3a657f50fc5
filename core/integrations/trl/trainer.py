"""`MRTPOTrainer`: TRL's `GRPOTrainer` with MRTPO's token advantages and the project's run store.

TRL keeps generation (transformers or vLLM), accelerate / DeepSpeed, the loss and the optimizer; MRTPO
replaces TRL's (B,) advantages with (b, T) token advantages, which TRL's loss takes as they are. One
generation batch, per process (b local rows of a batch of B = b * P samples; process p holds rows
[p b, (p + 1) b)):

    super()._generate_and_score_completions   TRL generates, calls the reward functions, gathers rewards (B, K)
    _local_rollout                            the local rows' prompts, ids and mask, decoded with offsets
    core.run.batch.verify                     our verifiers' spans as token masks (b, K, T)
    core.run.batch.route                      routing weights (b, K, T) (replay: `_distances`, the contrastive
                                              passes through `core.algos.teacher_forcing`)
    estimator(..., rows=)                     token advantages (b, T) from the gathered rewards: the batch's
                                              statistics, this process's rows (`core.algos.advantages`)
    -> out["advantages"] = (b, T)

The middle of the step is the built-in trainer's (`core.run.batch`); the run store is written by
`RunRecorder` (`core.integrations.trl.recorder`). Formulas: docs/METHOD.md ("Local rows" for the
statistics across processes).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import tempfile
import time
import traceback
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor
from trl import GRPOTrainer
from trl.models import unwrap_model_for_generation
from trl.models.utils import disable_gradient_checkpointing
from trl.trainer.utils import get_callable_name, get_config_model_id

from core.algos import advantages as adv_lib
from core.algos import routing as routing_lib
from core.algos import teacher_forcing as tf_lib
from core.choices import routing_source
from core.config import ConfigError, reward_weights_error
from core.integrations.trl.config import MRTPOConfig
from core.integrations.trl.dataset import (
    PromptRow,
    completion_text,
    dataset_rows,
    prompt_row,
    verifier_reward,
)
from core.integrations.trl.recorder import (
    TRL_TRAINER_STATE,
    LocalBatch,
    PromptView,
    RunRecorder,
    RunStoreCallback,
    gather_to_main,
    logger,
)
from core.integrations.trl.routes import RewardRoute, contrast_of, plan_routes, relevance_contrasts
from core.run import batch as batch_lib
from core.run.batch import Rollout, Scores
from core.run.lifecycle import SignalGuard

# The most the sampling's kept logits (b, T, V) may take (`MRTPOTrainer._generate_single_turn`); a larger batch
# recomputes p_t in the replay's full-prompt pass instead, whose memory is bounded by its chunk.
SAMPLING_LOGITS_MAX_BYTES = 2 << 30


def sampling_logits_bytes(rows: int, max_tokens: int, head: torch.nn.Module) -> int:
    """Bytes of the logits generation would keep: rows x max_tokens x V in the output layer's dtype, and the fp32
    log-softmax the replay makes of them (4 bytes each)."""
    weight = head.weight
    return rows * max_tokens * int(weight.shape[0]) * (weight.element_size() + 4)


def reward_func_name(func) -> str:
    """A reward function's name as TRL names it (metrics, reward_contrasts, family_weights): a model's id (a path's
    last part), a callable's __name__ (through functools.partial), else its class name."""
    if isinstance(func, str):
        return func.rstrip("/").split("/")[-1]
    if isinstance(func, torch.nn.Module):
        return get_config_model_id(func.config).split("/")[-1]
    return get_callable_name(func)


@dataclass
class CapturedRewards:
    """What TRL's `_calculate_rewards` saw of the current batch, kept for the token advantages."""

    rewards: Tensor  # (B, K) gathered from every process
    completions: list  # (b,) TRL's completions (text or messages) the reward functions scored
    completion_ids: list[list[int]]  # (b,) the sampled ids, unpadded


def end_process_group(trainer: GRPOTrainer | None = None, finished: bool = True) -> None:
    """End a multi-process run's torch.distributed process group in order (accelerate opens it and never closes it).

    1. `finished` (every rank came out of `train()`): a barrier, so that no rank tears the group down while another
       still talks through it (process 0 writes the run store and its final status after the last step); skipped
       after an error, where another rank may never arrive;
    2. the trainer's hold on the group dropped: DDP's reducer keeps the group and its gloo work alive, so the DDP
       wrapper and accelerate's lists of prepared objects are released and garbage-collected now, while the
       interpreter is whole;
    3. `destroy_process_group`.
    Left to interpreter exit, gloo's worker threads can be torn down while still joinable, and the process then
    aborts with "terminate called without an active exception" after the run has finished."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return
    if finished:
        torch.distributed.barrier()
    if trainer is not None:
        trainer.model_wrapped = trainer.model
        trainer.accelerator.free_memory()
    gc.collect()
    torch.distributed.destroy_process_group()


@contextlib.contextmanager
def future_warnings_once():
    """Show each FutureWarning (by message) once inside the block. Python shows a warning once per place through a
    registry that every `warnings.catch_warnings` resets (the "once" filter too, in CPython's C implementation);
    HF's checkpoint saving enters one, so the deprecations transformers raises at every generation came back after
    each run-store checkpoint. Filters still apply first (a user's "error" raises); other categories pass."""
    shown: set[tuple[str, type]] = set()
    previous = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, FutureWarning):
            if (str(message), category) in shown:
                return
            shown.add((str(message), category))
        previous(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = previous


def checkpoint_view(ckpt: Path) -> tuple[Path, tuple[Path, int]]:
    """A run-store checkpoint of a trl run as HF reads a checkpoint: a temporary folder of links to its files, with
    `trainer_state.json` linking to HF's TrainerState (`TRL_TRAINER_STATE`; the run store's own trainer_state.json
    is {"step", "seed"}). Returns (the folder, (run folder, step)); the caller deletes the folder."""
    if not (ckpt / TRL_TRAINER_STATE).is_file():
        raise ConfigError("resume", f"{ckpt} has no {TRL_TRAINER_STATE} (optimizer and scheduler state): it was "
                                    "not written by a resumable trl run; start a new run")
    step = int(json.loads((ckpt / "trainer_state.json").read_text(encoding="utf-8"))["step"])
    view = Path(tempfile.mkdtemp(prefix="mrtpo-resume-"))
    for item in ckpt.iterdir():
        if item.name not in ("trainer_state.json", TRL_TRAINER_STATE):
            (view / item.name).symlink_to(item.resolve())
    (view / "trainer_state.json").symlink_to((ckpt / TRL_TRAINER_STATE).resolve())
    return view, (ckpt.parent.parent.resolve(), step)


class MRTPOTrainer(RunRecorder, GRPOTrainer):
    """TRL's `GRPOTrainer` with MRTPO's token advantages and the project's run store (module docstring).

    `reward_funcs` defaults to `verifier_rewards(train_dataset)`. Any other reward function (or reward model) is
    routed by replay with the contrast `args.reward_contrasts` declares for its name (`core.contrast`; checked on
    every row by `routes.plan_routes`), uniformly when none is declared; one line per reward says which, at start.
    Its spans come from `reward_with_spans`, else it has none (no span metrics).
    `store_config` is what config.json records (the `mrtpo train --backend trl` command passes its
    TrainConfig); by default it is built from `args`. `held_out_dataset` (rows as `train_dataset`'s) is scored
    at every run-store checkpoint as the built-in trainer scores its eval set (`eval/*` metrics, first
    `args.eval_prompts` prompts x `args.eval_samples` responses); TRL's own `eval_dataset` keeps its meaning.
    """

    def __init__(self, model, reward_funcs=None, args: MRTPOConfig | None = None, train_dataset=None,
                 eval_dataset=None, processing_class=None, *, store_config: dict | None = None,
                 held_out_dataset=None, **kwargs):
        if args is None or not isinstance(args, MRTPOConfig):
            raise TypeError("MRTPOTrainer needs args=MRTPOConfig(...) (GRPOConfig plus routing, relevance, lam, ...)")
        for unsupported in ("tools", "environment_factory"):
            if kwargs.get(unsupported):
                raise ConfigError(unsupported, "MRTPO scores the whole completion text with its verifiers; tool calls "
                                               "and environments are not supported")
        if train_dataset is None:
            raise ConfigError("train_dataset", "MRTPOTrainer needs a dataset of prompts with constraint lists")
        rows = dataset_rows(train_dataset)  # every row readable, every constraint with a verifier
        if reward_funcs is None:
            families: list[str] = []
            for row in rows:
                families += [f for f in row.item.families() if f not in families]
            reward_funcs = [verifier_reward(f) for f in families]
        reward_funcs = list(reward_funcs) if isinstance(reward_funcs, (list, tuple)) else [reward_funcs]
        names = [reward_func_name(f) for f in reward_funcs]
        raw_rows = [dict(r) for r in train_dataset]
        self._relevance_contrast = relevance_contrasts(args, names, model)
        self.routes: list[RewardRoute] = plan_routes(names, reward_funcs, args.reward_contrasts, raw_rows, rows,
                                                     routing_source(args), self._relevance_contrast)
        if args.family_weights is not None:
            message = reward_weights_error(args.family_weights, names)
            if message:
                raise ConfigError("family_weights", message)
            args.reward_weights = [float(args.family_weights.get(n, 1.0)) for n in names]
        unknown = [n for n in (args.reward_scales or {}) if n not in names]
        if unknown:
            raise ConfigError("reward_scales", f"unknown reward name(s) {unknown}; the rewards are {names}")
        self._reward_scales = [float(args.reward_scales.get(n, 1.0)) for n in names] if args.reward_scales else None
        super().__init__(model, reward_funcs, args, train_dataset, eval_dataset, processing_class, **kwargs)
        if self.is_fsdp_enabled:
            raise ConfigError("fsdp", "the contrastive replay runs a data-dependent number of forward passes per "
                                      "process, which FSDP cannot keep in step; use DDP or DeepSpeed")
        ds = getattr(self.accelerator.state, "deepspeed_plugin", None) if self.is_deepspeed_enabled else None
        if ds is not None and getattr(ds, "zero_stage", 0) == 3:  # ZeRO-3 from an accelerate config file
            raise ConfigError("deepspeed", "MRTPO under DeepSpeed ZeRO-3 is not supported yet: untested "
                                           "(DeepSpeed is not installed where it was built); use DDP")
        self.reward_names: list[str] = list(self.reward_func_names)
        self._estimator = batch_lib.estimator(args, adv_lib.trl_estimator(args.method, args.multi_objective_aggregation,
                                                                          self.scale_rewards))
        if self.accelerator.is_main_process:
            self._say_routes(args)
        self._rows: dict[str, tuple[PromptRow, list[Any]]] = {}  # `_row`
        self._variant_ids: dict[str, list[int]] = {}
        self._captured: CapturedRewards | None = None
        self._guard: SignalGuard | None = None
        self._init_recorder(store_config)
        if held_out_dataset is not None:
            held = dataset_rows(held_out_dataset)[: args.eval_prompts]
            self.held_out = ([r.item for r in held], self._token_ids([r.prompt for r in held]))
        self.add_callback(RunStoreCallback(self))

    def _say_routes(self, args: MRTPOConfig) -> None:
        """One line per reward on how it is routed (`RewardRoute.line`), and what a TRL setting does here."""
        source = routing_source(args) or f"method={args.method}"
        source = "routing=uniform" if source == "uniform" else source
        for route in self.routes:
            logger.warning(route.line(source))
        if args.multi_objective_aggregation == "normalize_then_sum" and self.scale_rewards != "group":
            logger.warning(f"MRTPO: scale_rewards={self.scale_rewards!r} has no effect under "
                           "multi_objective_aggregation='normalize_then_sum' (as in TRL); sum_then_normalize reads it")

    # ------------------------------------------------------------------ TRL hooks

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._captured = CapturedRewards(rewards, list(completions), [list(ids) for ids in completion_ids_list])
        return rewards

    def _generate_and_score_completions(self, inputs):
        t0 = time.perf_counter()
        out = super()._generate_and_score_completions(inputs)
        if not self.model.training:  # evaluation: TRL's own advantages, no replay
            return out
        times = {"time/generate": time.perf_counter() - t0}
        local = self._token_advantages(inputs, out, times)
        self._sampling_logits = None  # used by the replay; (b, T, V) need not outlive the batch
        out["advantages"] = local.token_adv.to(out["completion_ids"].device)
        self._log_sequence_advantages(local.token_adv, local.rollout.mask)
        rewards = self._captured.rewards.float().cpu()  # (B, K), identical on every process
        stored = self.stored_rows(rewards)  # global rows whose credit map is stored
        b, p = local.token_adv.shape[0], self.accelerator.process_index
        parts = gather_to_main(local.keep_text({int(i) - p * b for i in stored if p * b <= i < (p + 1) * b}))
        self.begin_batch(parts, rewards, t0, times, stored)
        return out

    def _keeps_sampling_logits(self) -> bool:
        """Whether generation keeps its next-token logits for the replay (p_t under x, as the built-in trainer keeps
        them): MRTPO routing by replay on the JS distance, transformers' own generate (not paged, not vLLM) and a
        policy without dropout (the replay measures the policy itself)."""
        args = self.args
        if routing_source(args) != "replay" or routing_lib.get_relevance(args.relevance).distance != "js":
            return False
        if getattr(args, "use_transformers_paged", False) or args.use_vllm:
            return False
        model = self.accelerator.unwrap_model(self.model)
        drop = any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in model.modules())
        cfg = getattr(model, "config", None)
        drop = drop or any(float(getattr(cfg, name, 0) or 0) > 0 for name in
                           ("attention_dropout", "hidden_dropout", "dropout", "resid_pdrop", "attn_pdrop"))
        return not drop or bool(args.disable_dropout)

    def _generate_single_turn(self, prompt_ids, *args, **kwargs):
        """TRL's generation, keeping the logits each step computes at the last position (a forward hook on the output
        embeddings; prefill's last position is the first response token's): `_sampling_logp` reuses them instead of
        a full-prompt replay pass (docs/TRL.md, "Speed")."""
        self._sampling_logits = None
        if not (self.model.training and self._keeps_sampling_logits()):
            return super()._generate_single_turn(prompt_ids, *args, **kwargs)
        head = self.accelerator.unwrap_model(self.model).get_output_embeddings()
        if sampling_logits_bytes(len(prompt_ids), self.args.max_completion_length, head) > SAMPLING_LOGITS_MAX_BYTES:
            return super()._generate_single_turn(prompt_ids, *args, **kwargs)  # too large to keep: recompute p_t
        steps: list[Tensor] = []
        handle = head.register_forward_hook(lambda module, inputs, output: steps.append(output[:, -1, :].detach()))
        try:
            result = super()._generate_single_turn(prompt_ids, *args, **kwargs)
        finally:
            handle.remove()
        if steps and steps[0].shape[0] == len(prompt_ids):
            self._sampling_logits = torch.stack(steps, 1)  # (b, steps, V)
        return result

    def _sampling_logp(self, rollout: Rollout) -> Tensor | None:
        """(b, T, V) log p_t under x from the sampling's logits (`_generate_single_turn`), None when not kept."""
        logits = getattr(self, "_sampling_logits", None)
        t = rollout.response_ids.shape[1]
        if logits is None or logits.shape[0] != rollout.response_ids.shape[0] or logits.shape[1] < t:
            return None
        return torch.log_softmax(logits[:, :t].float(), -1)

    def _get_train_sampler(self, dataset=None):
        self._train_sampler = super()._get_train_sampler(dataset)  # kept: a resumed run skips its trained passes
        return self._train_sampler

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        if self.model.training:
            self.add_loss(loss)
        return loss

    def log(self, logs, start_time=None):
        super().log(logs, start_time)
        self._metric_marks = {}  # TRL cleared its metric lists

    def train(self, resume_from_checkpoint: str | bool | None = None, *args, **kwargs):
        """TRL's training loop inside a SignalGuard: SIGTERM/SIGINT on any process stop every process after the
        current optimizer step (they agree at each step end) and the run is marked stopped; an exception marks it
        failed with its traceback.

        `resume_from_checkpoint` a run-store checkpoint (runs/<run>/checkpoints/step_N): HF resumes from it
        (weights, optimizer, scheduler, RNG states, the data order) and the run store continues that run after
        step N. HF's own checkpoints (output_dir/checkpoint-N, True) resume as in TRL, into a new run folder."""
        view = None
        if resume_from_checkpoint not in (None, True, False):
            ckpt = Path(resume_from_checkpoint)
            if (ckpt / "trainer_state.json").is_file() and ckpt.parent.name == "checkpoints":
                view, self.resume_run = checkpoint_view(ckpt)
                resume_from_checkpoint = str(view)
        under_torchrun = "TORCHELASTIC_RUN_ID" in os.environ  # torchrun repeats SIGTERM, then SIGKILLs by itself
        with SignalGuard(repeats_stop_now=not under_torchrun) as guard, future_warnings_once():
            self._guard = guard
            try:
                result = super().train(resume_from_checkpoint, *args, **kwargs)
            except BaseException as exc:
                if self.writer is not None:
                    stopped = isinstance(exc, KeyboardInterrupt)
                    tail = "".join(traceback.format_exception(exc))[-4000:]
                    self.writer.set_status(state="stopped" if stopped else "failed", step=self.record_step,
                                           error=None if stopped else tail)
                raise
            finally:
                self._guard = None
                if view is not None:
                    shutil.rmtree(view, ignore_errors=True)
        if self.writer is not None and not self.diverged:  # a diverged run is already marked failed
            self.writer.set_status(state="stopped" if self.stopped else "completed", step=self.record_step, error=None)
        return result

    # ------------------------------------------------------------------ MRTPO on the local rows

    def _row(self, row: Mapping) -> tuple[PromptRow, list[Any]]:
        """A dataset row read once: its PromptRow and each reward's contrastive prompt x^-k (`RewardRoute.contrastive`;
        None where the reward has no contrast or it finds nothing in the row), cached by the whole row (a contrast may
        read any column)."""
        key = json.dumps(row, sort_keys=True, default=str)
        found = self._rows.get(key)
        if found is None:
            if len(self._rows) > 100_000:
                self._rows.clear()
            prow = prompt_row(row)
            contrasts = [r.contrast for r in self.routes]
            found = self._rows[key] = (prow, [
                route.contrastive(row, prow, contrast_of(self._relevance_contrast, route.name), self.reward_names,
                                  contrasts) if route.replays
                else None for route in self.routes])
        return found

    def _token_ids(self, prompts: list[Any]) -> list[list[int]]:
        """Token ids of prompts in TRL's format, tokenized as TRL tokenizes them (`_tokenize_prompts`), cached."""
        keys = [json.dumps(p, sort_keys=True) for p in prompts]
        todo = [i for i, k in enumerate(keys) if k not in self._variant_ids]
        if todo:
            ids = self._tokenize_prompts([prompts[i] for i in todo])[0]
            for i, row_ids in zip(todo, ids, strict=True):
                self._variant_ids[keys[i]] = [int(x) for x in row_ids]
        return [self._variant_ids[k] for k in keys]

    def _local_rollout(self, prompt_rows: list[PromptRow], out: dict) -> Rollout:
        """This process's rows as a `core.run.batch.Rollout`: prompt ids, completion ids and mask (b, T), and the
        completions decoded with character offsets, which must be the text TRL's reward functions scored."""
        captured = self._captured
        # (b, T) 1 on the sampled tokens (eos included): TRL's completion_mask also zeroes truncated rows under
        # mask_truncated_completions, which the loss mask (`_loss_mask`) applies; the record keeps their tokens
        width = out["completion_ids"].shape[1]
        lengths = torch.tensor([len(ids) for ids in captured.completion_ids])
        mask = (torch.arange(width)[None, :] < lengths[:, None]).long()
        prompt_ids = [r[m.bool()].tolist() for r, m in zip(out["prompt_ids"].cpu(), out["prompt_mask"].cpu(),
                                                             strict=True)]
        texts, tokens, offsets = batch_lib.decode_responses(self.processing_class, captured.completion_ids)
        for text, completion in zip(texts, captured.completions, strict=True):
            if text != completion_text(completion):
                raise RuntimeError(f"the completion decodes to {text!r} but TRL scored {completion_text(completion)!r}; "
                                   "MRTPO needs the reward text to be the decoded completion ids")
        items = [PromptView(r.item.key, r.item.prompt()) for r in prompt_rows]
        return Rollout(items, prompt_ids, out["completion_ids"].cpu(), mask, texts=texts, tokens=tokens,
                       offsets=offsets)

    def _token_advantages(self, inputs: list[dict], out: dict, times: dict[str, float]) -> LocalBatch:
        """Verify, route and compute the token advantages of this process's rows (module docstring)."""
        args = self.args
        t1 = time.perf_counter()
        b, p = len(inputs), self.accelerator.process_index
        rows = slice(p * b, (p + 1) * b)
        rewards_all = self._captured.rewards.float().cpu()  # (B, K), identical on every process
        if rewards_all.shape[0] != b * self.accelerator.num_processes:
            raise RuntimeError(f"gathered {rewards_all.shape[0]} reward rows for {self.accelerator.num_processes} "
                               f"processes of {b} rows")
        entries = [self._row(x) for x in inputs]
        prompt_rows = [prow for prow, _ in entries]
        rollout = self._local_rollout(prompt_rows, out)
        spans = self._span_mask(rollout)  # (b, K, T)
        scores = Scores(rewards_all[rows], spans)  # TRL's rewards (its reward functions), our spans
        times["time/verify"] = time.perf_counter() - t1

        t1 = time.perf_counter()
        group_adv = adv_lib.group_normalized(rewards_all, self.num_generations, args.eps)[rows]  # (b, K), global stats
        applicable = scores.applicable
        variants = [[v if bool(applicable[i, k]) else None for k, v in enumerate(found)]
                    for i, (_, found) in enumerate(entries)]  # (b, K) x^-k, None: no contrast there or not applicable
        routable = torch.tensor([[v is not None for v in vs] for vs in variants], dtype=torch.bool).reshape(b, -1)
        entropy = self._entropy(rollout) if routing_source(args) == "entropy" else None  # the `entropy` control
        routing = batch_lib.route(args, rollout.mask, scores, group_adv, self._distances(variants, rollout),
                                  entropy, routable=routable, step=self.state.global_step,
                                  scales=self._reward_scales, rows_before=self.accelerator.process_index * b)
        times["time/replay"] = time.perf_counter() - t1

        t1 = time.perf_counter()
        estimator = self._estimator
        token_adv, credit = estimator(rewards_all, routing.weights, rollout.mask, self.num_generations,
                                      self.reward_weights.cpu(), args.eps, rows=rows)  # (b, T), (b, K, T)
        loss_mask = self._loss_mask(out)  # truncated rows (mask_truncated_completions) and tool tokens get 0
        token_adv, credit = token_adv * loss_mask, credit * loss_mask[:, None, :]
        times["time/advantages"] = time.perf_counter() - t1
        return LocalBatch(rollout, spans, routing, token_adv, credit)

    @staticmethod
    def _loss_mask(out: dict) -> Tensor:
        """(b, T) TRL's loss mask: completion_mask (0 on truncated rows under mask_truncated_completions) x tool_mask."""
        mask = out["completion_mask"].cpu().float()
        if "tool_mask" in out:
            mask = mask * out["tool_mask"].cpu().float()
        return mask

    def _log_sequence_advantages(self, token_adv: Tensor, mask: Tensor) -> None:
        """TRL's completions table (`log_completions`, W&B / trackio) shows one advantage per completion, TRL's
        own GDPO one: replace the batch's entries with MRTPO's, the mean token advantage over the completion's
        tokens, sum_t A[i, t] m[i, t] / sum_t m[i, t] (under uniform routing, GDPO's), gathered in process
        order as TRL logs them."""
        lengths = mask.sum(1)  # (b,)
        means = (token_adv * mask).sum(1) / lengths.clamp(min=1)  # (b,)
        means = self.accelerator.gather(means.to(self.accelerator.device)).cpu().tolist()  # (B,)
        logged = self._logs["advantages"]
        n = min(len(means), len(logged))
        for j in range(n):
            logged[len(logged) - n + j] = means[len(means) - n + j]

    def _span_mask(self, rollout: Rollout) -> Tensor:
        """(b, K, T) bool: the verifiers' character spans as token masks, from the verdicts our reward functions
        (`verifier_reward`) kept when TRL called them on these rows (the verifiers run once per batch); no
        spans for other reward functions (their rewards are routed without them)."""
        b, width = len(rollout.texts), rollout.response_ids.shape[1]
        span_mask = np.zeros((b, len(self.reward_funcs), width), dtype=bool)  # (b, K, T)
        for k, func in enumerate(self.reward_funcs):
            results = getattr(func, "results", None)  # verifier_reward: VerifyResults
            spans = getattr(func, "spans", None) if results is None else [None if r is None else r.spans
                                                                           for r in results]
            if spans is None:
                continue
            if func.texts != rollout.texts:
                raise RuntimeError(f"reward {self.reward_names[k]} kept spans of other texts than this batch's")
            for i, item_spans in enumerate(spans):
                if item_spans:
                    span_mask[i, k] = batch_lib.span_token_mask(rollout.offsets[i], item_spans, width)
            if results is not None:
                func.results = None
            else:
                func.spans = None
            func.texts = None  # used: a later batch must not read them
        return torch.from_numpy(span_mask)

    def _entropy(self, rollout: Rollout) -> Tensor:
        """(b, T) the rollout policy's next-token entropy under x (routing=entropy): from the sampling's logits when
        kept, else one no-gradient pass of the policy as TRL holds it (as the replay runs)."""
        logp = self._sampling_logp(rollout)
        if logp is not None:
            return -(logp.exp() * logp).sum(-1).cpu() * rollout.mask
        args, device = self.args, self.accelerator.device
        pad = self.processing_class.pad_token_id if self.processing_class.pad_token_id is not None else 0
        with (unwrap_model_for_generation(self.model_wrapped, self.accelerator,
                                          gather_deepspeed3_params=args.ds3_gather_for_generation) as model,
              torch.no_grad()):
            was_training = model.training
            model.eval()
            try:
                out = tf_lib.response_logprobs(model, rollout.prompt_ids, rollout.response_ids.to(device),
                                               rollout.mask.to(device), args.replay_chunk, keep_full=False,
                                               pad_token_id=pad)
            finally:
                model.train(was_training)
        return out.entropy.float().cpu()

    def _distances(self, variants_all: list[list[Any]], rollout: Rollout) -> batch_lib.DistanceFn:
        """The contrastive passes of the local rows for `core.run.batch.route`: (b, K) pairs -> relevance
        distances (b, K, T), on the policy as TRL holds it (unwrapped, gathered under ZeRO-3, no dropout)."""
        args = self.args
        pad = self.processing_class.pad_token_id if self.processing_class.pad_token_id is not None else 0
        relevance = routing_lib.get_relevance(args.relevance)

        def distances(chosen: Tensor) -> Tensor:
            variants = [[v if bool(chosen[i, k]) else None for k, v in enumerate(vs)]
                        for i, vs in enumerate(variants_all)]
            flat = [v for vs in variants for v in vs if v is not None]
            flat_ids = iter(self._token_ids(flat)) if flat else iter(())
            contrastive_ids = [[None if v is None else next(flat_ids) for v in vs] for vs in variants]  # (b, K)
            device = self.accelerator.device
            with (unwrap_model_for_generation(self.model_wrapped, self.accelerator,
                                              gather_deepspeed3_params=args.ds3_gather_for_generation) as model,
                  disable_gradient_checkpointing(self.model, args.gradient_checkpointing_kwargs),
                  torch.no_grad(),
                  tf_lib.replay_precision(device.type, args.replay_dtype, self.accelerator.autocast())):
                was_training = model.training
                model.eval()  # no dropout in the replay: it measures the policy itself
                try:
                    d = tf_lib.contrastive_distances(
                        model, rollout.prompt_ids, contrastive_ids, rollout.response_ids.to(device),
                        rollout.mask.to(device), args.replay_chunk, logp_full=self._sampling_logp(rollout),
                        pad_token_id=pad,
                        distance=relevance.distance)  # (b, K, T)
                finally:
                    model.train(was_training)
            return d.float().cpu()

        return distances
