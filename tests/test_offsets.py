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


def test_byte_level_ids_of_whole_characters_decode_no_window(byte_level, monkeypatch):
    """With a byte-level tokenizer an id that is whole UTF-8 appends its own text (a per-id cache): plain text
    decodes no window at all, and a response with characters split over byte ids decodes two windows for each
    id of a split character only; the offsets are the reference's either way."""
    import core.model as model

    plain = byte_level("The river runs steady under a bridge, and light falls on water.\n" * 20,
                       add_special_tokens=False)["input_ids"] + [byte_level.eos_token_id]
    mixed = byte_level(TEXT, add_special_tokens=False)["input_ids"]
    split = [i for i in mixed if "\ufffd" in byte_level.backend_tokenizer.decode([i])]
    assert split and len(split) < len(mixed) // 2
    expected = {id(seq): decode_with_offsets_reference(byte_level, seq) for seq in (plain, mixed)}
    decoded = []
    monkeypatch.setattr(model, "_window_steps", lambda *a: pytest.fail("the block windows on a byte-level tokenizer"))
    backend = byte_level.backend_tokenizer
    monkeypatch.setattr(byte_level, "_tokenizer", _Counting(backend, decoded))
    assert decode_with_offsets(byte_level, plain) == expected[id(plain)] and decoded == [plain]  # the text only
    decoded.clear()
    assert decode_with_offsets(byte_level, mixed) == expected[id(mixed)]
    assert len(decoded) == 2 * len(split) + 1 and decoded[-1] == mixed


class _Counting:
    """A tokenizer backend that records what it decodes but single ids (those are the per-id cache's)."""

    def __init__(self, backend, seen: list):
        self._backend, self._seen = backend, seen

    def decode(self, ids, skip_special_tokens=True):
        if len(ids) != 1:
            self._seen.append(list(ids))
        return self._backend.decode(ids, skip_special_tokens=skip_special_tokens)

    def __getattr__(self, name):
        return getattr(self._backend, name)
