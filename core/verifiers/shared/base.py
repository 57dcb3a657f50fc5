"""The verifier base class, its results and argument specs, and the time limit of a custom check (the family
registry, `build` and custom-verifier loading: `core.verifiers.shared.registry`).

A verifier is built from a constraint spec (family id + arguments) and is a pure function of
the response text: `verify(text) -> VerifyResult(score, spans)`. Never imports torch.
"""

from __future__ import annotations

import logging
import math
import random
import re
import signal
import threading
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

log = logging.getLogger(__name__)

Span = tuple[int, int]


class VerifierSpecError(ValueError):
    """An unknown constraint family or bad arguments for one; the message names the constraint
    and the valid choices."""


class VerifierExit(RuntimeError):
    """A custom verifier's code called `sys.exit` (or raised SystemExit) inside its check: the message names the
    family, its module and the exit code. Ends the run (`failed`), where any other exception of a check scores 0."""


class _CheckTimeout(BaseException):
    """Raised inside a custom check that ran past the time limit (a BaseException: a check's own `except
    Exception` does not swallow it)."""


class CheckInterrupted(BaseException):
    """Raised inside a custom check by a stop request (`interrupt_check`, called from the trainer's SIGTERM / SIGINT
    handler): the stop does not wait for a check that hangs. Propagates out of `Verifier.verify`."""


_IN_CHECK = [False]  # a custom family's check is running now (main thread)


def interrupt_check() -> None:
    """From a signal handler: raise `CheckInterrupted` in the custom check that is running, if one is."""
    if _IN_CHECK[0]:
        raise CheckInterrupted()


DEFAULT_TIME_LIMIT = 5.0  # seconds one call of a custom family's check may run (TrainConfig.verifier_time_limit)
_TIME_LIMIT = [DEFAULT_TIME_LIMIT]
_TIMED_OUT: set[str] = set()  # families already warned about (one warning per family per process)


def set_time_limit(seconds: float) -> None:
    """The time limit of one call of a custom family's check (0: none). Built-in families have none: they are
    this project's code, fast and tested. The limit is an interval timer (SIGALRM) in the main thread: a check
    running Python code is interrupted at the limit; one stuck inside a single C call (a huge regular expression,
    say) when that call returns. Off the main thread no limit applies."""
    _TIME_LIMIT[0] = max(float(seconds), 0.0)


def time_limit() -> float:
    return _TIME_LIMIT[0]


_LOADED_PATHS: dict[str, str] = {}  # file path -> module name of each custom file `load_custom` imported


def module_of(cls: type) -> str:
    """Where a family's code lives: the .py file `load_custom` imported it from, else its module name."""
    name = getattr(getattr(cls, "_source", cls), "__module__", "") or ""
    paths = {module: path for path, module in _LOADED_PATHS.items()}
    return paths.get(name, name)


def _is_builtin(cls: type) -> bool:
    return (getattr(getattr(cls, "_source", cls), "__module__", "") or "").startswith("core.verifiers.")


@contextmanager
def _limited(seconds: float):
    """Run the block with SIGALRM raising `_CheckTimeout` after `seconds` (nothing when 0, off the main thread, or
    when something else owns SIGALRM)."""
    main = threading.current_thread() is threading.main_thread()
    usable = seconds > 0 and main and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.SIG_IGN, None)
    if not usable:
        _IN_CHECK[0] = main
        try:
            yield
        finally:
            _IN_CHECK[0] = False
        return

    def expire(signum, frame):
        raise _CheckTimeout()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    _IN_CHECK[0] = True
    try:
        yield
    finally:
        _IN_CHECK[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class VerifyResult(NamedTuple):
    """`score` in [0, 1]; `spans`: sorted, non-overlapping character ranges `(start, end)` of the
    text that the check inspected. Unpacks as a tuple: `score, spans = v.verify(text)`."""

    score: float
    spans: tuple[Span, ...]


def normalize_spans(spans: Iterable[Span], length: int) -> tuple[Span, ...]:
    """Clip spans into [0, length], drop empty ones, sort, and merge the ones that overlap
    (touching spans stay separate, so each counted item keeps its own range)."""
    clipped = []
    for start, end in spans:
        start, end = max(0, int(start)), min(length, int(end))
        if start < end:
            clipped.append((start, end))
    clipped.sort()
    merged: list[Span] = []
    for start, end in clipped:
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return tuple(merged)


def clamp_score(score: Any) -> float:
    """Scores outside [0, 1] are clipped; NaN or non-numbers become 0."""
    try:
        value = float(score)
    except (TypeError, ValueError):
        return 0.0
    if math.isnan(value):
        return 0.0
    return min(1.0, max(0.0, value))


# ---------------------------------------------------------------------------------------------
# Argument specs


@dataclass(frozen=True)
class Param:
    """One keyword argument of a family: `convert(value)` returns the normalised value or raises
    ValueError/TypeError with a short reason; `choices` (if any) are listed in the error."""

    convert: Callable[[Any], Any]
    required: bool = True
    default: Any = None
    choices: tuple[Any, ...] = ()
    help: str = ""


def as_int(minimum: int = 0, maximum: int | None = None) -> Callable[[Any], int]:
    def convert(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise TypeError(f"expected an integer, got {value!r}")
        try:
            number = int(value) if not isinstance(value, float) else value
        except ValueError:
            raise ValueError(f"expected an integer, got {value!r}") from None
        if isinstance(number, float):
            if not number.is_integer():
                raise ValueError(f"expected an integer, got {value!r}")
            number = int(number)
        if number < minimum:
            raise ValueError(f"must be >= {minimum}, got {number}")
        if maximum is not None and number > maximum:
            shown = str(number) if len(str(number)) <= 24 else f"a {len(str(number))}-digit number"
            raise ValueError(f"must be <= {maximum}, got {shown}")
        return number

    return convert


def as_text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a non-empty string, got {value!r}")
    return value


def as_word_list(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(f"expected a non-empty list of strings, got {value!r}")
    return [as_text(item) for item in value]


def as_choice(choices: tuple[str, ...]) -> Callable[[Any], str]:
    def convert(value: Any) -> str:
        if value not in choices:
            raise ValueError(f"got {value!r}")
        return value

    return convert


# ---------------------------------------------------------------------------------------------
# The base class and the registry


class Verifier:
    """Base class of all verifiers. Subclasses set `params`, and implement `check(text)` (the raw
    check: may assume `text` is a str) and `sentence()`.

    Attributes: `family` (the IFEval id), `kwargs` (the normalised arguments, without `graded`),
    `graded` (bool), `is_task` (True for task-correctness families).

    >>> from core.verifiers import build
    >>> build("punctuation:no_comma").verify("a, b")
    VerifyResult(score=0.0, spans=((1, 2),))
    """

    family: ClassVar[str] = ""
    is_task: ClassVar[bool] = False
    has_graded: ClassVar[bool] = False
    graded_doc: ClassVar[str] = ""
    params: ClassVar[dict[str, Param]] = {}
    # Words (matched at a word start, case-insensitive) that mark the sentence of a free-form
    # prompt (IFEval) stating this constraint, with their weight: 2 for the word that names the
    # rule ("comma"), 1 for words of its follow-up sentences ("capital" in "No capital letters
    # are allowed." after a lowercase rule).
    cue_words: ClassVar[dict[str, int]] = {}
    # What `counterfactual` swaps ("keyword", "phrase", "operands"); "" for a family without an argument to
    # swap (the `swap` relevance then removes its sentence, as `js` does).
    swap_kind: ClassVar[str] = ""

    def __init__(self, graded: bool = False, **kwargs: Any) -> None:
        if not isinstance(graded, bool):
            raise VerifierSpecError(f"constraint {self.family!r}: 'graded' must be true or false, got {graded!r}")
        if graded and not self.has_graded:
            raise VerifierSpecError(f"constraint {self.family!r} has no graded variant; valid choices: graded=False")
        self.graded = graded
        self.kwargs = self._convert_kwargs(kwargs)

    def _convert_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        names = sorted(self.params) + (["graded"] if self.has_graded else [])
        valid = ", ".join(names) or "(none)"
        unknown = sorted(set(kwargs) - set(self.params))
        if unknown:
            raise VerifierSpecError(
                f"constraint {self.family!r}: unknown argument(s) {', '.join(unknown)}; valid arguments: {valid}"
            )
        out: dict[str, Any] = {}
        for name, param in self.params.items():
            if name not in kwargs:
                if param.required:
                    raise VerifierSpecError(
                        f"constraint {self.family!r}: missing argument {name!r} ({param.help or 'required'});"
                        f" valid arguments: {valid}"
                    )
                out[name] = param.default
                continue
            try:
                out[name] = param.convert(kwargs[name])
            except (TypeError, ValueError) as exc:
                # The converter's message says what was expected and what was given ("expected an integer,
                # got 'seven'"); only a choice list adds to it.
                choices = f"; valid choices: {', '.join(repr(c) for c in param.choices)}" if param.choices else ""
                raise VerifierSpecError(f"constraint {self.family!r}: bad argument {name!r}: {exc}{choices}") from None
        return out

    # -- the interface ------------------------------------------------------------------------

    def sentence(self) -> str:
        """The constraint sentence a prompt states for this verifier ("" for a task verifier)."""
        return ""

    def check(self, text: str) -> tuple[float, Iterable[Span]]:
        """The raw check on a str; returns (score, spans). Built-in checks never raise."""
        raise NotImplementedError

    def counterfactual(self, part: str, rng: random.Random) -> str | None:
        """`part` (the prompt text stating this constraint: its sentence, or the task text for a task
        verifier) with the constraint's argument replaced by another value of the same kind drawn from
        `rng`, for the `swap` relevance (docs/METHOD.md, "Relevance variants"). None: this family has no
        argument to swap, or `part` does not contain it; the caller then removes `part` instead."""
        return None

    def verify(self, text: Any) -> VerifyResult:
        """Score and inspected spans of `text`; never raises (a non-string scores 0, no spans;
        an exception inside a custom check is logged and scores 0).

        An empty or whitespace-only response scores 0 with no spans on every verifier, before `check` runs:
        IFEval counts an instruction as followed only when `response.strip()` is non-empty (its
        `test_instruction_following_strict`), so "less than N words", "no commas", "no forbidden word" and the
        like fail on saying nothing. A reward that paid for an empty answer would teach a policy to give one.

        >>> from core.verifiers import build
        >>> build("punctuation:no_comma").verify("  \\n")
        VerifyResult(score=0.0, spans=())
        """
        if not isinstance(text, str) or not text.strip():
            return VerifyResult(0.0, ())
        if _is_builtin(type(self)):
            try:
                score, spans = self.check(text)
                return VerifyResult(clamp_score(score), normalize_spans(spans, len(text)))
            except Exception:  # noqa: BLE001 - the contract: verify never raises on any text
                log.exception("verifier %s raised on a text of %d characters; scoring 0", self.family, len(text))
                return VerifyResult(0.0, ())
        limit = time_limit()
        try:
            with _limited(limit):
                score, spans = self.check(text)
            return VerifyResult(clamp_score(score), normalize_spans(spans, len(text)))
        except _CheckTimeout:
            if self.family not in _TIMED_OUT:
                _TIMED_OUT.add(self.family)
                log.warning("verifier %s (%s) ran past its time limit of %g s on a text of %d characters; scoring 0 "
                            "(later calls past the limit score 0 without a warning; verifier_time_limit sets it)",
                            self.family, module_of(type(self)), limit, len(text))
            return VerifyResult(0.0, ())
        except SystemExit as exc:  # sys.exit in a check would end the trainer with no word: end the run with one
            raise VerifierExit(f"verifier {self.family} ({module_of(type(self))}) called sys.exit({exc.code!r}) in "
                               "its check; a check returns a score, it must not exit") from None
        except Exception:  # noqa: BLE001 - the contract: verify never raises on any text
            log.exception("verifier %s raised on a text of %d characters; scoring 0", self.family, len(text))
            return VerifyResult(0.0, ())

    def prompt_cues(self) -> tuple[list[str], dict[str, int]]:
        """(argument strings, weighted cue words) used to find the sentence of a free-form
        prompt that states this constraint: argument strings (keywords, phrases, "at least 300")
        count 3 each, cue words their weight."""
        return [], dict(self.cue_words)

    def to_spec(self) -> dict[str, Any]:
        """The JSON constraint spec this verifier was built from (`build(**spec)` rebuilds it)."""
        kwargs = {k: v for k, v in self.kwargs.items() if v is not None}
        if self.graded:
            kwargs["graded"] = True
        return {"family": self.family, "kwargs": kwargs}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        graded = ", graded=True" if self.graded else ""
        return f"{type(self).__name__}({self.family!r}{', ' if args else ''}{args}{graded})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Verifier) and (self.family, self.kwargs, self.graded) == (
            other.family,
            other.kwargs,
            other.graded,
        )

    def __hash__(self) -> int:
        return hash((self.family, repr(sorted(self.kwargs.items())), self.graded))


def swap_values(part: str, olds: Iterable[str], pool: Iterable[str], rng: random.Random) -> str | None:
    """`part` with every occurrence (literal, case-insensitive) of each value in `olds` replaced by a value
    of `pool` drawn from `rng`: distinct draws, none equal (case-insensitively) to an old value. None when
    an old value does not occur in `part` or the pool has too few other values.

    >>> swap_values("Include the keyword light.", ["light"], ["light", "stone"], random.Random(0))
    'Include the keyword stone.'
    """
    olds = [o for o in olds if o]
    taken = {o.lower() for o in olds}
    choices = sorted({v for v in pool if v.lower() not in taken})
    if not olds or len(choices) < len(olds) or any(o.lower() not in part.lower() for o in olds):
        return None
    new = {}
    for old in olds:
        pick = rng.choice(choices)
        choices.remove(pick)
        new[old.lower()] = pick
    pattern = re.compile("|".join(re.escape(o) for o in sorted(olds, key=len, reverse=True)), re.IGNORECASE)
    return pattern.sub(lambda m: new[m.group().lower()], part)
