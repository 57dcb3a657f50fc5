"""Where a run's contrastive distances fall, per reward: a look at real samples in numbers.

    python -m core.tools.distance_look RUN_FOLDER [RUN_FOLDER ...] [--steps 1 2 ...] [--top 8]

Reads the run's stored credit maps (`RunStore.credit`: per token the distance d[k,i,t] of the run's relevance, the
token's text and whether the verifier inspected it) and prints, per run and reward, over the replayed (sample,
reward) pairs of the chosen steps (default: every stored step):

- pairs, tokens, and the share of tokens inside the verifier's spans;
- mean d inside and outside the spans and their ratio (above 1: the distance prefers the inspected tokens);
- the share of each pair's d mass on its first 3 tokens, and on its last 3 (a position effect: a changed prompt
  moves the start of a response most, whatever the constraint);
- the Spearman correlation of d with the token's position;
- the tokens most often holding a pair's largest d (their text, how many pairs).

Nothing is written; the printed Markdown is what docs/results/faithfulness-smollm2-look.md quotes.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

import numpy as np
import pandas as pd


def pair_stats(df: pd.DataFrame, top: int = 8) -> dict:
    """The look's numbers (module docstring) for one reward's rows (columns step, sample, t, token, distance,
    in_span), over the pairs with a finite distance."""
    df = df[np.isfinite(df["distance"].astype(float))]
    out = {"pairs": 0}
    if df.empty:
        return out
    head, tail, tops = [], [], Counter()
    for _, g in df.groupby(["step", "sample"], sort=False):
        g = g.sort_values("t")
        d = g["distance"].to_numpy(float)
        total = d.sum()
        if total <= 0:
            continue
        head.append(d[:3].sum() / total)
        tail.append(d[-3:].sum() / total)
        tops[repr(str(g["token"].iloc[int(d.argmax())]))] += 1
    inside = df[df["in_span"].astype(bool)]["distance"].astype(float)
    outside = df[~df["in_span"].astype(bool)]["distance"].astype(float)
    rho = df["t"].rank().corr(df["distance"].rank()) if len(df) > 2 else float("nan")
    return {"pairs": len(head), "tokens": len(df), "span_share": float(df["in_span"].astype(bool).mean()),
            "d_in": float(inside.mean()) if len(inside) else float("nan"),
            "d_out": float(outside.mean()) if len(outside) else float("nan"),
            "head3": float(np.mean(head)) if head else float("nan"),
            "tail3": float(np.mean(tail)) if tail else float("nan"), "rho_t": float(rho),
            "top": ", ".join(f"{tok} {n}" for tok, n in tops.most_common(top))}


def look(folder: str, steps: list[int] | None = None, top: int = 8) -> list[dict]:
    """One row per reward of run `folder` (`pair_stats` over the chosen steps)."""
    from core.run.store import RunStore

    store = RunStore(folder)
    chosen = steps or store.credit_steps()
    if not chosen:
        raise SystemExit(f"distance_look: {folder} has no stored credit maps (is it a run folder?)")
    df = pd.concat([store.credit(s) for s in chosen], ignore_index=True)
    cfg = store.config()
    rows = []
    for reward, g in df.groupby("reward", sort=True):
        rows.append({"run": store.path.name, "relevance": cfg.get("relevance"), "reward": reward,
                     **pair_stats(g, top)})
    return rows


def _f(v) -> str:
    return "n/a" if v is None or (isinstance(v, float) and np.isnan(v)) else f"{v:.3f}" if isinstance(v, float) else str(v)


def markdown(rows: list[dict]) -> str:
    cols = ["run", "relevance", "reward", "pairs", "span_share", "d_in", "d_out", "head3", "tail3", "rho_t", "top"]
    lines = ["| " + " | ".join(cols) + " | d_in / d_out |", "|---" * (len(cols) + 1) + "|"]
    for r in rows:
        ratio = r.get("d_in", float("nan")) / r["d_out"] if r.get("d_out") else float("nan")
        lines.append("| " + " | ".join(_f(r.get(c)) for c in cols) + f" | {_f(ratio)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m core.tools.distance_look", description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="run folders")
    p.add_argument("--steps", type=int, nargs="*", default=None, help="steps to read (default: every stored one)")
    p.add_argument("--top", type=int, default=8, help="tokens listed as the most frequent argmax (default 8)")
    args = p.parse_args(argv)
    rows = [r for run in args.runs for r in look(run, args.steps, args.top)]
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
