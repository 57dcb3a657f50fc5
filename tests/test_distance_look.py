"""`python -m core.tools.distance_look`: the per-reward numbers of where a run's distances fall, on hand-made rows
and on the shipped SmolLM2 demo run's credit maps."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from core.tools.distance_look import look, markdown, pair_stats


def test_pair_stats_hand_case():
    # two pairs of 4 tokens; pair 0: d 0.4 0.3 0.2 0.1 (span: token 1), pair 1: d 0.1 0.1 0.1 0.7 (span: token 3)
    rows = []
    for sample, ds, span in ((0, [0.4, 0.3, 0.2, 0.1], 1), (1, [0.1, 0.1, 0.1, 0.7], 3)):
        for t, d in enumerate(ds):
            rows.append({"step": 1, "sample": sample, "t": t, "token": f"w{t}", "distance": d, "in_span": t == span})
    rows.append({"step": 1, "sample": 2, "t": 0, "token": "x", "distance": math.nan, "in_span": True})  # not replayed
    out = pair_stats(pd.DataFrame(rows))
    assert out["pairs"] == 2 and out["tokens"] == 8 and out["span_share"] == 0.25
    assert out["d_in"] == pytest.approx((0.3 + 0.7) / 2) and out["d_out"] == pytest.approx((0.4 + 0.2 + 0.1 + 0.3) / 6)
    # first 3 tokens' share of each pair's mass: 0.9 / 1.0 and 0.3 / 1.0; last 3: 0.6 and 0.9
    assert out["head3"] == pytest.approx(0.6) and out["tail3"] == pytest.approx(0.75)
    assert out["top"] == "'w0' 1, 'w3' 1"
    assert pair_stats(pd.DataFrame(rows[-1:]))["pairs"] == 0


def test_look_reads_the_shipped_smollm2_demo_run():
    rows = look("sample_data/runs/smollm2-135m-mrtpo-demo")
    assert {r["reward"] for r in rows} == {"change_case:english_lowercase", "punctuation:no_comma",
                                            "keywords:existence", "startend:end_checker", "task:arithmetic"}
    assert all(r["pairs"] > 0 and 0 <= r["head3"] <= 1 and -1 <= r["rho_t"] <= 1 for r in rows)
    text = markdown(rows)
    assert text.count("\n") == len(rows) + 1 and "| smollm2-135m-mrtpo-demo | js | keywords:existence |" in text


def test_a_folder_without_credit_maps_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="has no stored credit maps"):
        look(str(tmp_path))
