"""The names a run can choose from (method, routing, relevance, ...) and the rule that says whether a run routes.

The registries in core/algos/advantages.py (ESTIMATORS) and core/algos/routing.py (ROUTING, RELEVANCE) know
these names; they are kept here, not imported from there, because those modules import torch (tests check
that the lists agree). `core.config` validates fields against them; the app's pages and the memory estimate
ask `routing_source` / `routes_by_replay`; the memory estimate and both trainers ask `stores_credit` (which steps
write a credit map). Imports nothing of the project.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

METHODS = ("grpo", "gdpo", "mrtpo")
ROUTINGS = ("replay", "span", "uniform", "entropy")
# Estimators that spread credit by routing weights; the others (grpo, gdpo) give every token the same advantage.
ROUTED_ESTIMATORS = ("mrtpo",)
RELEVANCES = ("js", "js_specific", "swap", "swap_specific", "logp", "logp_specific", "auto", "neutral", "opposite",
              "key", "placebo", "average", "gradxinput")
# The relevance a run uses unless told otherwise (TrainConfig and MRTPOConfig): js, the one that learns. In study v2
# (docs/results/study-v2) MRTPO js beat GDPO on held-out all-satisfied on all 5 seeds (mean over evaluations +0.020,
# paired t 95% [+0.009, +0.030]); swap_specific (the default from issue 12 to 28) did not ([-0.013, +0.056], one seed
# negative) and lost safety (-0.038): the policy does not read which word is forbidden, so swapping it carries no
# signal (docs/METHOD.md, "Relevance variants"). Every run records its relevance in config.json.
DEFAULT_RELEVANCE = "js"
REPLAY_PAIRS = ("nonzero_adv", "all")
# Precision of replay's no-gradient contrastive passes (docs/METHOD.md, "Replay precision"): auto is the run's own
# (bf16 autocast on CUDA, fp32 on CPU), float32 and bfloat16 force one on any device.
REPLAY_DTYPES = ("auto", "float32", "bfloat16")
# What happens to routing weight above w_max (core.algos.routing.ROUTING_CLIPS, docs/METHOD.md "Keeping each reward's
# mass"): mass (redistributed: every reward keeps its advantage mass) or clip (dropped; runs recorded before the field
# existed were trained so, and their config.json loads as clip).
ROUTING_CLIPS = ("mass", "clip")
# The `shuffle` control (TrainConfig.routing_shuffle, docs/METHOD.md "Controls"): on permutes each (sample, reward)'s
# routing weights over its response's tokens (core.algos.routing.shuffle_routing); off routes as computed.
ROUTING_SHUFFLES = ("off", "on")
DEVICES = ("auto", "cpu", "cuda")
# Training engines: the built-in single-process loop (core.run) or TRL's GRPOTrainer (core.integrations.trl).
BACKENDS = ("builtin", "trl")


def stores_credit(step: int, every: int, last: int | None = None) -> bool:
    """True when step `step` (1-based) writes its credit map: step 1, every `every`-th after it (1, 1 + every,
    1 + 2 every, ...) and the last step `last`."""
    return (step - 1) % max(int(every), 1) == 0 or (last is not None and step == last)


def routing_source(cfg: Any) -> str | None:
    """The routing source a run uses: its `routing` for a routed estimator (mrtpo), None for grpo and gdpo.

    The one place that decides whether a run routes, and by what: both trainers, the memory estimate and the
    app's pages ask here. `cfg` is a TrainConfig, an MRTPOConfig or a run's config.json as a dict (a config
    without `routing` routes by replay, the default since the first run store).

    >>> routing_source({"method": "mrtpo"}), routing_source({"method": "gdpo", "routing": "replay"})
    ('replay', None)
    """
    get = cfg.get if isinstance(cfg, Mapping) else (lambda key, default=None: getattr(cfg, key, default))
    return get("routing", "replay") if get("method", None) in ROUTED_ESTIMATORS else None


def control_label(cfg: Any) -> str | None:
    """The controls a run trained with (docs/METHOD.md, "Controls"), as the Runs table and Compare name them, or
    None: `shuffle (seed s)` for a routed run with routing_shuffle on, `top-entropy q=0.2` for routing entropy,
    `reward scales name=c, ...` for reward_scales (scale-matched GDPO).

    >>> control_label({"method": "mrtpo", "routing_shuffle": "on", "routing_shuffle_seed": 3})
    'shuffle (seed 3)'
    >>> control_label({"method": "gdpo", "reward_scales": {"a": 0.84, "b": 0.35}}), control_label({"method": "gdpo"})
    ('reward scales a=0.84, b=0.35', None)
    """
    get = cfg.get if isinstance(cfg, Mapping) else (lambda key, default=None: getattr(cfg, key, default))
    source = routing_source(cfg)
    parts = []
    if source and get("routing_shuffle", "off") == "on":
        parts.append(f"shuffle (seed {get('routing_shuffle_seed', 0)})")
    if source == "entropy":
        parts.append(f"top-entropy q={float(get('entropy_q', 0.2)):g}")
    if scales := get("reward_scales", None):
        parts.append("reward scales " + ", ".join(f"{k}={float(v):g}" for k, v in scales.items()))
    return "; ".join(parts) or None


def routes_by_replay(cfg: Any) -> bool:
    """True when the run routes by contrastive replay: the only runs with relevance distances (JS or log-prob)."""
    return routing_source(cfg) == "replay"
