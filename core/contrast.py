"""Contrasts: for each reward, the prompt without what that reward checks (x^-k). The one home of that rule.

Contrastive replay (docs/METHOD.md, "MRTPO") scores the sampled response under the prompt x and under x^-k, the
prompt without the part that reward k depends on; the per-token distance between the two next-token distributions
says which tokens depend on it. Every reward needs its x^-k, and a reward can declare it in whichever way fits its
data (docs/TRL.md, "Bring your own rewards"):

| contrast | x^-k | fits |
|---|---|---|
| `"verifier"` | the workbench verifier's own rule (`verifier_contrastive` below, what `PromptItem.contrastive_prompt` gives: its constraint sentence removed, or its argument swapped by a `swap` relevance) | rows with `constraints` / IFEval's `instruction_id_list` |
| `"column:NAME"` | the text held in the row's column NAME removed from the user turn | datasets keeping each instruction in a column |
| `"match:REGEX"` | the first sentence (or line) of the user turn that REGEX matches, removed | an instruction worded alike in every prompt |
| `"last_sentence"` | the user turn's last sentence removed | prompts that end with their instruction |
| `"system"` | the system message(s) removed | a reward that checks what the system prompt asks |
| `"question"` | the user turn reduced to the other rewards' instruction texts (everything else removed) | a correctness reward: what depends on the question (as `task:arithmetic` does) |
| `text(fn)` | `fn(row)` -> the text stating the instruction, removed | anything computable from the row |
| `prompt(fn)` | `fn(row)` -> x^-k itself, in the row's prompt format | full control |
| `"uniform"` | none: the reward is routed uniformly (said at start) | a reward that reads the whole response |

A contrast that finds nothing in a row (an empty column, no sentence matching, no system message, `fn` returning
None) gives that row no x^-k: the reward is routed uniformly on it (counted and said, never silently). A text that
is declared but absent from the prompt, or an x^-k equal to x, is an error naming the row (`ContrastError`).
A prompt is a string or a list of chat messages {"role", "content"}; the user turn is the string itself or the
last user message. Imports neither torch nor TRL.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.verifiers.shared.base import Span
from core.verifiers.shared.text import sentence_spans

if TYPE_CHECKING:
    from core.verifiers import Verifier

# Contrast kinds that a string names ("column:" and "match:" take an argument after the colon).
NAMED = ("verifier", "uniform", "system", "last_sentence", "question")
WITH_ARGUMENT = ("column", "match")
# Kinds that remove one located text from the user turn ("question" keeps these texts of the other rewards).
TEXT_KINDS = ("column", "match", "last_sentence", "text")


class ContrastError(ValueError):
    """A contrast that cannot give x^-k for a row (a declared text not in its prompt, x^-k equal to x, a bad spec)."""


@dataclass(frozen=True)
class Contrast:
    """One reward's contrast (module docstring): `kind` and its argument (a column name, a regex, a function)."""

    kind: str
    arg: Any = None

    def describe(self) -> str:
        """How a routing line names it: `column 'hint'`, `match '\\\\boxed'`, `text(fn)`, `last_sentence`, ..."""
        if self.kind in WITH_ARGUMENT:
            return f"{self.kind} {self.arg!r}"
        if self.kind in ("text", "prompt"):
            return f"{self.kind}({getattr(self.arg, '__name__', 'fn')})"
        return self.kind

    @property
    def replays(self) -> bool:
        """False for `uniform`: no contrastive pass for this reward."""
        return self.kind != "uniform"


def text(fn: Callable[[Mapping], str | None]) -> Contrast:
    """A contrast whose `fn(row)` returns the text of the row's prompt that states the instruction (None: none)."""
    if not callable(fn):
        raise ContrastError(f"contrast.text needs a function row -> text, got {type(fn).__name__}")
    return Contrast("text", fn)


def prompt(fn: Callable[[Mapping], Any]) -> Contrast:
    """A contrast whose `fn(row)` returns x^-k itself (a string or messages, as the row's prompt; None: none)."""
    if not callable(fn):
        raise ContrastError(f"contrast.prompt needs a function row -> prompt, got {type(fn).__name__}")
    return Contrast("prompt", fn)


def parse(spec: Any) -> Contrast:
    """A `Contrast` from what a user writes: a Contrast, or a string ("verifier", "column:NAME", "match:REGEX", ...).

    >>> parse("column:format_hint").describe()
    "column 'format_hint'"
    >>> parse("last_sentence").kind
    'last_sentence'
    """
    if isinstance(spec, Contrast):
        return spec
    if callable(spec):
        raise ContrastError("a function is ambiguous as a contrast: wrap it as core.contrast.text(fn) (fn(row) -> the "
                            "instruction's text) or core.contrast.prompt(fn) (fn(row) -> the prompt without it)")
    if not isinstance(spec, str):
        raise ContrastError(f"a contrast is a string or core.contrast.text/prompt(fn), got {type(spec).__name__}")
    kind, sep, arg = spec.partition(":")
    if kind in WITH_ARGUMENT and sep and arg:
        if kind == "match":
            try:
                re.compile(arg)
            except re.error as exc:
                raise ContrastError(f"match:{arg}: not a regular expression ({exc})") from None
        return Contrast(kind, arg)
    if kind in NAMED and not sep:
        return Contrast(kind)
    raise ContrastError(f"unknown contrast {spec!r}; valid: {', '.join(NAMED)}, column:NAME, match:REGEX, "
                        "or core.contrast.text(fn) / core.contrast.prompt(fn)")


# ----------------------------------------------------------------------------------------------- the prompt


def _last_user(messages: Sequence[Mapping]) -> int:
    for j in range(len(messages) - 1, -1, -1):
        if messages[j].get("role") == "user" and isinstance(messages[j].get("content"), str):
            return j
    raise ContrastError("the prompt conversation has no user message with text content")


def user_text(prompt_: Any) -> str:
    """The text a prompt states its instructions in: the string itself, or the last user message's content."""
    if isinstance(prompt_, str):
        return prompt_
    if isinstance(prompt_, (list, tuple)) and prompt_ and all(isinstance(m, Mapping) for m in prompt_):
        return prompt_[_last_user(prompt_)]["content"]
    raise ContrastError(f"a prompt must be a string or a list of chat messages, got {type(prompt_).__name__}")


def with_user_text(prompt_: Any, new: str) -> Any:
    """The prompt with its user turn's text replaced by `new` (same format, the other messages kept)."""
    if isinstance(prompt_, str):
        return new
    messages = [dict(m) for m in prompt_]
    messages[_last_user(messages)]["content"] = new
    return messages


def located_text(contrast: Contrast, row: Mapping, user: str) -> str | None:
    """The instruction text a text-kind contrast (`TEXT_KINDS`) points at in this row's user turn, None when it
    finds none here; raises ContrastError when a declared text (column, fn) is not in the user turn."""
    if contrast.kind == "column":
        if contrast.arg not in row:
            raise ContrastError(f"the row has no column {contrast.arg!r} (columns: {', '.join(map(str, row))})")
        found = row[contrast.arg]
    elif contrast.kind == "text":
        found = contrast.arg(row)
    elif contrast.kind == "match":
        pattern = re.compile(contrast.arg)
        found = next((user[s:e] for s, e in prompt_segments(user) if pattern.search(user[s:e])), None)
    elif contrast.kind == "last_sentence":
        segments = prompt_segments(user)
        found = user[segments[-1][0]: segments[-1][1]] if len(segments) > 1 else None  # one sentence: the question
    else:
        raise ContrastError(f"{contrast.kind} does not point at a text")
    if found is None or (isinstance(found, str) and not found.strip()):
        return None
    if not isinstance(found, str):
        raise ContrastError(f"{contrast.describe()} gave a {type(found).__name__}, not the instruction's text")
    if found not in user:
        raise ContrastError(f"{contrast.describe()} gives {found!r}, which the prompt's user turn does not contain")
    return found


def _remove(user: str, part: str) -> str:
    start = user.find(part)
    return _cut(user, start, start + len(part))


def contrastive_prompt(contrast: Contrast, row: Mapping, others: Sequence[Contrast] = ()) -> Any | None:
    """x^-k of `row` (its "prompt" column) for a reward with `contrast`, None when the contrast finds nothing in this
    row (the reward is then routed uniformly on it). `others`: the other rewards' contrasts, whose instruction texts
    `question` keeps. `verifier` and `uniform` are not handled here (the verifier's rule lives in core.tasks).
    Raises ContrastError when a declared text is missing from the prompt or x^-k equals x.

    >>> row = {"prompt": "What is 3 plus 4? Put the answer in \\\\boxed{}.", "hint": "Put the answer in \\\\boxed{}."}
    >>> contrastive_prompt(parse("column:hint"), row)
    'What is 3 plus 4?'
    >>> contrastive_prompt(parse("question"), row, [parse("column:hint")])
    'Put the answer in \\\\boxed{}.'
    """
    x = row["prompt"]
    if contrast.kind == "prompt":
        out = contrast.arg(row)
    elif contrast.kind == "system":
        if isinstance(x, str):
            return None
        out = [dict(m) for m in x if m.get("role") != "system"]
        if len(out) == len(x):
            return None
    elif contrast.kind == "question":
        user = user_text(x)
        kept = []
        for other in others:
            if other.kind in TEXT_KINDS:
                found = located_text(other, row, user)
                if found is not None and found not in kept:
                    kept.append(found)
        kept.sort(key=user.find)
        out = with_user_text(x, " ".join(kept))
    elif contrast.kind in TEXT_KINDS:
        user = user_text(x)
        found = located_text(contrast, row, user)
        if found is None:
            return None
        out = with_user_text(x, _remove(user, found))
    else:
        raise ContrastError(f"contrastive_prompt does not handle {contrast.kind!r} (verifier / uniform)")
    if out is None:
        return None
    if out == x:
        raise ContrastError(f"{contrast.describe()} gives a contrastive prompt equal to the prompt: replay would see "
                            "no difference (route the reward 'uniform' if that is meant)")
    return out


def verifier_routes(names: Sequence[str], source: str | None) -> dict[str, dict]:
    """config.json's `reward_routes` of a run whose rewards are all workbench verifiers (the built-in trainer): each
    routed by `source` (replay / span; None or uniform: uniform) with the verifier's contrast, each reporting spans
    (docs/CONTRACTS.md, "config.json")."""
    routing = source if source in ("replay", "span") else "uniform"
    return {n: {"routing": routing, "contrast": "verifier" if routing == "replay" else None, "spans": True}
            for n in names}


# ----------------------------------------------------------------------------------------- the verifier's rule
# A prompt-set item's (`core.tasks.PromptItem`) x^-k by its verifier ("verifier", the default of every workbench
# reward). A native item's prompt is its task then its constraint sentences: x^-k leaves out constraint k's sentence
# (for a task verifier, the task text). An IFEval prompt is free text, so its x^-k is best effort: the sentence (or
# line) of the prompt that states the constraint is found from the constraint's arguments (keywords, phrases) and
# cue words ("comma", "lowercase", ...) and removed. When no sentence matches, the prompt is returned unchanged
# (`constraint_part` is None), so replay sees no difference and routes that reward uniformly, as GDPO would.
#
# A second kind (`verifier_contrastive(item, k, "swap")`, the `swap` relevance variants) keeps the constraint's part
# but replaces its argument (keyword, phrase, operands) by another value of the same kind
# (`Verifier.counterfactual`), drawn by a generator seeded by the item's key, k and the family, so the same prompt
# always gets the same counterfactual (and the G responses of a group share it). A family without an argument to
# swap gets the removal prompt. A third, `"auto"` (the `auto` relevance), swaps only for the families in
# `AUTO_SWAP_FAMILIES`, the ones whose argument the policy was measured to read (`mrtpo bench contrast`), and
# removes the constraint's part for every other family.

# Kinds of contrastive prompt x^-k: remove constraint k's part, swap its argument, or auto: swap for the families in
# AUTO_SWAP_FAMILIES and remove for the rest (module docstring).
CONTRASTS = ("remove", "swap", "auto", "neutral", "placebo", "opposite", "key")
# The kinds whose rewrite of constraint k's part is `core.contrast_kinds.rewrite` (its module table).
REWRITES = ("neutral", "placebo", "opposite", "key")
# The families whose argument the embedded tiny-multi reads: `mrtpo bench contrast` (docs/results/contrast-tiny-multi.md)
# measured that swapping their argument moves the argument's probability about as much as removing the sentence
# (ratio ~1). Forbidden words (0.003) and required keywords (~0.1) fail: the policy does not read which word, so a
# swap carries no signal for them and `auto` removes their sentence instead. Measured on tiny-multi; rerun the
# benchmark for another model.
AUTO_SWAP_FAMILIES = frozenset({"task:arithmetic", "startend:end_checker", "startend:start_checker"})


def _check_index(item: Any, k: int) -> None:
    if not 0 <= k < len(item.constraints):
        raise IndexError(f"prompt {item.key!r} has {len(item.constraints)} constraints, no index {k}")


def constraint_part(item: Any, k: int) -> Span | None:
    """Character range of `item.prompt()` that states constraint k (its sentence; for a task verifier the task
    text); None when it cannot be found (IFEval items only)."""
    _check_index(item, k)
    if item.text is not None:
        others = [c for j, c in enumerate(item.constraints) if j != k]
        return _locate_constraint(item.text, item.constraints[k], others)
    pos = 0
    for text_, owners in item._pieces():
        if k in owners:
            return (pos, pos + len(text_))
        pos += len(text_) + 1
    return None


def verifier_contrastive(item: Any, k: int, contrast: str = "remove", auto: Mapping[str, str] | None = None) -> str:
    """`item.prompt()` with constraint k's part removed (`contrast="remove"`), or with its argument swapped for
    another value of the same kind (`"swap"`; removed when the family has none), or `"auto"`: the contrast
    `auto[family]` (default: swapped for a family in `AUTO_SWAP_FAMILIES`, removed otherwise; the section's comment
    above), or rewritten by `core.contrast_kinds.rewrite` (`REWRITES`: neutral, placebo, opposite, key; removed
    where the rewrite has nothing to do)."""
    _check_index(item, k)
    if contrast not in CONTRASTS:
        raise ValueError(f"unknown contrast {contrast!r}; valid: {', '.join(CONTRASTS)}")
    if contrast == "auto":
        family = item.constraints[k].family
        contrast = (auto.get(family, "remove") if auto is not None
                    else "swap" if family in AUTO_SWAP_FAMILIES else "remove")
        if contrast not in CONTRASTS or contrast == "auto":
            raise ValueError(f"auto maps {family} to {contrast!r}, not a contrast ({', '.join(CONTRASTS)})")
    swap = _swapper(item, k) if contrast == "swap" else _rewriter(item, k, contrast) if contrast in REWRITES else None
    if item.text is None:
        kept = []
        for text_, owners in item._pieces():
            new = text_ if k not in owners else swap(text_) if swap else None
            if new is not None:
                kept.append(new)
        return " ".join(kept)
    part = constraint_part(item, k)
    if part is None:
        return item.text
    new = swap(item.text[part[0]: part[1]]) if swap else None
    return _cut(item.text, *part) if new is None else item.text[: part[0]] + new + item.text[part[1]:]


def _swapper(item: Any, k: int):
    """text -> constraint k's counterfactual of that text (None: nothing to swap), seeded per item and k."""
    c = item.constraints[k]
    return lambda text_: c.counterfactual(text_, random.Random(f"{item.key}/{k}/{c.family}"))


def _rewriter(item: Any, k: int, contrast: str):
    """text -> constraint k's part rewritten by `contrast` (`core.contrast_kinds.rewrite`; None: nothing to do),
    seeded per item, k and the contrast."""
    from core import contrast_kinds

    c = item.constraints[k]
    return lambda text_: contrast_kinds.rewrite(contrast, text_, c, random.Random(f"{item.key}/{k}/{contrast}"))


# Finding the constraint's sentence in a free-form (IFEval) prompt


def prompt_segments(text: str) -> list[Span]:
    """Sentences of a prompt, never crossing a line break."""
    segments: list[Span] = []
    for line in re.finditer(r"[^\n]+", text):
        offset = line.start()
        segments += [(offset + s, offset + e) for s, e in sentence_spans(line.group())]
    return segments


def _segment_score(segment: str, verifier: Verifier) -> int:
    """3 per argument string (keyword, phrase, "at least 300") the segment holds, plus the
    weight of each cue word found at a word start; case-insensitive."""
    args, cues = verifier.prompt_cues()
    low = segment.lower()
    score = 3 * sum(1 for a in args if a.strip() and a.strip().lower() in low)
    score += sum(w for cue, w in cues.items() if re.search(r"(?<!\w)" + re.escape(cue.lower()), low))
    return score


def _best_segment(text: str, segments: list[Span], verifier: Verifier) -> tuple[int | None, list[int]]:
    """Index of the best-scoring segment for `verifier` (ties go to the later segment, as
    constraints usually follow the task; None when none scores above 0) and all scores."""
    scores = [_segment_score(text[s:e], verifier) for s, e in segments]
    best = max(range(len(segments)), key=lambda i: (scores[i], i), default=None)
    if best is None or scores[best] <= 0:
        return None, scores
    return best, scores


def _locate_constraint(text: str, verifier: Verifier, others: Sequence[Verifier] = ()) -> Span | None:
    """The part of a free-form prompt that states the constraint: its best-scoring segment
    (`_segment_score`), extended over the segments right after it that also match its cues
    and are not another constraint's best segment ("... in all lowercase letters. No capital
    letters are allowed."). None when no segment matches."""
    segments = prompt_segments(text)
    best, scores = _best_segment(text, segments, verifier)
    if best is None:
        return None
    taken = {_best_segment(text, segments, other)[0] for other in others}
    last = best
    while last + 1 < len(segments) and scores[last + 1] > 0 and last + 1 not in taken:
        last += 1
    return (segments[best][0], segments[last][1])


def _cut(text: str, start: int, end: int) -> str:
    """`text` without [start, end), joining the two sides with one space (or keeping the line
    break when the cut part stood on its own line)."""
    left, right = text[:start].rstrip(" \t"), text[end:].lstrip(" \t")
    if not left:
        return right.lstrip()
    if not right:
        return left.rstrip()
    if left.endswith("\n") and right.startswith("\n"):
        right = right[1:]
    if left.endswith("\n") or right.startswith("\n"):
        return left + right
    return left + " " + right


# ----------------------------------------------------------------------------------------------- with verifiers


def stated_text(item: Any, name: str) -> str | None:
    """The text of `item.prompt()` (a `core.tasks.PromptItem`) that states reward `name`'s constraint (its sentence;
    the task for a task verifier), None when the prompt does not state it or it cannot be located."""
    names = item.reward_names()
    if name not in names:
        return None
    part = constraint_part(item, names.index(name))
    return None if part is None else item.prompt()[part[0]: part[1]]


def others_for(item: Any, names: Sequence[str], contrasts: Sequence[Contrast | None], k: int) -> list[Contrast]:
    """The other rewards' contrasts as `question` reads them for reward k of a prompt with verifiers: a reward that is
    a constraint of `item` points at its stated sentence (`stated_text`; a task verifier's text is the question
    itself, so it is not kept), whatever its own contrast; any other keeps its text contrast."""
    out = []
    for j, (name, contrast) in enumerate(zip(names, contrasts, strict=True)):
        if j == k:
            continue
        verifier = item.verifier_for(name) if item is not None else None
        stated = stated_text(item, name) if verifier is not None and not verifier.is_task else None  # not the question
        if stated:
            out.append(Contrast("text", lambda row, t=stated: t))
        elif contrast is not None and contrast.kind in TEXT_KINDS:
            out.append(contrast)
    return out


# Contrasts the built-in trainer's prompts (a prompt set: one user message, no columns) can take.
BUILTIN_KINDS = ("verifier", "uniform", "match", "last_sentence", "question")


def builtin_contrast_error(spec: Any) -> str:
    """Why `spec` cannot be a contrast of the built-in trainer (TrainConfig.reward_contrasts), "" when it can."""
    try:
        contrast = parse(spec)
    except ContrastError as exc:
        return str(exc)
    if contrast.kind not in BUILTIN_KINDS:
        return (f"{contrast.describe()}: a prompt set's prompts have no columns or system message; use one of "
                f"{', '.join(k for k in BUILTIN_KINDS if k != 'match')}, match:REGEX (MRTPOConfig takes the others)")
    return ""


def item_contrastive(item: Any, names: Sequence[str], declared: Mapping[str, Contrast], k: int,
                     relevance_contrast: str = "remove") -> str | None:
    """x^-k of a prompt-set item (a `core.tasks.PromptItem`, the built-in trainer) for reward `names[k]`: the
    verifier's own rule (`verifier_contrastive`, remove / swap / auto) unless `declared` (parsed
    TrainConfig.reward_contrasts) gives the reward another contrast; None where the prompt does not state the reward,
    the declared contrast is `uniform`, or it finds nothing in this prompt."""
    name = names[k]
    stated = item.reward_names()
    if name not in stated:
        return None
    contrast = declared.get(name)
    if contrast is None or contrast.kind == "verifier":
        return verifier_contrastive(item, stated.index(name), relevance_contrast)
    if contrast.kind == "uniform":
        return None
    others = others_for(item, names, [declared.get(n) for n in names], k)
    return contrastive_prompt(contrast, {"prompt": item.prompt()}, others)


def declared_contrasts(specs: Mapping[str, Any]) -> dict[str, Contrast]:
    """TrainConfig.reward_contrasts parsed (`parse`)."""
    return {name: parse(spec) for name, spec in (specs or {}).items()}


def check_declared(items: Sequence[Any], names: Sequence[str], specs: Mapping[str, Any]) -> str:
    """Why the declared contrasts cannot route a prompt set ("" when they can): one that raises on a prompt (naming
    it), or that finds nothing in every prompt stating its reward (replay would then route it uniformly everywhere)."""
    declared = declared_contrasts(specs)
    for name, contrast in declared.items():
        if contrast.kind in ("verifier", "uniform") or name not in names:
            continue
        k, found, stating = list(names).index(name), 0, 0
        for item in items:
            if name not in item.reward_names():
                continue
            stating += 1
            try:
                found += item_contrastive(item, names, declared, k) is not None
            except ContrastError as exc:
                return f"{name}: prompt {item.key!r}: {exc}"
        if stating and not found:
            return (f"{name}: contrast {contrast.describe()} finds nothing to remove in any of the {stating} prompts "
                    "stating it; fix it or declare 'uniform'")
    return ""
