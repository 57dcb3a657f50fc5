"""The Verifier debugger's span AUC figure (`mrtpo_viz.figures.span_auc`): one panel per reward, an optional rolling
mean, what one point is computed over (issue 46, item 8; pure functions, no Streamlit)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mrtpo_viz import figures

REWARDS = ["keywords:existence", "punctuation:no_comma"]
def auc_metrics(auc: list[float], control: list[float], rewards=REWARDS) -> pd.DataFrame:
    """Metrics of len(auc) steps whose every reward has this span AUC and control."""
    frame = {"step": range(1, len(auc) + 1)}
    for r in rewards:
        frame |= {f"span/{r}/auc": auc, f"span/{r}/auc_control": control}
    return pd.DataFrame(frame)


def test_auc_figure_draws_one_panel_per_reward_each_with_its_chance_line():
    """Issue 46 item 8: the span AUC of every reward was drawn in one panel (10 jagged lines over 150 steps): now
    one small panel per reward (titled by it), sharing one x axis, each with its AUC and control and a line at
    chance; with one run no legend (the title says solid / dotted)."""
    rewards = [*REWARDS, "task:arithmetic"]
    fig = figures.auc_figure({"r": auc_metrics([0.8, 0.9, 0.7], [0.6, 0.5, 0.5], rewards)}, rewards)
    panels = {}
    for tr in fig.data:
        panels.setdefault(tr.yaxis, set()).add(tr.meta[1])
    assert panels == {f"y{i + 1 if i else ''}": {f"span/{r}/auc", f"span/{r}/auc_control"}
                      for i, r in enumerate(rewards)}
    assert [a.text for a in fig.layout.annotations][:3] == rewards  # the panels' titles
    assert sorted(s.yref for s in fig.layout.shapes if s.y0 == s.y1 == 0.5) == ["y", "y2", "y3"]
    assert not any(tr.showlegend for tr in fig.data) and "dotted: control" in fig.layout.title.text
    assert shared_x(fig.to_plotly_json()) == 3


def shared_x(fig: dict) -> int:
    axes = [k for k in fig["layout"] if k.startswith("xaxis")]
    assert all(fig["layout"][a].get("matches") == "x" for a in axes if a != "xaxis")
    return len(axes)


def test_auc_figure_smooths_by_a_rolling_mean_and_keeps_the_raw_auc_faint():
    """window=2: AUC and control are the trailing mean of the last 2 logged steps (hand-computed below; a missing
    step is skipped in the mean), the raw AUC is drawn faint under its smoothed line, and the title says the
    window."""
    auc, control = [0.2, 0.4, float("nan"), 1.0], [0.5, 0.7, 0.7, 0.3]
    fig = figures.auc_figure({"r": auc_metrics(auc, control)}, REWARDS, window=2)
    key = f"span/{REWARDS[0]}/auc"
    raw = next(tr for tr in fig.data if list(tr.meta) == ["r", key, "raw"])
    smooth = next(tr for tr in fig.data if list(tr.meta) == ["r", key, "smoothed"])
    ctrl = next(tr for tr in fig.data if list(tr.meta) == ["r", f"span/{REWARDS[0]}/auc_control", "smoothed"])
    assert np.allclose(smooth.y, [0.2, 0.3, 0.4, 1.0]) and np.allclose(ctrl.y, [0.5, 0.6, 0.7, 0.5])
    assert np.isnan(raw.y[2]) and np.allclose(np.asarray(raw.y)[[0, 1, 3]], [0.2, 0.4, 1.0])
    assert raw.opacity < 1 and not smooth.opacity and raw.line.color == smooth.line.color
    assert "rolling mean over 2 steps" in fig.layout.title.text
    assert "rolling mean" not in figures.auc_figure({"r": auc_metrics(auc, control)}, REWARDS).layout.title.text
    with pytest.raises(ValueError, match="window"):
        figures.auc_figure({"r": auc_metrics(auc, control)}, REWARDS, window=0)


def test_auc_figure_of_several_runs_colours_by_run_with_one_legend_entry_per_run_and_line():
    fig = figures.auc_figure({"a": auc_metrics([0.8, 0.9], [0.6, 0.5]), "b": auc_metrics([0.7, 0.6], [0.5, 0.5])},
                             REWARDS)
    colours = figures.run_colors(["a", "b"])
    assert all(tr.line.color == colours[tr.meta[0]] for tr in fig.data)
    legend = sorted(tr.name for tr in fig.data if tr.showlegend)
    assert legend == ["a · AUC", "a · control", "b · AUC", "b · control"]


def test_auc_scope_says_what_one_point_is_computed_over():
    text = figures.auc_scope({"prompts_per_step": 4, "group_size": 8, "max_new_tokens": 48})
    assert "one training step" in text and "up to 32 samples (4 prompts x G = 8)" in text
    assert "48 response tokens" in text
    assert "the step's samples" in figures.auc_scope({})
