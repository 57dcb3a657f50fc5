"""TrainConfig: validation messages, JSON round trip, the command line built from its fields."""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys

import pytest
from helpers import MICRO_REWARDS

from core.config import (
    DEFAULT_RELEVANCE,
    METHODS,
    RELEVANCES,
    ROUTINGS,
    ConfigError,
    TrainConfig,
    add_config_arguments,
    config_from_args,
    field_docs,
    parse_weights,
)
from core.prompt_sets import load_prompts


@pytest.fixture
def ok(prompt_file):
    """Valid keyword arguments (the default prompt set may not exist in a fresh checkout)."""
    return {"prompt_set": str(prompt_file)}


@pytest.mark.parametrize(
    "bad, field, words",
    [
        ({"group_size": 1}, "group_size", "2 or more"),
        ({"group_size": 0}, "group_size", ">= 2"),
        ({"group_size": 2.5}, "group_size", "whole number"),
        ({"group_size": True}, "group_size", "whole number"),
        ({"method": "ppo"}, "method", "grpo, gdpo, mrtpo"),
        ({"method": "mrtp"}, "method", "did you mean 'mrtpo'"),
        ({"routing": "oracle"}, "routing", "replay, span, uniform"),
        ({"relevance": "kl"}, "relevance", "js, js_specific"),
        ({"device": "tpu"}, "device", "auto, cpu, cuda"),
        ({"lr": 0}, "lr", "> 0"),
        ({"lr": -1e-5}, "lr", "> 0"),
        ({"lr": float("nan")}, "lr", "finite"),
        ({"lr": "fast"}, "lr", "must be a number"),
        ({"lam": 1.5}, "lam", "[0, 1]"),
        ({"lam": -0.1}, "lam", "[0, 1]"),
        ({"w_max": 0.9}, "w_max", ">= 1"),
        ({"steps": 0}, "steps", ">= 1"),
        ({"prompts_per_step": 0}, "prompts_per_step", ">= 1"),
        ({"max_new_tokens": 0}, "max_new_tokens", ">= 1"),
        ({"temperature": 0}, "temperature", ">= 0.01"),
        ({"clip_range": 0}, "clip_range", "> 0"),
        ({"kl_beta": -0.1}, "kl_beta", ">= 0"),
        ({"inner_epochs": 0}, "inner_epochs", ">= 1"),
        ({"eps": 0}, "eps", "> 0"),
        ({"sharpen": 0}, "sharpen", "> 0"),
        ({"seed": -1}, "seed", ">= 0"),
        ({"replay_chunk": 0}, "replay_chunk", ">= 1"),
        ({"checkpoint_every": -1}, "checkpoint_every", ">= 0"),
        ({"max_grad_norm": -1}, "max_grad_norm", ">= 0"),
        ({"prompt_set": "no/such/file.jsonl"}, "prompt_set", "no such file"),
        ({"prompt_set": ""}, "prompt_set", "give the path"),
        ({"eval_prompt_set": "missing.jsonl"}, "eval_prompt_set", "no such file"),
        ({"model": "no-such-model"}, "model", "neither a preset"),
        ({"model": ""}, "model", "preset"),
        ({"custom_verifiers": "missing_file.py"}, "custom_verifiers", "no such file"),
        ({"custom_verifiers": "not a module"}, "custom_verifiers", "module name"),
        ({"run_name": "../escape"}, "run_name", "not a valid run name"),
        ({"run_name": "a" * 65}, "run_name", "not a valid run name"),
        ({"runs_dir": ""}, "runs_dir", "give a folder"),
        ({"reward_weights": {"keywords:existence": -1}}, "reward_weights", ">= 0"),
        ({"reward_weights": {"keywords:existence": "x"}}, "reward_weights", "finite number"),
        ({"reward_weights": [1, 2]}, "reward_weights", "mapping"),
    ],
)
def test_invalid_values_are_rejected_with_the_field_and_a_fix(ok, bad, field, words):
    with pytest.raises(ConfigError) as info:
        TrainConfig(**{**ok, **bad})
    assert info.value.field == field
    assert words in str(info.value)
    assert isinstance(info.value, ValueError)


def test_defaults_are_valid_and_types_are_normalised(ok, micro_model):
    cfg = TrainConfig(**ok, group_size=4.0, lr=1, model=str(micro_model), eval_prompt_set="")
    assert cfg.group_size == 4 and isinstance(cfg.group_size, int)
    assert cfg.lr == 1.0 and isinstance(cfg.lr, float)
    assert cfg.eval_prompt_set is None
    assert cfg.method in METHODS


def test_model_folder_needs_a_config(tmp_path, ok):
    with pytest.raises(ConfigError, match="without config.json") as info:
        TrainConfig(**ok, model=str(tmp_path))
    assert info.value.field == "model"


def test_reward_weights_are_checked_against_the_prompt_set(ok):
    cfg = TrainConfig(**ok, reward_weights={"punctuation:no_comma": 2.0})
    items, names = load_prompts(cfg)
    assert names == MICRO_REWARDS and len(items) == 4
    assert cfg.reward_weight("punctuation:no_comma") == 2.0 and cfg.reward_weight("task:arithmetic") == 1.0

    bad = TrainConfig(**ok, reward_weights={"keyword:existence": 1.0})
    with pytest.raises(ConfigError, match="unknown reward name") as info:
        load_prompts(bad)
    assert info.value.field == "reward_weights" and "keywords:existence" in str(info.value)

    with pytest.raises(ConfigError, match="weight 0"):
        TrainConfig(**ok, reward_weights=dict.fromkeys(MICRO_REWARDS, 0)).validate_against(MICRO_REWARDS)


def test_unloadable_prompt_set_names_the_field(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"key": "x", "task": "t", "constraints": [{"family": "no:such", "kwargs": {}}]}\n')
    cfg = TrainConfig(prompt_set=str(path))
    with pytest.raises(ConfigError) as info:
        load_prompts(cfg)
    assert info.value.field == "prompt_set" and "no:such" in str(info.value)


def test_json_round_trip_and_run_config_keys(ok, tmp_path):
    cfg = TrainConfig(**ok, method="gdpo", reward_weights={"a": 2.0}, steps=3)
    path = tmp_path / "c.json"
    path.write_text(json.dumps({**cfg.to_dict(), "reward_names": ["a"], "schema_version": 1}))
    again = TrainConfig.from_json(path)
    assert again == cfg
    assert TrainConfig.from_json(path, steps=7).steps == 7


def test_unknown_json_keys_and_bad_files_are_errors(ok, tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({**ok, "group_sise": 4}))
    with pytest.raises(ConfigError, match="did you mean 'group_size'"):
        TrainConfig.from_json(path)
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        TrainConfig.from_json(path)
    with pytest.raises(ConfigError, match="cannot read"):
        TrainConfig.from_json(tmp_path / "missing.json")


def test_every_field_is_documented_in_a_section():
    docs = field_docs()
    names = [f.name for f in dataclasses.fields(TrainConfig)]
    assert list(docs) == names
    for name, (section, doc) in docs.items():
        assert section and len(doc) > 20, name


def test_argparse_has_every_field_and_flags_override_the_file(ok, tmp_path):
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    help_text = parser.format_help()
    for f in dataclasses.fields(TrainConfig):
        assert "--" + f.name.replace("_", "-") in help_text
    assert "responses sampled per prompt" in help_text  # help comes from the field docs

    path = tmp_path / "c.json"
    path.write_text(json.dumps({**ok, "group_size": 4, "steps": 9}))
    ns = parser.parse_args(["--steps", "2", "--reward-weights", "a=2,b=0.5", "--eval-prompt-set", ""])
    cfg = config_from_args(ns, str(path))
    assert (cfg.group_size, cfg.steps) == (4, 2)
    assert cfg.reward_weights == {"a": 2.0, "b": 0.5} and cfg.eval_prompt_set is None
    # Fields not given on the command line keep the file's value (argparse defaults are suppressed).
    assert config_from_args(parser.parse_args([]), str(path)).steps == 9


def test_parse_weights_forms():
    assert parse_weights('{"x": 1}') == {"x": 1}
    assert parse_weights("keywords:existence=2, punctuation:no_comma=0") == {
        "keywords:existence": 2.0, "punctuation:no_comma": 0.0}
    for bad in ("x", "x=fast", "[1]"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_weights(bad)


def test_method_names_match_the_registries():
    from core.algos.advantages import ESTIMATORS

    assert set(METHODS) == set(ESTIMATORS)


def test_routing_and_relevance_names_match_the_registries():
    from core.algos.routing import RELEVANCE, ROUTING

    assert tuple(ROUTINGS) == tuple(ROUTING)
    assert tuple(RELEVANCES) == tuple(RELEVANCE)
    assert TrainConfig().relevance == DEFAULT_RELEVANCE == "js"


@pytest.mark.subprocess
def test_config_module_never_imports_torch():
    code = "import sys, core.config; sys.exit('torch' in sys.modules or 'transformers' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_model_presets_are_the_ones_core_model_loads():
    from core.config import MODEL_PRESETS
    from core.model import PRESETS, resolve_model

    assert PRESETS is MODEL_PRESETS
    path, preset, _ = resolve_model("tiny-instruct")
    assert preset == "tiny-instruct" and (path / "config.json").exists()
