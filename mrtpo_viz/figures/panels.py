"""The panels of Training curves and the metrics Compare runs offers: a registry of what each panel plots and
when its quantity is active in a run, so a panel whose quantity is constant by construction (KL to a
reference that does not exist, a clip fraction with one update pass) is left out with the reason instead of
plotting rounding noise.

Pure Python over run configs and metrics frames; no Streamlit. Never imports torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go

from core.choices import routes_by_replay
from mrtpo_viz.figures.lines import metric_lines
from mrtpo_viz.figures.training import loss_figure, per_reward_lines, reward_curves, step_time_figure

Metrics = Mapping[str, pd.DataFrame]


def _always(cfg: Mapping) -> bool:
    return True


def has_reference(cfg: Mapping) -> bool:
    """A KL penalty to a frozen reference model is trained (kl_beta > 0)."""
    return float(cfg.get("kl_beta") or 0.0) > 0


def several_passes(cfg: Mapping) -> bool:
    """The update makes more than one pass per batch (inner_epochs > 1): only then does the policy move away
    from the rollout policy within a step, so that its KL to it and the clip fraction can differ from 0."""
    return int(cfg.get("inner_epochs") or 1) > 1


def replays(cfg: Mapping) -> bool:
    """The run routes by contrastive replay (MRTPO with routing=replay), the only source of JS distances."""
    return routes_by_replay(cfg)


def has_eval(df: pd.DataFrame) -> bool:
    return any(str(c).startswith("eval/") for c in df.columns)


@dataclass(frozen=True)
class Panel:
    """One figure of Training curves: `build(metrics_by_run, reward_names, configs, **style)`; `active(cfg)` says
    whether a run has the quantity (runs without it are left out of the panel, and the panel is left out when no
    chosen run has it, with `hidden_why` shown instead); `full`: drawn at full width."""

    name: str
    build: Callable[..., go.Figure]
    active: Callable[[Mapping], bool] = _always
    hidden_why: str = ""
    full: bool = False
    log_ok: bool = True  # a log y axis makes sense (not for rates in [0, 1])


def _kl(metrics: Metrics, rewards: Sequence[str], configs: Mapping[str, Mapping], **style) -> go.Figure:
    series = {}
    if any(several_passes(c) for c in configs.values()):
        series["policy/kl"] = "KL to the rollout policy"
    if any(has_reference(c) for c in configs.values()):
        series["loss/kl"] = "KL to the reference"
    return metric_lines(metrics, series, "KL", "KL", **style)


PANELS: tuple[Panel, ...] = (
    Panel("rewards", lambda m, r, c, **s: reward_curves(m, r, **s), full=True, log_ok=False),
    Panel("loss", lambda m, r, c, **s: loss_figure(m, with_kl=any(has_reference(x) for x in c.values()),
                                                           **s)),
    Panel("kl", _kl, lambda c: has_reference(c) or several_passes(c),
          "KL: every chosen run has kl_beta = 0 (no reference model) and inner_epochs = 1 (the update's one pass "
          "starts at the rollout policy, so the KL to it is 0 up to rounding)"),
    Panel("entropy", lambda m, r, c, **s: metric_lines(m, {"policy/entropy": "entropy"}, "Entropy", "nats",
                                                                **s)),
    Panel("clip", lambda m, r, c, **s: metric_lines(m, {"policy/clip_frac": "clip fraction"}, "Clip fraction",
                                                             "fraction", **s), several_passes,
          "Clip fraction: inner_epochs = 1 in every chosen run, so the importance ratio is exactly 1 on the only "
          "pass and nothing is clipped", log_ok=False),
    Panel("js", lambda m, r, c, **s: per_reward_lines(m, r, "js/{name}/mean", "Mean JS distance per reward",
                                                               "JS", **s), replays,
          "JS distance: no chosen run routes by contrastive replay (GRPO, GDPO and span or uniform routing do no "
          "replay)"),
    Panel("span", lambda m, r, c, **s: per_reward_lines(
        m, r, "span/{name}/mass_in", "Span agreement: routing mass inside verifier spans", "share", **s),
        log_ok=False),
    Panel("time", lambda m, r, c, **s: step_time_figure(m) if len(m) == 1 and s.get("x", "step") == "step"
          else metric_lines(m, {"time/step": "step"}, "Step time", "seconds", **s)),
    Panel("length", lambda m, r, c, **s: metric_lines(m, {"response/length": "mean response length"},
                                                               "Response length", "tokens", **s)),
    Panel("eval", lambda m, r, c, **s: reward_curves(m, r, source="eval", **s), full=True, log_ok=False,
          hidden_why="Held-out eval: no chosen run has logged one yet (`eval/*` metrics, written at the checkpoint "
                     "steps of a run with a held-out prompt set)"),
)


# The views of Training curves ({id: (tab label, panel names)}): a page draws the open view's panels only (the held-out
# eval has a tab of its own: below the training rewards it was off screen, and drawing its panels too made the first
# view of the page take 0.2-0.25 s longer in the browser). "more": the panels of metrics asked for by name or pattern.
CURVE_VIEWS: dict[str, tuple[str, tuple[str, ...]]] = {
    "rewards": ("Rewards", ("rewards",)),
    "eval": ("Held-out eval", ("eval",)),
    "optimisation": ("Loss, KL, entropy", ("loss", "kl", "entropy", "clip")),
    "routing": ("Credit routing: JS and spans", ("js", "span")),
    "speed": ("Step time and length", ("time", "length")),
    "more": ("More panels", ()),
}


def build_panels(metrics: Metrics, rewards: Sequence[str], configs: Mapping[str, Mapping], *, x: str = "step",
                 smooth: float = 0.0, log_y: bool = False, only: Sequence[str] | None = None,
                 ) -> tuple[dict[str, tuple[Panel, go.Figure]], list[str]]:
    """The figures of the panels that some chosen run has ({panel name: (panel, figure)}, in PANELS order) and
    the reasons of those left out; `only`: these panels alone (a view's), None: all. `metrics` and `configs` are
    keyed by run label; a panel draws only its runs. The eval panel is drawn when some run logged eval metrics."""
    out: dict[str, tuple[Panel, go.Figure]] = {}
    hidden: list[str] = []
    for panel in PANELS:
        if only is not None and panel.name not in only:
            continue
        runs = [run for run in metrics if panel.active(configs.get(run, {}))]
        if panel.name == "eval":
            runs = [run for run in runs if has_eval(metrics[run])]
        if not runs:
            hidden.append(panel.hidden_why)
            continue
        subset = {run: metrics[run] for run in runs}
        sub_cfg = {run: configs.get(run, {}) for run in runs}
        fig = panel.build(subset, rewards, sub_cfg, x=x, smooth=smooth, log_y=log_y and panel.log_ok)
        out[panel.name] = (panel, fig)
    return out, hidden


# ---------------------------------------------------------------------------------------------- compare


@dataclass(frozen=True)
class CompareMetric:
    """A quantity Compare runs overlays (one colour per run): a metric key, or a `{name}` template drawn as one
    panel per reward."""

    label: str
    key: str
    yaxis: str
    per_reward: bool = False
    eval_key: str | None = None  # the same quantity on the held-out eval, when it has one
    rate: bool = False  # a rate in [0, 1]
    active: Callable[[Mapping], bool] = _always  # the run has the quantity (else it is 0 up to rounding there)
    by_name: bool = False  # the keys are the logged metrics a typed name or glob pattern matches
    inactive_why: str = ""  # why a run where `active` is False has only rounding noise for it


COMPARE_METRICS: tuple[CompareMetric, ...] = (
    CompareMetric("all satisfied", "reward/all_satisfied", "rate", eval_key="eval/all_satisfied", rate=True),
    CompareMetric("reward (one panel per reward)", "reward/{name}", "reward", True, "eval/reward/{name}", rate=True),
    CompareMetric("entropy", "policy/entropy", "nats"),
    CompareMetric("KL to the rollout policy", "policy/kl", "KL", active=several_passes,
                  inactive_why="inner_epochs = 1: the update's one pass starts at the rollout policy, so this KL is 0 "
                               "up to rounding"),
    CompareMetric("KL to the reference", "loss/kl", "KL", active=has_reference,
                  inactive_why="kl_beta = 0: no reference model"),
    CompareMetric("total loss", "loss/total", "loss"),
    CompareMetric("policy loss", "loss/policy", "loss"),
    CompareMetric("response length", "response/length", "tokens"),
    CompareMetric("span overlap: routing mass in spans (per reward)", "span/{name}/mass_in", "share", True,
                  rate=True),
    CompareMetric("routing overlap between rewards", "span/overlap", "overlap", rate=True),
    CompareMetric("mean JS distance (per reward)", "js/{name}/mean", "JS", True),
    CompareMetric("step time", "time/step", "seconds"),
    CompareMetric("any logged metric (name or pattern)", "", "value", by_name=True),
)
MAX_PATTERN_PANELS = 24  # a pattern that matches more keys draws the first ones and says how many it left out


def compare_metrics_for(configs: Mapping[str, Mapping]) -> tuple[list[CompareMetric], dict[str, str]]:
    """The quantities Compare offers for runs with these configs (those some run has, `CompareMetric.active`) and,
    for the others, why not ({label: reason}): a KL that is rounding noise in every run is not offered."""
    offered = [m for m in COMPARE_METRICS if any(m.active(c) for c in configs.values())]
    left_out = {m.label: m.inactive_why for m in COMPARE_METRICS if m not in offered}
    return offered, left_out


def compare_keys(metric: CompareMetric, rewards: Sequence[str], source: str = "train", patterns: Sequence[str] = (),
                 columns: Sequence[str] = ()) -> dict[str, str]:
    """{panel title: metric key} for a compared quantity: one entry, one per reward, or (`by_name`) one per logged
    metric among `columns` that a name or pattern of `patterns` matches."""
    if metric.by_name:
        from mrtpo_viz.analysis import match_metrics
        return {key: key for key in match_metrics(columns, patterns)}
    key = metric.eval_key if source == "eval" and metric.eval_key else metric.key
    if metric.per_reward:
        return {name: key.format(name=name) for name in rewards}
    return {metric.label: key}


def has_values(df: pd.DataFrame, key: str) -> bool:
    return key in df.columns and pd.to_numeric(df[key], errors="coerce").notna().any()
