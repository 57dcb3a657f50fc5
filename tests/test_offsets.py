"""`core.model.decode_with_offsets` (O(T), windows) against its definition `decode_with_offsets_reference`
(every prefix decoded), on real tokenizers: the shipped tiny-instruct one (byte-level BPE) and a
sentencepiece-style one (metaspace, byte fallback, strip) trained here with `tokenizers`."""

import json

import numpy as np
import pytest
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from core.model import decode_with_offsets, decode_with_offsets_reference
from core.paths import REPO_ROOT

TEXT = ("The river runs steady under a bridge, é ü ñ 漢字 and light 😀 falls on water.\n  Über café, naïve "
        "résumé — «quoted» 🙂🙂 end. ")


@pytest.fixture(scope="module")
def byte_level():
    return AutoTokenizer.from_pretrained(str(REPO_ROOT / "sample_data" / "models" / "tiny-instruct"))


@pytest.fixture(scope="module")
def metaspace(tmp_path_factory):
    """A Llama-2-style tokenizer: '▁' for spaces, <0xNN> byte tokens for unknown characters, strip of the
    leading space on decode."""
    from tokenizers import Tokenizer, decoders, models, normalizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.train_from_iterator([TEXT.replace("漢字", "").replace("😀", "")] * 20,
                            trainers.BpeTrainer(vocab_size=120, special_tokens=["<unk>", "<s>", "</s>"]))
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    for b in range(256):
        vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    spec["model"]["byte_fallback"] = True
    spec["decoder"] = json.loads(decoders.Sequence([
        decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0),
    ]).__getstate__())
    fast = Tokenizer.from_str(json.dumps(spec))
    return PreTrainedTokenizerFast(tokenizer_object=fast, eos_token="</s>", unk_token="<unk>", bos_token="<s>")


def _cases(tok, n: int = 120, seed: int = 0):
    rng = np.random.default_rng(seed)
    ids = tok(TEXT * 8, add_special_tokens=False)["input_ids"]
    yield []
    yield [tok.eos_token_id]
    for k in range(n):
        length = int(rng.integers(1, 90))
        if k % 3 == 2:  # any ids: broken byte sequences, special tokens in the middle
            seq = [int(x) for x in rng.integers(0, len(tok), length)]
        else:  # a slice of real text, cut anywhere (also inside a multi-byte character)
            a = int(rng.integers(0, len(ids) - length))
            seq = ids[a:a + length]
        yield seq + ([tok.eos_token_id] if k % 4 == 0 else [])


@pytest.mark.parametrize("name", ["byte_level", "metaspace"])
def test_fast_offsets_equal_the_reference(name, request):
    tok = request.getfixturevalue(name)
    multibyte = 0
    for seq in _cases(tok):
        text, offsets = decode_with_offsets(tok, seq)
        assert (text, offsets) == decode_with_offsets_reference(tok, seq), seq
        assert text == tok.decode(seq, skip_special_tokens=True)
        multibyte += any(b - a == 1 and ord(text[a]) > 127 for a, b in offsets) and any(a == b for a, b in offsets)
    assert multibyte > 0  # some cases split a character over byte tokens (an empty range, then the character)


@pytest.mark.parametrize("name", ["byte_level", "metaspace"])
def test_a_long_response(name, request):
    tok = request.getfixturevalue(name)
    seq = tok(TEXT * 40, add_special_tokens=False)["input_ids"][:1023] + [tok.eos_token_id]
    text, offsets = decode_with_offsets(tok, seq)
    assert (text, offsets) == decode_with_offsets_reference(tok, seq)
    assert len(offsets) == 1024 and offsets[-1] == (len(text), len(text))
    assert "".join(text[a:b] for a, b in offsets) == text
