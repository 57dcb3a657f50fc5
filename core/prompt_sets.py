"""A run's prompt sets, loaded and checked against its config: the custom verifiers it names, the prompt set (and the
eval set), the reward weights and contrasts against the set's rewards, the run against the set's size and this
machine's memory. Every problem is a `ConfigError` naming its field (exit 2, one line; the app shows it by the form
input). What both trainers, `mrtpo train`'s early checks and the app's Launch form call before a run starts.

The config validates values (`core.config`), the tasks module reads prompt sets (`core.tasks`); this module is the
one place that puts them together. Never imports torch.
"""

from __future__ import annotations

from core import tasks, verifiers
from core.config import ConfigError, TrainConfig
from core.contrast import check_declared
from core.paths import resolve_path
from core.tasks import PromptItem


def load_prompts(cfg: TrainConfig, path: str | None = None) -> tuple[list[PromptItem], list[str]]:
    """Load custom verifiers and the prompt set, check the weights: `(items, reward_names)`.

    Any problem is a ConfigError naming its field (`custom_verifiers`, `prompt_set`, `reward_weights`,
    `reward_contrasts`, `prompts_per_step`, or the field a memory problem comes from).
    `path` loads another set (the eval set) with the same checks, reported against `eval_prompt_set`.
    """
    verifiers.set_time_limit(cfg.verifier_time_limit)
    if cfg.custom_verifiers:
        try:
            verifiers.load_custom(cfg.custom_verifiers)
        except Exception as exc:  # a user's module can fail in any way
            raise ConfigError("custom_verifiers", f"cannot load {cfg.custom_verifiers!r}: {exc}") from exc
    field_name = "prompt_set" if path is None else "eval_prompt_set"
    source = resolve_path(cfg.prompt_set if path is None else path)
    try:
        items = tasks.load_prompt_set(source)
    except Exception as exc:
        raise ConfigError(field_name, f"cannot load {str(source)!r}: {exc}") from exc
    if not items:
        raise ConfigError(field_name, f"{str(source)!r} holds no prompts")
    names = list(tasks.reward_names(items))
    if path is None:
        cfg.validate_against(names)
        cfg.validate_resources(items, source)
        message = check_declared(items, names, cfg.reward_contrasts)
        if message:
            raise ConfigError("reward_contrasts", message)
    return items, names
