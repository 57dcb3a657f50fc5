"""The "Steps to reach" table of seed groups (Compare runs with seed groups on): per group and target rate, the
mean and spread of its runs' first steps at that rate, over the runs that reached it.

Pure pandas over `analysis.steps_to_reach`'s per-run table; no Streamlit. Never imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd


def _spread(values: Sequence[float], band: str, digits: int) -> str:
    """"m ± s" (band "std": mean and sample standard deviation, ddof = 1) or "m (lo–hi)" (band "minmax"); one value
    alone as itself."""
    v = np.asarray(values, dtype=float)
    mean = f"{v.mean():.{digits}f}"
    if len(v) < 2:
        return mean
    if band == "minmax":
        return f"{mean} ({v.min():.{digits}f}–{v.max():.{digits}f})"
    return f"{mean} ± {v.std(ddof=1):.{digits}f}"


def group_steps_to_reach(table: pd.DataFrame, groups: Mapping[str, Sequence[str]], thresholds: Sequence[float],
                         band: str = "std", missing: str = "no data") -> pd.DataFrame:
    """One row per seed group (`analysis.seed_groups`) of `steps_to_reach`'s per-run table, as text: "runs" (how
    many), for each target "≥ t" the mean ± std (band "std") or mean (min–max) (band "minmax") of the first step of
    the group's runs that reached it, followed by "(k of n)" when only k of its n runs with data did ("not reached
    (0 of n)" when none did), "best" the same statistic of the runs' best values, and `missing` for a group none
    of whose runs logged a value. Groups in the order given; runs not in the table are skipped."""
    by_run = table.set_index("run")
    rows = []
    for label, runs in groups.items():
        part = by_run.loc[[r for r in runs if r in by_run.index]]
        with_data = part[part["best"].notna()]
        row: dict[str, object] = {"group": label, "runs": len(part)}
        for thr in thresholds:
            col = f"≥ {thr:g}"
            if with_data.empty:
                row[col] = missing
                continue
            hit = pd.to_numeric(with_data[col], errors="coerce").dropna()
            n, k = len(with_data), len(hit)
            row[col] = (f"not reached (0 of {n})" if not k
                        else _spread(hit.tolist(), band, 1) + ("" if k == n else f" ({k} of {n})"))
        row["best"] = _spread(with_data["best"].tolist(), band, 3) if not with_data.empty else missing
        rows.append(row)
    return pd.DataFrame(rows, columns=["group", "runs", *(f"≥ {t:g}" for t in thresholds), "best"])
