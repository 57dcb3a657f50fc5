"""Plotly figures and the analysis tables behind the pages (pure functions, no Streamlit)."""

from __future__ import annotations

import io
import math
import zlib

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pyarrow.parquet as pq
import pytest

from core.run.store import CREDIT_COLUMNS
from mrtpo_viz import analysis, figures
from mrtpo_viz.heatmap import reward_colors
from mrtpo_viz.tools.synthetic import synthetic_credit_frame

REWARDS = ["keywords:existence", "punctuation:no_comma"]


def metrics_frame(values_all=(0.1, 0.3, 0.6, 0.8), with_js=True) -> pd.DataFrame:
    rows = []
    for i, v in enumerate(values_all, start=1):
        row = {"step": i, "reward/all_satisfied": v, f"reward/{REWARDS[0]}": v + 0.1, f"reward/{REWARDS[1]}": 0.5,
               "loss/policy": 0.1, "loss/total": 0.1, "time/generate": 1.0, "time/verify": 0.1,
               "time/replay": 0.5, "time/update": 0.4, "time/step": 2.0}
        if with_js:
            for r in REWARDS:
                row |= {f"js/{r}/mean": 0.1, f"span/{r}/auc": 0.8, f"span/{r}/auc_control": 0.6,
                        f"span/{r}/mass_in": 0.3}
        rows.append(row)
    return pd.DataFrame(rows)


def test_reward_curves_one_line_per_reward_plus_all_satisfied():
    fig = figures.reward_curves({"run1": metrics_frame()}, REWARDS)
    names = [tr.name for tr in fig.data]
    assert names == [*REWARDS, "all satisfied"]
    colors = reward_colors(REWARDS)
    assert [tr.line.color for tr in fig.data] == [colors[REWARDS[0]], colors[REWARDS[1]], figures.ALL_SATISFIED_COLOR]
    assert list(fig.data[-1].y) == [0.1, 0.3, 0.6, 0.8]


def test_several_runs_overlay_with_one_dash_per_run():
    fig = figures.reward_curves({"a": metrics_frame(), "b": metrics_frame((0.2, 0.2))}, REWARDS)
    assert len(fig.data) == 6
    dashes = {tr.meta[0]: set() for tr in fig.data}
    for tr in fig.data:
        dashes[tr.meta[0]].add(tr.line.dash)
    assert dashes == {"a": {"solid"}, "b": {"dash"}}
    assert fig.data[0].name == f"a · {REWARDS[0]}"


def test_missing_metrics_are_skipped_and_empty_figure_says_so():
    fig = figures.metric_lines({"r": metrics_frame()}, {"loss/policy": "policy", "loss/kl": "KL"}, "Loss")
    assert [tr.name for tr in fig.data] == ["policy"]
    empty = figures.metric_lines({"r": metrics_frame()}, ["policy/entropy"], "Entropy")
    assert not empty.data and "no data" in empty.layout.annotations[0].text
    nothing = figures.reward_curves({"r": pd.DataFrame({"step": pd.Series(dtype="int64")})}, REWARDS)
    assert not nothing.data


def test_auc_figure_draws_each_control_dotted_in_the_rewards_colour():
    fig = figures.auc_figure({"r": metrics_frame()}, REWARDS)
    by_key = {tr.meta[1]: tr for tr in fig.data}
    for r in REWARDS:
        auc, ctrl = by_key[f"span/{r}/auc"], by_key[f"span/{r}/auc_control"]
        assert ctrl.line.dash == "dot" and ctrl.line.color == auc.line.color
    assert any(s.y0 == 0.5 for s in fig.layout.shapes)  # chance line
    gdpo = figures.auc_figure({"r": metrics_frame(with_js=False)}, REWARDS)
    assert not gdpo.data and "no replay" in gdpo.layout.annotations[0].text


def test_step_time_split_stacks_the_parts():
    fig = figures.step_time_figure({"r": metrics_frame()})
    bars = [tr for tr in fig.data if tr.type == "bar"]
    assert [b.name for b in bars] == ["generate", "verify", "replay", "update"]
    assert fig.layout.barmode == "stack"
    two = figures.step_time_figure({"a": metrics_frame(), "b": metrics_frame()})
    assert all(tr.type == "scatter" for tr in two.data) and len(two.data) == 8


def test_js_positions_shade_each_span_run():
    df = synthetic_credit_frame(1, n_samples=4, n_tokens=20, rewards=tuple(REWARDS), group_size=2, seed=3)
    sample = df[df["sample"] == 0].assign(score=1.0)
    fig = figures.js_positions_figure(sample, REWARDS)
    assert len([tr for tr in fig.data if tr.meta != "spans"]) == len(REWARDS)
    boxes = 0
    for row, r in enumerate(REWARDS, start=1):
        d = sample[sample["reward"] == r].sort_values("t")
        runs = figures.span_runs(d["in_span"].tolist(), d["t"].tolist())
        trace = next(tr for tr in fig.data if tr.name == r)
        assert list(trace.y) == pytest.approx(d["distance"].tolist(), nan_ok=True)
        spans = [tr for tr in fig.data if tr.name == f"{r} spans"]
        if not runs:
            assert not spans
            continue
        # one closed box per run of span tokens, from t - 0.5 to t + 0.5, floor to the row's top, on its own row
        (box,) = spans
        assert box.fill == "toself" and box.yaxis == f"y{'' if row == 1 else row}"
        xs = [x for x in box.x if x is not None]
        assert [(xs[i], xs[i + 2]) for i in range(0, len(xs), 5)] == [(a - 0.5, b + 0.5) for a, b in runs]
        assert set(y for y in box.y if y is not None) == {0, fig.layout[f"yaxis{'' if row == 1 else row}"].range[1]}
        boxes += len(runs)
    assert boxes > 0 and not fig.layout.shapes


def test_js_positions_name_tokens_on_the_axis_and_skip_unstated_rewards():
    df = synthetic_credit_frame(1, n_samples=4, n_tokens=20, rewards=tuple(REWARDS), group_size=2, seed=3)
    sample = df[df["sample"] == 0].copy()
    sample.loc[sample["reward"] == REWARDS[1], "score"] = float("nan")  # the prompt does not state reward 2
    sample.loc[sample["reward"] == REWARDS[0], "score"] = 1.0
    fig = figures.js_positions_figure(sample, REWARDS)
    assert [tr.name for tr in fig.data if tr.meta != "spans"] == [REWARDS[0]]  # no empty panel
    tokens = sample[sample["reward"] == REWARDS[0]].sort_values("t")["token"].tolist()
    assert list(fig.layout.xaxis.ticktext) == [t.replace("\n", "↵") or "∅" for t in tokens]
    vals, texts = figures.token_ticks(list(range(250)), ["a"] * 250)
    assert vals == list(range(0, 250, 3)) and len(texts) == len(vals)  # every 3rd of 250 positions


def test_span_runs():
    assert figures.span_runs([False, True, True, False, True], [0, 1, 2, 3, 4]) == [(1, 2), (4, 4)]
    assert figures.span_runs([True, True], [3, 5]) == [(3, 3), (5, 5)]  # a gap in positions splits a run
    assert figures.span_runs([], []) == []


def test_js_in_out_boxes_and_the_no_replay_case():
    df = synthetic_credit_frame(1, n_samples=8, n_tokens=20, rewards=tuple(REWARDS), group_size=4)
    fig = figures.js_in_out_figure(df, REWARDS)
    assert [tr.name for tr in fig.data] == ["in span", "out of span"]
    nojs = figures.js_in_out_figure(synthetic_credit_frame(1, 4, 20, tuple(REWARDS), 2, with_js=False), REWARDS)
    assert not nojs.data


def test_foreground_lines_take_streamlits_text_colour_on_both_themes():
    # regression: the all-satisfied and step-total lines were #111, invisible on the dark theme. Streamlit's
    # plotly theme replaces this placeholder with its text colour (dark on light, light on dark).
    from streamlit.elements.lib.streamlit_plotly_theme import GRAY_90

    assert figures.FOREGROUND == GRAY_90
    fig = figures.reward_curves({"r": metrics_frame()}, REWARDS)
    assert fig.data[-1].line.color == figures.FOREGROUND
    total = next(tr for tr in figures.step_time_figure({"r": metrics_frame()}).data if tr.name == "step total")
    assert total.line.color == figures.FOREGROUND


def test_legend_sits_at_the_figures_bottom_edge_and_grows_the_figure():
    # regression: a legend at y=-0.27 of the plot overlapped the x title and rotated category labels
    fig = figures.reward_curves({"r": metrics_frame()}, REWARDS)
    assert fig.layout.legend.yref == "container" and fig.layout.legend.y == 0
    assert fig.layout.legend.yanchor == "bottom"
    many = figures.reward_curves({f"run-{i}": metrics_frame() for i in range(4)}, REWARDS)
    assert many.layout.height > fig.layout.height  # 12 entries need more rows
    assert figures.legend_rows([]) == 0 and figures.legend_rows(["a"]) == 1
    assert figures.legend_rows(["x" * 60] * 3) == 3  # each entry fills a half-width row


def test_smoothing_draws_the_ema_over_the_faint_raw_values():
    df = metrics_frame((0.0, 1.0, 0.0, 1.0))
    fig = figures.metric_lines({"r": df}, {"reward/all_satisfied": "all"}, "t", smooth=0.5)
    raw, smooth = fig.data
    assert raw.showlegend is False and raw.opacity == 0.25 and list(raw.y) == [0.0, 1.0, 0.0, 1.0]
    assert list(smooth.y) == pytest.approx(analysis.ema([0.0, 1.0, 0.0, 1.0], 0.5).tolist())
    assert [raw.meta[2], smooth.meta[2]] == ["raw", "smoothed"]
    with pytest.raises(ValueError, match="smooth"):
        figures.metric_lines({"r": df}, ["loss/policy"], "t", smooth=1.0)


def test_x_axis_log_scale_and_one_colour_per_run():
    a, b = (analysis.with_x_columns(metrics_frame(), 32), analysis.with_x_columns(metrics_frame(), 16))
    fig = figures.metric_lines({"a": a, "b": b}, {"reward/all_satisfied": "all"}, "t", x="samples", log_y=True,
                               color_by="run")
    assert list(fig.data[0].x) == [32, 64, 96, 128] and list(fig.data[1].x) == [16, 32, 48, 64]
    assert fig.layout.xaxis.title.text == figures.X_TITLES["samples"] and fig.layout.yaxis.type == "log"
    assert [tr.line.color for tr in fig.data] == [figures.run_colors(["a", "b"])[r] for r in ("a", "b")]
    assert [tr.name for tr in fig.data] == ["a", "b"]


def test_a_run_keeps_its_colour_on_every_figure_and_beside_any_other_runs():
    # issue 26: a persistent colour per run (by its name), not by its position among the chosen runs
    df = metrics_frame()
    n = len(figures.RUN_PALETTE)
    slot = {r: zlib.crc32(r.encode()) % n for r in ("study-mrtpo-s0", "study-grpo-s0", "study-gdpo-s2")}
    assert len(set(slot.values())) == 3  # no two of them want the same colour
    alone = figures.metric_lines({"study-grpo-s0": df}, ["reward/all_satisfied"], "t", color_by="run")
    both = figures.metric_lines({"study-mrtpo-s0": df, "study-grpo-s0": df}, ["reward/all_satisfied"], "t",
                                color_by="run")
    own = figures.RUN_PALETTE[slot["study-grpo-s0"]]
    assert alone.data[0].line.color == both.data[1].line.color == own  # was RUN_PALETTE[0], then [1]
    # a view of more runs than one colour each would allow still gives distinct colours up to the palette's size
    many = [f"run-{i}" for i in range(n)]
    assert len(set(figures.run_colors(many).values())) == n
    assert figures.run_colors(many[::-1]) == figures.run_colors(many)


def test_loss_figure_leaves_out_the_kl_term_without_a_reference_model():
    df = metrics_frame().assign(**{"loss/kl": 0.0})
    assert "KL to reference" in [tr.name for tr in figures.loss_figure({"r": df}).data]
    assert "KL to reference" not in [tr.name for tr in figures.loss_figure({"r": df}, with_kl=False).data]


def test_plotted_series_exports_what_the_figures_draw():
    fig = figures.metric_lines({"a": metrics_frame()}, {"reward/all_satisfied": "all"}, "Rewards", smooth=0.5)
    table = figures.plotted_series({"Rewards": fig, "Empty": figures.metric_lines({}, ["x"], "Empty")})
    assert list(table.columns) == ["figure", "run", "metric", "kind", "x", "y"]
    assert set(table["kind"]) == {"raw", "smoothed"} and set(table["figure"]) == {"Rewards"}
    raw = table[table["kind"] == "raw"]
    assert raw["y"].tolist() == [0.1, 0.3, 0.6, 0.8] and raw["x"].tolist() == [1, 2, 3, 4]


# ------------------------------------------------------------------------------------------ analysis


def test_span_mass_in_hand_computed():
    assert analysis.span_mass_in([1.0, 3.0, 0.0, 4.0], [False, True, True, False]) == pytest.approx(3 / 8)
    assert analysis.span_mass_in([2.0, float("nan")], [True, True]) == 1.0
    assert math.isnan(analysis.span_mass_in([0.0, 0.0], [True, False]))


def test_disagreement_ranks_lowest_span_mass_first_and_skips_uncredited_samples():
    df = synthetic_credit_frame(1, n_samples=8, n_tokens=16, rewards=tuple(REWARDS), group_size=4, seed=1)
    table = analysis.disagreement({1: df}, top=100)
    assert (table["disagreement"].diff().dropna() <= 1e-12).all()
    assert np.allclose(table["disagreement"], 1 - table["mass_in"])
    assert (table["group_adv"] != 0).all() and table["score"].notna().all()
    # recompute one row by hand
    row = table.iloc[0]
    d = df[(df["sample"] == row["sample"]) & (df["reward"] == row["reward"])]
    w, m = d["weight"].to_numpy(float), d["in_span"].to_numpy(bool)
    assert row["mass_in"] == pytest.approx(w[m].sum() / w.sum())


def test_disagreement_every_row_by_hand():
    frames = {s: synthetic_credit_frame(s, 16, 12, (*REWARDS, "startend:end_checker"), 4, seed=s) for s in (1, 2)}
    table = analysis.disagreement(frames, top=1000)
    expected = []
    for step, df in frames.items():
        for (sample, reward), d in df.groupby(["sample", "reward"], sort=False):
            w, m = d["weight"].to_numpy(float), d["in_span"].to_numpy(bool)
            if m.any() and np.isfinite(d["score"].iloc[0]) and d["group_adv"].iloc[0] != 0 and w.sum() > 0:
                expected.append((step, sample, reward, w[m].sum() / w.sum(), m.mean()))
    got = sorted(zip(table["step"], table["sample"], table["reward"], table["mass_in"], table["span_share"],
                     strict=True))
    assert len(got) == len(expected) > 0
    for g, e in zip(got, sorted(expected), strict=True):
        assert g[:3] == e[:3] and g[3:] == pytest.approx(e[3:])


def test_filter_samples_by_prompt_and_outcome():
    df = synthetic_credit_frame(1, n_samples=8, n_tokens=4, rewards=tuple(REWARDS), group_size=4, seed=2)
    per = df.drop_duplicates(["sample", "reward"])
    sat = sorted(per.loc[(per["reward"] == REWARDS[0]) & (per["score"] >= 1), "sample"].tolist())
    assert analysis.filter_samples(df, reward=REWARDS[0], outcome="satisfied") == sat
    nap = sorted(per.loc[(per["reward"] == REWARDS[1]) & per["score"].isna(), "sample"].tolist())
    assert nap and analysis.filter_samples(df, reward=REWARDS[1], outcome="not stated") == nap
    assert analysis.filter_samples(df, prompt_key="p0001") == [4, 5, 6, 7]
    assert analysis.filter_samples(df) == list(range(8))
    with pytest.raises(ValueError):
        analysis.filter_samples(df, outcome="maybe")


def test_steps_to_reach_hand_computed():
    table = analysis.steps_to_reach({"a": metrics_frame((0.1, 0.3, 0.6, 0.8)), "b": metrics_frame((0.0, 0.55))},
                                    [0.25, 0.5, 0.75])
    a, b = table.iloc[0], table.iloc[1]
    assert (a["≥ 0.25"], a["≥ 0.5"], a["≥ 0.75"], a["best"]) == (2, 3, 4, 0.8)
    assert (b["≥ 0.25"], b["≥ 0.5"]) == (2, 2) and pd.isna(b["≥ 0.75"])


def test_sample_rewards_table_and_scores():
    df = synthetic_credit_frame(1, n_samples=4, n_tokens=10, rewards=tuple(REWARDS), group_size=2, seed=4)
    sample = df[df["sample"] == 1]
    table = analysis.sample_rewards_table(sample)
    assert table["reward"].tolist() == REWARDS
    for _, row in table.iterrows():
        d = sample[sample["reward"] == row["reward"]]
        assert row["credit_sum"] == pytest.approx(float(d["credit"].sum()), rel=1e-5)
        assert row["in_span_tokens"] == int(d["in_span"].sum())
    scores = analysis.sample_scores(df)
    assert sorted(scores) == [0, 1, 2, 3] and list(scores[1]) == REWARDS
    assert scores[1][REWARDS[0]] == float(sample.loc[sample["reward"] == REWARDS[0], "score"].iloc[0])


def test_exports_round_trip_with_the_store_schema():
    df = synthetic_credit_frame(1, n_samples=2, n_tokens=5, rewards=tuple(REWARDS), group_size=2)
    df["reward"] = df["reward"].astype("category")  # as the app's loaders hand it over
    back = pq.read_table(io.BytesIO(analysis.to_parquet_bytes(df)))
    assert back.schema.names == list(CREDIT_COLUMNS)
    assert back.schema.metadata[b"mrtpo_schema_version"] == b"1"
    assert back.num_rows == len(df)
    csv = pd.read_csv(io.BytesIO(analysis.to_csv_bytes(df)))
    assert list(csv.columns) == list(CREDIT_COLUMNS) and len(csv) == len(df)
    # tokens that are line breaks of some kind (a lone carriage return was left unquoted and split its row)
    df["token"] = ["\r", "a\r", "\n", "\u2028", "\x85"] * (len(df) // 5)
    back = pd.read_csv(io.BytesIO(analysis.to_csv_bytes(df)), keep_default_na=False)
    assert len(back) == len(df) and back["token"].tolist() == df["token"].tolist()


def test_js_in_out_table():
    df = pd.DataFrame({"reward": ["a"] * 4, "distance": [0.4, 0.2, 0.1, 0.1], "in_span": [True, True, False, False]})
    row = analysis.js_in_out_table(df).iloc[0]
    assert (row["tokens_in"], row["tokens_out"]) == (2, 2)
    assert row["js_in"] == pytest.approx(0.3) and row["js_out"] == pytest.approx(0.1) and row["ratio"] == pytest.approx(3)


def test_eval_curves_use_the_eval_keys_and_bridge_non_checkpoint_steps():
    series, _ = figures.reward_series(REWARDS, "eval")
    assert list(series) == [f"eval/reward/{REWARDS[0]}", f"eval/reward/{REWARDS[1]}", "eval/all_satisfied"]
    df = metrics_frame()
    df["eval/all_satisfied"] = [None, 0.2, None, 0.5]  # logged at checkpoint steps only
    fig = figures.reward_curves({"r": df}, REWARDS, source="eval")
    assert [tr.name for tr in fig.data] == ["all satisfied"] and fig.data[0].connectgaps
    with pytest.raises(ValueError):
        figures.reward_series(REWARDS, "test")


def test_js_positions_say_not_computed_for_a_skipped_reward():
    df = synthetic_credit_frame(1, n_samples=16, n_tokens=12, rewards=tuple(REWARDS), group_size=4, seed=0)
    assert df["distance_skipped"].any() and df.loc[df["distance_skipped"], "distance"].isna().all()
    i = int(df.loc[df["distance_skipped"], "sample"].iloc[0])
    sample = df[df["sample"] == i]
    fig = figures.js_positions_figure(sample, REWARDS)
    notes = [a for a in fig.layout.annotations if "not computed" in a.text]
    skipped = [r for r in REWARDS if sample.loc[sample["reward"] == r, "distance_skipped"].any()]
    assert len(notes) == len(skipped) >= 1
    # each note sits in its reward's row (subplot rows follow the reward order)
    rows = [REWARDS.index(r) + 1 for r in skipped]
    assert [a.yref for a in notes] == [f"y{'' if r == 1 else r} domain" for r in rows]


def test_replay_coverage_counts_computed_and_skipped_pairs():
    df = synthetic_credit_frame(1, n_samples=16, n_tokens=5, rewards=tuple(REWARDS), group_size=4, seed=0)
    pairs = df.drop_duplicates(["sample", "reward"])
    computed, skipped = analysis.replay_coverage(df)
    assert skipped == int(pairs["distance_skipped"].sum()) > 0
    assert computed == int((pairs["score"].notna() & ~pairs["distance_skipped"]).sum())
    older = df.drop(columns=["distance_skipped"]).assign(distance=float("nan"))  # a GDPO run of an older store
    assert analysis.replay_coverage(older) == (0, 0)


def test_ema_hand_computed():
    # w = 0.5: s1 = 0.5 -> 0.5 / 0.5 = 1; s2 = 0.25 + 1 = 1.25 -> 1.25 / 0.75; s3 = 0.625 + 1.5 -> 2.125 / 0.875
    assert analysis.ema([1.0, 2.0, 3.0], 0.5).tolist() == pytest.approx([1.0, 1.25 / 0.75, 2.125 / 0.875])
    assert analysis.ema([4.0, 5.0], 0.0).tolist() == [4.0, 5.0]
    out = analysis.ema([1.0, float("nan"), 3.0], 0.5)  # a gap keeps NaN and does not move the average
    assert math.isnan(out[1]) and out[2] == pytest.approx((0.25 + 1.5) / 0.75)
    with pytest.raises(ValueError):
        analysis.ema([1.0], 1.0)


def test_x_columns_samples_and_training_minutes():
    df = pd.DataFrame({"step": [1, 2, 3], "time/step": [30.0, None, 90.0]})
    out = analysis.with_x_columns(df, 8)
    assert out["samples"].tolist() == [8, 16, 24]
    assert out["minutes"].tolist() == pytest.approx([0.5, 0.5, 2.0])
    assert "samples" not in analysis.with_x_columns(df, None).columns


def test_figures_carry_the_white_template_whatever_the_default():
    import plotly.io as pio
    import streamlit.elements.plotly_chart  # noqa: F401  (sets plotly's default template to Streamlit's)

    white = pio.templates["plotly_white"].to_plotly_json()
    for fig in (figures.metric_lines({"r": metrics_frame()}, ["reward/all_satisfied"], "t"),
                figures.js_positions_figure(synthetic_credit_frame(1, 4, 6, tuple(REWARDS), 2).query("sample == 0"),
                                            REWARDS)):
        assert fig.to_dict()["layout"]["template"] == white


def test_step_time_of_a_long_run_is_stacked_areas_not_bars():
    long = pd.concat([metrics_frame()] * 100, ignore_index=True).assign(step=lambda f: range(1, len(f) + 1))
    assert len(long) > figures.MAX_BARS
    fig = figures.step_time_figure({"r": long})
    parts = [tr for tr in fig.data if tr.name != "step total"]
    assert parts and all(tr.type == "scatter" and tr.stackgroup == "time" for tr in parts)
    assert all(tr.type == "bar" for tr in figures.step_time_figure({"r": metrics_frame()}).data
               if tr.name != "step total")


def test_long_runs_draw_lines_without_markers():
    long = pd.concat([metrics_frame()] * 20, ignore_index=True).assign(step=lambda f: range(1, len(f) + 1))
    assert len(long) >= figures.MARKERS_BELOW
    for fig in (figures.auc_figure({"r": long}, REWARDS), figures.metric_lines({"r": long}, ["reward/all_satisfied"], "t")):
        assert fig.data and all(tr.mode == "lines" for tr in fig.data)
    assert all("markers" in tr.mode for tr in figures.auc_figure({"r": metrics_frame()}, REWARDS).data)


def test_index_based_summaries_equal_the_token_based_ones(tmp_path):
    """disagreement, replay coverage, the in / out table and box plot from a step's index and distance summary
    (what the pages read) equal those computed from its token rows."""
    from core.run.store import RunStore, RunWriter

    names = (*REWARDS, "startend:end_checker")
    w = RunWriter.create(tmp_path, "r", {"steps": 2, "reward_names": list(names)})
    for step in (1, 2):
        w.write_credit(step, synthetic_credit_frame(step, 16, 12, names, 4, seed=step))
        w.append_metrics({"step": step})
    store = RunStore(w.path)
    frames = {s: store.credit(s) for s in (1, 2)}
    indexes = {s: store.credit_index(s) for s in (1, 2)}
    a = analysis.disagreement(frames, top=40)
    b = analysis.disagreement_from_index(indexes, top=40)
    assert len(a) > 0 and a[["step", "sample", "reward"]].equals(b[["step", "sample", "reward"]])
    pd.testing.assert_frame_equal(a.drop(columns=["prompt_key"]), b.drop(columns=["prompt_key"]), check_dtype=False,
                                  rtol=1e-5)
    assert analysis.replay_coverage(frames[1]) == analysis.replay_coverage_from_index(indexes[1])
    summary = store.credit_summary(1)
    t1 = analysis.js_in_out_table(frames[1]).assign(reward=lambda f: f["reward"].astype(str))
    t2 = analysis.js_in_out_table_from_summary(summary, list(names))
    pd.testing.assert_frame_equal(t1.reset_index(drop=True), t2, check_dtype=False, rtol=1e-5)
    fig = figures.js_in_out_summary_figure(summary, list(names))
    assert [t.name for t in fig.data] == ["in span", "out of span"]
    d = frames[1].query("reward == @REWARDS[0] and in_span")["distance"].dropna()
    box = fig.data[0]
    i = list(box.x).index(REWARDS[0])
    assert box.median[i] == pytest.approx(d.median(), rel=1e-5) and box.q3[i] == pytest.approx(d.quantile(0.75),
                                                                                                rel=1e-5)


def test_eval_setting_differences_name_each_setting_that_differs_with_its_runs():
    same = {"model": "m", "eval_prompt_set": "a.jsonl", "eval_prompts": 32, "eval_samples": 4}
    assert analysis.eval_setting_differences({"r1": same, "r2": dict(same)}) == []
    got = analysis.eval_setting_differences({"r1": same, "r2": {**same, "eval_prompt_set": "b.jsonl"},
                                             "r3": {**same, "model": "other"}})
    assert got == ["model: m (r1, r2) vs other (r3)",
                   "evaluation prompt set: a.jsonl (r1, r3) vs b.jsonl (r2)"]


def test_compare_offers_a_kl_only_where_some_run_has_it():
    from mrtpo_viz.figures import panels

    one_pass = {"inner_epochs": 1, "kl_beta": 0.0}
    offered, left_out = panels.compare_metrics_for({"a": one_pass, "b": one_pass})
    labels = [m.label for m in offered]
    assert "KL to the rollout policy" not in labels and "KL to the reference" not in labels
    assert "inner_epochs = 1" in left_out["KL to the rollout policy"] and "all satisfied" in labels
    offered, left_out = panels.compare_metrics_for({"a": one_pass, "b": {"inner_epochs": 2, "kl_beta": 0.1}})
    assert {"KL to the rollout policy", "KL to the reference"} <= {m.label for m in offered} and not left_out


def test_a_log_axis_says_how_many_values_it_cannot_draw():
    # regression (issue 26 bug 7): the log y axis dropped the Loss panel's negative values without a word
    df = pd.DataFrame({"step": [1, 2, 3, 4], "loss/policy": [-0.2, 0.1, -0.05, 0.3], "loss/total": [0.5, 0.4, 0.3, 0.2]})
    fig = figures.loss_figure({"run": df}, with_kl=False, log_y=True)
    notes = [a.text for a in fig.layout.annotations]
    assert notes == ["log axis: 2 values ≤ 0 not drawn"]
    smoothed = figures.loss_figure({"run": df}, with_kl=False, log_y=True, smooth=0.5)  # raw lines not counted twice
    drawn = sum(int((pd.Series(list(tr.y)) <= 0).sum()) for tr in smoothed.data if tr.meta[2] == "smoothed")
    assert [a.text for a in smoothed.layout.annotations] == [
        f"log axis: {drawn} value{'s' if drawn > 1 else ''} ≤ 0 not drawn"] and drawn >= 1
    assert not figures.loss_figure({"run": df}, with_kl=False).layout.annotations  # linear axis: nothing to say
    positive = df.assign(**{"loss/policy": [0.2, 0.1, 0.05, 0.3]})
    assert not figures.loss_figure({"run": positive}, with_kl=False, log_y=True).layout.annotations


def test_seed_groups_gather_runs_that_differ_only_in_their_seed():
    base = {"method": "mrtpo", "relevance": "js", "lr": 1e-5, "run_name": "x", "runs_dir": "r"}
    configs = {f"study-mrtpo-s{i}": {**base, "seed": i, "run_name": f"study-mrtpo-s{i}"} for i in range(3)}
    configs |= {f"study-gdpo-s{i}": {**base, "method": "gdpo", "seed": i} for i in range(2)}
    configs["lone"] = {**base, "lr": 3e-5, "seed": 0}
    assert analysis.seed_groups(configs) == {
        "study-mrtpo (3 seeds)": ["study-mrtpo-s0", "study-mrtpo-s1", "study-mrtpo-s2"],
        "study-gdpo (2 seeds)": ["study-gdpo-s0", "study-gdpo-s1"], "lone": ["lone"]}


def test_group_metrics_mean_and_bands_by_hand():
    a = pd.DataFrame({"step": [1, 2, 3], "reward/all_satisfied": [0.0, 0.5, 1.0]})
    b = pd.DataFrame({"step": [1, 2], "reward/all_satisfied": [1.0, 0.5]})
    c = pd.DataFrame({"step": [1, 2], "reward/all_satisfied": [0.5, 0.5]})
    runs = {"a": a, "b": b, "c": c}
    g = analysis.group_metrics(runs, {"G (3 seeds)": ["a", "b", "c"]}, "std")["G (3 seeds)"].set_index("step")
    key = "reward/all_satisfied"
    assert g[key].tolist() == [0.5, 0.5, 1.0]
    # step 1: values 0, 1, 0.5: sample std = sqrt(((.5)^2 + (.5)^2 + 0) / 2) = 0.5; step 2: 0; step 3: one run, NaN
    assert g[key + "::lo"].tolist()[:2] == [0.0, 0.5] and g[key + "::hi"].tolist()[:2] == [1.0, 0.5]
    assert math.isnan(g.loc[3, key + "::lo"])
    m = analysis.group_metrics(runs, {"G": ["a", "b", "c"]}, "minmax")["G"].set_index("step")
    assert m[key + "::lo"].tolist() == [0.0, 0.5, 1.0] and m[key + "::hi"].tolist() == [1.0, 0.5, 1.0]
    assert analysis.group_metrics(runs, {"only a": ["a"]})["only a"] is a  # one run: unchanged
    with pytest.raises(ValueError, match="band"):
        analysis.group_metrics(runs, {"G": ["a", "b"]}, "iqr")


def test_a_seed_group_is_drawn_as_its_mean_over_a_filled_band():
    a = pd.DataFrame({"step": [1, 2], "reward/all_satisfied": [0.2, 0.4]})
    b = pd.DataFrame({"step": [1, 2], "reward/all_satisfied": [0.4, 0.8]})
    groups = analysis.group_metrics({"a": a, "b": b}, {"m (2 seeds)": ["a", "b"]}, "minmax")
    fig = figures.metric_lines(groups, {"reward/all_satisfied": "all satisfied"}, "t", color_by="run")
    kinds = [tr.meta[2] for tr in fig.data]
    assert kinds == ["band high", "band low", "raw"]
    assert [round(v, 6) for v in fig.data[0].y] == [0.4, 0.8] and [round(v, 6) for v in fig.data[1].y] == [0.2, 0.4]
    assert fig.data[1].fill == "tonexty" and fig.data[1].fillcolor.startswith("rgba(")
    assert [round(v, 6) for v in fig.data[2].y] == [0.3, 0.6] and fig.data[2].name == "m (2 seeds)"


def test_metrics_by_name_or_glob_pattern():
    cols = ["step", "samples", "minutes", "span/a:b/overlap", "span/overlap", "time/replay", "time/step",
            "span/a:b/mass_in", "reward/all_satisfied::lo"]
    assert analysis.metric_patterns(" span/*/overlap,time/replay  time/replay ") == ["span/*/overlap", "time/replay"]
    assert analysis.match_metrics(cols, ["span/*/overlap", "time/replay"]) == ["span/a:b/overlap", "time/replay"]
    assert analysis.match_metrics(cols, ["span/*"]) == ["span/a:b/overlap", "span/overlap", "span/a:b/mass_in"]
    assert analysis.match_metrics(cols, ["*"])[:1] == ["span/a:b/overlap"]  # never the x axes or band columns
    assert "reward/all_satisfied::lo" not in analysis.match_metrics(cols, ["*"])
    assert analysis.match_metrics(cols, ["nothing/*"]) == []


def test_small_multiples_share_one_x_axis_keep_the_data_and_name_each_line_once():
    df = metrics_frame()
    parts = {k: figures.metric_lines({"a": df, "b": df}, [k], k, color_by="run")
             for k in ("reward/all_satisfied", "loss/policy", "loss/total")}
    before = [p.to_json() for p in parts.values()]
    fig = figures.small_multiples(parts, "three", cols=2)
    assert [p.to_json() for p in parts.values()] == before  # the parts (cached figures) are left as they were
    assert [a.text for a in fig.layout.annotations] == list(parts)
    axes = [fig.layout[k] for k in sorted((k for k in fig.layout if k.startswith("xaxis")),
                                          key=lambda k: int(k[5:] or 1))]
    # 2 x 2 grid: every axis follows the first (the empty cell's too); the first follows none (an axis matching
    # itself is ignored by plotly, with a warning in the browser's console)
    assert len(axes) == 4 and axes[0].matches is None and all(ax.matches == "x" for ax in axes[1:])
    assert [ax.title.text for ax in axes] == ["", "step", "step", ""]  # under each column's lowest panel
    assert [tr.name for tr in fig.data if tr.showlegend] == ["a", "b"]  # one legend entry per run
    assert {tr.legendgroup for tr in fig.data} == {"a", "b"}  # a click toggles the run in every panel
    pd.testing.assert_frame_equal(figures.plotted_series({"x": fig}).drop(columns="figure"),
                                  pd.concat([figures.plotted_series({"x": p}) for p in parts.values()],
                                            ignore_index=True).drop(columns="figure"))
    assert not any(tr.showlegend for tr in figures.small_multiples(parts, "t", legend=False).data)


def test_a_panel_without_data_says_so_once():
    """A part that `metric_lines` found nothing to draw for carries its own note ("no data for these metrics
    yet"); small_multiples put its "no data" over it as well, two texts on top of each other."""
    df = metrics_frame()
    parts = {"drawn": figures.metric_lines({"a": df}, ["loss/policy"], "drawn"),
             "empty": figures.metric_lines({"a": df}, ["no/such/key"], "empty"), "bare": go.Figure()}
    notes = [(a.text, a.xref) for a in figures.small_multiples(parts, "t", cols=3).layout.annotations]
    assert notes == [("drawn", "paper"), ("empty", "paper"), ("bare", "paper"),
                     ("no data for these metrics yet", "x2 domain"), ("no data", "x3 domain")]


def test_ten_reward_curves_are_one_small_panel_per_reward():
    names = [f"family:r{i}" for i in range(10)]
    df = pd.DataFrame({"step": [1, 2, 3], "reward/all_satisfied": [0.1, 0.2, 0.3],
                       **{f"reward/{n}": [0.5, 0.6, 0.7] for n in names}})
    fig = figures.reward_curves({"run": df}, names)
    assert [a.text for a in fig.layout.annotations] == ["all satisfied", *names]
    assert {tr.line.color for tr in fig.data if tr.name != "all satisfied"} == set(reward_colors(names).values())
    few = figures.reward_curves({"run": df}, names[:4])
    assert not few.layout.annotations and len(few.data) == 5  # four rewards: one panel, as before


def test_display_indices_keep_each_buckets_lowest_and_highest_point():
    y = [0, 5, 1, 3, 2, 9, 4, 4]  # 2 buckets of 4: (0 at 0, 5 at 1), (2 at 4, 9 at 5); plus the last point
    assert figures.display_indices(y, 4).tolist() == [0, 1, 4, 5, 7]
    nan = float("nan")
    assert figures.display_indices([nan, nan, nan, 1, 2, 3], 4).tolist() == [0, 3, 5]  # a NaN bucket: its first
    assert figures.display_indices([3, 1, 2, 0, 7, 6, 5], 4).tolist() == [0, 3, 4, 6]  # (3 at 0, 0 at 3), (7, 5)
    assert figures.display_indices([1, 2, 3], 4).tolist() == [0, 1, 2]  # short: all
    with pytest.raises(ValueError, match="at least 2"):
        figures.display_indices([1, 2, 3], 1)


@pytest.mark.parametrize("n, max_points", [(2000, 600), (601, 600), (1999, 10), (5000, 2)])
def test_display_indices_keep_every_buckets_range_and_the_ends(n, max_points):
    rng = np.random.default_rng(n)
    y = rng.normal(size=n).cumsum()
    y[rng.random(n) < 0.05] = np.nan
    keep = figures.display_indices(y, max_points)
    assert len(keep) <= max_points + 2 and (np.diff(keep) > 0).all() and keep[0] == 0 and keep[-1] == n - 1
    width = -(-n // (max_points // 2))
    for start in range(0, n, width):  # the drawn points span each bucket's lowest to highest value
        bucket = y[start:start + width]
        drawn = y[keep[(keep >= start) & (keep < start + width)]]
        if np.isfinite(bucket).any():
            assert np.nanmin(drawn) == np.nanmin(bucket) and np.nanmax(drawn) == np.nanmax(bucket)


def test_for_display_thins_long_lines_only_and_leaves_the_figure_whole():
    steps = pd.DataFrame({"step": np.arange(1, 2001), "reward/a": np.sin(np.arange(2000) / 50.0)})
    fig = figures.metric_lines({"r": steps}, ["reward/a"], "t")
    fig.add_trace(go.Scatter(x=list(range(2000)), y=list(range(2000)), customdata=list(range(2000)),
                             text=[f"t{i}" for i in range(2000)]))
    fig.add_trace(go.Bar(x=list(range(2000)), y=[1] * 2000))
    fig.add_trace(go.Scatter(x=list(range(2000)), y=[1.0] * 2000, stackgroup="time"))
    fig.add_trace(go.Scatter(x=[1, 2], y=[3, 4]))
    shown = figures.for_display(fig, 100)
    assert [len(t.y) for t in fig.data] == [2000, 2000, 2000, 2000, 2]  # the figure (and its CSV) keep all
    assert len(figures.plotted_series({"t": fig})) == 2000
    lens = [len(t.y) for t in shown.data]
    assert lens[0] <= 102 and lens[1] <= 102 and lens[2:] == [2000, 2000, 2]
    line = shown.data[1]
    assert list(line.customdata) == list(line.x) == list(line.y) and list(line.text) == [f"t{i}" for i in line.x]
    assert shown.layout.title.text == "t" and shown.data[0].meta == fig.data[0].meta
    short = figures.metric_lines({"r": steps.head(50)}, ["reward/a"], "t")
    assert figures.for_display(short) is short  # nothing to thin: the same figure


def test_a_step_without_the_constraint_breaks_the_line_and_its_hover_says_why():
    """Issue 46, item 10: `reward/task:arithmetic` is not logged at a step whose samples none carry it; the line
    breaks there (no straight segment across), and a hollow marker at the gap's steps says why on hover."""
    df = metrics_frame((0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7))
    df["reward/task:arithmetic"] = [None, 0.5, 0.4, 0.5, None, None, 0.8]
    for smooth in (0.0, 0.5):
        fig = figures.metric_lines({"r": df}, {"reward/task:arithmetic": "task:arithmetic"}, "t", smooth=smooth)
        lines = [tr for tr in fig.data if tr.meta[2] in ("raw", "smoothed")]
        assert lines and all(tr.connectgaps is False for tr in lines)  # a gap is drawn as a gap
        assert all(np.isnan(tr.y[i]) for tr in lines for i in (0, 4, 5))
        (gap,) = [tr for tr in fig.data if tr.meta[2] == "gap"]
        assert list(gap.x) == [1, 5, 6] and gap.marker.symbol == "circle-open" and gap.showlegend is False
        assert all("no sample of this step carried task:arithmetic" in t for t in gap.hovertext)
        assert gap.y[0] == pytest.approx(lines[-1].y[1])  # before the first value: at the first value's height
        assert figures.plotted_series({"t": fig})["kind"].isin(["raw", "smoothed"]).all()  # the CSV: values only
    long = pd.DataFrame({"step": range(1, 41), "reward/task:arithmetic": [0.5] * 19 + [None, 0.4, None] + [0.6] * 18})
    fig = figures.metric_lines({"r": long}, {"reward/task:arithmetic": "task:arithmetic"}, "t")
    assert fig.data[0].mode == "lines"  # 40 points: no markers, so a value alone between gaps would not show
    assert any(21 in list(tr.x) and "markers" in tr.mode for tr in fig.data if tr.meta[2] == "alone")
    other = figures.metric_lines({"r": df}, {"js/x/mean": "x"}, "t")  # a key the frame lacks: nothing to say
    assert not [tr for tr in other.data if tr.meta and tr.meta[2] == "gap"]


def test_steps_to_reach_of_seed_groups_mean_and_spread_by_hand():
    """Issue 46, item 7: with seed groups on, the table lists the groups (mean and spread of the first steps)."""
    from mrtpo_viz.reach import group_steps_to_reach

    runs = {"g-s0": (0.1, 0.3, 0.6, 0.8), "g-s1": (0.3, 0.6, 0.6, 0.6), "g-s2": (0.1, 0.2, 0.2, 0.2),
            "h-s0": (0.0, 0.1)}
    table = analysis.steps_to_reach({r: metrics_frame(v) for r, v in runs.items()}, [0.25, 0.5, 0.75])
    groups = {"g (3 seeds)": ["g-s0", "g-s1", "g-s2"], "h": ["h-s0"], "none": ["x"]}
    out = group_steps_to_reach(table, groups, [0.25, 0.5, 0.75]).set_index("group")
    assert list(out.index) == ["g (3 seeds)", "h", "none"] and out.loc["g (3 seeds)", "runs"] == 3
    # first steps at 0.25: 2, 1 (g-s2 never): mean 1.5, sample std 0.707
    assert out.loc["g (3 seeds)", "≥ 0.25"] == "1.5 ± 0.7 (2 of 3)"
    assert out.loc["g (3 seeds)", "≥ 0.5"] == "2.5 ± 0.7 (2 of 3)"
    assert out.loc["g (3 seeds)", "≥ 0.75"] == "4.0 (1 of 3)"
    assert out.loc["g (3 seeds)", "best"] == "0.533 ± 0.306"  # bests 0.8, 0.6, 0.2
    assert out.loc["h", "≥ 0.25"] == "not reached (0 of 1)" and out.loc["h", "best"] == "0.100"
    assert out.loc["none", "≥ 0.5"] == "no data" and out.loc["none", "runs"] == 0
    minmax = group_steps_to_reach(table, groups, [0.25], band="minmax").set_index("group")
    assert minmax.loc["g (3 seeds)", "≥ 0.25"] == "1.5 (1.0–2.0) (2 of 3)"


def test_a_seed_groups_band_is_filled_and_outlined_in_its_colour():
    """Issue 46, item 7: a band of fill opacity 0.15 without an outline was barely visible in a light colour."""
    a = pd.DataFrame({"step": [1, 2], "reward/all_satisfied": [0.2, 0.4]})
    b = pd.DataFrame({"step": [1, 2], "reward/all_satisfied": [0.4, 0.8]})
    groups = analysis.group_metrics({"a": a, "b": b}, {"gdpo (2 seeds)": ["a", "b"]}, "std")
    fig = figures.metric_lines(groups, {"reward/all_satisfied": "all satisfied"}, "t", color_by="run")
    hi, lo, line = fig.data
    r, g, b_ = (int(line.line.color[i:i + 2], 16) for i in (1, 3, 5))
    fill = [float(v) for v in lo.fillcolor[5:-1].split(",")]
    assert fill[:3] == [r, g, b_] and fill[3] >= 0.25
    for edge in (hi, lo):
        assert edge.line.width >= 1 and edge.line.color.startswith(f"rgba({r},{g},{b_},")
        assert float(edge.line.color[:-1].split(",")[3]) >= 0.6


def test_the_controls_are_named_and_a_shuffle_seed_is_a_seed():
    # issue 42: the Runs table and Compare tell a control run from the routing it controls
    from core.choices import control_label

    js = {"method": "mrtpo", "routing": "replay", "relevance": "js"}
    assert control_label(js) is None and control_label({"method": "gdpo"}) is None
    assert control_label({**js, "routing_shuffle": "on", "routing_shuffle_seed": 7}) == "shuffle (seed 7)"
    assert control_label({**js, "routing_shuffle": "off"}) is None
    assert control_label({"method": "gdpo", "routing_shuffle": "on"}) is None  # gdpo routes nothing to shuffle
    assert control_label({"method": "mrtpo", "routing": "entropy", "entropy_q": 0.3}) == "top-entropy q=0.3"
    assert control_label({"method": "gdpo", "reward_scales": {"a": 0.84, "b": 0.35}}) == "reward scales a=0.84, b=0.35"
    row = analysis.run_row("r", type("I", (), {"method": "mrtpo", "state": "completed", "step": 1, "total_steps": 1,
                                               "model": "m", "updated_at": None, "source": "runs", "path": "p"})(),
                           {**js, "routing_shuffle": "on"}, {}, {})
    assert row["control"] == "shuffle (seed 0)" and row["routing"] == "replay"
    configs = {f"sh-s{i}": {**js, "routing_shuffle": "on", "seed": i, "routing_shuffle_seed": 10 + i} for i in range(2)}
    configs["js-s0"] = {**js, "seed": 0}
    assert analysis.seed_groups(configs) == {"sh (2 seeds)": ["sh-s0", "sh-s1"], "js": ["js-s0"]}
