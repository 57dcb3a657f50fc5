"""`mrtpo bench faithfulness` on the micro model: every variant and baseline for every reward, the oracle's
hand-known values, and the report files."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from core.algos.routing import RELEVANCE
from core.tools.bench_faithfulness import BASELINES, CONTROLS, baseline_relevance


def test_baseline_relevance_hand_case():
    spans = torch.tensor([[[1, 0, 0], [0, 0, 1]]], dtype=torch.bool)
    mask = torch.tensor([[1, 1, 0]])
    app = torch.tensor([[True, False]])
    ent = torch.tensor([[0.5, 2.0, 9.0]])
    assert baseline_relevance("span", spans, mask, ent, app, 0)[0, 0].tolist() == [1.0, 0.0, 0.0]
    assert baseline_relevance("position", spans, mask, ent, app, 0)[0, 0].tolist() == [1.0, 0.5, 0.0]
    assert baseline_relevance("entropy", spans, mask, ent, app, 0)[0, 0].tolist() == [0.5, 2.0, 0.0]
    assert torch.isnan(baseline_relevance("random", spans, mask, ent, app, 0)[0, 1]).all()
    # scatter: each reward on the first real token outside its own span, distinct across rewards
    app2 = torch.tensor([[True, True]])
    sc = baseline_relevance("scatter", spans, torch.tensor([[1, 1, 1]]), ent, app2, 0)
    assert sc[0, 0].tolist() == [0.0, 1.0, 0.0] and sc[0, 1].tolist() == [1.0, 0.0, 0.0]


def test_bench_writes_every_variant_and_baseline(micro_model, prompt_file, tmp_path, capsys):
    from core.tools.bench_faithfulness import main

    code = main(["--model", str(micro_model), "--prompt-set", str(prompt_file), "--prompts", "4", "--samples", "2",
                 "--batch-prompts", "2", "--max-new-tokens", "8", "--out", str(tmp_path), "--routing-clip", "mass"])
    assert code == 0
    rows = pd.read_csv(tmp_path / f"faithfulness-{micro_model.name}-mass.csv")
    cost = pd.read_csv(tmp_path / f"faithfulness-{micro_model.name}-mass-cost.csv")
    assert set(rows["relevance"]) == set(RELEVANCE) | set(BASELINES) | set(CONTROLS)
    assert set(cost["relevance"]) == set(RELEVANCE) | {"gdpo"}
    # issue 42's controls beside the variants: shuffle keeps js's per-reward mass (its retained share), only the
    # positions move; top-entropy routes every reward alike (pairwise overlap 1)
    by = rows.set_index(["relevance", "reward"])
    for reward in [r for r in dict.fromkeys(rows["reward"]) if r != "*"]:
        js, sh = by.loc[("js", reward), "retained"], by.loc[("js+shuffle", reward), "retained"]
        assert (math.isnan(js) and math.isnan(sh)) or sh == pytest.approx(js, abs=1e-5)
    top = by.loc[("top-entropy", "*"), "overlap"]
    assert top == pytest.approx(1.0, abs=1e-5)
    assert "control: js+shuffle" in capsys.readouterr().out
    assert (cost.loc[cost["relevance"] != "gdpo", "passes_per_response"] > 0).all() and (cost["step_s"] > 0).all()
    oracle = rows[(rows["relevance"] == "span") & (rows["reward"] != "*")]
    auc = oracle["auc"].dropna()
    assert len(auc) and (auc == 1.0).all()  # the span mask separates its own span tokens perfectly
    lift = rows[(rows["relevance"] == "entropy") & (rows["reward"] == "*")]["overlap"].iloc[0]
    assert not math.isnan(lift) and "## " in (tmp_path / f"faithfulness-{micro_model.name}-mass.md").read_text()
    useless = rows[(rows["relevance"] == "scatter") & (rows["reward"] != "*")]
    # no preference for its own span (with mass-keeping weights the rest of the mass spreads evenly: lift < 1)
    assert len(useless["lift"].dropna()) and (useless["lift"].dropna() < 1.0).all()
    assert (useless["retained"].dropna() > 0.999).all()  # mass-keeping routing keeps every reward's mass
    assert {"retained", "lift_rotated", "mass_in_rotated"} <= set(rows.columns)
    # the default (the trainer's routing_clip, clip): the same samples, weights clipped; the scatter router keeps
    # little of its mass
    assert main(["--model", str(micro_model), "--prompt-set", str(prompt_file), "--prompts", "4", "--samples", "2",
                 "--batch-prompts", "2", "--max-new-tokens", "8", "--out", str(tmp_path)]) == 0
    clipped = pd.read_csv(tmp_path / f"faithfulness-{micro_model.name}-clip.csv")
    assert "routing_clip clip" in (tmp_path / f"faithfulness-{micro_model.name}-clip.md").read_text()
    scatter = clipped[(clipped["relevance"] == "scatter") & (clipped["reward"] != "*")]["retained"].dropna()
    assert len(scatter) and (scatter < 0.999).all()


def test_interval95_hand_computed():
    from core.tools.bench_faithfulness import interval95

    # values 1, 2, 3, 4: mean 2.5, sd sqrt(5/3) = 1.29099, t(3) = 3.182, half = 3.182 * 1.29099 / 2 = 2.05397
    lo, hi = interval95([1.0, 2.0, 3.0, 4.0, float("nan")])
    assert abs(lo - (2.5 - 2.05397)) < 1e-4 and abs(hi - (2.5 + 2.05397)) < 1e-4
    assert all(math.isnan(v) for v in interval95([1.0]))


def _tiny_argv(prompt_file, out, *extra):
    return ["--model", "tiny-instruct", "--prompt-set", str(prompt_file), "--prompts", "4", "--samples", "2",
            "--batch-prompts", "2", "--max-new-tokens", "8", "--out", str(out), *extra]


def test_bench_saves_each_batch_and_resumes_to_the_same_numbers(prompt_file, tmp_path, monkeypatch):
    from core.tools import bench_faithfulness as bench

    assert bench.main(_tiny_argv(prompt_file, tmp_path / "whole")) == 0
    whole = pd.read_csv(tmp_path / "whole" / "faithfulness-tiny-instruct-clip.csv")
    # a crash in batch 2: batch 1 is on disk already, batch 2 is not
    real = bench.run_batch

    def crash_in_batch_2(args, base, state, gdpo, batch):
        if batch == 2:
            raise RuntimeError("simulated crash")
        return real(args, base, state, gdpo, batch)

    monkeypatch.setattr(bench, "run_batch", crash_in_batch_2)
    with pytest.raises(RuntimeError, match="simulated crash"):
        bench.main(_tiny_argv(prompt_file, tmp_path / "resumed"))
    saved = tmp_path / "resumed" / "faithfulness-tiny-instruct-clip-batches"
    assert sorted(p.name for p in saved.glob("batch-*")) == ["batch-0001.csv"]
    assert not (tmp_path / "resumed" / "faithfulness-tiny-instruct-clip.csv").exists()
    # the re-run computes batch 2 only and reports the same numbers as the uninterrupted run
    done: list[int] = []

    def counting(args, base, state, gdpo, batch):
        done.append(batch)
        return real(args, base, state, gdpo, batch)

    monkeypatch.setattr(bench, "run_batch", counting)
    assert bench.main(_tiny_argv(prompt_file, tmp_path / "resumed")) == 0
    assert done == [2]
    resumed = pd.read_csv(tmp_path / "resumed" / "faithfulness-tiny-instruct-clip.csv")
    pd.testing.assert_frame_equal(resumed, whole)
    assert resumed["lift_lo"].notna().any() and resumed["overlap_hi"].notna().any()  # two batches: intervals
    # a --batches limit reports the first batches only, and says so
    assert bench.main(_tiny_argv(prompt_file, tmp_path / "resumed", "--batches", "1")) == 0
    partial = (tmp_path / "resumed" / "faithfulness-tiny-instruct-clip.md").read_text()
    assert done == [2] and "batches 1 of 2" in partial and "from the first 1 of 2 batches" in partial
    assert "Partial run" not in (tmp_path / "whole" / "faithfulness-tiny-instruct-clip.md").read_text()


def test_bench_refuses_to_resume_with_other_settings(prompt_file, tmp_path):
    from core.tools import bench_faithfulness as bench

    assert bench.main(_tiny_argv(prompt_file, tmp_path, "--batches", "1")) == 0
    with pytest.raises(SystemExit, match=r"other settings \(seed: saved 0, now 1\)"):
        bench.main(_tiny_argv(prompt_file, tmp_path, "--seed", "1"))


def test_progress_line_per_batch(prompt_file, tmp_path, capsys):
    from core.tools.bench_faithfulness import main, progress_line

    # ETA: the mean of the computed batches' seconds (10, 20) times the 3 batches left
    line = progress_line(2, 5, [10.0, 20.0], 3)
    assert line.startswith("batch 2/5: 20 s, ETA 45 s (") and line.endswith("UTC), 3 to go")
    assert main(_tiny_argv(prompt_file, tmp_path, "--batches", "1")) == 0
    assert main(_tiny_argv(prompt_file, tmp_path)) == 0
    err = capsys.readouterr().err
    assert "batch 1/1: " in err and "ETA 0 s" in err  # the first run: one batch, none left
    assert "batch 1/2: saved in" in err and "skipped" in err and "batch 2/2: " in err


def test_every_column_gets_its_interval_hand_computed():
    from core.tools.bench_faithfulness import METRICS, aggregate, markdown

    nan = float("nan")
    # lift over 4 batches: 1, 2, 3, 4 -> 2.5 -/+ 3.182 * sqrt(5/3) / 2 = 2.5 -/+ 2.05397
    # mass_in over 2 finite batches: 0.1, 0.3 -> 0.2 -/+ 12.706 * 0.141421 / sqrt(2) = 0.2 -/+ 1.2706
    sums = {("js", "r", "lift"): [1.0, 2.0, 3.0, 4.0], ("js", "r", "mass_in"): [0.1, nan, 0.3, nan],
            ("js", "r", "auc"): [0.7], ("js", "*", "overlap"): [0.5, 0.7, 0.5, 0.7]}
    # GDPO step 10, 12, 10, 12 s (mean 11); js replays 1, 1, 3, 3 s after a 1 s log-softmax: step 13, 13, 15, 15 s
    cost = {"gdpo": {"step_s": [10.0, 12.0, 10.0, 12.0]},
            "js": {"passes": [2.0] * 4, "replay_s": [1.0, 1.0, 3.0, 3.0], "logprobs_s": [1.0] * 4}}
    rows, cost_rows = aggregate(sums, cost, ("js",), ["r"])
    js = next(r for r in rows if r["relevance"] == "js" and r["reward"] == "r")
    assert {f"{m}_{end}" for m in METRICS for end in ("lo", "hi")} <= set(js)
    assert abs(js["lift_lo"] - 0.44603) < 1e-4 and abs(js["lift_hi"] - 4.55397) < 1e-4
    assert abs(js["mass_in"] - 0.2) < 1e-12 and abs(js["mass_in_lo"] + 1.0706) < 1e-4
    assert abs(js["mass_in_hi"] - 1.4706) < 1e-4
    assert js["auc"] == 0.7 and math.isnan(js["auc_lo"])  # one batch: no interval
    # overlap 0.6, s = sqrt(4 * 0.01 / 3) = 0.11547, half = 3.182 * 0.11547 / 2 = 0.18371
    star = next(r for r in rows if r["relevance"] == "js" and r["reward"] == "*")
    assert abs(star["overlap_lo"] - 0.41629) < 1e-4
    step = next(c for c in cost_rows if c["relevance"] == "js")
    # step 14, s = sqrt(4 / 3) = 1.15470, half = 3.182 * 1.15470 / 2 = 1.83712; x GDPO = 14 / 11
    assert step["step_s"] == 14.0 and abs(step["step_s_lo"] - 12.16288) < 1e-4
    assert abs(step["step_vs_gdpo"] - 14 / 11) < 1e-12 and step["passes_per_response_lo"] == 2.0
    text = markdown(rows, cost_rows, {"model": "m"})
    assert "| js | 0.200 [-1.071, 1.471] |" in text and "2.500 [0.446, 4.554]" in text
    assert "| 0.700 |" in text and "14.000 [12.163, 15.837]" in text and "0.600 [0.416, 0.784]" in text


def test_the_lift_gap_and_its_difference_to_the_priors_pair_the_batches():
    from core.tools.bench_faithfulness import aggregate, gap_values, markdown

    nan = float("nan")
    # js: lift 3, 4, 5 and control 1, 1, 2 -> gaps 2, 3, 3; entropy prior: lift 1.5, 2, nan, control 0.5, 0, 0
    # -> gaps 1, 2 (batch 3 undefined); js - entropy paired on batches 1, 2: 1, 1
    by_batch = {("js", "r", "lift"): {1: 3.0, 2: 4.0, 3: 5.0}, ("js", "r", "mass_control"): {1: 1.0, 2: 1.0, 3: 2.0},
                ("entropy", "r", "lift"): {1: 1.5, 2: 2.0, 3: nan},
                ("entropy", "r", "mass_control"): {1: 0.5, 2: 0.0, 3: 0.0},
                ("position", "r", "lift"): {2: 1.0}, ("position", "r", "mass_control"): {2: 1.0}}
    assert gap_values(by_batch, "js", "r") == [2.0, 3.0, 3.0]
    assert gap_values(by_batch, "entropy", "r") == [1.0, 2.0]
    assert gap_values(by_batch, "js", "r", "entropy") == [1.0, 1.0]
    assert gap_values(by_batch, "js", "r", "position") == [3.0]  # only batch 2 has both
    sums = {k: list(v.values()) for k, v in by_batch.items()}
    cost = {"gdpo": {"step_s": [1.0] * 3}, "js": {"passes": [1.0] * 3, "replay_s": [1.0] * 3, "logprobs_s": [0.0] * 3}}
    rows, cost_rows = aggregate(sums, cost, ("js",), ["r"], by_batch)
    js = next(r for r in rows if r["relevance"] == "js" and r["reward"] == "r")
    # gaps 2, 3, 3: mean 8/3, s = sqrt(1/3) = 0.57735, half = 4.303 * 0.57735 / sqrt 3 = 1.43433
    assert abs(js["gap"] - 8 / 3) < 1e-12 and abs(js["gap_lo"] - (8 / 3 - 1.43433)) < 1e-4
    assert js["gap_over_entropy"] == 1.0 and js["gap_over_entropy_lo"] == 1.0  # no spread: a point
    assert js["gap_over_position"] == 3.0 and math.isnan(js["gap_over_position_lo"])  # one batch
    text = markdown(rows, cost_rows, {"model": "m"})
    assert "## Lift gap over the priors" in text and "| r | js | 2.667 [1.232, 4.101] | 1.000 [1.000, 1.000] |" in text
    assert "| r | entropy |" not in text  # the priors are what the variants are measured against


def test_a_batch_saved_without_some_labels_gets_only_those_from_the_same_samples(prompt_file, tmp_path, monkeypatch):
    """A saved batch lacking labels (variants added since) is sampled again and gets just those rows, equal to what
    an uninterrupted run computes; a batch whose samples would differ (its check label tampered with) is refused."""
    from core.tools import bench_faithfulness as bench

    assert bench.main(_tiny_argv(prompt_file, tmp_path / "whole")) == 0
    whole = pd.read_csv(tmp_path / "whole" / "faithfulness-tiny-instruct-clip.csv")
    folder = tmp_path / "whole" / "faithfulness-tiny-instruct-clip-batches"
    for path in folder.glob("batch-*.csv"):  # as if saved before `placebo` and `top-entropy` existed
        df = pd.read_csv(path, keep_default_na=False, na_values=[""])
        df[~df["relevance"].isin(["placebo", "top-entropy"])].to_csv(path, index=False)
    asked: list = []
    real = bench.run_batch

    def recording(args, base, state, gdpo, batch, only=None):
        asked.append((batch, None if only is None else sorted(only)))
        return real(args, base, state, gdpo, batch, only=only)

    monkeypatch.setattr(bench, "run_batch", recording)
    assert bench.main(_tiny_argv(prompt_file, tmp_path / "whole")) == 0
    assert asked == [(1, ["placebo", "top-entropy"]), (2, ["placebo", "top-entropy"])]
    again = pd.read_csv(tmp_path / "whole" / "faithfulness-tiny-instruct-clip.csv")
    cols = [c for c in whole.columns if c not in ("step_s", "step_s_lo", "step_s_hi")]
    pd.testing.assert_frame_equal(again[cols], whole[cols], atol=1e-6)
    # the check label's saved value tampered with: the batch is not the same samples any more, and it says so
    path = folder / "batch-0001.csv"
    df = pd.read_csv(path, keep_default_na=False, na_values=[""])
    df.loc[(df["relevance"] == "span") & (df["metric"] == "mass_in"), "value"] += 0.5
    df[df["relevance"] != "placebo"].to_csv(path, index=False)
    with pytest.raises(SystemExit, match="batch 1 sampled again differs"):
        bench.main(_tiny_argv(prompt_file, tmp_path / "whole"))


def test_variants_sharing_a_pass_run_it_once(prompt_file, tmp_path, monkeypatch):
    """Per batch each (contrast, distance) pass runs once: js, js_specific and placebo's removal share one."""
    from core.run import replay as replay_lib
    from core.tools import bench_faithfulness as bench

    calls: list = []
    real = replay_lib.contrast_distances

    def counting(state, rollout, logprobs, chosen, contrast, distance="js"):
        calls.append((contrast, distance))
        return real(state, rollout, logprobs, chosen, contrast, distance)

    monkeypatch.setattr(replay_lib, "contrast_distances", counting)
    assert bench.main(_tiny_argv(prompt_file, tmp_path / "once", "--batches", "1")) == 0
    assert len(calls) == len(set(calls))
    assert set(calls) == {("remove", "js"), ("swap", "js"), ("remove", "logp"), ("neutral", "js"),
                          ("placebo", "js"), ("opposite", "js"), ("key", "js"), ("remove", "gradxinput")}
