"""Prompt sets: JSONL files of prompts with their constraint specs, loaded into `PromptItem`s.

Native format (one JSON object per line):
    {"key": "p0001", "task": "Write a short note about rivers.",
     "constraints": [{"family": "keywords:existence", "kwargs": {"keywords": ["steady"]}},
                     {"family": "punctuation:no_comma", "kwargs": {}}]}
A constraint may carry its own `"sentence"` (the words the prompt states it in; `with_sentence`), e.g.
{"family": "punctuation:no_comma", "kwargs": {}, "sentence": "Leave out every comma."}.
IFEval's input format loads too: {"key": 1000, "prompt": "...", "instruction_id_list": [...],
"kwargs": [{...}, ...]}, in google-research's shape (each kwargs object holds the arguments its instruction
uses) and in the shape with every argument name in every object and None where unused (Hugging Face's
`google/IFEval`, lm-eval): None-valued arguments are dropped.

A prompt may state one family more than once with different arguments (IFEval: "between 5 and 10 sentences" is
`number_sentences` "at least 5" and `number_sentences` "less than 11"). Each statement is its own reward, named
by `reward_name`: the family for its first statement in a prompt, `family#2`, `family#3`, ... for the next ones,
so the names are stable (they depend only on the order of the prompt's constraint list) and distinct in every
metric (`reward/<name>`), page and credit map.

The prompt of a native item is its task then its constraint sentences, joined with spaces. Its contrastive prompts
x^-k (`PromptItem.contrastive_prompt`: constraint k's part removed, or its argument swapped) follow the verifier's
rule, which lives with every other contrast in `core.contrast` (`constraint_part`, `verifier_contrastive`).

Never imports torch.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import core.contrast as contrast_lib
from core.contrast import AUTO_SWAP_FAMILIES, CONTRASTS, prompt_segments  # noqa: F401  (the old import path)
from core.verifiers import Span, Verifier, VerifierSpecError, VerifyResult, build, families, family_class, module_of


def json_error_text(exc: json.JSONDecodeError, line: bool = True) -> str:
    """One readable line for a JSON syntax error, e.g. "unterminated string starting at line 1, column 2"
    (`line=False`: the column only, for one line of a JSONL file whose line the caller names).

    >>> try:
    ...     json.loads('{"a')
    ... except json.JSONDecodeError as exc:
    ...     print(json_error_text(exc))
    unterminated string starting at line 1, column 2
    """
    msg = exc.msg[:1].lower() + exc.msg[1:]
    where = f"line {exc.lineno}, column {exc.colno}" if line else f"column {exc.colno}"
    # Some messages end with "at" ("Unterminated string starting at"): the position completes them.
    return f"{msg} {where}" if msg.endswith(" at") else f"{msg} at {where}"


class PromptSetError(ValueError):
    """A prompt set that cannot be loaded; the message names the file and line."""


@dataclass(eq=False)
class PromptItem:
    """One prompt: `key`, `task` text and its `constraints` (verifiers).

    `text` is the verbatim prompt of an IFEval-format item (None for native items, whose prompt
    is built from the task and the constraint sentences).

    >>> from core.verifiers import build
    >>> item = PromptItem("p1", "What is 3 plus 4?", [build("task:arithmetic", answer=7),
    ...                                               build("punctuation:no_comma")])
    >>> item.prompt()
    'What is 3 plus 4? Do not use any commas.'
    >>> item.contrastive_prompt(0), item.contrastive_prompt(1)
    ('Do not use any commas.', 'What is 3 plus 4?')
    """

    key: str
    task: str
    constraints: list[Verifier] = field(default_factory=list)
    text: str | None = None

    # -- prompt text --------------------------------------------------------------------------

    def _pieces(self) -> list[tuple[str, list[int]]]:
        """Native prompt pieces in order, each with the constraint indices it states."""
        task_owners = [k for k, c in enumerate(self.constraints) if c.is_task]
        pieces = [(self.task, task_owners)]
        for k, c in enumerate(self.constraints):
            if not c.is_task:
                pieces.append((c.sentence(), [k]))
        return [(text, owners) for text, owners in pieces if text.strip()]

    def prompt(self) -> str:
        """The full user message."""
        if self.text is not None:
            return self.text
        return " ".join(text for text, _ in self._pieces())

    def constraint_part(self, k: int) -> Span | None:
        """Character range of `prompt()` that states constraint k (its sentence; for a task
        verifier the task text); None when it cannot be found (IFEval items only). The rule:
        `core.contrast.constraint_part`."""
        return contrast_lib.constraint_part(self, k)

    def contrastive_prompt(self, k: int, contrast: str = "remove") -> str:
        """The prompt x^-k of constraint k by the verifier's own rule (`core.contrast.verifier_contrastive`): its part
        removed (`contrast="remove"`), its argument swapped (`"swap"`), or `"auto"` (swapped for a family in
        `AUTO_SWAP_FAMILIES`, removed otherwise)."""
        return contrast_lib.verifier_contrastive(self, k, contrast)

    # -- rewards ------------------------------------------------------------------------------

    def reward_names(self) -> list[str]:
        """The reward name of each constraint, in order: its family, or `family#n` for the n-th statement of a
        family this prompt states more than once (module docstring).

        >>> from core.verifiers import build
        >>> item = PromptItem("p", "t", [build("length_constraints:number_words", relation="at least", num_words=5),
        ...                              build("punctuation:no_comma"),
        ...                              build("length_constraints:number_words", relation="less than", num_words=9)])
        >>> item.reward_names()
        ['length_constraints:number_words', 'punctuation:no_comma', 'length_constraints:number_words#2']
        """
        seen: dict[str, int] = {}
        names = []
        for c in self.constraints:
            seen[c.family] = seen.get(c.family, 0) + 1
            names.append(reward_name(c.family, seen[c.family]))
        return names

    def families(self) -> list[str]:
        """The reward name of each constraint (`reward_names`; the family itself unless a prompt repeats it):
        what the trainers compare with the run's reward names."""
        return self.reward_names()

    def verifier_for(self, name: str) -> Verifier | None:
        """The constraint of this prompt with that reward name (`reward_names`), or None when the prompt does
        not state it."""
        names = self.reward_names()
        return self.constraints[names.index(name)] if name in names else None

    def verify(self, response: str, names: Sequence[str]) -> list[VerifyResult | None]:
        """The verdict of each reward in `names` on `response` (None where this prompt does not
        state that reward)."""
        out: list[VerifyResult | None] = []
        for name in names:
            verifier = self.verifier_for(name)
            out.append(None if verifier is None else verifier.verify(response))
        return out

    def scores(self, response: str, names: Sequence[str]) -> list[float]:
        """Scores of `response` per reward name; NaN where the prompt does not state it."""
        return [math.nan if r is None else r.score for r in self.verify(response, names)]

    def to_dict(self) -> dict[str, Any]:
        """The native JSONL record of this item (IFEval items keep their verbatim prompt as `prompt`)."""
        record: dict[str, Any] = {
            "key": self.key,
            "task": self.task,
            "constraints": [_spec_of(c) for c in self.constraints],
        }
        if self.text is not None:
            record["prompt"] = self.text
        return record


def _spec_of(verifier: Verifier) -> dict[str, Any]:
    """A constraint's native spec, with its own sentence when the record gave one (`with_sentence`)."""
    spec = verifier.to_spec()
    override = getattr(verifier, "sentence_override", None)
    return {**spec, "sentence": override} if override is not None else spec


def contrastive_prompt(item: PromptItem, k: int, contrast: str = "remove") -> str:
    """`item.contrastive_prompt(k, contrast)`: the prompt with constraint k's part removed (or its argument
    swapped)."""
    return item.contrastive_prompt(k, contrast)


# Separates a family from the ordinal of its repeated statement in a reward name ("family#2"); `register` refuses
# family ids that contain it.
REPEAT_MARK = "#"


def reward_name(family: str, n: int = 1) -> str:
    """The reward name of the n-th (1-based) statement of `family` in one prompt: the family, then `family#n`.

    >>> reward_name("startend:quotation"), reward_name("startend:quotation", 2)
    ('startend:quotation', 'startend:quotation#2')
    """
    return family if n == 1 else f"{family}{REPEAT_MARK}{n}"


def family_of(name: str) -> str:
    """The family of a reward name (`reward_name`'s inverse on the family).

    >>> family_of("length_constraints:number_words#2")
    'length_constraints:number_words'
    """
    return name.split(REPEAT_MARK, 1)[0]


def reward_names(items: Iterable[PromptItem]) -> list[str]:
    """The rewards of a run: the distinct reward names (`PromptItem.reward_names`: the constraint families, with
    `family#2`... for a family a prompt states again) of the prompt set, first-seen order.

    >>> from core.verifiers import build
    >>> a = PromptItem("a", "t", [build("punctuation:no_comma")])
    >>> b = PromptItem("b", "t", [build("task:arithmetic", answer=2), build("punctuation:no_comma")])
    >>> reward_names([a, b])
    ['punctuation:no_comma', 'task:arithmetic']
    """
    names: list[str] = []
    for item in items:
        for name in item.reward_names():
            if name not in names:
                names.append(name)
    return names


# ---------------------------------------------------------------------------------------------
# Loading


def item_from_record(record: Any, *, skip_unknown: bool = False, default_key: str = "") -> PromptItem | None:
    """Build a PromptItem from a native or IFEval-format record. Raises ValueError (including
    VerifierSpecError) with a plain message; returns None when `skip_unknown` dropped every
    constraint of an IFEval record."""
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object, got {type(record).__name__}")
    if "instruction_id_list" in record:
        return _ifeval_item(record, skip_unknown=skip_unknown, default_key=default_key)
    key = str(record.get("key", default_key))
    task = record.get("task")
    if not isinstance(task, str):
        raise ValueError("missing 'task' (a string); a native record has key, task, constraints")
    if not task.strip():
        raise ValueError("empty 'task': a prompt needs a task text")
    specs = record.get("constraints", [])
    if not isinstance(specs, list):
        raise ValueError('\'constraints\' must be a list of {"family": ..., "kwargs": {...}}')
    constraints = []
    for spec in specs:
        if not isinstance(spec, dict) or not isinstance(spec.get("family"), str):
            raise ValueError(f'bad constraint spec {spec!r}: expected {{"family": str, "kwargs": {{...}}}}')
        kwargs = spec.get("kwargs") or {}
        if not isinstance(kwargs, dict):
            raise ValueError(f"constraint {spec['family']!r}: 'kwargs' must be an object")
        verifier = build_for_prompt(spec["family"], kwargs, task)
        if "sentence" in spec:
            verifier = with_sentence(verifier, spec["sentence"])
        constraints.append(verifier)
    text = record.get("prompt") if isinstance(record.get("prompt"), str) else None
    return PromptItem(key=key, task=task, constraints=constraints, text=text)


def with_sentence(verifier: Verifier, sentence: Any) -> Verifier:
    """`verifier` stating its constraint in the record's own words: a native constraint spec's optional
    `"sentence"` replaces what the family's `sentence()` writes (the verdict is the family's; only the prompt's
    wording changes). The out-of-template set `multi-ood.jsonl` paraphrases every constraint this way. The
    spec keeps it (`to_dict` writes it back). A task verifier states nothing, so it takes no sentence.

    >>> from core.verifiers import build
    >>> v = with_sentence(build("punctuation:no_comma"), "Leave out every comma.")
    >>> PromptItem("k", "Say hi.", [v]).prompt()
    'Say hi. Leave out every comma.'
    """
    if not isinstance(sentence, str) or not sentence.strip():
        raise VerifierSpecError(f"constraint {verifier.family!r}: 'sentence' must be a non-empty string, got "
                                f"{sentence!r}")
    if verifier.is_task:
        raise VerifierSpecError(f"constraint {verifier.family!r} is a task verifier (its part is the task text): "
                                "it takes no 'sentence'; reword the task instead")
    text = sentence.strip()
    verifier.sentence = functools.partial(str, text)  # type: ignore[method-assign]  # this instance only; picklable
    verifier.sentence_override = text  # type: ignore[attr-defined]
    return verifier


def build_for_prompt(family: str, kwargs: dict[str, Any], task: str) -> Verifier:
    """`build(family, **kwargs)`, giving a family that reads the prompt (its class names the argument in
    `prompt_arg`, e.g. `combination:repeat_prompt`'s `prompt_to_repeat`) the task text when the record
    leaves that argument out."""
    arg = getattr(family_class(family), "prompt_arg", None) if family in families() else None
    if arg and arg not in kwargs:
        kwargs = {**kwargs, arg: task}
    verifier = build(family, **kwargs)
    try:  # a custom family's sentence() is asked now, so a broken one is a line here, not a traceback mid-run
        text = verifier.sentence()
    except (Exception, SystemExit) as exc:  # noqa: BLE001 -- a user's code can fail in any way
        what = f"called sys.exit({exc.code!r})" if isinstance(exc, SystemExit) else f"raised {exc!r}"[:200]
        raise VerifierSpecError(f"constraint {family!r} ({module_of(type(verifier))}): its sentence() {what}") from None
    if not isinstance(text, str):
        raise VerifierSpecError(f"constraint {family!r} ({module_of(type(verifier))}): its sentence() returned "
                                f"{type(text).__name__}, not a string")
    return verifier


def _ifeval_item(record: dict[str, Any], *, skip_unknown: bool, default_key: str) -> PromptItem | None:
    prompt = record.get("prompt")
    ids = record.get("instruction_id_list")
    all_kwargs = record.get("kwargs")
    if all_kwargs is None and isinstance(ids, list):
        all_kwargs = [{} for _ in ids]
    if not isinstance(prompt, str):
        raise ValueError("IFEval record without a 'prompt' string")
    if not isinstance(ids, list) or not isinstance(all_kwargs, list) or len(ids) != len(all_kwargs):
        raise ValueError("IFEval record: 'instruction_id_list' and 'kwargs' must be lists of the same length")
    constraints = []
    for family, kwargs in zip(ids, all_kwargs, strict=True):
        if not isinstance(family, str):
            raise ValueError(f"IFEval record: an instruction id must be a string, got {type(family).__name__}")
        if kwargs is not None and not isinstance(kwargs, dict):
            raise ValueError(f"IFEval record: the kwargs of {family!r} must be an object, got {type(kwargs).__name__}")
        kwargs = {k: v for k, v in (kwargs or {}).items() if v is not None}
        try:
            constraints.append(build_for_prompt(family, kwargs, prompt))
        except VerifierSpecError:
            if skip_unknown and not _is_registered(family):
                continue
            raise
    if not constraints:
        return None
    key = str(record.get("key", default_key))
    return PromptItem(key=key, task=prompt, constraints=constraints, text=prompt)


def _is_registered(family: Any) -> bool:
    return family in families()


def jsonl_records(path: Path, what: str, error: type[ValueError]) -> list[tuple[int, Any]]:
    """(line number, parsed value) of every non-blank line of a JSONL file. Lines end at "\n" only (a "\r" before
    it is JSON whitespace): U+2028, U+2029 and U+0085 are allowed raw inside a JSON string, and `json.dumps(...,
    ensure_ascii=False)` writes them so, so `str.splitlines` (which splits at them) is not used. Raises `error` with
    one line naming the file (`what` it is, e.g. "prompt set") when it cannot be read or is not UTF-8, or the file
    and line when a line is not JSON, nests too deep, or holds an integer of more digits than Python converts."""
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except OSError as exc:
        raise error(f"cannot read {what} {str(path)!r}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not UTF-8 text ({exc.reason})") from exc
    records = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append((lineno, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise error(f"{path}:{lineno}: not valid JSON: {json_error_text(exc, line=False)}") from None
        except RecursionError:
            raise error(f"{path}:{lineno}: the JSON nests too deep to be read") from None
        except ValueError as exc:  # an integer of more than sys.get_int_max_str_digits() (4300) digits
            raise error(f"{path}:{lineno}: not usable JSON: {str(exc).split(';')[0]}") from None
    return records


def load_prompt_set(path: str | Path, *, skip_unknown: bool = False) -> list[PromptItem]:
    """Load a JSONL prompt set (native or IFEval format, blank lines ignored).

    Raises `PromptSetError` naming the file and line for malformed JSON, bad constraint specs
    (unknown family, bad arguments), an empty task, a prompt without constraints, duplicate keys, or a file
    without prompts. With
    `skip_unknown=True`, IFEval constraints of families not implemented here are dropped
    (and prompts left without constraints skipped) instead.
    """
    path = Path(path)
    items: list[PromptItem] = []
    keys: dict[str, int] = {}
    for lineno, record in jsonl_records(path, "prompt set", PromptSetError):
        try:
            item = item_from_record(record, skip_unknown=skip_unknown, default_key=f"line{lineno}")
        except ValueError as exc:
            raise PromptSetError(f"{path}:{lineno}: {exc}") from None
        if item is None:
            continue
        if not item.constraints:  # training needs a reward per prompt; the bootstrap corpus (not a file) may have none
            raise PromptSetError(f"{path}:{lineno}: no constraints: every prompt of a training set needs at least "
                                 "one (its rewards come from them)")
        if item.key in keys:
            raise PromptSetError(f"{path}:{lineno}: duplicate key {item.key!r} (first on line {keys[item.key]})")
        keys[item.key] = lineno
        items.append(item)
    if not items:
        raise PromptSetError(f"{path}: no prompts")
    return items


def save_prompt_set(records: Iterable[dict[str, Any] | PromptItem], path: str | Path) -> None:
    """Write records (native dicts or PromptItems) as JSONL, one per line."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for record in records:
            if isinstance(record, PromptItem):
                record = record.to_dict()
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
