"""Launch validation against the model, the prompt set and this machine (issue 15, bug 2): the memory estimate
(docs/METHOD.md, "Memory estimate") by hand, the model's shape read without torch, and refusals with a clear
message in the app's validation and in core.prompt_sets.load_prompts (which `mrtpo train` runs before the model loads)."""

from __future__ import annotations

import pytest

from core import resources
from core.config import ConfigError, TrainConfig
from core.prompt_sets import load_prompts
from core.resources import ModelShape, memory_estimate
from mrtpo_viz import launcher

SHAPE = ModelShape(parameters=1000, vocab=10, hidden=4, intermediate=8, layers=2, kv_width=2)


def test_memory_estimate_by_hand():
    # b = 4 x 3 / 2 = 6 per process, T = 5, S = 3 + 5 = 8, c = min(4, 6) = 4
    est = memory_estimate(SHAPE, prompts_per_step=4, group_size=3, max_new_tokens=5, prompt_tokens=3,
                          replay_chunk=4, kl_beta=0.1, keeps_logits=False, nproc=2)
    assert est["state"] == 4 * 1000 * 5 == 20000  # weights, grads, 2 AdamW moments, reference copy
    assert est["logits"] == 0  # not kept
    assert est["kv_cache"] == 4 * 2 * 6 * 8 * 2 * 2 == 1536
    assert est["activations"] == 4 * 4 * 8 * (2 * (8 * 4 + 3 * 8) + 2 * 10) == 16896
    assert est["total"] == 2 * (20000 + 0 + 16896) == 73792  # two processes, each its own copy
    kept = memory_estimate(SHAPE, prompts_per_step=4, group_size=3, max_new_tokens=5, prompt_tokens=3,
                           replay_chunk=100, kl_beta=0.0, keeps_logits=True)
    # b = 12, c = 12: logits 4 x 2 x 12 x 5 x 10 = 4800; activations 4 x 12 x 8 x 132 = 50688 > kv 3072
    assert (kept["state"], kept["logits"], kept["kv_cache"], kept["activations"]) == (16000, 4800, 3072, 50688)
    assert kept["total"] == 16000 + 4800 + 50688


def test_model_shape_is_read_from_config_and_safetensors_headers():
    from transformers import AutoModelForCausalLM

    from core.presets import EMBEDDED_MODELS

    shape = resources.model_shape("tiny-instruct")
    model = AutoModelForCausalLM.from_pretrained(EMBEDDED_MODELS["tiny-instruct"][0])
    assert shape.parameters == sum(p.numel() for p in model.parameters())
    c = model.config
    assert (shape.vocab, shape.hidden, shape.intermediate, shape.layers) == (
        c.vocab_size, c.hidden_size, c.intermediate_size, c.num_hidden_layers)
    assert shape.kv_width == c.hidden_size * c.num_key_value_heads // c.num_attention_heads
    assert resources.model_shape("smollm2-135m") is None or resources.model_shape("smollm2-135m").parameters > 1e8


def test_keeps_logits_agrees_with_the_trainers_routing_source():
    from core.choices import routing_source

    for method in ("grpo", "gdpo", "mrtpo"):
        for routing in ("replay", "span", "uniform"):
            cfg = TrainConfig(method=method, routing=routing)
            assert resources.keeps_sampling_logits(cfg) == (routing_source(cfg) == "replay")


def test_memory_is_refused_above_the_share_of_available_memory(prompt_file):
    cfg = TrainConfig(prompt_set=str(prompt_file), group_size=64, prompts_per_step=4, max_new_tokens=100)
    items, _ = load_prompts(cfg)
    shape = resources.model_shape(cfg.model)
    est = memory_estimate(shape, prompts_per_step=4, group_size=64, max_new_tokens=100,
                          prompt_tokens=resources.prompt_tokens(items), replay_chunk=cfg.replay_chunk, kl_beta=0.0,
                          keeps_logits=True)["total"]
    enough = int(est / resources.MEMORY_SHARE) + 1
    assert resources.memory_problem(cfg, items, available=(enough, "RAM")) == ("", "")
    field, message = resources.memory_problem(cfg, items, available=(enough - 2, "RAM"))
    assert field == "group_size"  # 64 is 8x its default, the furthest above
    assert message.startswith(f"this run would need about {resources.gib(est)} of memory")
    assert "more than 80% of the" in message and "MRTPO_SKIP_MEMORY_CHECK=1" in message


def test_prompt_tokens_is_the_longest_prompt_in_characters_over_three(prompt_file):
    items, _ = load_prompts(TrainConfig(prompt_set=str(prompt_file)))
    longest = max(len(i.prompt()) for i in items)
    assert resources.prompt_tokens(items) == -(-longest // 3)


@pytest.mark.parametrize("fields,field,words", [
    ({"group_size": 100_000_000}, "group_size", "this run would need about"),
    ({"prompts_per_step": 1000}, "prompts_per_step", "holds 200; a step would repeat prompts. Use at most 200"),
    ({"max_new_tokens": 1_000_000}, "max_new_tokens", "do not fit the model's context of 256 tokens"),
])
def test_the_issues_launches_are_refused_with_a_message_on_their_field(tmp_path, fields, field, words):
    # regression: G = 100000, prompts per step beyond the set, 1e6 new tokens on a 256-position model were accepted
    cfg, errors = launcher.validate({"runs_dir": str(tmp_path), "prompt_set": "sample_data/prompts/default.jsonl",
                                     **fields})
    assert cfg is None and list(errors) == [field] and words in errors[field], errors
    with pytest.raises(ConfigError, match="would need|repeat prompts|do not fit"):
        load_prompts(TrainConfig(runs_dir=str(tmp_path), **fields))


def test_the_memory_check_can_be_skipped(monkeypatch, tmp_path):
    monkeypatch.setenv(resources.SKIP_ENV, "1")
    cfg, errors = launcher.validate({"runs_dir": str(tmp_path), "group_size": 100_000_000})
    assert errors == {} and cfg.group_size == 100_000_000


def test_sizes_are_shown_in_a_unit_that_never_reads_zero():
    """`gib` picks the unit by size: a small disk term (a short run's metrics) reads in KiB or bytes, not "0 MiB"."""
    cases = {0: "0 B", 900: "900 B", 8192 * 20: "160 KiB", 1023 * 2**10: "1023 KiB", 2**20: "1.0 MiB",
             2.5 * 2**20: "2.5 MiB", 200 * 2**20: "200 MiB", 2**28: "0.2 GiB", 2**29: "0.5 GiB", 3 * 2**30: "3.0 GiB",
             2**40: "1.0 TiB"}
    assert {n: resources.gib(n) for n in cases} == cases
    cfg = TrainConfig(steps=3, credit_every=1)
    line = resources.disk_line(cfg, 2)
    assert "metrics 24 KiB" in line and " 0 MiB" not in line and " 0 B" not in line, line
