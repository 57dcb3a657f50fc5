"""The shipped tiny-instruct model: loads with plain transformers, generates short text, and its compliance
depends on the stated constraint sentences (statistical bounds on a small fixed-seed sample).

The full measurement (more prompts, timing) is `python -m core.tools.bootstrap --evaluate`; see the model card."""

from __future__ import annotations

import pytest
import torch

from core.tools import bootstrap as bs

FOLDER = bs.DEFAULT_OUT


@pytest.fixture(scope="module")
def shipped():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(FOLDER)
    model = AutoModelForCausalLM.from_pretrained(FOLDER)
    model.eval()
    return model, tok


def test_folder_is_small_and_complete():
    for name in ("model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json",
                 "generation_config.json", "README.md"):
        assert (FOLDER / name).is_file(), name
    assert bs.folder_mb(FOLDER) <= 25.0


def test_loads_with_plain_transformers_as_fp32_llama(shipped):
    model, tok = shipped
    assert model.config.model_type == "llama"
    assert next(model.parameters()).dtype == torch.float32
    assert tok.eos_token == bs.EOS and tok.pad_token == bs.PAD
    assert model.config.eos_token_id == tok.eos_token_id
    ids = tok.apply_chat_template([{"role": "user", "content": "What is 3 plus 4?"}], add_generation_prompt=True,
                                  tokenize=True, return_dict=False)
    assert tok.decode(ids).endswith("<|assistant|>\n")
    enc = tok("Rivers are calm, The end.", add_special_tokens=False, return_offsets_mapping=True)
    assert enc["offset_mapping"][0][0] == 0 and enc["offset_mapping"][-1][1] == len("Rivers are calm, The end.")


def test_generates_short_on_topic_text(shipped):
    model, tok = shipped
    items = bs.eval_items(8, seed=11)
    prompts = [it.prompt() for it in items]
    texts = bs.sample(model, tok, prompts, max_new_tokens=64, seed=0)
    for prompt, text in zip(prompts, texts, strict=True):
        n_tokens = len(tok(text, add_special_tokens=False)["input_ids"])
        assert 5 <= n_tokens < 64, text  # finished (eos) well before the limit
        assert text.strip()[-1] in ".!?", text
        if prompt.startswith("Write a short note about "):
            topic = prompt.removeprefix("Write a short note about ").split(".")[0]
            assert topic.lower() in text.lower(), (prompt, text)


@pytest.fixture(scope="module")
def stats(shipped):
    model, tok = shipped
    items = bs.eval_items(16, seed=21, arithmetic_share=0.35)  # more sums than the default set: ~30 samples
    return bs.conditioning_stats(model, tok, items, samples_per_prompt=6, seed=0)


def test_compliance_is_partial_and_depends_on_the_stated_sentence(stats):
    """Targets: stated rate 30-80% and at least twice the rate with the sentence removed. On 16 prompts x 4
    samples (about 40-50 samples per family) the bounds are widened by about two standard errors."""
    assert set(stats["families"]) == {bs.KEYWORD, bs.END, bs.LOWER, bs.NO_COMMA, bs.ARITH}
    for fam, v in stats["families"].items():
        assert 0.15 <= v["stated"] <= 0.92, (fam, v)
        assert v["stated"] >= 2 * v["removed"] and v["stated"] - v["removed"] >= 0.15, (fam, v)


def test_all_constraints_together_leave_room_for_rl(stats):
    assert 0.03 <= stats["all_satisfied"] <= 0.65, stats["all_satisfied"]
