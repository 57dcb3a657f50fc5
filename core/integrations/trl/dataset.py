"""The dataset side of MRTPO on TRL: dataset rows read as prompts with constraints, and our verifiers as TRL
reward functions.

A dataset row has a `prompt` (text or chat messages) and its `constraints` (a list, or its JSON, of
{"family", "kwargs"}; `task` and `key` optional; IFEval's `instruction_id_list` / `kwargs` work too).
`prompt_row` reads one into a `PromptRow` (its PromptItem, and where the item's text sits in the prompt, so
that a contrastive prompt is the same prompt with that text replaced); `prompt_dataset` builds a dataset
from a prompt set; `verifier_rewards` makes one TRL reward function per constraint family.
Imports neither torch nor TRL (`prompt_dataset` imports `datasets` when called).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.config import ConfigError
from core.contrast import user_text, verifier_contrastive, with_user_text
from core.tasks import PromptItem, item_from_record

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
        user = user_text(self.prompt)
        return with_user_text(self.prompt, user[: self.start] + text + user[self.end:])

    def contrastive(self, family: str, contrast: str = "remove") -> Any | None:
        """The prompt x^-k for reward `family` (None when the row does not state it): the verifier's rule,
        `core.contrast.verifier_contrastive` (`contrast`: remove the constraint, swap its argument, or auto), in the
        row's own prompt format."""
        families = self.item.families()
        if family not in families:
            return None
        return self.variant(verifier_contrastive(self.item, families.index(family), contrast))


def completion_text(completion: Any) -> str:
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
    key = str(("constraints" in row or "instruction_id_list" in row) and row.get("key")
              or "h" + hashlib.sha1(text.encode()).hexdigest()[:10])
    if "instruction_id_list" in row:  # IFEval format: the verbatim prompt, sentences located by cue words
        record_ = {"key": key, "prompt": text, "instruction_id_list": row["instruction_id_list"],
                   "kwargs": row.get("kwargs") or []}
        item = item_from_record(record_)
        return PromptRow(item, row["prompt"], 0, len(text))
    if "constraints" not in row:  # a row for the user's own reward functions: its `task` / `key` are left alone
        key = "h" + hashlib.sha1(text.encode()).hexdigest()[:10]
        return PromptRow(PromptItem(key, text, [], text=text), row["prompt"], 0, len(text))
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
    the completion, None (TRL: NaN, "does not apply") for rows that do not state it. The verdicts of its last
    call (`VerifyResult`s with their character spans, None where the row does not state the family) stay on
    the function as `results`, with the texts they judged as `texts`: `MRTPOTrainer` takes the spans from
    there instead of running the verifiers a second time.

    >>> reward = verifier_reward("punctuation:no_comma")
    >>> reward(prompts=["Say hi. Do not use any commas."], completions=["hi, there"],
    ...        constraints=['[{"family": "punctuation:no_comma", "kwargs": {}}]'])
    [0.0]
    """

    def reward(prompts, completions, **columns) -> list[float | None]:
        results, texts = [], [completion_text(c) for c in completions]
        for row, text in zip(_batch_rows(prompts, columns), texts, strict=True):
            verifier = _cached_row(row).item.verifier_for(family)
            results.append(None if verifier is None else verifier.verify(text))
        reward.results, reward.texts = results, texts  # type: ignore[attr-defined]
        return [None if r is None else float(r.score) for r in results]

    reward.__name__ = family
    reward.__qualname__ = f"verifier_reward({family!r})"
    reward.family = family  # type: ignore[attr-defined]
    reward.results, reward.texts = None, None  # type: ignore[attr-defined]
    return reward


def verifier_rewards(dataset: Iterable[Mapping]) -> list[Callable[..., list[float | None]]]:
    """One `verifier_reward` per constraint family of the dataset, in first-seen order."""
    return [verifier_reward(f) for f in reward_families(dataset)]


def reward_with_spans(func: Callable[..., Sequence]) -> Callable[..., list[float | None]]:
    """Let a reward function report the character spans of the completion it inspected, so that MRTPO's span
    overlays, span metrics and the Verifier debugger work for it (docs/TRL.md, "Spans").

    `func` is an ordinary TRL reward function except that each item of its list may be `(score, spans)`, spans a
    list of (start, end) character ranges in the completion's text (`completion_text`); a plain score (or None)
    reports no spans for that completion. The wrapped function returns the scores TRL expects and keeps the spans of
    its last call as `.spans` (one list per completion, None where none were reported) and the texts as `.texts`;
    it keeps `func`'s name.

    >>> @reward_with_spans
    ... def no_comma(completions, **kwargs):
    ...     return [(0.0 if "," in c else 1.0, [(i, i + 1) for i, ch in enumerate(c) if ch == ","]) for c in completions]
    >>> no_comma(completions=["a, b", "ab"]), no_comma.spans
    ([0.0, 1.0], [[(1, 2)], []])
    """
    import functools

    @functools.wraps(func)
    def reward(prompts=None, completions=None, **kwargs) -> list[float | None]:
        out = func(completions=completions, **kwargs) if prompts is None else \
            func(prompts=prompts, completions=completions, **kwargs)
        scores, spans = [], []
        for item in out:
            if isinstance(item, (tuple, list)) and len(item) == 2 and not isinstance(item[1], (int, float)):
                score, item_spans = item
                spans.append([(int(a), int(b)) for a, b in (item_spans or [])])
            else:
                score = item
                spans.append(None)
            scores.append(None if score is None else float(score))
        reward.spans, reward.texts = spans, [completion_text(c) for c in completions]  # type: ignore[attr-defined]
        return scores

    reward.spans, reward.texts = None, None  # type: ignore[attr-defined]
    return reward
