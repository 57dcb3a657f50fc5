"""The app's reward-specificity panel, relevance switch and Compare overlap (mrtpo_viz/specificity.py, the Token
credit, JS and Compare pages): the torch-free twins equal the trainer's torch functions on random inputs, and
the pages show hand-computed numbers for a hand-made two-reward credit map."""

from __future__ import annotations

import base64
import json

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import html_tables, numeric, open_page
from streamlit.testing.v1 import AppTest

from core.algos import routing, span_metrics
from core.run.store import RunWriter
from mrtpo_viz import specificity as sp

KW, NC, LC = "keywords:existence", "punctuation:no_comma", "change_case:english_lowercase"
REWARDS = [KW, NC, LC]


# ----------------------------------------------------------------------------- twins equal the torch functions


def random_inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    b, k, t = 5, 3, 7
    d = torch.rand(b, k, t, generator=g)
    d[d < 0.2] = 0.0
    d[0, 1] = float("nan")  # a reward that does not apply
    d[2, :, :] = 0.0 if seed % 2 else d[2]  # a row with no mass
    mask = torch.ones(b, t)
    mask[1, 5:] = 0
    span = torch.rand(b, k, t, generator=g) < 0.3
    return d, mask, span


@pytest.mark.parametrize("seed", range(6))
def test_twins_equal_the_trainer_functions(seed):
    d, mask, span = random_inputs(seed)
    dn, mn, sn = d.numpy(), mask.numpy(), span.numpy()
    for lam, w_max, sharpen in ((1.0, 5.0, 1.0), (0.5, 2.0, 2.0)):
        np.testing.assert_allclose(sp.routing_weights(dn, mn, lam, w_max, sharpen),
                                   routing.routing_weights(d, mask, lam, w_max, sharpen).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sp.specific_relevance(dn), routing.specific_relevance(d).numpy(), rtol=1e-5,
                               atol=1e-6, equal_nan=True)
    w = routing.routing_weights(routing.specific_relevance(d), mask)
    w = torch.where(routing.applicable_from(d)[:, :, None], w, torch.nan)
    p_t = span_metrics.token_shares(w, mask)
    p_n = sp.token_shares(w.numpy(), mn)
    np.testing.assert_allclose(p_n, p_t.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True)
    np.testing.assert_allclose(sp.pairwise_overlap(p_n), span_metrics.pairwise_overlap(p_t).numpy(), rtol=1e-5,
                               atol=1e-6, equal_nan=True)
    for got, want in zip(sp.mass_control(p_n, sn, mn), span_metrics.mass_control(p_t, span, mask), strict=True):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True)
    scores, labels = d[3].reshape(-1), span[3].reshape(-1)
    assert sp.roc_auc(scores.numpy(), labels.numpy()) == pytest.approx(span_metrics.roc_auc(scores, labels))


def test_variant_table_mirrors_the_trainer_registry():
    assert set(sp.VARIANTS) == set(routing.RELEVANCE)
    for name, (contrast, distance, specific) in sp.VARIANTS.items():
        r = routing.RELEVANCE[name]
        assert ("+".join(r.contrasts), r.distance, r.combine is routing.specific_relevance) == (contrast, distance,
                                                                                               specific)
    assert set(sp.CONTRAST_TEXT) >= {c for c, _, _ in sp.VARIANTS.values()}


def test_computable_variants_follow_the_stored_contrast_and_distance():
    ok, why = sp.computable_variants({"method": "mrtpo", "routing": "replay", "relevance": "swap"})
    assert ok == ["swap", "swap_specific"]
    assert "swapped" not in why["js"] and "without the constraint" in why["js"]
    assert "log-probs are not stored" in why["logp"] and "without the constraint" in why["logp"]
    ok, why = sp.computable_variants({"method": "mrtpo", "routing": "replay", "relevance": "logp_specific"})
    assert ok == ["logp", "logp_specific"] and "distributions are not stored" in why["js"]
    assert sp.computable_variants({"method": "gdpo"})[0] == []
    assert sp.computable_variants({"method": "mrtpo", "routing": "span"})[0] == []


# ----------------------------------------------------------------------------- a hand-made credit map
# Sample 0 states KW and NC (4 tokens); stored d_KW = [.2, .6, .2, 0], d_NC = [.2, 0, .2, .4], relevance js:
# u_KW = 4 d / 1.0 = [.8, 2.4, .8, 0], u_NC = 4 d / .8 = [1, 0, 1, 2]; shares p_KW = [.2, .6, .2, 0],
# p_NC = [.25, 0, .25, .5]; overlap = .2 + 0 + .2 + 0 = 0.4. Spans: KW token 1, NC token 2 (share 1/4 each):
# KW mass_in .6, lift 2.4, control p_NC[1] / .25 = 0, AUC 1; NC mass_in .25, lift 1, control .2 / .25 = .8,
# AUC: ranks of [.2 | 0, .2, .4] -> pos mid-rank 2.5, (2.5 - 1) / 3 = 0.5.
# js_specific: spec_KW = [0, .6, 0, 0], spec_NC = [0, 0, 0, .4] -> w_KW = [0, 4, 0, 0], w_NC = [0, 0, 0, 4], overlap 0.
# Credit factors c_KW = .5, c_NC = -.25, total advantage = sum of credit - .1.
# Sample 1 states only LC (satisfied, span = the whole text): its metrics are not applicable.
D = {KW: [0.2, 0.6, 0.2, 0.0], NC: [0.2, 0.0, 0.2, 0.4]}
W = {KW: [0.8, 2.4, 0.8, 0.0], NC: [1.0, 0.0, 1.0, 2.0]}
C = {KW: 0.5, NC: -0.25}
SPAN = {KW: 1, NC: 2}


def hand_frame() -> pd.DataFrame:
    rows = []
    adv0 = [sum(C[r] * W[r][t] for r in (KW, NC)) - 0.1 for t in range(4)]
    for sample in (0, 1):
        for reward in REWARDS:
            stated = reward in ((KW, NC) if sample == 0 else (LC,))
            for t in range(4):
                rows.append({
                    "step": 1, "sample": sample, "group": 0, "prompt_key": f"p{sample}", "prompt": f"prompt {sample}",
                    "response": "abcd", "reward": reward,
                    "score": ({KW: 1.0, NC: 0.0, LC: 1.0}[reward] if stated else np.nan),
                    "group_adv": 0.5 if stated else 0.0, "t": t, "token_id": t, "token": "abcd"[t], "start": t,
                    "end": t + 1,
                    "distance": (D[reward][t] if sample == 0 else 0.5) if stated else np.nan, "distance_skipped": False,
                    "weight": (W[reward][t] if sample == 0 else 1.0) if stated else 1.0,
                    "credit": (C[reward] * W[reward][t] if sample == 0 else 0.3) if stated else 0.0,
                    "in_span": (t == SPAN[reward] if sample == 0 else True) if stated else False,
                    "token_adv": adv0[t] if sample == 0 else 0.2,
                })
    return pd.DataFrame(rows)


def write_run(root, name: str, overlap: list[float]) -> None:
    cfg = {"model": "synthetic", "prompt_set": "synthetic", "method": "mrtpo", "routing": "replay", "relevance": "js",
           "lam": 1.0, "w_max": 5.0, "sharpen": 1.0, "steps": len(overlap), "group_size": 2, "prompts_per_step": 1,
           "reward_names": REWARDS, "reward_weights": {}}
    w = RunWriter.create(root, name, cfg)
    for step, o in enumerate(overlap, start=1):
        w.write_credit(step, hand_frame().assign(step=step))
        w.append_metrics({"step": step, "span/overlap": o, "reward/all_satisfied": 0.5})
    w.set_status(state="completed", step=len(overlap), total_steps=len(overlap))


def test_recompute_variant_gives_the_hand_computed_weights_credit_and_advantage():
    cfg = {"method": "mrtpo", "routing": "replay", "relevance": "js", "lam": 1.0, "w_max": 5.0}
    out = sp.recompute_variant(hand_frame(), "js_specific", cfg, REWARDS)
    s0 = out[out["sample"] == 0]
    kw, nc = s0[s0["reward"] == KW], s0[s0["reward"] == NC]
    np.testing.assert_allclose(kw["weight"], [0, 4, 0, 0], atol=1e-6)
    np.testing.assert_allclose(nc["weight"], [0, 0, 0, 4], atol=1e-6)
    np.testing.assert_allclose(kw["credit"], [0, 2.0, 0, 0], atol=1e-6)
    np.testing.assert_allclose(nc["credit"], [0, 0, 0, -1.0], atol=1e-6)
    np.testing.assert_allclose(kw["token_adv"], [-0.1, 1.9, -0.1, -1.1], atol=1e-6)
    np.testing.assert_allclose(kw["relevance"], [0, 0.6, 0, 0], atol=1e-6)
    # sample 1 has one reward: specific = d, uniform d -> weights 1, credit unchanged
    s1 = out[(out["sample"] == 1) & (out["reward"] == LC)]
    np.testing.assert_allclose(s1["weight"], 1.0) and np.testing.assert_allclose(s1["credit"], 0.3, atol=1e-6)
    same = sp.recompute_variant(hand_frame(), "js", cfg, REWARDS)
    np.testing.assert_allclose(same["weight"], hand_frame()["weight"], atol=1e-6)


def test_sample_metrics_hand_computed():
    df = hand_frame()
    overlap, mean = sp.sample_overlap(df[df["sample"] == 0], [KW, NC])
    assert overlap.loc[KW, NC] == pytest.approx(0.4) and overlap.loc[NC, KW] == pytest.approx(0.4)
    assert mean == pytest.approx(0.4)
    t = sp.sample_metrics(df[df["sample"] == 0], [KW, NC]).set_index("reward")
    assert t.loc[KW, ["mass_in", "lift", "mass_control", "auc"]].tolist() == pytest.approx([0.6, 2.4, 0.0, 1.0])
    assert t.loc[NC, ["mass_in", "lift", "mass_control", "auc"]].tolist() == pytest.approx([0.25, 1.0, 0.8, 0.5])
    assert t.loc[KW, "outcome"] == "satisfied" and t.loc[NC, "outcome"] == "violated"
    # two rewards: rotating the labels hands each reward the other's routing, so lift_rotated is the control entry
    assert t.loc[KW, "lift_rotated"] == pytest.approx(0.0) and t.loc[NC, "lift_rotated"] == pytest.approx(0.8)
    s0 = df[df["sample"] == 0]
    for name in (KW, NC):
        assert t.loc[name, "retained"] == pytest.approx(s0[s0["reward"] == name]["weight"].mean())
    lc = sp.sample_metrics(df[df["sample"] == 1], [LC]).set_index("reward").loc[LC]
    assert "whole text" in lc["no metrics because"] and np.isnan(lc["auc"]) and np.isnan(lc["mass_in"])


# ----------------------------------------------------------------------------- the pages


@pytest.fixture(scope="module")
def hand_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("hand_runs")
    write_run(root, "hand-a", [0.4, 0.3])
    write_run(root, "hand-b", [0.2, 0.1])
    mp = pytest.MonkeyPatch()
    mp.setenv("MRTPO_RUNS_DIR", str(root))
    yield root
    mp.undo()


def metrics_table(at: AppTest) -> pd.DataFrame:
    return numeric(next(f for f in html_tables(at) if "mass_control" in f.columns)).set_index("reward")


@pytest.mark.app
@pytest.mark.parametrize("name", ["credit", "js"])
def test_page_shows_the_samples_overlap_and_metrics_and_switches_variant(hand_runs, name):
    at = open_page(name, {"run": "hand-a", "step": "1", "sample": "0"})
    overlap = next(t for t in html_tables(at) if KW in t.columns)  # shown whole, as text (3 decimals)
    assert overlap.loc[KW, NC] == "0.400" and overlap.loc[KW, KW] == "—"
    assert any(m.value == "0.400" for m in at.metric)
    t = metrics_table(at)
    assert t.loc[NC, ["mass_in", "lift", "mass_control", "auc"]].tolist() == pytest.approx([0.25, 1.0, 0.8, 0.5])
    box = at.selectbox(key=f"{name}_relevance")
    assert box.options == ["js (trained)", "js_specific (recomputed)"]
    assert any("Not computable" in c.value and "swap" in c.value for c in at.caption)
    box.set_value("js_specific").run()
    assert not at.exception, at.exception
    assert any(m.value == "0.000" for m in at.metric)  # disjoint routing under js_specific
    t = metrics_table(at)
    assert t.loc[KW, ["mass_in", "lift", "mass_control"]].tolist() == pytest.approx([1.0, 4.0, 0.0])
    assert t.loc[NC, ["mass_in", "lift", "mass_control"]].tolist() == pytest.approx([0.0, 0.0, 0.0])
    assert any("recomputed under" in i.value for i in at.info)


@pytest.mark.app
def test_page_says_not_applicable_for_a_whole_text_span(hand_runs):
    at = open_page("credit", {"run": "hand-a", "step": "1", "sample": "1"})
    row = metrics_table(at).loc[LC]
    assert "whole text" in row["no metrics because"] and np.isnan(row["lift"])
    assert any("no pairwise overlap" in c.value for c in at.caption)


def array(values) -> np.ndarray:
    """A plotly JSON array: a list, or {"dtype", "bdata"} (base64 of the raw values)."""
    if isinstance(values, dict):
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]).astype(float)
    return np.asarray(values, dtype=float)


@pytest.mark.app
def test_compare_draws_overlap_over_training_one_colour_per_run(hand_runs):
    at = open_page("compare", {"run": ["hand-a", "hand-b"]})
    at.selectbox(key="compare_metric").set_value("routing overlap between rewards").run()
    assert not at.exception, at.exception
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    ys = sorted(tuple(np.round(array(tr["y"]), 6)) for tr in fig["data"])
    assert len(fig["data"]) == 2 and len({tr["line"]["color"] for tr in fig["data"]}) == 2
    assert ys == [(0.2, 0.1), (0.4, 0.3)]
