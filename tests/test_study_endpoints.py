"""Study endpoints (core/tools/study_endpoints.py): Student t, paired t, Holm, the endpoints of a hand-made study."""

import math

import pandas as pd
import pytest

from core.tools import study_endpoints as se


def test_t_distribution_against_table_values():
    # two-sided 95% critical values from a t table
    for df, q in ((1, 12.7062), (4, 2.7764), (9, 2.2622), (11, 2.2010), (30, 2.0423)):
        assert se.t_quantile(0.975, df) == pytest.approx(q, abs=1e-4)
    assert se.t_cdf(0.0, 5) == pytest.approx(0.5)
    assert se.t_cdf(2.0150, 5) == pytest.approx(0.95, abs=1e-4)
    assert se.t_cdf(-2.0150, 5) == pytest.approx(0.05, abs=1e-4)


def test_paired_t_by_hand():
    # d = [1, 2, 3]: mean 2, sd 1, se 1/sqrt 3, t = 2 sqrt 3 = 3.4641, df 2: p = 0.0742, interval 2 -+ 4.3027 / sqrt 3
    r = se.paired_t([1.0, 2.0, 3.0])
    assert r["n"] == 3 and r["mean"] == 2.0 and r["sd"] == pytest.approx(1.0)
    assert r["t"] == pytest.approx(3.4641, abs=1e-4) and r["p"] == pytest.approx(0.0742, abs=1e-4)
    assert r["low"] == pytest.approx(2 - 4.3027 / math.sqrt(3), abs=1e-4)
    assert r["high"] == pytest.approx(2 + 4.3027 / math.sqrt(3), abs=1e-4)
    assert math.isnan(se.paired_t([0.5])["p"]) and se.paired_t([0.5])["mean"] == 0.5
    assert se.paired_t([0.1, 0.1])["p"] == 0.0  # no spread, nonzero mean
    assert math.isnan(se.paired_t([0.0, 0.0])["p"])


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04 with m = 3: 0.03, max(0.03, 0.06), max(0.06, 0.04) -> input order
    assert se.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert se.holm([0.5, 0.001]) == pytest.approx([0.5, 0.002])
    out = se.holm([float("nan"), 0.02])
    assert math.isnan(out[0]) and out[1] == pytest.approx(0.02)  # NaN does not count in m
    assert se.holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])


def _study(diffs: dict[str, list[float]], steps=(10, 20)) -> pd.DataFrame:
    rows = []
    for seed in range(len(next(iter(diffs.values())))):
        base = 0.2 + 0.01 * seed
        for method, d in {"gdpo": [0.0] * 10, **diffs}.items():
            rows.append({"method": method, "seed": seed, "step": 0, "metric": se.ALL_SATISFIED, "value": 0.1})
            for i, step in enumerate(steps):
                # the mean over the evaluations is base + d[seed]; step 0 (the same model for all) is left out
                value = base + d[seed] + (0.01 if i == 0 else -0.01)
                rows.append({"method": method, "seed": seed, "step": step, "metric": se.ALL_SATISFIED, "value": value})
                rows.append({"method": method, "seed": seed, "step": step,
                             "metric": "eval/reward/keywords:forbidden_words", "value": value})
    return pd.DataFrame(rows)


def test_primary_endpoint_pairs_by_seed_and_holm_corrects_the_mrtpo_arms():
    df = _study({"mrtpo-js": [0.02, 0.03, 0.01, 0.02], "mrtpo-auto": [0.01, -0.01, 0.02, 0.0],
                 "grpo": [0.0, 0.01, -0.01, 0.0]})
    rows = se.endpoint_rows(df).set_index(["endpoint", "method"])
    prim = rows.loc["all-satisfied, mean over evaluations"]
    js = prim.loc["mrtpo-js"]
    assert js["n"] == 4 and js["mean"] == pytest.approx(0.02)
    ref = se.paired_t([0.02, 0.03, 0.01, 0.02])
    assert js["p"] == pytest.approx(ref["p"]) and js["low"] == pytest.approx(ref["low"])
    adj = se.holm([js["p"], prim.loc["mrtpo-auto", "p"]])
    assert js["p_holm"] == pytest.approx(adj[0]) and prim.loc["mrtpo-auto", "p_holm"] == pytest.approx(adj[1])
    assert js["verdict"] == "beats GDPO" and prim.loc["mrtpo-auto", "verdict"] == "not shown"
    assert math.isnan(prim.loc["grpo", "p_holm"]) and prim.loc["grpo", "verdict"] == ""  # not an MRTPO contrast
    assert rows.loc[("safety, mean over evaluations", "mrtpo-js"), "role"] == "secondary"
    assert "| mrtpo-js | 4 |" in se.markdown(se.endpoint_rows(df))


def test_an_unfinished_run_is_left_out_of_the_pairing():
    df = _study({"mrtpo-js": [0.02, 0.03, 0.01]})
    df = df[~((df["method"] == "mrtpo-js") & (df["seed"] == 2) & (df["step"] == 20))]  # seed 2 stopped early
    r = se.endpoint_rows(df).set_index(["endpoint", "method"]).loc[("all-satisfied, mean over evaluations",
                                                                      "mrtpo-js")]
    assert r["n"] == 2 and r["mean"] == pytest.approx(0.025)


def test_a_study_with_no_finished_run_gives_empty_tables(tmp_path):
    empty = pd.DataFrame(columns=["method", "seed", "step", "metric", "value"])
    rows = se.endpoint_rows(empty)
    assert rows.empty and "## Primary" in se.markdown(rows)
    csv = tmp_path / "efficiency.csv"
    empty.to_csv(csv, index=False)
    assert se.main([str(csv)]) == 0 and (tmp_path / "endpoints.md").exists()


def test_fewer_seeds_than_planned_is_interim_with_no_verdict(tmp_path):
    df = _study({"mrtpo-js": [0.02, 0.03, 0.01, 0.02]})  # would beat GDPO with 4 seeds (test above)
    rows = se.endpoint_rows(df, planned=12).set_index(["endpoint", "method"])
    assert rows.loc[("all-satisfied, mean over evaluations", "mrtpo-js"), "verdict"] == "interim"
    text = se.markdown(se.endpoint_rows(df, planned=12), planned=12)
    assert "**Interim: 4 of 12 pre-registered seeds.**" in text and "beats GDPO" not in text
    # every planned seed in: the verdict stands, no interim line
    assert se.endpoint_rows(df, planned=4).set_index(["endpoint", "method"]).loc[
        ("all-satisfied, mean over evaluations", "mrtpo-js"), "verdict"] == "beats GDPO"
    assert "Interim" not in se.markdown(se.endpoint_rows(df, planned=4), planned=4)
    csv = tmp_path / "efficiency.csv"
    df.to_csv(csv, index=False)
    assert se.main([str(csv), "--planned-seeds", "12"]) == 0
    assert "Interim: 4 of 12" in (tmp_path / "endpoints.md").read_text()
