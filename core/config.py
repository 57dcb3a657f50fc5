"""The training configuration: one validated dataclass, its JSON form and its command line.

`TrainConfig(**fields)` checks every value on construction and raises `ConfigError` (a
`ValueError` whose `.field` names the offending field, so the app can show the message next to
its form input). Checks that need the prompt set (reward weights naming real rewards) live in
`TrainConfig.validate_against(reward_names)` and `validate_resources(items)`; `core.prompt_sets.load_prompts(cfg)`
loads a run's prompt sets and runs them (the config validates values, it loads no file).

The command line is built from the fields: `--<field-name>` for every field (`_` -> `-`), its
help text taken from the docstring line under the field.

Never imports torch or transformers, not even indirectly: the app validates its form with it.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import difflib
import functools
import importlib.metadata
import importlib.util
import inspect
import json
import math
import os
import re
import sys
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core import resources
from core.choices import (  # noqa: F401 (re-exported: the config's field choices)
    BACKENDS,
    DEFAULT_RELEVANCE,
    DEVICES,
    METHODS,
    RELEVANCES,
    REPLAY_DTYPES,
    REPLAY_PAIRS,
    ROUTED_ESTIMATORS,
    ROUTING_CLIPS,
    ROUTING_SHUFFLES,
    ROUTINGS,
    routes_by_replay,
    routing_source,
)
from core.paths import RUN_NAME_RULE, is_run_name, resolve_path
from core.presets import MODEL_PRESETS

# The TRL the integration is written against: it overrides private methods of GRPOTrainer 1.16.
TRL_REQUIREMENT = "trl>=1.16,<1.17"
TRL_MINOR = "1.16"
# Fields whose value is one of a fixed set (the command line and the app's form offer these).
FIELD_CHOICES: dict[str, tuple[str, ...]] = {"method": METHODS, "routing": ROUTINGS, "relevance": RELEVANCES,
                                             "routing_clip": ROUTING_CLIPS, "routing_shuffle": ROUTING_SHUFFLES, "replay_pairs": REPLAY_PAIRS,
                                             "replay_dtype": REPLAY_DTYPES,
                                             "device": DEVICES, "backend": BACKENDS}
# Keys that config.json of a run holds besides the fields; from_dict() skips them.
STORE_KEYS = ("reward_names", "reward_routes", "schema_version")


class ConfigError(ValueError):
    """A config value that cannot be used; `field` names it (None when the problem spans fields)."""

    def __init__(self, field: str | None, message: str):
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)
        self.message = message


@dataclass
class TrainConfig:
    """Everything one training run needs; the run store records it as config.json."""

    # --- model and data ---
    model: str = "tiny-instruct"
    """policy to train: a preset (tiny-instruct, tiny-multi, smollm2-135m) or a local Hugging Face folder; the tiny ones run on a laptop CPU"""
    prompt_set: str = "sample_data/prompts/default.jsonl"
    """JSONL prompt set (native or IFEval format); the default matches tiny-instruct's training distribution"""
    eval_prompt_set: str | None = None
    """optional held-out JSONL prompt set, scored at every checkpoint (eval/... metrics); none by default to save time"""
    eval_samples: int = 4
    """responses sampled (at `temperature`, fixed seed) per held-out prompt in each evaluation; rates are over all of them"""
    eval_prompts: int = 32
    """held-out prompts scored in each evaluation (the first ones of the eval set); 32 x 4 samples take seconds on tiny-instruct"""
    custom_verifiers: str | None = None
    """module name or .py path that registers extra verifier families before the prompt set loads"""
    verifier_time_limit: float = 5.0
    """seconds one call of a custom verifier's check may run; past it the sample scores 0 for that reward (one warning per family); 0: no limit"""

    # --- method ---
    method: str = "mrtpo"
    """advantage estimator: grpo (sum rewards, then normalise), gdpo (normalise each reward per group) or mrtpo (GDPO routed to tokens)"""
    routing: str = "replay"
    """mrtpo only: where each reward's credit goes; replay (contrastive JS), span (verifier spans, an oracle) or uniform (= gdpo)"""
    relevance: str = DEFAULT_RELEVANCE
    """mrtpo replay only: token relevance; js (JS distance to the prompt without the constraint), swap (JS to the prompt with the constraint's keyword/phrase/operands swapped), logp (|log-prob change| of the sampled token); *_specific: minus the other rewards' mean; auto: swap for the families whose argument the policy reads (mrtpo bench contrast), remove for the rest"""
    auto_evidence: str = ""
    """mrtpo relevance auto only: whose measurements pick each family's variant (core/evidence/NAME.json, core.auto_evidence); empty: the model's own evidence when one is shipped, else tiny-multi; a run records the name it used"""
    sharpen: float = 1.0
    """exponent on the normalised relevance u before mixing; 1.0 leaves it as measured, >1 concentrates credit"""
    lam: float = 1.0
    """routing strength in [0, 1]: w = clip((1 - lam) + lam * u, 0, w_max); 1 is pure routing, 0 reduces mrtpo to gdpo"""
    w_max: float = 5.0
    """upper clip of a routing weight (>= 1); 5 bounds how much one token can take of a reward's credit"""
    routing_clip: str = "clip"
    """weight above w_max: clip (dropped; the default: study v3 trained better with it, +0.013 held-out all-satisfied over mass, docs/results/study-v3.md) or mass (handed to the other tokens, so each reward keeps mean weight 1: all its advantage mass; with w_max 5 clip drops 60-65% of it)"""
    reward_weights: dict[str, float] = field(default_factory=dict)
    """weight per reward name (JSON object, or name=w,name=w on the command line); names left out get 1.0"""
    routing_shuffle: str = "off"
    """control (docs/METHOD.md "Controls"): on permutes each (sample, reward)'s routing weights at random over the response's tokens (same weights and mass, random positions); off routes as computed"""
    routing_shuffle_seed: int = 0
    """seed of routing_shuffle's permutations (step s uses seed * 1000003 + s); recorded so the permutations can be redrawn"""
    entropy_q: float = 0.2
    """routing entropy only (a control): the fraction of each response's tokens, those of highest policy entropy, that get the routing weight; 0.2 as in Wang et al. 2025 (top-20% entropy tokens)"""
    reward_scales: dict[str, float] = field(default_factory=dict)
    """gdpo only (scale-matched control): factor c_k on reward k's group advantage after GDPO's batch statistics, A_i = (sum_k w_k c_k a[k,i] - mu) / (sigma + eps) (reward_weights act before them and are normalised away); names left out get 1.0"""
    reward_contrasts: dict[str, str] = field(default_factory=dict)
    """mrtpo replay only: per reward name, the prompt part replay removes instead of the verifier's own rule (core.contrast; docs/TRL.md): match:REGEX, last_sentence, question (the prompt reduced to the other constraints' sentences), uniform (no replay), verifier; a JSON object, or name=spec,name=spec; names left out use their verifier's"""
    eps: float = 1e-4
    """added to standard deviations in the normalisations; 1e-4 keeps zero-spread groups at advantage 0"""

    # --- rollout ---
    group_size: int = 8
    """G, responses sampled per prompt (>= 2: advantages compare responses inside a group); 8 as in GRPO papers"""
    prompts_per_step: int = 4
    """prompts per optimizer step; the batch is prompts_per_step * group_size responses"""
    max_new_tokens: int = 48
    """longest response in tokens (it ends earlier at eos); tiny-instruct's answers take 20-40 tokens"""
    temperature: float = 1.0
    """sampling temperature (top_k=0, top_p=1: the full distribution); 1.0 samples the policy itself"""

    # --- optimisation ---
    steps: int = 50
    """optimizer steps of the run; 50 steps of tiny-instruct take a few minutes on a laptop CPU"""
    lr: float = 5e-5
    """AdamW learning rate; small models move visibly within 50 steps at 5e-5, use 1e-6..1e-5 for >1B models"""
    clip_range: float = 0.2
    """PPO clip epsilon on the importance ratio against the rollout policy; 0.2 as in PPO"""
    kl_beta: float = 0.0
    """weight of the KL penalty to a frozen copy of the initial policy; 0 skips the reference model (as in DAPO/Dr. GRPO)"""
    inner_epochs: int = 1
    """passes over each batch of rollouts; 1 is on-policy (ratio 1 on the first pass)"""
    max_grad_norm: float = 1.0
    """clip the gradient's global norm to this value before each step; 0 disables clipping"""
    seed: int = 0
    """seeds prompt order, sampling and initialisation; the same seed on CPU gives the same metrics"""

    # --- replay ---
    replay_chunk: int = 16
    """samples per forward pass in replay and in the update (memory bound); 16 fits a 135M model on 8 GB"""
    replay_pairs: str = "nonzero_adv"
    """(sample, reward) pairs replay scores: nonzero_adv (where the reward's group advantage is nonzero: the rest cannot change any token advantage) or all (JS maps for every reward, slower)"""
    replay_dtype: str = "auto"
    """precision of replay's contrastive passes: auto (the run's: bf16 autocast on CUDA, fp32 on CPU), float32, or bfloat16 (bf16 autocast on any device: replay 10-25% faster on one thread of a CPU with AVX512-BF16, relevance within about 2% of fp32; docs/METHOD.md "Replay precision")"""

    # --- run and output ---
    runs_dir: str = "runs"
    """folder that holds run folders (the app lists it)"""
    run_name: str = ""
    """name of the run folder ([A-Za-z0-9._-], up to 64 chars); empty picks <method>-<date>-<time>"""
    checkpoint_every: int = 25
    """save the policy and optimizer every this many steps (and always at the end); 0 saves only at the end"""
    keep_checkpoints: int = 3
    """keep the newest this many checkpoints, older ones are deleted as new ones are saved (the run's last one is always the newest); 0 keeps all"""
    credit_samples: int = 256
    """samples per step whose token-level credit map is stored: all when the batch has at most this many (0: always all), else whole groups keeping both outcomes of each reward (docs/CONTRACTS.md "What a run stores")"""
    credit_every: int = 1
    """store the token-level credit map of step 1, every this-many-th step after it and the last step (metrics are stored every step)"""
    device: str = "auto"
    """auto (cuda when available, else cpu), cpu or cuda; cuda runs under bf16 autocast"""

    # --- engine ---
    backend: str = "builtin"
    """builtin (the single-process reference loop) or trl (TRL's GRPOTrainer with MRTPO's token advantages; several processes, accelerate/DeepSpeed)"""
    nproc: int = 1
    """processes of a trl run (torch.distributed.run: gloo on CPU, NCCL on GPU); each takes prompts_per_step / nproc prompts' samples"""

    def __post_init__(self) -> None:
        _coerce_types(self)
        for name, check in _CHECKS:
            message = check(getattr(self, name), self)
            if message:
                raise ConfigError(name, message)
        for name, rule in _RULES:
            message = rule(self)
            if message:
                raise ConfigError(name, message)
        if self.method == "mrtpo" and self.relevance == "auto" and not self.auto_evidence:
            from core import auto_evidence

            self.auto_evidence = auto_evidence.for_model(self.model)  # recorded in config.json
        if self.method == "mrtpo" and self.relevance == "auto" and self.backend == "trl":
            from core import auto_evidence

            message = auto_evidence.one_pass_error(self.auto_evidence)
            if message:
                raise ConfigError("auto_evidence", message)

    # ---- reward-dependent checks ----
    def validate_against(self, reward_names: list[str]) -> None:
        """Check `reward_weights` against the rewards of the prompt set (ConfigError on mismatch)."""
        message = reward_weights_error(self.reward_weights, reward_names)
        if message:
            raise ConfigError("reward_weights", message)
        unknown = [n for n in self.reward_scales if n not in reward_names]
        if unknown:
            raise ConfigError("reward_scales", f"unknown reward name(s) {unknown}; the prompt set's rewards are "
                                               f"{list(reward_names)}")
        unknown = [n for n in self.reward_contrasts if n not in reward_names]
        if unknown:
            raise ConfigError("reward_contrasts", f"{', '.join(map(repr, unknown))} is not a reward of the prompt set; "
                                                  f"its rewards are {', '.join(reward_names)}")

    def reward_weight(self, name: str) -> float:
        return float(self.reward_weights.get(name, 1.0))

    def reward_scale_vector(self, reward_names: list[str]) -> list[float] | None:
        """c_k per reward in `reward_names` order (names left out: 1.0); None without reward_scales."""
        return [float(self.reward_scales.get(n, 1.0)) for n in reward_names] if self.reward_scales else None

    def validate_resources(self, items: list, source: str | os.PathLike = "the prompt set") -> None:
        """Check the run against its prompt set and this machine (ConfigError): `prompts_per_step` at most the
        set's prompts (more would repeat prompts within a step), and the memory estimate within a share of the
        available memory (`core.resources.memory_problem`)."""
        if self.prompts_per_step > len(items):
            raise ConfigError("prompts_per_step", f"{self.prompts_per_step} prompts per step, but {str(source)!r} "
                              f"holds {len(items)}; a step would repeat prompts. Use at most {len(items)}")
        field_name, message = resources.memory_problem(self, items)
        if message:
            raise ConfigError(field_name, message)

    # ---- serialisation ----
    def to_dict(self) -> dict[str, Any]:
        return {f.name: _copy_value(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any], **overrides: Any) -> TrainConfig:
        """Build from a dict (config.json of a run works: its store keys are skipped); unknown keys are errors."""
        if not isinstance(data, dict):
            raise ConfigError(None, f"a config must be a JSON object, got {type(data).__name__}")
        merged = {k: v for k, v in data.items() if k not in STORE_KEYS}
        if "schema_version" in data and "routing_clip" not in data:
            merged["routing_clip"] = "clip"  # a run recorded before the field: its weights were clipped
        merged.update(overrides)
        names = [f.name for f in dataclasses.fields(cls)]
        for key in merged:
            if key not in names:
                close = difflib.get_close_matches(key, names, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else f"; valid fields: {', '.join(names)}"
                raise ConfigError(key, f"unknown config field{hint}")
        return cls(**merged)

    @classmethod
    def from_json(cls, path: str | os.PathLike, **overrides: Any) -> TrainConfig:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(None, f"cannot read config file {str(path)!r}: {exc.strerror or exc}") from exc
        except json.JSONDecodeError as exc:
            from core.tasks import json_error_text

            raise ConfigError(None, f"config file {str(path)!r} is not valid JSON: {json_error_text(exc)}") from exc
        return cls.from_dict(data, **overrides)


def reward_weights_error(weights: dict[str, float], reward_names: list[str]) -> str:
    """What is wrong with reward weights by name for a run whose rewards are `reward_names` ("" when fine)."""
    unknown = [name for name in weights if name not in reward_names]
    if unknown:
        return f"unknown reward name(s) {unknown}; the prompt set's rewards are {list(reward_names)}"
    if reward_names and all(float(weights.get(n, 1.0)) == 0 for n in reward_names):
        return "every reward has weight 0, so no reward would be learned; raise one"
    return ""


# ---------------------------------------------------------------- value checks
# Each check returns an error message (what is wrong and how to fix it) or "" when the value is fine.


def _model_check(v: str, cfg: TrainConfig) -> str:
    if not v:
        return f"give a preset ({', '.join(MODEL_PRESETS)}) or a local Hugging Face model folder"
    if v in MODEL_PRESETS:
        return ""
    p = resolve_path(v)
    if p.is_dir():
        if not (p / "config.json").exists():
            return f"{v!r} is a folder without config.json; point it at a save_pretrained folder"
        return resources.safetensors_problem(p)
    return (
        f"{v!r} is neither a preset ({', '.join(MODEL_PRESETS)}) nor an existing model folder "
        "(nothing is downloaded: give a local save_pretrained folder)"
    )


def _readable_file(v: str | None, optional: bool) -> str:
    if v is None or v == "":
        return "" if optional else "give the path of a JSONL prompt set"
    p = resolve_path(v)
    if not p.is_file():
        return f"no such file {v!r}; give the path of a JSONL prompt set"
    if not os.access(p, os.R_OK):
        return f"{v!r} is not readable; check its permissions"
    return ""


def _custom_check(v: str | None, cfg: TrainConfig) -> str:
    if not v:
        return ""
    if v.endswith(".py"):
        return "" if resolve_path(v).is_file() else f"no such file {v!r}; give a .py path or an importable module name"
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", v):
        return f"{v!r} is neither a .py file nor a module name like my_pkg.verifiers"
    return ""


def _auto_evidence_check(v: Any, cfg: Any) -> str | None:
    """"" (the model's evidence, else tiny-multi) or a shipped evidence name (core/evidence/NAME.json)."""
    from core import auto_evidence

    if v and v not in auto_evidence.names():
        return f"no auto evidence {v!r}; shipped: {', '.join(auto_evidence.names())} (or leave it empty)"
    return None


def _choice(valid: tuple[str, ...]):
    def check(v: str, cfg: TrainConfig) -> str:
        if v in valid:
            return ""
        close = difflib.get_close_matches(str(v), valid, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"unknown value {v!r}{hint}; choose one of: {', '.join(valid)}"

    return check


INT_MAX = 2**31 - 1
TEMPERATURE_RANGE = (1e-2, 1e2)
LR_MAX = 1.0
STEPS_MAX = 10_000_000
SEED_MAX = 2**32 - 1  # counts are int32 in the run store (credit maps) and in torch's index arithmetic


def _at_least(lo: float, why: str = "", strict: bool = False, hi: float | None = None, why_hi: str = ""):
    """A field's range check: >= lo (> lo when `strict`) and <= hi (INT_MAX for whole-number fields by default)."""
    def check(v: float, cfg: TrainConfig) -> str:
        if not math.isfinite(v):
            return f"must be a finite number, got {v}"
        if v < lo or (strict and v == lo):
            relation = ">" if strict else ">="
            return f"must be {relation} {lo:g}, got {v:g}" + (f"; {why}" if why else "")
        top = hi if hi is not None else (INT_MAX if isinstance(v, int) else None)
        if top is not None and v > top:
            return f"must be <= {_num(top)}, got {_num(v)}" + (f"; {why_hi}" if why_hi else "")
        return ""

    return check


def _num(v: float) -> str:
    """A number as a message shows it: whole numbers in full (up to 20 digits), others as %g."""
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) < 1e20):
        text = str(int(v))
        return text if len(text) <= 20 else f"{int(v):.3e}"
    return f"{v:g}"


CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


def model_context(model: str) -> int | None:
    """The longest sequence (prompt + response tokens) the model takes, from its config.json (None when unknown:
    a preset not built yet, or a config without such a key). Reads the file only; no torch."""
    data = resources.model_config(model)
    for key in CONTEXT_KEYS:
        v = data.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def _context_rule(cfg: TrainConfig) -> str:
    context = model_context(cfg.model)
    if context is not None and cfg.max_new_tokens >= context:
        return (f"{cfg.max_new_tokens} new tokens do not fit the model's context of {context} tokens (prompt and "
                f"response together); use fewer than {context}")
    return ""


def _lam_check(v: float, cfg: TrainConfig) -> str:
    if not (math.isfinite(v) and 0.0 <= v <= 1.0):
        return f"must lie in [0, 1] (0 = uniform weights, 1 = pure routing), got {v}"
    return ""


def _weights_check(v: dict[str, float], cfg: TrainConfig) -> str:
    for name, w in v.items():
        if not isinstance(name, str) or not name:
            return f"reward names must be non-empty strings, got {name!r}"
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w):
            return f"weight of {name!r} must be a finite number, got {w!r}"
        if w < 0:
            return f"weight of {name!r} is {w:g}; weights must be >= 0 (set 0 to ignore a reward)"
    return ""


def _contrasts_check(v: dict[str, str], cfg: TrainConfig) -> str:
    from core.contrast import builtin_contrast_error

    for name, spec in v.items():
        if not isinstance(name, str) or not name:
            return f"reward names must be non-empty strings, got {name!r}"
        message = builtin_contrast_error(spec)
        if message:
            return f"{name}: {message}"
    return ""


def trl_problem() -> str:
    """Why the trl backend cannot run here ("" when TRL 1.16 is installed); looks at the package without importing it."""
    try:
        found = importlib.util.find_spec("trl") is not None
    except (ImportError, ValueError):  # a module entry of None (import blocked) raises ValueError
        found = False
    if not found:
        return f"the trl backend needs TRL, which is not installed; install it with pip install '{TRL_REQUIREMENT}'"
    try:
        version = importlib.metadata.version("trl")
    except importlib.metadata.PackageNotFoundError:
        return ""  # a source checkout on the path: trust it
    if not version.startswith(TRL_MINOR + "."):
        return (f"the trl backend overrides private methods of TRL {TRL_MINOR}, found trl {version}; "
                f"install it with pip install '{TRL_REQUIREMENT}'")
    return ""


def _backend_check(v: str, cfg: TrainConfig) -> str:
    return _choice(BACKENDS)(v, cfg) or (trl_problem() if v == "trl" else "")


def _nproc_rule(cfg: TrainConfig) -> str:
    n = cfg.nproc
    if n == 1:
        return ""
    if cfg.backend != "trl":
        return "the builtin backend is the single-process reference; use backend trl for several processes"
    if n > cfg.prompts_per_step:
        return (f"{n} processes for {cfg.prompts_per_step} prompt groups per step: each process needs at least one "
                "group's worth of samples; use at most prompts_per_step processes")
    if (cfg.prompts_per_step * cfg.group_size) % n:
        return (f"the batch of {cfg.prompts_per_step} x {cfg.group_size} samples does not split evenly over {n} "
                "processes; pick a process count that divides it")
    return ""


def _run_name_check(v: str, cfg: TrainConfig) -> str:
    if v and not is_run_name(v):
        return f"{v!r} is not a valid run name: use {RUN_NAME_RULE} (or leave it empty for an automatic name)"
    return ""


_CHECKS: list[tuple[str, Any]] = [
    ("model", _model_check),
    ("prompt_set", lambda v, c: _readable_file(v, optional=False)),
    ("eval_prompt_set", lambda v, c: _readable_file(v, optional=True)),
    ("eval_samples", _at_least(1)),
    ("eval_prompts", _at_least(1)),
    ("custom_verifiers", _custom_check),
    ("verifier_time_limit", _at_least(0.0, "use 0 for no limit", hi=86400.0, why_hi="a day per call")),
    ("method", _choice(FIELD_CHOICES["method"])),
    ("routing", _choice(FIELD_CHOICES["routing"])),
    ("relevance", _choice(FIELD_CHOICES["relevance"])),
    ("auto_evidence", _auto_evidence_check),
    ("sharpen", _at_least(0.0, "use 1.0 to keep the relevance as measured", strict=True)),
    ("lam", _lam_check),
    ("w_max", _at_least(1.0, "weights have mean 1, so a cap below 1 would clip every token")),
    ("routing_clip", _choice(FIELD_CHOICES["routing_clip"])),
    ("reward_weights", _weights_check),
    ("routing_shuffle", _choice(FIELD_CHOICES["routing_shuffle"])),
    ("routing_shuffle_seed", _at_least(0, hi=SEED_MAX, why_hi="torch seeds are unsigned 64-bit numbers")),
    ("entropy_q", _at_least(0.0, "try 0.2", strict=True, hi=1.0, why_hi="it is a fraction of the tokens")),
    ("reward_scales", _weights_check),
    ("reward_contrasts", _contrasts_check),
    ("eps", _at_least(0.0, "try 1e-4", strict=True)),
    ("group_size", _at_least(2, "advantages compare responses within a group, so a group needs 2 or more")),
    ("prompts_per_step", _at_least(1)),
    ("max_new_tokens", _at_least(1, hi=1_000_000, why_hi="and below the model's context")),
    ("temperature", _at_least(TEMPERATURE_RANGE[0], "below it the sampler's logits / temperature overflow float32; "
                              "use 1.0 to sample the policy itself", hi=TEMPERATURE_RANGE[1],
                              why_hi="above it sampling is uniform noise; use 1.0 to sample the policy itself")),
    ("steps", _at_least(1, hi=STEPS_MAX)),
    ("lr", _at_least(0.0, "try 5e-5 for small models, 1e-6 for large ones", strict=True, hi=LR_MAX,
                     why_hi="AdamW moves every weight by about lr per step, so a larger one wipes out the model")),
    ("clip_range", _at_least(0.0, "try 0.2", strict=True)),
    ("kl_beta", _at_least(0.0, "use 0 to train without a reference model")),
    ("inner_epochs", _at_least(1)),
    ("max_grad_norm", _at_least(0.0, "use 0 to disable clipping")),
    ("seed", _at_least(0, hi=SEED_MAX, why_hi="torch and numpy seeds are unsigned 32/64-bit numbers")),
    ("replay_chunk", _at_least(1)),
    ("replay_pairs", _choice(FIELD_CHOICES["replay_pairs"])),
    ("replay_dtype", _choice(FIELD_CHOICES["replay_dtype"])),
    ("runs_dir", lambda v, c: "" if v else "give a folder for the runs, e.g. runs"),
    ("run_name", _run_name_check),
    ("checkpoint_every", _at_least(0, "use 0 to save only at the end")),
    ("keep_checkpoints", _at_least(0, "use 0 to keep every checkpoint")),
    ("credit_samples", _at_least(0, "use 0 to store every sample's credit map")),
    ("credit_every", _at_least(1, "use 1 to store every step's credit map")),
    ("device", _choice(FIELD_CHOICES["device"])),
    ("backend", _backend_check),
    ("nproc", _at_least(1)),
]
_CHECK_OF = dict(_CHECKS)
# Rules between fields, checked once every field is fine: (the field the message belongs to, rule).
def _trl_one_pass(relevance: str) -> str:
    """MRTPOTrainer replays one no-gradient contrastive prompt per reward (`core.algos.routing.one_pass_reason`)."""
    from core.algos.routing import RELEVANCE, one_pass_reason

    reason = one_pass_reason(relevance) if relevance in RELEVANCE else ""
    return (f"{reason}; the trl backend replays one no-gradient pass per reward: use backend builtin or a one-pass "
            "variant") if reason else ""


_RULES: list[tuple[str, Any]] = [
    ("max_new_tokens", _context_rule),
    ("nproc", _nproc_rule),
    ("routing_shuffle", lambda c: "" if c.routing_shuffle == "off" or c.method == "mrtpo" else
     f"shuffles routing weights, which method {c.method} does not use; set method mrtpo or routing_shuffle off"),
    ("relevance", lambda c: "" if c.backend != "trl" or c.method != "mrtpo" else _trl_one_pass(c.relevance)),
    ("reward_scales", lambda c: "" if not c.reward_scales or c.method == "gdpo" else
     f"scales GDPO's per-reward advantages (the scale-matched control); set method gdpo, not {c.method}, "
     "or leave reward_scales empty"),
]


def field_error(name: str, value: Any) -> str:
    """What TrainConfig says about field `name` holding `value` on its own ("" when fine): its type and its
    check, not the rules between fields. The app's form shows every field's problem at once with it, and
    configs of other engines that share a field's meaning (core.integrations.trl.MRTPOConfig) reuse it."""
    cfg = TrainConfig()
    setattr(cfg, name, value)
    try:
        _coerce_types(cfg)
    except ConfigError as exc:
        return exc.message
    return _CHECK_OF[name](getattr(cfg, name), cfg)


# ---------------------------------------------------------------- types


@functools.cache
def field_types() -> dict[str, Any]:
    return typing.get_type_hints(TrainConfig)


def _base_type(tp: Any) -> Any:
    """`str | None` -> str; other annotations unchanged."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, getattr(__import__("types"), "UnionType", None)) and len(args) == 1:
        return args[0]
    return tp


def _coerce_types(cfg: TrainConfig) -> None:
    """Accept what JSON and forms produce (an int for a float, 8.0 for an int); reject the rest with a message."""
    for f in dataclasses.fields(cfg):
        tp = field_types()[f.name]
        optional = type(None) in typing.get_args(tp)
        base = _base_type(tp)
        v = getattr(cfg, f.name)
        if v is None and optional:
            continue
        if base is str and optional and v == "":
            setattr(cfg, f.name, None)
            continue
        if base is int:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
                raise ConfigError(f.name, f"must be a whole number, got {v!r}")
            setattr(cfg, f.name, int(v))
        elif base is float:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ConfigError(f.name, f"must be a number, got {v!r}")
            setattr(cfg, f.name, float(v))
        elif base is str:
            if isinstance(v, os.PathLike):
                v = os.fspath(v)
                setattr(cfg, f.name, v)
            if not isinstance(v, str):
                raise ConfigError(f.name, f"must be a string, got {v!r}")
        elif typing.get_origin(base) is dict:
            if not isinstance(v, dict):
                raise ConfigError(f.name, f"must be a mapping of reward name to weight, got {v!r}")
            setattr(cfg, f.name, dict(v))


def _copy_value(v: Any) -> Any:
    return dict(v) if isinstance(v, dict) else v


# ---------------------------------------------------------------- docs and command line


@functools.cache
def field_docs() -> dict[str, tuple[str, str]]:
    """field name -> (section title, docstring line), read from this class's source (cleanrl style)."""
    source = inspect.getsource(TrainConfig)
    lines = source.splitlines()
    tree = ast.parse(source)
    body = tree.body[0].body
    docs: dict[str, tuple[str, str]] = {}
    section = ""
    prev_end = 0
    for i, node in enumerate(body):
        for line in lines[prev_end : node.lineno - 1]:
            m = re.match(r"\s*# --- (.+?) ---", line)
            if m:
                section = m.group(1)
        prev_end = node.end_lineno or node.lineno
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            nxt = body[i + 1] if i + 1 < len(body) else None
            doc = ""
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
                doc = nxt.value.value.strip()
            docs[node.target.id] = (section, doc)
    return docs


def _json_object(text: str, what: str) -> dict:
    """A command-line JSON object of reward name -> `what`; argparse's error otherwise."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        from core.tasks import json_error_text

        raise argparse.ArgumentTypeError(f"not a JSON object: {json_error_text(exc)}") from exc
    if not isinstance(data, dict):
        raise argparse.ArgumentTypeError(f"give a JSON object of reward name -> {what}")
    return data


def parse_weights(text: str) -> dict[str, float]:
    """`'{"a": 2}'` or `'a=2,b=0.5'` -> {"a": 2.0, "b": 0.5} (argparse type for reward_weights)."""
    text = text.strip()
    if not text:
        return {}
    if text.startswith("{"):
        return _json_object(text, "weight")
    out: dict[str, float] = {}
    for part in text.split(","):
        name, sep, value = part.rpartition("=")
        if not sep or not name.strip():
            raise argparse.ArgumentTypeError(f"{part!r}: write name=weight, e.g. keywords:existence=2")
        try:
            out[name.strip()] = float(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{part!r}: the weight must be a number") from exc
    return out


def parse_contrasts(text: str) -> dict[str, str]:
    """`'{"task:arithmetic": "question"}'` or `'task:arithmetic=question'` -> {"task:arithmetic": "question"}
    (argparse type for reward_contrasts; a spec may hold "=" and "," only in the JSON form)."""
    text = text.strip()
    if text.startswith("{"):
        return _json_object(text, "contrast")
    out: dict[str, str] = {}
    for part in filter(None, text.split(",")):
        name, sep, spec = part.partition("=")
        if not sep or not name.strip() or not spec.strip():
            raise argparse.ArgumentTypeError(f"{part!r}: write name=contrast, e.g. task:arithmetic=question")
        out[name.strip()] = spec.strip()
    return out


def _optional_str(text: str) -> str | None:
    return text or None


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """One `--<field-name>` option per TrainConfig field, grouped by section, help from the field docs.

    Defaults are `argparse.SUPPRESS`, so the namespace holds only the flags given (they override --config).
    """
    docs = field_docs()
    groups: dict[str, argparse._ArgumentGroup] = {}
    defaults = TrainConfig.__dataclass_fields__
    for f in dataclasses.fields(TrainConfig):
        section, doc = docs.get(f.name, ("", ""))
        group = groups.get(section)
        if group is None:
            group = groups[section] = parser.add_argument_group(section or "options")
        tp = _base_type(field_types()[f.name])
        if f.name == "reward_contrasts":
            conv, metavar = parse_contrasts, "NAME=SPEC,..."
        elif typing.get_origin(tp) is dict:
            conv, metavar = parse_weights, "NAME=W,..."
        elif type(None) in typing.get_args(field_types()[f.name]):
            conv, metavar = _optional_str, "STR"
        else:
            conv, metavar = tp, tp.__name__.upper()
        choices = FIELD_CHOICES.get(f.name)
        default = defaults[f.name].default
        if default is dataclasses.MISSING:
            default = defaults[f.name].default_factory()  # type: ignore[misc]
        shown = json.dumps(default) if isinstance(default, dict) else repr(default)
        group.add_argument(
            "--" + f.name.replace("_", "-"),
            dest=f.name,
            type=conv,
            choices=choices,
            metavar=None if choices else metavar,
            default=argparse.SUPPRESS,
            help=f"{doc} (default: {shown})".replace("%", "%%"),
        )


def config_from_args(ns: argparse.Namespace, config_file: str | None = None) -> TrainConfig:
    """`--config FILE` first, then the flags given on the command line on top of it."""
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    flags = {k: v for k, v in vars(ns).items() if k in names}
    if config_file:
        return TrainConfig.from_json(config_file, **flags)
    return TrainConfig(**flags)


TRAIN_COMMAND = ("-m", "core.cli", "train")  # how a process starts `mrtpo train` (never through a shell)
PATH_FIELDS = ("prompt_set", "eval_prompt_set", "custom_verifiers")


def train_argv(cfg: TrainConfig, python: str | None = None) -> list[str]:
    """`[python, -m, core.cli, train, --<field> <value>, ...]` for every field that is not None, with
    paths made absolute (the child may run from another folder); `python` defaults to this interpreter.
    The one place that turns a config into a `mrtpo train` command (the app's launcher, the studies and
    the multi-process launcher use it)."""
    return [python or sys.executable, *TRAIN_COMMAND, *train_flags(cfg)]


def train_flags(cfg: TrainConfig) -> list[str]:
    """The `--<field> <value>` part of `train_argv`."""
    argv: list[str] = []
    values = cfg.to_dict()
    for key in PATH_FIELDS:
        v = values.get(key)
        if v and (key != "custom_verifiers" or str(v).endswith(".py")):
            values[key] = str(resolve_path(v).resolve())
    if values["model"] not in MODEL_PRESETS:
        values["model"] = str(resolve_path(values["model"]).resolve())
    values["runs_dir"] = str(Path(values["runs_dir"]).expanduser().resolve())
    for key, value in values.items():
        if value is None:
            continue
        argv += ["--" + key.replace("_", "-"), json.dumps(value) if isinstance(value, dict) else str(value)]
    return argv


def resume_argv(run_path: str | os.PathLike, python: str | None = None, **overrides: Any) -> list[str]:
    """`[python, -m, core.cli, train, --resume RUN, --<field> <value>, ...]`: continue a run, changing only
    the fields a resume may change (`steps`, `device`, ...; the trainer refuses the others)."""
    argv = [python or sys.executable, *TRAIN_COMMAND, "--resume", str(Path(run_path).resolve())]
    for key, value in overrides.items():
        argv += ["--" + key.replace("_", "-"), str(value)]
    return argv
