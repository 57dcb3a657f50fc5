"""Per-id agreement between the project's IFBench verifiers and IFBench's reference verdicts (written by
`core/tools/ifbench_reference.py` in a throwaway environment, docs/IFBENCH.md), instruction by instruction, strict
and loose, on the same responses (default: the package's `sample_output.jsonl`).

    python -m core.tools.ifbench_conformance --reference /tmp/ifb-ref/verdicts.jsonl

Prints one line per id (instructions, agreeing strict, agreeing loose), the ids left out (refused, or without a
verifier yet) and the instruction-level agreement over the supported ids; `--show-differences` lists each
differing instruction. Exit 1 when the agreement is under `--min-agreement` (default 0.99).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from core.evaluate.benchmarks import ifbench_file
from core.evaluate.ifeval import followed
from core.tasks import build_for_prompt
from core.verifiers.ifbench import REFUSED, supported


def compare(prompts: Path, responses: Path, reference: Path) -> tuple[dict[str, list[int]], list[str]]:
    """id -> [instructions, strict agreements, loose agreements], and one line per differing instruction."""
    ref = {str(r["key"]): r for r in map(json.loads, reference.read_text(encoding="utf-8").splitlines()) if r}
    answers = {}
    for line in responses.read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            answers[r["prompt"]] = r["response"]
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    differences = []
    for line in prompts.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        r = ref[str(record["key"])]
        for i, iid in enumerate(record["instruction_id_list"]):
            if not supported(iid):
                continue
            kwargs = {k: v for k, v in record["kwargs"][i].items() if v is not None}
            verifier = build_for_prompt(iid, kwargs, record["prompt"])
            strict, loose = followed(verifier, answers[record["prompt"]], "project")
            t = tally[iid]
            t[0] += 1
            t[1] += strict == r["strict"][i]
            t[2] += loose == r["loose"][i]
            if strict != r["strict"][i] or loose != r["loose"][i]:
                differences.append(f"key {record['key']} {iid}: here strict {strict} loose {loose}, reference "
                                   f"strict {r['strict'][i]} loose {r['loose'][i]}")
    return dict(tally), differences


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.tools.ifbench_conformance", description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", required=True, help="verdicts JSONL from core/tools/ifbench_reference.py")
    parser.add_argument("--prompts", help="IFBench-format prompts (default: the installed package's test set)")
    parser.add_argument("--responses", help="JSONL of {prompt, response} (default: the package's sample_output)")
    parser.add_argument("--min-agreement", type=float, default=0.99)
    parser.add_argument("--show-differences", action="store_true")
    args = parser.parse_args(argv)
    prompts = Path(args.prompts) if args.prompts else ifbench_file("test")
    responses = Path(args.responses) if args.responses else ifbench_file("sample")
    tally, differences = compare(prompts, responses, Path(args.reference))
    print(f"{'instruction id':34} {'n':>4} {'strict agree':>12} {'loose agree':>12}")
    for iid, (n, s, lo) in sorted(tally.items()):
        print(f"{iid:34} {n:4d} {s:12d} {lo:12d}")
    print("refused:", ", ".join(sorted(REFUSED)))
    n = sum(t[0] for t in tally.values())
    agree = (n - len(differences)) / n if n else float("nan")
    print(f"supported ids: {len(tally)}; instructions: {n}; agreeing strict and loose: {n - len(differences)} "
          f"({agree:.4f}); strict {sum(t[1] for t in tally.values())}, loose {sum(t[2] for t in tally.values())}")
    if args.show_differences:
        print("\n".join(differences))
    return 0 if n and agree >= args.min_agreement else 1


if __name__ == "__main__":
    sys.exit(main())
