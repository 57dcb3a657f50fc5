"""The Launch form's fields, generated from `TrainConfig`: its sections, types, defaults, choices and
field docs (as `core.config.add_config_arguments` builds the command line), plus a small table of
widget overrides (short labels, steps, number formats, which fields sit under "Advanced").

Pure Python, no Streamlit: the page (`pages/launch.py`) draws one widget per `FormField` and reads the
values back with `values_from_state`. Never imports torch.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.config import FIELD_CHOICES, TrainConfig, field_docs, field_types

# Fields the page draws itself: the prompt set (its rewards decide the weight inputs), the model (a
# preset or a folder), the eval set (a file picker), the reward weights (one input per reward), the
# custom verifiers module (a path for the command line), the runs directory (the app's own) and the reward scales
# (one input per reward, under Advanced).
PAGE_DRAWN = ("model", "prompt_set", "eval_prompt_set", "reward_weights", "custom_verifiers", "runs_dir",
              "reward_contrasts", "reward_scales")
# not offered here yet: reward_contrasts (mrtpo train --reward-contrasts)

# field -> widget settings that differ from what the type gives (label, step, format, advanced)
OVERRIDES: dict[str, dict[str, Any]] = {
    "lam": {"label": "λ (routing strength)", "step": 0.1},
    "relevance": {"label": "Relevance"},
    "routing": {"label": "Routing source"},
    "group_size": {"label": "G (responses per prompt)"},
    "lr": {"label": "Learning rate", "step": 1e-5, "format": "%.1e"},
    "max_new_tokens": {"step": 8},
    "run_name": {"label": "Run name (empty: automatic)", "max_chars": 64},
    "w_max": {"label": "w_max (weight cap)", "step": 0.5, "advanced": True},
    "routing_clip": {"label": "Weight above w_max", "advanced": True},
    "sharpen": {"label": "Sharpen (exponent on u)", "step": 0.5, "advanced": True},
    "auto_evidence": {"label": "auto: whose evidence (empty: the model's own, else tiny-multi)", "max_chars": 64,
                      "advanced": True},
    "eps": {"step": 1e-4, "format": "%.1e", "advanced": True},
    "verifier_time_limit": {"label": "Custom verifier time limit (s)", "step": 1.0, "advanced": True},
    "temperature": {"step": 0.1, "advanced": True},
    "kl_beta": {"label": "KL β", "step": 0.01, "advanced": True},
    "clip_range": {"step": 0.05, "advanced": True},
    "inner_epochs": {"advanced": True},
    "max_grad_norm": {"label": "Max grad norm (0: off)", "step": 0.5, "advanced": True},
    "checkpoint_every": {"label": "Checkpoint every (steps)", "step": 5, "advanced": True},
    "keep_checkpoints": {"label": "Checkpoints kept (0: all)", "advanced": True},
    "credit_samples": {"label": "Credit map samples per step (0: all)", "step": 16, "advanced": True},
    "credit_every": {"label": "Credit map every (steps)", "advanced": True},
    "replay_chunk": {"label": "Replay chunk (samples per pass)", "step": 4, "advanced": True},
    "replay_pairs": {"label": "Replay pairs", "advanced": True},
    "replay_dtype": {"label": "Replay precision", "advanced": True},
    "eval_samples": {"label": "Eval samples per prompt", "advanced": True},
    "eval_prompts": {"label": "Eval prompts", "advanced": True},
    "backend": {"label": "Engine (backend)"},
    "nproc": {"label": "Processes (trl only)", "step": 1},
}


@dataclass(frozen=True)
class FormField:
    """One widget of the form: `kind` is select | int | float | text."""

    name: str
    label: str
    kind: str
    section: str
    help: str
    default: Any
    options: tuple[str, ...] = ()
    step: float | None = None
    format: str | None = None
    max_chars: int | None = None
    advanced: bool = False

    @property
    def key(self) -> str:
        return widget_key(self.name)


PREFIX = "lf_"  # session-state key of a field's widget: lf_<TrainConfig field>


def widget_key(name: str) -> str:
    return PREFIX + name


def _kind(tp: Any) -> str:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    base = args[0] if args else tp
    return {int: "int", float: "float", str: "text"}.get(base, "text")


def _default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]


def form_fields() -> list[FormField]:
    """Every TrainConfig field the form draws, in class order, with its section and doc line as help."""
    docs, types = field_docs(), field_types()
    out = []
    for f in dataclasses.fields(TrainConfig):
        if f.name in PAGE_DRAWN:
            continue
        section, doc = docs.get(f.name, ("", ""))
        over = OVERRIDES.get(f.name, {})
        options = FIELD_CHOICES.get(f.name, ())
        out.append(FormField(
            name=f.name, label=over.get("label", f.name.replace("_", " ").capitalize()),
            kind="select" if options else _kind(types[f.name]), section=section, help=doc, default=_default(f),
            options=tuple(options), step=over.get("step"), format=over.get("format"),
            max_chars=over.get("max_chars"), advanced=over.get("advanced", False),
        ))
    return out


def sections(fields: list[FormField], advanced: bool) -> dict[str, list[FormField]]:
    """The fields of the main part (advanced=False) or of the Advanced expander, grouped by section."""
    out: dict[str, list[FormField]] = {}
    for field in fields:
        if field.advanced == advanced:
            out.setdefault(field.section, []).append(field)
    return out


def values_from_state(state: Mapping[str, Any], fields: list[FormField]) -> dict[str, Any]:
    """TrainConfig values from the widgets' session state: text stripped, fields without a value left out
    (they keep TrainConfig's default)."""
    values = {}
    for field in fields:
        v = state.get(field.key)
        if isinstance(v, str):
            v = v.strip()
        if v is None:
            continue
        values[field.name] = v
    return values
