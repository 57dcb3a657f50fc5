"""MRTPO on TRL: `MRTPOConfig` / `MRTPOTrainer`, subclasses of TRL's `GRPOConfig` / `GRPOTrainer`.

Imported only when used; needs `trl>=1.16,<1.17` (`core.config.TRL_REQUIREMENT`), whose private methods
`_calculate_rewards` and `_generate_and_score_completions` it extends. TRL keeps generation (transformers
or vLLM), accelerate / DeepSpeed, the loss and the optimizer; MRTPO replaces TRL's (B,) advantages with
(b, T) token advantages, which TRL's loss takes as they are. One generation batch, per process (b local
rows of a batch of B = b * P samples; process p holds rows [p b, (p + 1) b)):

    super()._generate_and_score_completions   TRL generates, calls the reward functions, gathers rewards (B, K)
    _verify                                   our verifiers on the decoded completion ids with character
                                              offsets: spans as token masks (b, K, T)
    _route                                    routing weights (b, K, T) through `core.algos.routing.ROUTING`
                                              (replay: the contrastive passes, `core.algos.teacher_forcing`)
    _advantages                               token advantages (b, T) from the gathered rewards: the batch's
                                              statistics, this process's rows (`core.algos.advantages`, rows=)
    -> out["advantages"] = (b, T)

The dataset: one row per prompt with a `prompt` (text or chat messages) and its `constraints` (a list, or
its JSON, of {"family", "kwargs"}; `task` and `key` optional; IFEval's `instruction_id_list` / `kwargs`
work too). `prompt_dataset` builds one from a prompt set, `verifier_rewards` makes our verifiers TRL
reward functions (one per constraint family). The rewards of the run are the reward functions, in order.

The run store: process 0 writes config.json, status.json, metrics.jsonl and one credit Parquet per
generation batch (per-process rows gathered, global sample index p b + i) with `core.run.store` /
`core.run.record`, exactly as the built-in trainer does, so the app shows TRL runs like built-in ones.
Formulas: docs/METHOD.md ("Local rows" for the statistics across processes).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.config import (
    DEFAULT_RELEVANCE,
    TRL_REQUIREMENT,
    ConfigError,
    TrainConfig,
    field_error,
    reward_weights_error,
    trl_problem,
)

if trl_problem():
    raise ImportError(f"core.integrations.trl: {trl_problem()}")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from accelerate.utils import gather_object  # noqa: E402
from torch import Tensor  # noqa: E402
from transformers import TrainerCallback  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402
from trl.models import unwrap_model_for_generation  # noqa: E402
from trl.models.utils import disable_gradient_checkpointing  # noqa: E402

from core import model as model_lib  # noqa: E402
from core.algos import advantages as adv_lib  # noqa: E402
from core.algos import routing as routing_lib  # noqa: E402
from core.algos import teacher_forcing as tf_lib  # noqa: E402
from core.run import names as names_lib  # noqa: E402
from core.run import record  # noqa: E402
from core.run import step as step_lib  # noqa: E402
from core.run.lifecycle import SignalGuard  # noqa: E402
from core.run.store import RunWriter, run_dir  # noqa: E402
from core.tasks import PromptItem, item_from_record  # noqa: E402

__all__ = ["MRTPOConfig", "MRTPOTrainer", "prompt_dataset", "verifier_rewards", "verifier_reward", "TRL_REQUIREMENT"]

# ----------------------------------------------------------------------------------------------- dataset rows


@dataclass(frozen=True)
class PromptRow:
    """A dataset row as MRTPO reads it: its PromptItem (verifiers, contrastive prompts) and where the item's
    prompt text sits in the row's `prompt` (a string, or the last user message of a conversation), so that
    a contrastive prompt is the same prompt with that text replaced (`variant`)."""

    item: PromptItem
    prompt: Any  # the row's prompt as TRL gets it: str or list of {"role", "content"}
    start: int  # item.prompt() == user_text(prompt)[start:end]
    end: int

    def variant(self, text: str) -> Any:
        """The row's prompt with the item's text replaced by `text` (same template, same chat format)."""
        if isinstance(self.prompt, str):
            return self.prompt[: self.start] + text + self.prompt[self.end:]
        messages = [dict(m) for m in self.prompt]
        j = _last_user(messages)
        content = messages[j]["content"]
        messages[j]["content"] = content[: self.start] + text + content[self.end:]
        return messages

    def contrastive(self, family: str, contrast: str = "remove") -> Any | None:
        """The prompt x^-k for reward `family` (None when the row does not state it); `contrast` as in
        `core.tasks.PromptItem.contrastive_prompt` (remove the constraint, or swap its argument)."""
        families = self.item.families()
        if family not in families:
            return None
        return self.variant(self.item.contrastive_prompt(families.index(family), contrast))


def _last_user(messages: Sequence[Mapping]) -> int:
    for j in range(len(messages) - 1, -1, -1):
        if messages[j].get("role") == "user" and isinstance(messages[j].get("content"), str):
            return j
    raise ValueError("the prompt conversation has no user message with text content")


def user_text(prompt: Any) -> str:
    """The text a row's prompt states its constraints in: the string itself, or the last user message."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, (list, tuple)) and prompt and all(isinstance(m, Mapping) for m in prompt):
        return prompt[_last_user(prompt)]["content"]
    raise ValueError(f"a prompt must be a string or a list of chat messages, got {type(prompt).__name__}")


def _completion_text(completion: Any) -> str:
    """TRL's completion as text: a string, or the content of the assistant message."""
    if isinstance(completion, str):
        return completion
    return str(completion[-1].get("content") or "")


def _specs(constraints: Any) -> list[dict]:
    """A row's constraint list: a list (or its JSON) of {"family", "kwargs"}; None-valued kwargs (what Arrow
    adds when rows have different arguments) dropped."""
    if isinstance(constraints, str):
        constraints = json.loads(constraints)
    if not isinstance(constraints, (list, tuple)):
        raise ValueError('`constraints` must be a list of {"family": ..., "kwargs": {...}} (or its JSON)')
    out = []
    for spec in constraints:
        if not isinstance(spec, Mapping):
            raise ValueError(f"bad constraint spec {spec!r}")
        kwargs = {k: v for k, v in (spec.get("kwargs") or {}).items() if v is not None}
        out.append({"family": spec.get("family"), "kwargs": kwargs})
    return out


def prompt_row(row: Mapping) -> PromptRow:
    """Read one dataset row (see the module docstring); raises ValueError with a plain message."""
    if "prompt" not in row:
        raise ValueError("a row needs a `prompt` column")
    text = user_text(row["prompt"])
    key = str(row.get("key") or "h" + hashlib.sha1(text.encode()).hexdigest()[:10])
    if "instruction_id_list" in row:  # IFEval format: the verbatim prompt, sentences located by cue words
        record_ = {"key": key, "prompt": text, "instruction_id_list": row["instruction_id_list"],
                   "kwargs": row.get("kwargs") or []}
        item = item_from_record(record_)
        return PromptRow(item, row["prompt"], 0, len(text))
    if "constraints" not in row:
        raise ValueError("a row needs `constraints` (a list of {family, kwargs}) or IFEval's `instruction_id_list`")
    specs = _specs(row["constraints"])
    if row.get("task"):  # native: the prompt states task + constraint sentences; find that text in the prompt
        item = item_from_record({"key": key, "task": row["task"], "constraints": specs})
        stated = item.prompt()
        start = text.find(stated)
        if start < 0:
            raise ValueError(f"the prompt does not contain the task and constraint sentences {stated!r}; "
                             "drop the `task` column to use the prompt text as it is")
        return PromptRow(item, row["prompt"], start, start + len(stated))
    item = item_from_record({"key": key, "task": text, "prompt": text, "constraints": specs})
    return PromptRow(item, row["prompt"], 0, len(text))


def _row_error(index: int, exc: Exception) -> ConfigError:
    return ConfigError("train_dataset", f"row {index}: {exc}")


def dataset_rows(dataset: Iterable[Mapping]) -> list[PromptRow]:
    """Every row read with `prompt_row`; the first bad row raises ConfigError naming it (e.g. a constraint
    family without a verifier), before anything runs or is written."""
    rows = []
    for i, row in enumerate(dataset):
        try:
            rows.append(prompt_row(row))
        except ValueError as exc:
            raise _row_error(i, exc) from exc
    if not rows:
        raise ConfigError("train_dataset", "the dataset holds no prompts")
    return rows


def reward_families(dataset: Iterable[Mapping]) -> list[str]:
    """The constraint families of a dataset in first-seen order: the rewards `verifier_rewards` makes."""
    out: list[str] = []
    for row in dataset_rows(dataset):
        out += [f for f in row.item.families() if f not in out]
    return out


def prompt_dataset(items: Sequence[PromptItem], tokenizer=None):
    """A `datasets.Dataset` of a prompt set (PromptItems), one row per prompt: `prompt`, `key`, `task` and
    `constraints` (JSON text, so Arrow keeps each constraint's own arguments).

    The prompt is what the built-in trainer's `core.model.encode_prompt` feeds the model: a one-message
    conversation when the tokenizer has a chat template, else the text plus a newline (TRL tokenizes a
    string prompt as it is). IFEval-format items keep their verbatim prompt and no `task`.
    """
    from datasets import Dataset

    chat = tokenizer is None or bool(getattr(tokenizer, "chat_template", None))
    records = []
    for item in items:
        text = item.prompt()
        rec = {
            "prompt": [{"role": "user", "content": text}] if chat else text + "\n",
            "key": item.key,
            "task": item.task if item.text is None else "",
            "constraints": json.dumps([c.to_spec() for c in item.constraints]),
        }
        records.append(rec)
    return Dataset.from_list(records)


def end_process_group() -> None:
    """Shut down the torch.distributed process group a multi-process run started (accelerate opens it and never
    closes it). Left to interpreter exit, gloo's worker threads can be torn down while still joinable, and the
    process then aborts with "terminate called without an active exception" after the run has finished."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


# ----------------------------------------------------------------------------------------------- reward functions

_ROW_CACHE: dict[str, PromptRow] = {}


def _cached_row(row: Mapping) -> PromptRow:
    key = json.dumps(row, sort_keys=True, default=str)
    found = _ROW_CACHE.get(key)
    if found is None:
        if len(_ROW_CACHE) > 100_000:
            _ROW_CACHE.clear()
        found = _ROW_CACHE[key] = prompt_row(row)
    return found


ROW_COLUMNS = ("prompt", "key", "task", "constraints", "instruction_id_list", "kwargs")


def _batch_rows(prompts: Sequence[Any], columns: Mapping[str, Any]) -> list[dict]:
    """Per-row dicts of the columns a reward function gets from TRL (every dataset column as a list)."""
    n = len(prompts)
    lists = {k: v for k, v in columns.items() if k in ROW_COLUMNS and isinstance(v, list) and len(v) == n}
    return [{"prompt": prompts[i], **{k: v[i] for k, v in lists.items()}} for i in range(n)]


def verifier_reward(family: str) -> Callable[..., list[float | None]]:
    """A TRL reward function for one constraint family: the score of the row's verifier of that family on
    the completion, None (TRL: NaN, "does not apply") for rows that do not state it.

    >>> reward = verifier_reward("punctuation:no_comma")
    >>> reward(prompts=["Say hi. Do not use any commas."], completions=["hi, there"],
    ...        constraints=['[{"family": "punctuation:no_comma", "kwargs": {}}]'])
    [0.0]
    """

    def reward(prompts, completions, **columns) -> list[float | None]:
        out: list[float | None] = []
        for row, completion in zip(_batch_rows(prompts, columns), completions, strict=True):
            verifier = _cached_row(row).item.verifier_for(family)
            out.append(None if verifier is None else float(verifier.verify(_completion_text(completion)).score))
        return out

    reward.__name__ = family
    reward.__qualname__ = f"verifier_reward({family!r})"
    reward.family = family  # type: ignore[attr-defined]
    return reward


def verifier_rewards(dataset: Iterable[Mapping]) -> list[Callable[..., list[float | None]]]:
    """One `verifier_reward` per constraint family of the dataset, in first-seen order."""
    return [verifier_reward(f) for f in reward_families(dataset)]


# ----------------------------------------------------------------------------------------------- config

# MRTPOConfig fields that mean what the TrainConfig field of the same name means (checked the same way).
SHARED_FIELDS = ("method", "routing", "relevance", "sharpen", "lam", "w_max", "eps", "replay_chunk", "replay_pairs",
                 "routing_clip", "replay_dtype", "run_name", "checkpoint_every", "keep_checkpoints")


@dataclass
class MRTPOConfig(GRPOConfig):
    """`GRPOConfig` plus MRTPO's method fields (docs/METHOD.md), checked like `core.config.TrainConfig`.

    TRL's own fields keep their meaning (`num_generations` is G, `max_completion_length` the longest
    response, `epsilon` the clip range, `beta` the KL weight, `loss_type` the aggregation). Raises
    `core.config.ConfigError` naming the field.
    """

    method: str = field(default="mrtpo", metadata={"help": "advantage estimator: mrtpo (GDPO routed to tokens), "
                                                            "gdpo or grpo (every token gets the response's advantage)"})
    routing: str = field(default="replay", metadata={"help": "where each reward's credit goes: replay (contrastive "
                                                              "JS), span (verifier spans, an oracle) or uniform (= GDPO)"})
    relevance: str = field(default=DEFAULT_RELEVANCE, metadata={"help": "token relevance for replay routing: js, js_specific, "
                                                          "swap, swap_specific, logp, logp_specific or auto"})
    sharpen: float = field(default=1.0, metadata={"help": "exponent on the normalised relevance u (1: as measured)"})
    lam: float = field(default=1.0, metadata={"help": "routing strength in [0, 1]: w = clip((1 - lam) + lam u, 0, w_max)"})
    w_max: float = field(default=5.0, metadata={"help": "upper clip of a routing weight (>= 1)"})
    routing_clip: str = field(default="mass", metadata={"help": "weight above w_max: mass (redistributed) or clip (lost)"})
    family_weights: dict | str | None = field(
        default=None, metadata={"help": "weight per reward name (a verifier family), a dict or its JSON; names left "
                                        "out get 1.0. Sets TRL's reward_weights, so give one or the other"})
    eps: float = field(default=1e-4, metadata={"help": "added to every standard deviation of the normalisations"})
    replay_chunk: int = field(default=16, metadata={"help": "samples per forward pass of the contrastive replay"})
    replay_pairs: str = field(default="nonzero_adv", metadata={"help": "nonzero_adv: replay only the (sample, reward) "
                                                                       "pairs whose group advantage is nonzero (the "
                                                                       "others cannot change an advantage); all"})
    replay_dtype: str = field(default="auto", metadata={"help": "precision of the contrastive passes: auto (the "
                                                                 "run's, accelerate's autocast), float32 or bfloat16"})
    runs_dir: str | None = field(default="runs", metadata={"help": "where process 0 writes the run store the app "
                                                                     "reads (None: no run store)"})
    run_name: str = field(default="", metadata={"help": "run folder name ([A-Za-z0-9._-]); empty: automatic"})
    checkpoint_every: int = field(default=0, metadata={"help": "save the policy into the run store every this many "
                                                                "generation batches (and at the end); 0: only at the end"})
    keep_checkpoints: int = field(default=3, metadata={"help": "keep the newest this many run-store checkpoints, "
                                                                "deleting older ones as new ones are saved; 0 keeps all"})
    multi_objective_aggregation: str = field(
        default="normalize_then_sum", metadata={"help": "TRL's own advantages (logged by TRL, replaced by MRTPO's): "
                                                        "normalize_then_sum is GDPO"})

    def __post_init__(self):
        super().__post_init__()
        if isinstance(self.family_weights, str):
            try:
                self.family_weights = json.loads(self.family_weights)
            except json.JSONDecodeError as exc:
                raise ConfigError("family_weights", f"not a JSON object: {exc}") from exc
        for name in SHARED_FIELDS:
            message = field_error(name, getattr(self, name))
            if message:
                raise ConfigError(name, message)
        if self.family_weights is not None:
            message = field_error("reward_weights", self.family_weights)
            if message:
                raise ConfigError("family_weights", message)
            if self.reward_weights is not None:
                raise ConfigError("family_weights", "give reward weights once: family_weights (by name) or "
                                                    "reward_weights (a list in reward-function order)")
        if self.runs_dir is not None and not str(self.runs_dir):
            raise ConfigError("runs_dir", "give a folder for the run store, or None for no run store")
        if self.loss_type == "vespo" or self.off_policy_mask_threshold is not None:
            raise ConfigError("loss_type", "vespo weights and the off-policy sequence mask read the sign of one "
                                           "advantage per sequence; MRTPO's advantages are per token, so they "
                                           "are not defined here (use dapo, grpo, bnpo, dr_grpo, cispo or sapo)")
        spans = self.steps_per_generation * self.num_iterations
        if spans % self.gradient_accumulation_steps:
            raise ConfigError("steps_per_generation", f"a generation batch spans steps_per_generation x "
                              f"num_iterations = {spans} micro-batches, not a whole number of optimizer steps of "
                              f"{self.gradient_accumulation_steps}; the run store records whole batches")

    @property
    def steps_per_batch(self) -> int:
        """Optimizer steps per generation batch (a run-store step is one generation batch)."""
        return self.steps_per_generation * self.num_iterations // self.gradient_accumulation_steps


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
    """What one process's rows of a generation batch leave for the record (CPU tensors): gathered to
    process 0, concatenated in process order, they are the batch's `core.run.record.StepRecord` pieces."""

    items: list[PromptView]
    prompt_ids: list[list[int]]
    response_ids: Tensor  # (b, T)
    mask: Tensor  # (b, T)
    texts: list[str]
    tokens: list[list[str]]
    offsets: list[list[tuple[int, int]]]
    span_mask: Tensor  # (b, K, T)
    weights: Tensor | None  # (b, K, T)
    js: Tensor | None  # (b, K, T), NaN where not computed
    replayed: Tensor | None  # (b, K) bool: pairs whose contrastive pass ran
    token_adv: Tensor  # (b, T)
    credit: Tensor  # (b, K, T)


def _pad_cat(parts: list[Tensor | None], width: int, fill: float = 0.0) -> Tensor | None:
    """Concatenate along dim 0 after right-padding the last dim to `width` (None when any part is None)."""
    if any(p is None for p in parts):
        return None
    padded = [torch.nn.functional.pad(p, (0, width - p.shape[-1]), value=fill) for p in parts]
    return torch.cat(padded, 0)


def merge_batches(parts: list[LocalBatch], rewards: Tensor, group_adv: Tensor) -> tuple:
    """(Rollout, Scores, Routing, Advantages) of the whole batch from the processes' parts, in process order
    (global sample index p b + i), padded to the longest response of any process."""
    width = max(max(p.mask.shape[1] for p in parts), 1)
    mask = _pad_cat([p.mask for p in parts], width)
    rollout = step_lib.Rollout(
        items=[it for p in parts for it in p.items], prompt_ids=[x for p in parts for x in p.prompt_ids],
        response_ids=_pad_cat([p.response_ids for p in parts], width).long(), mask=mask.long(),
        texts=[x for p in parts for x in p.texts], tokens=[x for p in parts for x in p.tokens],
        offsets=[x for p in parts for x in p.offsets],
    )
    scores = step_lib.Scores(rewards, _pad_cat([p.span_mask for p in parts], width).bool())
    replayed = None if any(p.replayed is None for p in parts) else torch.cat([p.replayed for p in parts], 0)
    routing = step_lib.Routing(_pad_cat([p.weights for p in parts], width), _pad_cat([p.js for p in parts], width),
                               replayed)
    adv = step_lib.Advantages(_pad_cat([p.token_adv for p in parts], width), _pad_cat([p.credit for p in parts], width),
                              group_adv)
    return rollout, scores, routing, adv


# ----------------------------------------------------------------------------------------------- trainer

# TRL's per-update metrics -> the run store's keys (docs/CONTRACTS.md); what TRL does not measure is NaN.
TRL_LOSS_METRICS = {"entropy": "policy/entropy", "clip_ratio/region_mean": "policy/clip_frac", "kl": "loss/kl"}


class MRTPOTrainer(GRPOTrainer):
    """TRL's `GRPOTrainer` with MRTPO's token advantages and the project's run store (module docstring).

    `reward_funcs` defaults to `verifier_rewards(train_dataset)`; reward functions that are not verifier
    families are routed uniformly (they have no constraint sentence to remove) and have no spans.
    `store_config` is what config.json records (the `mrtpo train --backend trl` command passes its
    TrainConfig); by default it is built from `args`.
    """

    def __init__(self, model, reward_funcs=None, args: MRTPOConfig | None = None, train_dataset=None,
                 eval_dataset=None, processing_class=None, *, store_config: dict | None = None, **kwargs):
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
        names = [getattr(f, "__name__", None) or type(f).__name__ for f in reward_funcs]
        if args.family_weights is not None:
            message = reward_weights_error(args.family_weights, names)
            if message:
                raise ConfigError("family_weights", message)
            args.reward_weights = [float(args.family_weights.get(n, 1.0)) for n in names]
        super().__init__(model, reward_funcs, args, train_dataset, eval_dataset, processing_class, **kwargs)
        if self.is_fsdp_enabled:
            raise ConfigError("fsdp", "the contrastive replay runs a data-dependent number of forward passes per "
                                      "process, which FSDP cannot keep in step; use DDP or DeepSpeed")
        if self.is_deepspeed_enabled and not args.ds3_gather_for_generation:
            ds = getattr(self.accelerator.state, "deepspeed_plugin", None)
            if ds is not None and getattr(ds, "zero_stage", 0) == 3:
                raise ConfigError("ds3_gather_for_generation", "the replay's forward passes need the ZeRO-3 weights "
                                                               "gathered (their number differs between processes)")
        self.reward_names: list[str] = list(self.reward_func_names)
        self.store_config = store_config
        self._rows: dict[str, PromptRow] = {}
        self._variant_ids: dict[str, list[int]] = {}
        self._captured: dict[str, Any] = {}
        self._batch: dict[str, Any] | None = None  # the generation batch in training
        self._loss_sum: Tensor | None = None
        self._metric_marks: dict[str, int] = {}
        self._guard: SignalGuard | None = None
        self.record_step = 0
        self.stopped = False
        self.writer: RunWriter | None = None
        self.add_callback(_RunStoreCallback(self))

    # ------------------------------------------------------------------ TRL hooks

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._captured = {"rewards": rewards, "completions": list(completions),
                          "completion_ids": [list(ids) for ids in completion_ids_list]}
        return rewards

    def _generate_and_score_completions(self, inputs):
        t0 = time.perf_counter()
        out = super()._generate_and_score_completions(inputs)
        if not self.model.training:  # evaluation: TRL's own advantages, no replay
            return out
        times = {"time/generate": time.perf_counter() - t0}
        local = self._token_advantages(inputs, out, times)
        out["advantages"] = local.token_adv.to(out["completion_ids"].device)
        parts = gather_object([local])  # every process's rows, in process order
        rewards = self._captured["rewards"].float().cpu()
        self._batch = {
            "parts": parts if self.accelerator.is_main_process else None, "rewards": rewards,
            "start": t0, "times": times, "losses": [], "metrics": {},
        }
        self._mark_metrics()
        return out

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        if self.model.training:
            self._loss_sum = loss.detach() if self._loss_sum is None else self._loss_sum + loss.detach()
        return loss

    def log(self, logs, start_time=None):
        super().log(logs, start_time)
        self._metric_marks = {}  # TRL cleared its metric lists

    def train(self, *args, **kwargs):
        """TRL's training loop inside a SignalGuard: SIGTERM/SIGINT on any process stop every process after the
        current optimizer step (they agree at each step end) and the run is marked stopped; an exception marks it
        failed with its traceback."""
        with SignalGuard() as guard:
            self._guard = guard
            try:
                result = super().train(*args, **kwargs)
            except BaseException as exc:
                if self.writer is not None:
                    stopped = isinstance(exc, KeyboardInterrupt)
                    tail = "".join(traceback.format_exception(exc))[-4000:]
                    self.writer.set_status(state="stopped" if stopped else "failed", step=self.record_step,
                                           error=None if stopped else tail)
                raise
            finally:
                self._guard = None
        if self.writer is not None:
            self.writer.set_status(state="stopped" if self.stopped else "completed", step=self.record_step, error=None)
        return result

    # ------------------------------------------------------------------ MRTPO on the local rows

    def _prompt_row(self, row: Mapping) -> PromptRow:
        key = json.dumps({k: row[k] for k in ROW_COLUMNS if k in row}, sort_keys=True, default=str)
        found = self._rows.get(key)
        if found is None:
            found = self._rows[key] = prompt_row(row)
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

    def _token_advantages(self, inputs: list[dict], out: dict, times: dict[str, float]) -> LocalBatch:
        """Verify, route and compute the token advantages of this process's rows (module docstring)."""
        args, names = self.args, self.reward_names
        t1 = time.perf_counter()
        b, p = len(inputs), self.accelerator.process_index
        rows = slice(p * b, (p + 1) * b)
        rewards_all = self._captured["rewards"].float().cpu()  # (B, K), identical on every process
        if rewards_all.shape[0] != b * self.accelerator.num_processes:
            raise RuntimeError(f"gathered {rewards_all.shape[0]} reward rows for {self.accelerator.num_processes} "
                               f"processes of {b} rows")
        ids = out["completion_ids"].cpu()  # (b, T) right-padded
        mask = out["completion_mask"].cpu().long()  # (b, T), 0 on padding (and on truncated rows when masked)
        if "tool_mask" in out:
            mask = mask * out["tool_mask"].cpu().long()
        prompt_rows = [self._prompt_row(x) for x in inputs]
        prompt_ids = [r[m.bool()].tolist() for r, m in zip(out["prompt_ids"].cpu(), out["prompt_mask"].cpu(),
                                                             strict=True)]
        texts, tokens, offsets = [], [], []
        width = ids.shape[1]
        span_mask = torch.zeros((b, len(names), width), dtype=torch.bool)  # (b, K, T)
        for i, (row, completion_ids) in enumerate(zip(prompt_rows, self._captured["completion_ids"], strict=True)):
            text, offs = model_lib.decode_with_offsets(self.processing_class, completion_ids)
            trl_text = _completion_text(self._captured["completions"][i])
            if text != trl_text:
                raise RuntimeError(f"the completion decodes to {text!r} but TRL scored {trl_text!r}; MRTPO needs "
                                   "the reward text to be the decoded completion ids")
            texts.append(text)
            offsets.append([(int(a), int(c)) for a, c in offs])
            tokens.append([text[a:c] for a, c in offs])
            for k, result in enumerate(row.item.verify(text, names)):
                if result is not None:
                    span_mask[i, k] = torch.from_numpy(step_lib.span_token_mask(offsets[i], result.spans, width))
        times["time/verify"] = time.perf_counter() - t1

        t1 = time.perf_counter()
        group_adv = adv_lib.group_normalized(rewards_all, self.num_generations, args.eps)[rows]  # (b, K), global stats
        weights, js, replayed = self._route(prompt_rows, prompt_ids, ids, mask, span_mask, group_adv,
                                            ~torch.isnan(rewards_all[rows]))
        times["time/replay"] = time.perf_counter() - t1

        t1 = time.perf_counter()
        estimator = adv_lib.get_estimator(args.method)
        token_adv, credit = estimator(rewards_all, weights, mask, self.num_generations, self.reward_weights.cpu(),
                                      args.eps, rows=rows)  # (b, T), (b, K, T): rows of the whole batch's result
        times["time/advantages"] = time.perf_counter() - t1
        return LocalBatch(
            items=[PromptView(r.item.key, r.item.prompt()) for r in prompt_rows], prompt_ids=prompt_ids,
            response_ids=ids, mask=mask, texts=texts,
            tokens=tokens, offsets=offsets, span_mask=span_mask, weights=weights, js=js, replayed=replayed,
            token_adv=token_adv, credit=credit,
        )

    def _route(self, prompt_rows: list[PromptRow], prompt_ids: list[list[int]], ids: Tensor, mask: Tensor,
               span_mask: Tensor, group_adv: Tensor, applicable: Tensor
               ) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        """Routing weights (b, K, T), relevance d (b, K, T) and the replayed pairs (b, K) of the local rows, as
        docs/CONTRACTS.md ("Routing for a trainer") says: `replay_pairs` on the group advantages of the global
        statistics, then the config's routing source (`core.algos.routing.ROUTING`); (None, None, None) for
        estimators that ignore routing."""
        args = self.args
        source = step_lib.routing_source(args)
        if source is None:
            return None, None, None
        pairs = None
        if source == "replay":
            pairs = applicable if args.replay_pairs == "all" else routing_lib.replay_pairs(group_adv, applicable,
                                                                                             args.relevance)
        pad = self.processing_class.pad_token_id if self.processing_class.pad_token_id is not None else 0
        relevance = routing_lib.get_relevance(args.relevance)

        def contrastive_js(chosen: Tensor) -> Tensor:
            variants = [[row.contrastive(name, relevance.contrast) if bool(chosen[i, k]) else None
                         for k, name in enumerate(self.reward_names)] for i, row in enumerate(prompt_rows)]
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
                    d = tf_lib.contrastive_js(model, prompt_ids, contrastive_ids, ids.to(device), mask.to(device),
                                              args.replay_chunk, logp_full=None, pad_token_id=pad,
                                              distance=relevance.distance)  # (b, K, T)
                finally:
                    model.train(was_training)
            return d.float().cpu()

        inputs = routing_lib.RoutingInputs(
            mask=mask, span_mask=span_mask, applicable=applicable, lam=args.lam, w_max=args.w_max,
            sharpen=args.sharpen, relevance=args.relevance, contrastive_js=contrastive_js, replay=pairs,
            clip=args.routing_clip,
        )
        with torch.no_grad():
            weights, js = routing_lib.get_routing(source)(inputs)
        return weights.float(), js, None if js is None else pairs & applicable

    # ------------------------------------------------------------------ the run store

    def _mark_metrics(self) -> None:
        self._metric_marks = {k: len(v) for k, v in self._metrics["train"].items()}

    def _harvest_metrics(self) -> None:
        """Move TRL's per-update metrics logged since the last mark into the batch's lists."""
        if self._batch is None:
            return
        for key in TRL_LOSS_METRICS:
            values = self._metrics["train"].get(key, [])
            self._batch["metrics"].setdefault(key, []).extend(values[self._metric_marks.get(key, 0):])
        self._mark_metrics()

    def default_store_config(self) -> dict[str, Any]:
        """config.json for a run started from Python: TrainConfig's keys, from this trainer's settings."""
        args = self.args
        model = self.accelerator.unwrap_model(self.model)
        unknown = dict.fromkeys(TrainConfig.__dataclass_fields__)  # e.g. the prompt set: the caller's dataset
        return {
            **unknown,
            "model": str(getattr(model.config, "_name_or_path", "") or type(model).__name__),
            "method": args.method, "routing": args.routing, "relevance": args.relevance, "sharpen": args.sharpen,
            "lam": args.lam, "w_max": args.w_max, "reward_weights": dict(args.family_weights or {}), "eps": args.eps,
            "routing_clip": args.routing_clip,
            "group_size": self.num_generations, "prompts_per_step": args.generation_batch_size // self.num_generations,
            "max_new_tokens": args.max_completion_length, "temperature": args.temperature,
            "steps": self.total_record_steps(), "lr": args.learning_rate, "clip_range": args.epsilon,
            "kl_beta": args.beta, "inner_epochs": args.num_iterations, "max_grad_norm": args.max_grad_norm,
            "seed": args.seed, "replay_chunk": args.replay_chunk, "replay_pairs": args.replay_pairs,
            "replay_dtype": args.replay_dtype,
            "runs_dir": str(args.runs_dir),
            "run_name": args.run_name, "checkpoint_every": args.checkpoint_every,
            "keep_checkpoints": args.keep_checkpoints,
            "device": self.accelerator.device.type, "backend": "trl", "nproc": self.accelerator.num_processes,
        }

    def total_record_steps(self) -> int:
        return max(self.state.max_steps // self.args.steps_per_batch, 1) if self.state.max_steps else 0

    def open_run(self) -> None:
        """Process 0: create the run folder (config.json, status running)."""
        args = self.args
        if args.runs_dir is None or not self.accelerator.is_main_process:
            return
        config = dict(self.store_config) if self.store_config is not None else self.default_store_config()
        name = args.run_name or names_lib.auto_run_name(args.method, lambda n: run_dir(args.runs_dir, n).exists())
        config.update(run_name=name, runs_dir=str(args.runs_dir), reward_names=self.reward_names)
        self.writer = RunWriter.create(args.runs_dir, name, config)
        self.writer.set_status(state="running", pid=os.getpid(), step=0, total_steps=self.total_record_steps(),
                               error=None)
        print(f"run {name}: {self.writer.path}", flush=True)

    def end_optimizer_step(self, control) -> None:
        """After every optimizer step, on every process: keep its loss, record a finished generation batch,
        and stop every process when any of them was asked to."""
        self._harvest_metrics()
        if self._batch is not None and self._loss_sum is not None:
            self._batch["losses"].append(self._loss_sum)
        self._loss_sum = None
        if self._batch is not None and self._step % (self.args.steps_per_generation * self.num_iterations) == 0:
            self._record_batch(self._batch)
            self._batch = None
        asked = float(self._guard is not None and self._guard.requested)
        if self.accelerator.num_processes > 1:
            asked = float(self.accelerator.reduce(torch.tensor([asked], device=self.accelerator.device), "sum").item())
        if asked:
            self.stopped = True
            control.should_training_stop = True

    def _record_batch(self, batch: dict) -> None:
        """Process 0 writes the batch's credit map and metrics line (the other processes only join the
        reductions)."""
        losses = torch.stack(batch["losses"]).mean() if batch["losses"] else torch.tensor(float("nan"))
        loss = self.accelerator.reduce(losses.to(self.accelerator.device).float(), "mean").item()
        self.record_step += 1
        step = self.record_step
        if self.args.checkpoint_every and step % self.args.checkpoint_every == 0:
            self.save_run_checkpoint(step)
        if self.writer is None:
            return
        times = dict(batch["times"])
        times["time/update"] = time.perf_counter() - batch["start"] - sum(times.values())
        times["time/step"] = time.perf_counter() - batch["start"]
        loss_stats = {key: float(np.mean(v)) if v else float("nan") for key, v in
                      ((TRL_LOSS_METRICS[k], batch["metrics"].get(k, [])) for k in TRL_LOSS_METRICS)}
        loss_stats["loss/kl"] = loss_stats["loss/kl"] if self.beta else 0.0
        loss_stats["loss/total"] = loss
        loss_stats["loss/policy"] = loss - self.beta * loss_stats["loss/kl"]
        loss_stats["policy/kl"] = float("nan")  # TRL does not measure KL(pi_old || pi) per update
        rewards = batch["rewards"]
        group_adv = adv_lib.group_normalized(rewards, self.num_generations, self.args.eps)  # (B, K)
        rollout, scores, routing, adv = merge_batches(batch["parts"], rewards, group_adv)
        rec = record.StepRecord(step, self.reward_names, self.num_generations, rollout, scores, routing, adv,
                                loss_stats, times, w_max=self.args.w_max)
        metrics = record.step_metrics(rec)
        self.writer.write_credit(step, record.credit_frame(rec))
        self.writer.append_metrics(metrics)
        self.writer.set_status(state="running", step=step)
        print(record.summary_line(metrics, self.total_record_steps(), self.reward_names), flush=True)

    def save_run_checkpoint(self, step: int) -> None:
        """The policy and tokenizer (save_pretrained) into the run store's checkpoints/step_<step>, written to a
        hidden folder then renamed (every process takes part: DeepSpeed gathers weights)."""
        if self.args.runs_dir is None:
            return
        final = self.writer.checkpoint_dir(step) if self.writer is not None else None
        tmp = None if final is None else final.parent / f".{final.name}.tmp"
        if tmp is not None and tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        tmp_name = gather_object([str(tmp) if tmp is not None else None])[0]
        if tmp_name is None:
            return
        self.save_model(tmp_name)
        self.accelerator.wait_for_everyone()
        if final is not None:
            if final.exists():
                shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
            self.writer.prune_checkpoints(self.args.keep_checkpoints)


class _RunStoreCallback(TrainerCallback):
    """Calls the trainer's run-store steps at the points of HF's loop (kept out of the trainer's own methods so
    they read top to bottom)."""

    def __init__(self, trainer: MRTPOTrainer):
        self.trainer = trainer

    def on_train_begin(self, args, state, control, **kwargs):
        self.trainer.open_run()

    def on_step_end(self, args, state, control, **kwargs):
        self.trainer.end_optimizer_step(control)

    def on_train_end(self, args, state, control, **kwargs):
        step = self.trainer.record_step
        if step and (not args.checkpoint_every or step % args.checkpoint_every):
            self.trainer.save_run_checkpoint(step)
