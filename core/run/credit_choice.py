"""Which steps and samples a run stores token-level credit for (`credit_every`, `credit_samples`).

Metrics are written every step. The token-level credit map of a step is written when `stores_credit(step,
every, last)` (step 1, every `every`-th step after it, and the run's last step), for the samples
`choose_samples(rewards, group_size, n)` picks: all of them when the batch has at most `n` (or `n` is 0);
else whole groups, chosen deterministically (docs/CONTRACTS.md, "What a run stores"):

1. m = max(1, n // G) groups are kept (n rounded down to whole groups, at least one);
2. for each reward k in order, while fewer than m groups are kept: if the kept groups lack an outcome of k
   (satisfied: score >= 1, or not: score < 1, among the samples k applies to) that the batch has, keep the
   first group (lowest index) that has both outcomes of k, else the first that has the missing one;
3. the remaining places go to the first groups not yet kept.

So a stored step shows, for every reward, a satisfied and an unsatisfied response whenever the batch had both
and m is large enough (one group with both outcomes covers a reward; m >= K always suffices). Torch-free.
"""

from __future__ import annotations

import numpy as np

from core.choices import stores_credit  # noqa: F401  (the rule lives with the run's other choices)


def outcomes(rewards: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(satisfied, unsatisfied), each (B, K) bool: score >= 1, score < 1; both False where the reward does not
    apply (NaN)."""
    r = np.asarray(rewards, dtype=np.float64)
    applies = ~np.isnan(r)
    with np.errstate(invalid="ignore"):
        return applies & (r >= 1.0), applies & (r < 1.0)


def choose_samples(rewards: np.ndarray, group_size: int, n: int) -> np.ndarray:
    """The batch rows (sorted) whose token credit is stored: all when n == 0 or n >= B, else whole groups
    chosen as the module docstring says. rewards: (B, K), NaN where a reward does not apply; rows of a group
    contiguous (B a multiple of group_size)."""
    r = np.asarray(rewards, dtype=np.float64)
    B = r.shape[0]
    if n <= 0 or n >= B:
        return np.arange(B)
    G = max(int(group_size), 1)
    n_groups = -(-B // G)
    m = min(max(1, n // G), n_groups)
    sat, unsat = outcomes(r)
    K = r.shape[1] if r.ndim == 2 else 0
    pad = n_groups * G - B
    if pad:
        sat = np.concatenate([sat, np.zeros((pad, K), bool)])
        unsat = np.concatenate([unsat, np.zeros((pad, K), bool)])
    g_sat = sat.reshape(n_groups, G, K).any(1)  # (groups, K)
    g_unsat = unsat.reshape(n_groups, G, K).any(1)
    kept: list[int] = []
    for k in range(K):
        while len(kept) < m:
            have = np.array([g_sat[kept, k].any(), g_unsat[kept, k].any()]) if kept else np.zeros(2, dtype=bool)
            need = np.array([g_sat[:, k].any(), g_unsat[:, k].any()]) & ~have
            if not need.any():
                break
            candidates = [g for g in range(n_groups) if g not in kept]
            both = [g for g in candidates if g_sat[g, k] and g_unsat[g, k]]
            one = [g for g in candidates if (need[0] and g_sat[g, k]) or (need[1] and g_unsat[g, k])]
            kept.append(both[0] if both else one[0])
    for g in range(n_groups):
        if len(kept) >= m:
            break
        if g not in kept:
            kept.append(g)
    rows = np.concatenate([np.arange(g * G, min((g + 1) * G, B)) for g in sorted(kept)])
    return rows
