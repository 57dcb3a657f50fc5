"""What a run needs of the machine, checked before anything heavy loads: the model's shape (from its config.json
and safetensors headers), a memory estimate (docs/METHOD.md, "Memory estimate") and the memory available.

`memory_problem(cfg, items)` is "" when the estimate fits `MEMORY_SHARE` of the available memory, else a message
that says how much the run would take, where, and which settings drive it. `core.prompt_sets.load_prompts` calls it,
so both the app's Launch form and `mrtpo train` refuse such a run before the model loads.

Never imports torch or transformers: the app validates its form with it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.choices import routes_by_replay, stores_credit
from core.paths import resolve_path
from core.presets import EMBEDDED_MODELS, MODEL_PRESETS

FLOAT_BYTES = 4  # the trainer keeps fp32 master weights, gradients, AdamW moments and activations
MEMORY_SHARE = 0.8  # a run may take at most this share of the available memory
CHARS_PER_TOKEN = 3  # a prompt's length in tokens is estimated as ceil(characters / 3) (BPE: ~4 on English)
SKIP_ENV = "MRTPO_SKIP_MEMORY_CHECK"  # set to 1 to start a run whatever the estimate says
SAFETENSORS_HEADER_MAX = 100_000_000  # bytes; a larger header length is not a safetensors file


def model_folder(model: str) -> Path | None:
    """The folder of a model preset or path (None for a preset that is built on first use: smollm2-135m)."""
    if model in EMBEDDED_MODELS:
        return EMBEDDED_MODELS[model][0]
    if model in MODEL_PRESETS:
        return None
    return resolve_path(model)


def model_config(model: str) -> dict[str, Any]:
    """The model's config.json ({} when there is none or it is unreadable)."""
    folder = model_folder(model)
    if folder is None:
        return {}
    try:
        data = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


SAFETENSORS_DTYPES = ("BOOL", "U8", "I8", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64", "I64", "U64",
                      "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2", "C64")


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def read_safetensors_header(file: Path) -> dict[str, Any]:
    """The JSON header of a .safetensors file (8 bytes little-endian length, then the JSON), checked entry by
    entry: every tensor has a known `dtype`, a `shape` of non-negative whole numbers and `data_offsets` [begin,
    end] inside the file's data. Raises ValueError with one line naming the file and the tensor; reads only the
    header, so a malformed file is refused before torch or safetensors parse it."""
    name = Path(file).name
    try:
        with open(file, "rb") as fh:
            raw = fh.read(8)
            if len(raw) < 8:
                raise ValueError(f"{name}: not a safetensors file (shorter than its 8-byte header length)")
            (size,) = struct.unpack("<Q", raw)
            data_bytes = os.fstat(fh.fileno()).st_size - 8 - size
            if size > SAFETENSORS_HEADER_MAX or data_bytes < 0:
                raise ValueError(f"{name}: not a safetensors file (header length {size} does not fit the file)")
            header = json.loads(fh.read(size), parse_constant=lambda c: c)  # NaN / Infinity stay strings
    except OSError as exc:
        raise ValueError(f"{name}: unreadable ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{name}: its header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise ValueError(f"{name}: its header is not a JSON object")
    for tensor, meta in header.items():
        if tensor == "__metadata__":
            continue
        if not isinstance(meta, dict):
            raise ValueError(f"{name}: tensor {tensor!r} is not described by an object")
        shape, offsets = meta.get("shape"), meta.get("data_offsets")
        if meta.get("dtype") not in SAFETENSORS_DTYPES:
            raise ValueError(f"{name}: tensor {tensor!r} has an unknown dtype {meta.get('dtype')!r}")
        if not isinstance(shape, list) or not all(_is_count(n) for n in shape):
            raise ValueError(f"{name}: tensor {tensor!r} has shape {shape!r}; a list of whole numbers >= 0 expected")
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_count(n) for n in offsets)
                or offsets[0] > offsets[1] or offsets[1] > data_bytes):
            raise ValueError(f"{name}: tensor {tensor!r} has data_offsets {offsets!r} outside the file's "
                             f"{data_bytes} data bytes")
    return header


def safetensors_problem(folder: Path) -> str:
    """The first malformed *.safetensors file of a model folder, as one line ("" when every header reads)."""
    for file in sorted(Path(folder).glob("*.safetensors")):
        try:
            read_safetensors_header(file)
        except ValueError as exc:
            return f"{folder}: {exc}"
    return ""


def safetensors_parameters(folder: Path) -> int | None:
    """The number of weights in a folder's *.safetensors files, summed over their headers' tensor shapes
    (`read_safetensors_header`); None when there is no file or one is malformed."""
    total, found = 0, False
    for file in sorted(Path(folder).glob("*.safetensors")):
        try:
            header = read_safetensors_header(file)
        except ValueError:
            return None
        total += sum(math.prod(meta["shape"]) for name, meta in header.items() if name != "__metadata__")
        found = True
    return total if found else None


@dataclass(frozen=True)
class ModelShape:
    """What the memory estimate needs of a model."""

    parameters: int  # P
    vocab: int  # V
    hidden: int  # d
    intermediate: int  # f, the MLP's inner width
    layers: int  # L
    kv_width: int  # d_kv = d x key-value heads / attention heads


def model_shape(model: str) -> ModelShape | None:
    """The model's shape from its folder (None when unknown: a preset not built yet, a folder without
    safetensors weights or without the usual config keys)."""
    folder = model_folder(model)
    cfg = model_config(model)
    params = safetensors_parameters(folder) if folder is not None else None
    try:
        hidden = int(cfg["hidden_size"])
        heads = int(cfg.get("num_attention_heads") or 1)
        shape = ModelShape(
            parameters=int(params),
            vocab=int(cfg["vocab_size"]),
            hidden=hidden,
            intermediate=int(cfg.get("intermediate_size") or 4 * hidden),
            layers=int(cfg["num_hidden_layers"]),
            kv_width=hidden * int(cfg.get("num_key_value_heads") or heads) // max(heads, 1),
        )
    except (KeyError, TypeError, ValueError):
        return None
    return shape


def memory_estimate(shape: ModelShape, *, prompts_per_step: int, group_size: int, max_new_tokens: int,
                    prompt_tokens: int, replay_chunk: int, kl_beta: float, keeps_logits: bool,
                    nproc: int = 1) -> dict[str, int]:
    """Peak bytes of a training step, by term (docs/METHOD.md, "Memory estimate"); `total` is their sum:

    b = prompts_per_step x group_size / nproc samples per process, T = max_new_tokens, S = prompt_tokens + T,
    c = min(replay_chunk, b), 4 bytes a number;
      state       = 4 P (4 + r)                       weights, gradients, AdamW's two moments; r = 1 with kl_beta > 0
      logits      = 4 x 2 b T V  (when kept)          the sampling's next-token logits (a list and its stack)
      kv_cache    = 4 x 2 b S L d_kv                  generation's keys and values
      activations = 4 c S (L (8 d + 3 f) + 2 V)       one update chunk's saved activations, logits, log-softmax
      total       = nproc (state + logits + max(kv_cache, activations))

    >>> s = ModelShape(parameters=1000, vocab=10, hidden=4, intermediate=8, layers=2, kv_width=4)
    >>> memory_estimate(s, prompts_per_step=2, group_size=3, max_new_tokens=5, prompt_tokens=3, replay_chunk=4,
    ...                 kl_beta=0.0, keeps_logits=True)["total"]
    35296
    """
    b = max(1, prompts_per_step * group_size // max(nproc, 1))
    t, s = max_new_tokens, prompt_tokens + max_new_tokens
    c = min(replay_chunk, b)
    terms = {
        "state": FLOAT_BYTES * shape.parameters * (4 + (1 if kl_beta > 0 else 0)),
        "logits": FLOAT_BYTES * 2 * b * t * shape.vocab if keeps_logits else 0,
        "kv_cache": FLOAT_BYTES * 2 * b * s * shape.layers * shape.kv_width,
        "activations": FLOAT_BYTES * c * s * (shape.layers * (8 * shape.hidden + 3 * shape.intermediate)
                                              + 2 * shape.vocab),
    }
    terms["total"] = max(nproc, 1) * (terms["state"] + terms["logits"] + max(terms["kv_cache"], terms["activations"]))
    return terms


def prompt_tokens(items: list) -> int:
    """The longest prompt of a set in tokens, estimated as ceil(characters / CHARS_PER_TOKEN)."""
    longest = max((len(item.prompt()) for item in items), default=0)
    return -(-longest // CHARS_PER_TOKEN)


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def _gpu_free() -> int | None:
    """Free memory of GPU 0 in bytes from nvidia-smi (None without one)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=memory.free", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
        return int(float(out.strip().splitlines()[0])) * 1024 * 1024
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


def available_memory(device: str) -> tuple[int | None, str]:
    """(bytes free, where): GPU 0's free memory for device cuda or auto with a GPU, else the RAM the kernel
    says is available (MemAvailable)."""
    if device in ("cuda", "auto"):
        free = _gpu_free()
        if free is not None:
            return free, "free GPU memory"
    return _meminfo_available(), "available RAM (MemAvailable)"


def gib(n: float) -> str:
    """Bytes as a message shows them: TiB from 1024 GiB, GiB from 0.25 GiB, MiB from 1 MiB (one decimal below 10),
    KiB from 1 KiB, else bytes; never a size that reads 0 unless it is 0.

    >>> gib(3 * 2**40), gib(2**29), gib(200 * 2**20), gib(2.5 * 2**20), gib(300 * 2**10), gib(512), gib(0)
    ('3.0 TiB', '0.5 GiB', '200 MiB', '2.5 MiB', '300 KiB', '512 B', '0 B')
    """
    if n >= 2**40:
        return f"{n / 2**40:.1f} TiB"
    if n >= 2**28:
        return f"{n / 2**30:.1f} GiB"
    if n >= 2**20:
        return f"{n / 2**20:.{0 if n >= 10 * 2**20 else 1}f} MiB"
    return f"{n / 2**10:.0f} KiB" if n >= 2**10 else f"{n:.0f} B"


def keeps_sampling_logits(cfg: Any) -> bool:
    """True when the run keeps the sampling's logits for replay: it routes by replay (`core.config.routes_by_replay`)."""
    return routes_by_replay(cfg)


# The fields a message about each term names: the one whose value is furthest above its default.
TERM_FIELDS = {"state": ("model",), "logits": ("group_size", "prompts_per_step", "max_new_tokens"),
               "kv_cache": ("group_size", "prompts_per_step", "max_new_tokens"), "activations": ("replay_chunk",)}
DRIVERS = {
    "state": "the model's size (a smaller model, or kl_beta 0 to skip the reference copy)",
    "logits": "prompts_per_step x group_size x max_new_tokens (the sampling's logits are kept for replay)",
    "kv_cache": "prompts_per_step x group_size x (prompt + max_new_tokens) (generation's key-value cache)",
    "activations": "replay_chunk x (prompt + max_new_tokens) (the update's activations)",
}


def memory_problem(cfg: Any, items: list, available: tuple[int | None, str] | None = None) -> tuple[str, str]:
    """("", "") when the run's memory estimate fits MEMORY_SHARE of the available memory (or cannot be made),
    else (the field to blame, a message naming the estimate, the memory and the settings that drive it).
    `available` (bytes, where) replaces the probe of this machine."""
    if os.environ.get(SKIP_ENV, "") not in ("", "0"):
        return "", ""
    shape = model_shape(cfg.model)
    if shape is None:
        return "", ""
    est = memory_estimate(shape, prompts_per_step=cfg.prompts_per_step, group_size=cfg.group_size,
                          max_new_tokens=cfg.max_new_tokens, prompt_tokens=prompt_tokens(items),
                          replay_chunk=cfg.replay_chunk, kl_beta=cfg.kl_beta, keeps_logits=keeps_sampling_logits(cfg),
                          nproc=cfg.nproc)
    free, where = available if available is not None else available_memory(cfg.device)
    if free is None or est["total"] <= MEMORY_SHARE * free:
        return "", ""
    biggest = max(("logits", "kv_cache", "activations", "state"), key=est.get)
    defaults = {f.name: f.default for f in dataclasses.fields(cfg)}
    field = max(TERM_FIELDS[biggest], key=lambda f: _ratio(getattr(cfg, f), defaults.get(f)))
    return field, (f"this run would need about {gib(est['total'])} of memory (estimate, docs/METHOD.md \"Memory "
                   f"estimate\"), more than {MEMORY_SHARE:.0%} of the {gib(free)} of {where}; most of it is the "
                   f"{biggest.replace('_', ' ')} ({gib(est[biggest])}), driven by {DRIVERS[biggest]}: lower those "
                   f"(or set {SKIP_ENV}=1 to start it anyway)")


def _ratio(value: Any, default: Any) -> float:
    try:
        return float(value) / float(default)
    except (TypeError, ValueError, ZeroDivisionError):
        return 0.0


# ----------------------------------------------------------------------------------------------- disk

# schema 3 on noisy floats (`mrtpo bench store`, 512x1024x5: 6.8 per cell + 7.8 per token = 8.5 per cell in all)
CELL_BYTES = 7  # on disk per (sample, reward, token) of a credit map: distance, weight, in_span
TOKEN_BYTES = 8  # per (sample, token): id, end offset, total advantage, and ~4 characters of response text
METRICS_LINE_BYTES = 8192  # one metrics.jsonl line (the shipped runs: 2-8 KB)


def stored_samples(cfg: Any) -> int:
    """Samples whose credit map a stored step holds (`core.run.credit_choice.choose_samples`): the batch B =
    prompts_per_step x group_size when credit_samples is 0 or >= B, else whole groups: G x max(1,
    credit_samples // G)."""
    batch = cfg.prompts_per_step * cfg.group_size
    n = int(getattr(cfg, "credit_samples", 0) or 0)
    if n <= 0 or n >= batch:
        return batch
    return cfg.group_size * max(1, n // cfg.group_size)


def disk_estimate(cfg: Any, n_rewards: int, parameters: int | None = None) -> dict[str, int]:
    """Bytes a run leaves on disk, by term (docs/CONTRACTS.md, "What a run stores"); `total` is their sum:

    S = stored_samples(cfg), T = max_new_tokens (the longest response), K = n_rewards (e.g. 20 steps, credit_every
    10: steps 1, 11 and 20 store a credit map, 3 x 32 x 100 x (7 x 2 + 8) = 211,200 bytes),
    n_c = steps storing a credit map (step 1, every credit_every-th after it, the last), P = parameters;
      credit      = n_c S T (CELL_BYTES K + TOKEN_BYTES)       the credit maps (an upper bound: T is the longest)
      metrics     = steps METRICS_LINE_BYTES
      checkpoints = min(kept, saved) x 4 P (1 + 2 for AdamW's moments)   0 when P is unknown

    >>> from types import SimpleNamespace as C
    >>> c = C(prompts_per_step=4, group_size=8, credit_samples=0, credit_every=10, steps=20, max_new_tokens=100,
    ...       checkpoint_every=0, keep_checkpoints=3, backend="builtin")
    >>> disk_estimate(c, 2, 1000)
    {'credit': 211200, 'metrics': 163840, 'checkpoints': 12000, 'total': 387040}
    """
    steps = int(cfg.steps)
    every = int(getattr(cfg, "credit_every", 1) or 1)
    n_credit = sum(1 for s in range(1, steps + 1) if stores_credit(s, every, steps))
    per_step = stored_samples(cfg) * cfg.max_new_tokens * (CELL_BYTES * n_rewards + TOKEN_BYTES)
    saved = len({*range(cfg.checkpoint_every, steps + 1, cfg.checkpoint_every), steps} if cfg.checkpoint_every > 0
                else {steps})
    kept = saved if not cfg.keep_checkpoints else min(cfg.keep_checkpoints, saved)
    one_ckpt = FLOAT_BYTES * parameters * 3 if parameters else 0  # both backends save the optimizer (resume)
    terms = {"credit": n_credit * per_step, "metrics": steps * METRICS_LINE_BYTES, "checkpoints": kept * one_ckpt}
    terms["total"] = sum(terms.values())
    return terms


def disk_line(cfg: Any, n_rewards: int) -> str:
    """One line: the disk a run will take (`disk_estimate`), with its biggest terms."""
    shape = model_shape(cfg.model)
    est = disk_estimate(cfg, n_rewards, shape.parameters if shape is not None else None)
    n_credit = sum(1 for s in range(1, cfg.steps + 1) if stores_credit(s, cfg.credit_every, cfg.steps))
    batch = cfg.prompts_per_step * cfg.group_size
    ckpt = gib(est["checkpoints"]) if shape is not None else "unknown (model not built yet)"
    return (f"disk: about {gib(est['total'])} (estimate): credit maps {gib(est['credit'])} ({n_credit} steps x "
            f"{stored_samples(cfg)} of {batch} samples x {n_rewards} rewards x up to {cfg.max_new_tokens} tokens; "
            f"credit_samples, credit_every), checkpoints {ckpt}, metrics {gib(est['metrics'])}")
