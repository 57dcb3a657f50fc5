"""What `auto` relevance picks per reward family, and from which model's evidence (docs/METHOD.md, "auto").

An evidence file (`core/evidence/<name>.json`) names, per constraint family, the relevance variant that `auto` routes
that family's reward with, and a default for the families it does not list:

    {"model": "smollm2-135m", "source": "...", "default": "js", "families": {"keywords:existence": "swap", ...},
     "measured": {family: {"variant": ..., "gap": ..., "gap_lo": ..., ...}}}

`tiny-multi.json` holds the choice measured on the embedded tiny model (`mrtpo bench contrast`: swap where the policy
reads the argument). A model's own file is written from its `mrtpo bench faithfulness` reports by

    python -m core.auto_evidence --model smollm2-135m docs/results/faithfulness-smollm2-135m-clip-default.csv \\
        docs/results/faithfulness-smollm2-135m-clip-ifeval-style.csv --write

with the rule of `choose`: per family, among `CANDIDATES`, the variant with the largest mean lift gap whose 95%
interval, and whose paired differences to the entropy and the position prior's gaps, all lie above 0. A run records
the evidence it used (`TrainConfig.auto_evidence`, in config.json). Imports neither torch nor pandas at import time.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

FOLDER = Path(__file__).parent / "evidence"
DEFAULT = "tiny-multi"
# The variants `auto` may pick for a family: the pairwise ones (a reward's relevance from its own distance alone;
# `*_specific` reads the other rewards' distances of the same variant, which auto does not compute), each run by the
# built-in trainer.
CANDIDATES = ("js", "swap", "logp", "neutral", "opposite", "key", "placebo", "average", "gradxinput")
PRIORS = ("entropy", "position")


def names() -> list[str]:
    """The evidence files shipped (`core/evidence/*.json`), by name."""
    return sorted(p.stem for p in FOLDER.glob("*.json"))


# Folder names a preset's model is loaded from (core.model's converted cache), by preset: a model given as that
# folder (MRTPOTrainer reads the name from the loaded model) gets the preset's evidence.
FOLDER_PRESETS = {"smollm2-135m-instruct": "smollm2-135m"}


def for_model(model: str) -> str:
    """The evidence a run of `model` uses by default: the model's own file (by preset name or folder name, the
    preset's converted folder included) when one is shipped, else `DEFAULT` (tiny-multi).

    >>> for_model("/root/.cache/mrtpo/smollm2-135m-instruct"), for_model("tiny-instruct")
    ('smollm2-135m', 'tiny-multi')
    """
    name = Path(str(model)).name
    name = FOLDER_PRESETS.get(name, name)
    return name if name in names() else DEFAULT


def one_pass_reason(variant: str) -> str:
    """Why MRTPOTrainer's replay, one no-gradient js pass per reward, cannot route a reward whose family's evidence
    picks `variant` ("" when it can; `core.algos.routing.one_pass_reason` with distance js, auto's own)."""
    from core.algos import routing

    return routing.one_pass_reason(variant, distance=routing.RELEVANCE["auto"].distance)


def one_pass_error(name: str) -> str:
    """Why a replay of one js pass per reward (MRTPOTrainer's) cannot run `auto` under evidence `name` ("" when it
    can): a variant it picks merges passes or uses another distance."""
    evidence = load(name)
    bad = sorted({v for v in (*evidence.get("families", {}).values(), evidence.get("default", "js"))
                  if one_pass_reason(v)})
    if not bad:
        return ""
    return (f"the {name} evidence picks {', '.join(bad)} for some families, which MRTPOTrainer's one js pass per "
            "reward cannot run: use backend builtin, auto_evidence tiny-multi, or another relevance")


def load(name: str) -> dict:
    """The evidence file `name` (ValueError naming the shipped ones when there is none)."""
    path = FOLDER / f"{name}.json"
    if not path.is_file():
        raise ValueError(f"no auto evidence {name!r}; shipped: {', '.join(names())}")
    data = json.loads(path.read_text())
    bad = {f: v for f, v in data.get("families", {}).items() if v not in CANDIDATES}
    if bad or data.get("default", "js") not in CANDIDATES:
        raise ValueError(f"{path}: auto may pick only {', '.join(CANDIDATES)}; the file names {bad or data['default']}")
    return data


def variant_for(evidence: Mapping, family: str) -> str:
    """The variant `auto` routes a reward of `family` with under `evidence`."""
    return evidence.get("families", {}).get(family, evidence.get("default", "js"))


def describe(name: str, rewards) -> str:
    """The start line of an `auto` run: whose evidence it uses and the variant per reward.

    >>> describe("tiny-multi", ["task:arithmetic", "punctuation:no_comma"])
    'relevance auto: the tiny-multi evidence (core/evidence/tiny-multi.json): task:arithmetic -> swap, punctuation:no_comma -> js'
    """
    evidence = load(name)
    picks = ", ".join(f"{r} -> {variant_for(evidence, r)}" for r in rewards)
    return f"relevance auto: the {name} evidence (core/evidence/{name}.json): {picks}"


def _finite(v) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def choose(rows: Iterable[Mapping], candidates: Iterable[str] = CANDIDATES) -> dict[str, dict]:
    """family -> {"variant", "gap", "gap_lo", "gap_over_entropy_lo", "gap_over_position_lo", "sets"} from the rows of
    one or more faithfulness CSVs (columns relevance, reward, gap, gap_lo, gap_over_<prior>_lo; `rows` may carry a
    "set" key). A variant qualifies for a family when, in every set that measured the family, gap_lo > 0 and
    gap_over_<prior>_lo > 0 for both priors; the pick is the qualifying variant with the largest gap averaged over
    those sets. A family no variant qualifies for is left out (auto then uses the evidence's default)."""
    candidates = tuple(candidates)
    by: dict[tuple[str, str], list[Mapping]] = {}
    for r in rows:
        if r.get("relevance") in candidates and r.get("reward") not in (None, "*"):
            by.setdefault((r["reward"], r["relevance"]), []).append(r)
    out: dict[str, dict] = {}
    for family in sorted({f for f, _ in by}):
        best = None
        for variant in candidates:
            measured = by.get((family, variant), [])
            lows = [r.get(c) for r in measured for c in ("gap_lo", *(f"gap_over_{p}_lo" for p in PRIORS))]
            if not measured or not all(_finite(v) and float(v) > 0 for v in lows):
                continue
            gap = sum(float(r["gap"]) for r in measured) / len(measured)
            if best is None or gap > best["gap"]:
                best = {"variant": variant, "gap": gap, "gap_lo": min(float(r["gap_lo"]) for r in measured),
                        **{f"gap_over_{p}_lo": min(float(r[f"gap_over_{p}_lo"]) for r in measured) for p in PRIORS},
                        "sets": sorted({str(r.get("set", "")) for r in measured})}
        if best is not None:
            out[family] = best
    return out


def evidence_from_csvs(model: str, paths: list[str]) -> dict:
    """The evidence file's content for `model` from its faithfulness CSVs (`choose`)."""
    import pandas as pd

    rows = []
    for path in paths:
        df = pd.read_csv(path, keep_default_na=False, na_values=[""])
        rows += [{**r, "set": Path(path).stem} for r in df.to_dict("records")]
    measured = choose(rows)
    return {"model": model, "source": "mrtpo bench faithfulness: " + ", ".join(paths)
            + " (rule: core.auto_evidence.choose; families without a qualifying variant use the default)",
            "default": "js", "families": {f: m["variant"] for f, m in measured.items()}, "measured": measured}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m core.auto_evidence", description="auto's per-family choice from a "
                                "model's faithfulness reports")
    p.add_argument("csvs", nargs="+", help="faithfulness-<model>-<clip>[-<set>].csv reports")
    p.add_argument("--model", required=True, help="the evidence's name: the preset (or model folder) name")
    p.add_argument("--write", action="store_true", help=f"write {FOLDER}/<model>.json (else print it)")
    args = p.parse_args(argv)
    data = evidence_from_csvs(args.model, args.csvs)
    text = json.dumps(data, indent=1) + "\n"
    if args.write:
        (FOLDER / f"{args.model}.json").write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
