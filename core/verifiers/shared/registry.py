"""The family registry: `register` (a Verifier subclass or a plain function), `families`, `family_class`,
`build`, and `load_custom` (a module or .py file that registers families)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from core.verifiers.shared.base import _LOADED_PATHS, Param, Span, Verifier, VerifierSpecError

_REGISTRY: dict[str, type[Verifier]] = {}


def families() -> list[str]:
    """All registered family ids, sorted."""
    return sorted(_REGISTRY)


def family_class(family_id: str) -> type[Verifier]:
    if not isinstance(family_id, str) or family_id not in _REGISTRY:
        raise VerifierSpecError(f"unknown constraint family {family_id!r}; valid choices: {', '.join(families())}")
    return _REGISTRY[family_id]


def build(family_id: str, **kwargs: Any) -> Verifier:
    """Build the verifier of a constraint spec. Raises `VerifierSpecError` on an unknown family
    or bad arguments.

    >>> build("keywords:existence", keywords=["river"]).verify("The River runs.")
    VerifyResult(score=1.0, spans=((4, 9),))
    """
    return family_class(family_id)(**kwargs)


def _origin(obj: Any) -> tuple[str, str]:
    return getattr(obj, "__module__", ""), getattr(obj, "__qualname__", "")


def register(
    family_id: str,
    *,
    sentence: str | Callable[..., str] | None = None,
    params: dict[str, Param] | None = None,
    is_task: bool = False,
) -> Callable[[Any], Any]:
    """Decorator that registers a constraint family under `family_id`.

    Decorate either a `Verifier` subclass, or a plain function `fn(text, **kwargs)` returning a
    score or `(score, spans)`. For a function, `sentence` is a format string over the kwargs (or a
    callable taking them) and `params` the accepted arguments (default: any keyword arguments,
    passed through unchecked). Registering a different object under an existing id raises
    `VerifierSpecError`; re-registering the same class or function (a module imported twice) is
    allowed. See `sample_data/custom_verifier_example.py`.
    """
    if not isinstance(family_id, str) or ":" not in family_id or "#" in family_id:
        # '#' marks a repeated statement in a reward name ("family#2", core.tasks.reward_name)
        raise VerifierSpecError(f"family id must look like 'group:name' (without '#'), got {family_id!r}")

    def decorator(obj: Any) -> Any:
        if isinstance(obj, type) and issubclass(obj, Verifier):
            cls = obj
            cls.family = family_id
        elif callable(obj):
            cls = _function_verifier(family_id, obj, sentence, params, is_task)
        else:
            raise VerifierSpecError(f"register({family_id!r}) decorates a Verifier subclass or a function")
        existing = _REGISTRY.get(family_id)
        if existing is not None and _origin(getattr(existing, "_source", existing)) != _origin(obj):
            raise VerifierSpecError(
                f"constraint family {family_id!r} is already registered by "
                f"{'.'.join(_origin(getattr(existing, '_source', existing)))}"
            )
        cls._source = obj
        _REGISTRY[family_id] = cls
        return obj

    return decorator


def _function_verifier(
    family_id: str,
    fn: Callable[..., Any],
    sentence: str | Callable[..., str] | None,
    params: dict[str, Param] | None,
    is_task: bool,
) -> type[Verifier]:
    class FunctionVerifier(Verifier):
        __doc__ = fn.__doc__

        def _convert_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
            if params is None:
                return dict(kwargs)
            return super()._convert_kwargs(kwargs)

        def sentence(self) -> str:
            if sentence is None:
                return ""
            if callable(sentence):
                return str(sentence(**self.kwargs))
            return sentence.format(**self.kwargs)

        def check(self, text: str) -> tuple[float, Iterable[Span]]:
            result = fn(text, **self.kwargs)
            if isinstance(result, tuple) and len(result) == 2:
                return result[0], result[1] or ()
            return result, ()

    FunctionVerifier.family = family_id
    FunctionVerifier.is_task = is_task
    FunctionVerifier.params = dict(params or {})
    FunctionVerifier.__name__ = FunctionVerifier.__qualname__ = f"FunctionVerifier[{family_id}]"
    if sentence is not None and not callable(sentence):
        # Fail at registration, not at first use, when the sentence names a missing argument.
        try:
            sentence.format(**{name: f"{{{name}}}" for name in (params or {})})
        except (KeyError, IndexError) as exc:
            if params is not None:
                raise VerifierSpecError(f"register({family_id!r}): sentence names unknown argument {exc}") from None
    return FunctionVerifier



def load_custom(module_or_path: str) -> list[str]:
    """Import a module that registers custom families (a dotted module name, or a path to a .py
    file) and return the family ids it added. Loading the same file twice is a no-op.
    Raises `VerifierSpecError` when it cannot be found or imported."""
    before = set(_REGISTRY)
    target = str(module_or_path).strip()
    if not target:
        raise VerifierSpecError("custom_verifiers: empty module name")
    if target.endswith(".py") or "/" in target or "\\" in target:
        path = Path(target).expanduser().resolve()
        if not path.is_file():
            raise VerifierSpecError(f"custom_verifiers: no such file {str(path)!r}")
        key = str(path)
        if key in _LOADED_PATHS:
            return []
        name = "mrtpo_custom_" + "".join(c if c.isalnum() else "_" for c in path.stem) + f"_{abs(hash(key)):x}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise VerifierSpecError(f"custom_verifiers: cannot import {str(path)!r}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except VerifierSpecError:
            sys.modules.pop(name, None)
            raise
        except SystemExit as exc:  # the module's sys.exit would end the trainer silently with its code
            sys.modules.pop(name, None)
            raise VerifierSpecError(f"custom_verifiers: importing {str(path)!r} called sys.exit({exc.code!r}); a "
                                    "verifier module registers families, it must not exit") from None
        except Exception as exc:
            sys.modules.pop(name, None)
            raise VerifierSpecError(f"custom_verifiers: importing {str(path)!r} failed: {exc!r}") from exc
        _LOADED_PATHS[key] = name
    else:
        try:
            importlib.import_module(target)
        except ImportError as exc:
            raise VerifierSpecError(f"custom_verifiers: cannot import module {target!r}: {exc}") from exc
        except SystemExit as exc:
            raise VerifierSpecError(f"custom_verifiers: importing module {target!r} called sys.exit({exc.code!r}); "
                                    "a verifier module registers families, it must not exit") from None
        except Exception as exc:
            raise VerifierSpecError(f"custom_verifiers: importing module {target!r} failed: {exc!r}") from exc
    return sorted(set(_REGISTRY) - before)
