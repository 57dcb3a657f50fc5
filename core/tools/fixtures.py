"""Test helpers: a micro policy model that builds in about a second.

`make_micro_model(path)` writes a tiny random LlamaForCausalLM (hidden 32, 2 layers) and a
byte-level BPE tokenizer (about 300 tokens, trained in-process with `tokenizers` on text from the
prompt generator) with a chat template, eos == pad, as a `save_pretrained` folder. Its samples are
noise, but every code path of the trainer (generation, incremental decoding, replay, update,
checkpoints) runs on it exactly as on a real model.
"""

from __future__ import annotations

import os
from pathlib import Path

# A chat template in the usual shape (user turn, then the assistant header the model continues from).
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
SPECIAL_TOKENS = ["<|end|>", "<|user|>", "<|assistant|>", "<|system|>"]

# Used when core.tools.promptgen is not importable (it is the preferred source: the trainer sees its prompts).
_FALLBACK_TEXT = [
    "Write a short note about rivers. Include the keyword steady. Do not use any commas.",
    "What is 3 plus 4? Use only lowercase letters. End your response with the phrase Is there anything else?",
    "rivers are steady and calm. they carry water to the sea. Is there anything else?",
    "The answer is 7. mountains stand tall and quiet under the sky",
]


def _corpus(n: int = 200, seed: int = 0) -> list[str]:
    """Prompt texts from the prompt generator plus a few response-like lines."""
    lines = list(_FALLBACK_TEXT)
    try:
        from core.tasks import item_from_record
        from core.tools.promptgen import generate_prompts
    except ImportError:
        return lines * 4
    for record in generate_prompts(n, seed=seed):
        lines.append(item_from_record(record).prompt())
    return lines


def make_micro_tokenizer(vocab_size: int = 300, seed: int = 0):
    """A fast byte-level BPE tokenizer (any text encodes; decoding a prefix gives a prefix) with a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(seed=seed), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|end|>",
        pad_token="<|end|>",
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
    )


def make_micro_model(path: str | os.PathLike, seed: int = 0, hidden: int = 32, layers: int = 2) -> Path:
    """Write a tiny random Llama policy + tokenizer to `path` (save_pretrained folder) and return the path."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    path = Path(path)
    tokenizer = make_micro_tokenizer(seed=seed)
    eos = tokenizer.convert_tokens_to_ids("<|end|>")
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=eos,
        eos_token_id=eos,
        pad_token_id=eos,
    )
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = LlamaForCausalLM(config)
    finally:
        torch.random.set_rng_state(state)
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = eos
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
