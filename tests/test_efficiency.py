"""The efficiency study: plan and run-state decisions, collecting run stores into the long table,
the report's aggregation (steps to target, final rates, seconds per step, seed spread) on hand-made
run stores with hand-computed numbers, the report files, and one tiny end-to-end study."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
from pathlib import Path

import pandas as pd
import pytest

from core.paths import REPO_ROOT
from core.run.store import RunWriter
from core.tools import efficiency as eff
from mrtpo_viz.tools import efficiency_report as rep
from mrtpo_viz.tools import efficiency_stats as stats

REWARDS = ["a:x", "b:y"]
# Hand-made held-out curves: (method, seed) -> {step: (all_satisfied, reward a, reward b)}; None = not evaluated.
EVAL = {
    ("gdpo", 0): {2: (0.1, 0.5, 0.2), 4: (0.3, 0.7, 0.4)},
    ("gdpo", 1): {2: (0.25, 0.6, None), 4: (0.2, 0.6, 0.3)},
    ("mrtpo-replay", 0): {2: (0.3, 0.6, 0.5), 4: (0.5, 0.8, 0.6)},
    ("mrtpo-replay", 1): {2: (0.2, 0.5, 0.3), 4: (0.45, 0.9, 0.5)},
}
STEP_TIMES = {("gdpo", 0): [1.0, 2.0, 3.0, 2.0], ("gdpo", 1): [4.0] * 4,
              ("mrtpo-replay", 0): [3.0] * 4, ("mrtpo-replay", 1): [5.0] * 4}
INITIAL = {"eval/reward/a:x": 0.4, "eval/reward/b:y": 0.1, "eval/all_satisfied": 0.15}


def make_args(tmp_path, **over) -> argparse.Namespace:
    args = eff.build_parser().parse_args(["--out", str(tmp_path / "study"), "--methods", "gdpo", "mrtpo-replay",
                                          "--seeds", "0", "1", "--steps", "4", "--eval-every", "2"])
    for k, v in over.items():
        setattr(args, k, v)
    return eff.resolve_args(args)


def write_run(spec: eff.RunSpec, steps: int, state: str = "completed", extra_steps: int = 0) -> None:
    """A run store as the trainer leaves it: config, status, one metrics line per step (+ `extra_steps` more)."""
    w = RunWriter.create(spec.fields["runs_dir"], spec.name, {**spec.fields, "reward_names": REWARDS})
    times = STEP_TIMES[(spec.method, spec.seed)]
    for step in range(1, steps + extra_steps + 1):
        row = {"step": step, "reward/a:x": 0.1 * step, "reward/all_satisfied": 0.05 * step,
               "time/step": times[(step - 1) % len(times)], "time/replay": 0.5}
        ev = EVAL[(spec.method, spec.seed)].get(step)
        if ev is not None:
            row |= {"eval/all_satisfied": ev[0], "eval/reward/a:x": ev[1], "eval/reward/b:y": ev[2]}
        w.append_metrics(row)  # a None (NaN) value is stored as null
    w.set_status(state=state, step=steps)


@pytest.fixture
def study(tmp_path):
    """(args, specs, long table) of a finished hand-made study: 2 methods x 2 seeds x 4 steps, eval at 2 and 4."""
    args = make_args(tmp_path)
    specs = eff.plan_runs(args)
    for spec in specs:
        write_run(spec, 4, extra_steps=2 if spec.name == "gdpo-s0" else 0)  # steps beyond the budget are ignored
    return args, specs, eff.collect(specs, INITIAL)


# ---------------------------------------------------------------------------------------------- plan


def test_plan_gives_every_method_the_same_budget(tmp_path):
    args = make_args(tmp_path)
    specs = eff.plan_runs(args)
    assert [s.name for s in specs] == ["gdpo-s0", "gdpo-s1", "mrtpo-replay-s0", "mrtpo-replay-s1"]
    budget = {k: {s.fields[k] for s in specs} for k in ("steps", "group_size", "prompts_per_step", "lr",
                                                          "max_new_tokens", "checkpoint_every", "eval_prompt_set")}
    assert all(len(v) == 1 for v in budget.values()), budget
    assert specs[0].fields["checkpoint_every"] == 2  # the trainer evaluates at its checkpoints
    assert specs[2].fields["method"] == "mrtpo" and specs[2].fields["routing"] == "replay"
    assert [s.fields["seed"] for s in specs] == [0, 1, 0, 1]


def test_plan_scores_the_first_eval_prompts_of_the_held_out_set(tmp_path):
    args = make_args(tmp_path, eval_prompts=5)
    spec = eff.plan_runs(args)[0]
    assert spec.fields["eval_prompts"] == 5
    assert spec.fields["eval_prompt_set"] == str((REPO_ROOT / "sample_data/prompts/heldout.jsonl").resolve())


def test_quick_fills_only_unset_flags(tmp_path):
    args = eff.resolve_args(eff.build_parser().parse_args(["--quick", "--steps", "3"]))
    assert args.steps == 3 and args.seeds == eff.QUICK_DEFAULTS["seeds"]
    assert args.group_size == eff.QUICK_DEFAULTS["group_size"]
    full = eff.resolve_args(eff.build_parser().parse_args([]))
    assert full.seeds == [0, 1, 2] and full.group_size == 8 and full.methods == eff.SETTING_METHODS["tiny"]
    assert full.jobs == 1 and args.jobs == 2
    assert full.model == "tiny-instruct" and full.max_new_tokens == 48
    assert full.prompt_set.endswith("default.jsonl") and full.heldout.endswith("heldout.jsonl")


def test_setting_multi_picks_model_prompt_sets_tokens_and_methods(tmp_path):
    args = eff.resolve_args(eff.build_parser().parse_args(["--setting", "multi", "--out", str(tmp_path)]))
    assert args.model == "tiny-multi" and args.max_new_tokens == 96
    assert args.prompt_set.endswith("multi.jsonl") and args.heldout.endswith("multi-heldout.jsonl")
    assert args.methods == ["grpo", "gdpo", "mrtpo-replay", "mrtpo-swap-specific", "mrtpo-swap"]
    specs = eff.plan_runs(args)
    relevance = [specs[i * len(args.seeds)].fields.get("relevance") for i in (2, 3, 4)]
    assert relevance == ["js", "swap_specific", "swap"]  # js pinned: the default relevance is not js any more
    assert specs[3 * len(args.seeds)].fields["eval_prompt_set"].endswith("multi-heldout.jsonl")
    mine = eff.resolve_args(eff.build_parser().parse_args(["--setting", "multi", "--max-new-tokens", "64",
                                                           "--methods", "gdpo"]))
    assert mine.max_new_tokens == 64 and mine.methods == ["gdpo"]  # flags override the setting


def test_an_arm_without_its_relevance_variant_is_refused_plainly(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(eff, "RELEVANCES", ("js", "js_specific"))  # a trainer without the swap variant
    assert eff.arm_error("mrtpo-js-specific") == "" and eff.arm_error("gdpo") == ""
    message = eff.arm_error("mrtpo-swap")
    assert "arm mrtpo-swap needs the relevance variant 'swap'" in message and "js, js_specific" in message
    with pytest.raises(eff.ConfigError, match="methods: arm mrtpo-swap needs"):
        eff.plan_runs(make_args(tmp_path, methods=["gdpo", "mrtpo-swap"]))
    rc = eff.main(["--out", str(tmp_path / "s"), "--methods", "gdpo", "mrtpo-swap", "--steps", "1"])
    assert rc == 2 and "arm mrtpo-swap needs the relevance variant 'swap'" in capsys.readouterr().err
    assert not (tmp_path / "s" / "runs").exists()  # refused before anything trains
    monkeypatch.setattr(eff, "RELEVANCES", ("js", "js_specific", "swap"))
    assert eff.arm_error("mrtpo-swap") == ""


def test_child_env_runs_one_thread():
    env = eff.child_env()
    assert env["OMP_NUM_THREADS"] == "1" and env["MKL_NUM_THREADS"] == "1"
    assert str(REPO_ROOT) in env["PYTHONPATH"].split(os.pathsep)


# ---------------------------------------------------------------------------------------------- run state


def test_decide_new_reuse_resume_conflict(tmp_path):
    args = make_args(tmp_path)
    specs = {s.name: s for s in eff.plan_runs(args)}
    assert eff.decide(specs["gdpo-s0"]).action == "new"
    write_run(specs["gdpo-s0"], 4)
    assert eff.decide(specs["gdpo-s0"]).action == "reuse"
    write_run(specs["gdpo-s1"], 2, state="stopped")
    d = eff.decide(specs["gdpo-s1"])
    assert d.action == "resume" and "stopped after 2 of 4" in d.reason
    cmd = eff.train_command(specs["gdpo-s1"], d)
    assert cmd[-6:-2] == ["--resume", str(tmp_path / "study" / "runs" / "gdpo-s1"), "--steps", "4"]
    new = eff.train_command(specs["gdpo-s0"], eff.Decision("new"))
    assert new[1:4] == ["-m", "core.cli", "train"] and new[new.index("--run-name") + 1] == "gdpo-s0"
    # A finished run shorter than the budget is extended by resuming it.
    longer = eff.RunSpec("gdpo", 0, {**specs["gdpo-s0"].fields, "steps": 8})
    assert eff.decide(longer).action == "resume"
    # Other settings than the recorded ones: refused, naming the field.
    other = eff.RunSpec("gdpo", 0, {**specs["gdpo-s0"].fields, "lr": 1e-3})
    d = eff.decide(other)
    assert d.action == "conflict" and "lr" in d.reason
    # A run whose recorded pid is alive and state running is someone else's work in progress.
    running = eff.RunSpec("mrtpo-replay", 0, specs["mrtpo-replay-s0"].fields)
    write_run(running, 1, state="running")  # RunWriter.create recorded this process's pid
    assert eff.decide(running).action == "busy"


def test_rebuilt_model_is_not_reused(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights v1")
    first = eff.model_identity(str(model))
    assert first == eff.model_identity(str(model)) and len(first) == 64
    (model / "model.safetensors").write_bytes(b"weights v2")
    assert eff.model_identity(str(model)) != first
    assert eff.model_identity(str(tmp_path / "missing")) is None
    args = make_args(tmp_path)
    spec = eff.plan_runs(args)[0]
    write_run(spec, 4)
    assert eff.decide(spec, "new-id", "old-id").action == "conflict"
    assert eff.decide(spec, "same", "same").action == "reuse"
    assert eff.decide(spec, "new-id", None).action == "reuse"  # a run from before ids were recorded
    ids = eff.ModelIds(tmp_path / "study")
    ids.set("gdpo-s0", "abc")
    assert eff.ModelIds(tmp_path / "study").get("gdpo-s0") == "abc"


def test_config_conflicts_ignore_free_fields():
    rec = {"lr": 1e-4, "steps": 10, "device": "cpu", "method": "gdpo"}
    assert eff.config_conflicts(rec, {"lr": 1e-4, "steps": 20, "device": "cuda", "method": "gdpo"}) == []
    assert eff.config_conflicts(rec, {"lr": 1e-4, "method": "grpo"}) == ["method: 'gdpo' != 'grpo'"]


def test_prune_keeps_only_the_last_checkpoint(tmp_path):
    args = make_args(tmp_path)
    spec = eff.plan_runs(args)[0]
    write_run(spec, 4)
    w = RunWriter(tmp_path / "study" / "runs" / spec.name)
    for step in (2, 4):
        w.checkpoint_dir(step).mkdir(parents=True)
        (w.checkpoint_dir(step) / "model.safetensors").write_bytes(b"x")
    assert eff.prune_checkpoints(w.path) == 1
    assert [p.name for p in (w.path / "checkpoints").iterdir()] == ["step_000004"]


# ---------------------------------------------------------------------------------------------- collect


def test_collect_long_table(study):
    _, specs, df = study
    assert list(df.columns) == eff.CSV_COLUMNS
    assert df["step"].max() == 4  # gdpo-s0's steps 5 and 6 lie beyond the budget
    assert set(df["method"]) == {"gdpo", "mrtpo-replay"} and set(df["seed"]) == {0, 1}
    # Step 0 = the initial evaluation, once per run.
    zero = df[df["step"] == 0]
    assert len(zero) == 4 * len(INITIAL) and set(zero["metric"]) == set(INITIAL)
    # A held-out reward that was not measured (null) is absent, not NaN.
    b = df[(df["method"] == "gdpo") & (df["seed"] == 1) & (df["metric"] == "eval/reward/b:y")]
    assert b["step"].tolist() == [0, 4] and not df["value"].isna().any()
    # Training metrics are there too.
    r = df[(df["method"] == "mrtpo-replay") & (df["seed"] == 0) & (df["metric"] == "reward/a:x")]
    assert r["value"].round(6).tolist() == [0.1, 0.2, 0.3, 0.4]


def test_collect_skips_runs_without_steps(tmp_path):
    args = make_args(tmp_path)
    specs = eff.plan_runs(args)
    write_run(specs[0], 0, state="failed")
    df = eff.collect(specs, INITIAL)
    assert df.empty and list(df.columns) == eff.CSV_COLUMNS


# ---------------------------------------------------------------------------------------------- aggregation


def test_first_step_reaching():
    assert stats.first_step_reaching([0, 2, 4], [0.1, 0.3, 0.2], 0.25) == 2
    assert stats.first_step_reaching([0, 2, 4], [0.3, 0.1, 0.2], 0.25) == 0
    assert stats.first_step_reaching([0, 2, 4], [0.1, 0.2, float("nan")], 0.25) is None
    assert stats.first_step_reaching([2, 4], [0.25, 0.3], 0.25) == 2  # reaching = equal counts


def test_steps_to_target_hand_computed(study):
    df = study[2]
    stt = stats.steps_to_target(df, [0.1, 0.2, 0.3, 0.4]).set_index(["method", "target"])
    # The initial model (step 0, 0.15) already reaches 0.1 in every run.
    assert stt.loc[("gdpo", 0.1), "per_seed"] == [0, 0] and stt.loc[("gdpo", 0.1), "mean_bound"] == 0
    # gdpo, 0.2: seed 0 at step 4 (0.1, 0.3), seed 1 at step 2 (0.25) -> mean 3.
    g = stt.loc[("gdpo", 0.2)]
    assert g["per_seed"] == [4, 2] and g["n_reached"] == 2 and g["mean_reached"] == 3.0 == g["mean_bound"]
    # gdpo, 0.3: seed 0 at 4, seed 1 never (0.25, 0.2): reached mean 4, bound (4 + 4) / 2 = 4.
    g = stt.loc[("gdpo", 0.3)]
    assert g["per_seed"] == [4, None] and g["n_reached"] == 1 and g["mean_reached"] == 4.0 and g["mean_bound"] == 4.0
    assert math.isnan(stt.loc[("gdpo", 0.4), "mean_reached"]) and stt.loc[("gdpo", 0.4), "n_reached"] == 0
    # mrtpo-replay: 0.3 at steps 2 and 4 -> 3; 0.4 at 4 and 4 -> 4.
    assert stt.loc[("mrtpo-replay", 0.3), "per_seed"] == [2, 4] and stt.loc[("mrtpo-replay", 0.3), "mean_bound"] == 3
    assert stt.loc[("mrtpo-replay", 0.4), "mean_reached"] == 4.0


def test_target_cells_say_how_many_seeds_reached(study):
    header, rows = rep.target_table(study[2], [0.2, 0.3, 0.4])
    table = {r[0]: r[1:] for r in rows}
    assert header == ["method", "all-satisfied ≥ 0.2", "all-satisfied ≥ 0.3", "all-satisfied ≥ 0.4"]
    assert table["gdpo"] == ["3.0 (2/2: 4, 2)", "≥ 4.0 (1/2: 4, n/r)", "not reached (0/2)"]
    assert table["mrtpo-replay"] == ["2.0 (2/2: 2, 2)", "3.0 (2/2: 2, 4)", "4.0 (2/2: 4, 4)"]


def test_final_rates_mean_and_std_over_seeds(study):
    fr = stats.final_rates(study[2]).set_index(["method", "metric"])
    g = fr.loc[("gdpo", "eval/all_satisfied")]
    assert g["n"] == 2 and g["step"] == 4
    assert g["mean"] == pytest.approx(0.25) and g["std"] == pytest.approx(math.sqrt(2 * 0.05**2))  # ddof=1
    m = fr.loc[("mrtpo-replay", "eval/reward/a:x")]
    assert m["mean"] == pytest.approx(0.85) and m["std"] == pytest.approx(math.sqrt(2 * 0.05**2))
    assert fr.loc[("gdpo", "eval/reward/b:y"), "mean"] == pytest.approx(0.35)
    header, rows = rep.final_table(study[2], REWARDS)
    assert header == ["method", "step", "all satisfied", "a:x", "b:y"]
    assert rows[0] == ["gdpo", "4", "0.25 ± 0.07", "0.65 ± 0.07", "0.35 ± 0.07"]


def test_final_rates_single_seed_has_no_std(study):
    one = study[2][study[2]["seed"] == 0]
    fr = stats.final_rates(one).set_index(["method", "metric"])
    assert fr.loc[("gdpo", "eval/all_satisfied"), "mean"] == pytest.approx(0.3)
    assert math.isnan(fr.loc[("gdpo", "eval/all_satisfied"), "std"])
    assert rep.final_table(one)[1][0][2] == "0.30"


def test_seconds_per_step(study):
    sp = stats.seconds_per_step(study[2]).set_index(["method", "metric"])
    # gdpo: run means 2.0 (1, 2, 3, 2) and 4.0 -> 3.0 ± sqrt(2).
    assert sp.loc[("gdpo", "time/step"), "mean"] == pytest.approx(3.0)
    assert sp.loc[("gdpo", "time/step"), "std"] == pytest.approx(math.sqrt(2))
    assert sp.loc[("mrtpo-replay", "time/step"), "mean"] == pytest.approx(4.0)
    assert sp.loc[("gdpo", "time/replay"), "mean"] == pytest.approx(0.5)
    assert ("gdpo", "time/generate") not in sp.index  # not recorded in these runs: no row, no made-up zero


def test_seed_spread(study):
    s = stats.seed_spread(study[2], "eval/all_satisfied").set_index(["method", "step"])
    g = s.loc[("gdpo", 2)]
    assert g["n"] == 2 and g["mean"] == pytest.approx(0.175) and g["min"] == 0.1 and g["max"] == 0.25
    assert g["std"] == pytest.approx(math.sqrt(2 * 0.075**2))
    assert s.loc[("gdpo", 0), "mean"] == pytest.approx(0.15) and s.loc[("gdpo", 0), "std"] == 0
    b = stats.seed_spread(study[2], "eval/reward/b:y").set_index(["method", "step"])
    assert b.loc[("gdpo", 2), "n"] == 1  # seed 1 did not measure b at step 2


# ---------------------------------------------------------------------------------------------- figure and files


def _traces(fig, method):
    return [t for t in fig.data if t.legendgroup == method]


@pytest.mark.parametrize("band", ["minmax", "std"])
def test_figure_mean_and_band(study, band):
    df = study[2]
    fig = rep.efficiency_figure(df, band=band, reward_names=REWARDS)
    titles = [a.text for a in fig.layout.annotations]
    assert titles == ["held-out all satisfied", "held-out a:x", "held-out b:y"]
    assert len(fig.data) == 3 * 2 * 2  # panels x methods x (band, mean)
    gdpo = _traces(fig, "gdpo")
    band_tr, mean_tr = gdpo[0], gdpo[1]
    assert list(mean_tr.x) == [0, 2, 4] and list(mean_tr.y) == pytest.approx([0.15, 0.175, 0.25])
    assert mean_tr.line.color == rep.METHOD_COLORS["gdpo"] and mean_tr.showlegend
    assert not gdpo[3].showlegend  # one legend entry per method
    upper = list(band_tr.y)[:3]
    if band == "minmax":
        assert upper == pytest.approx([0.15, 0.25, 0.3])
    else:
        assert upper == pytest.approx([0.15, 0.175 + math.sqrt(2 * 0.075**2), 0.25 + math.sqrt(2 * 0.05**2)])


def test_figure_single_seed_draws_no_band(study):
    fig = rep.efficiency_figure(study[2][study[2]["seed"] == 0])
    assert len(fig.data) == 3 * 2 and all(t.mode == "lines+markers" for t in fig.data)


def test_report_files_parse(study, tmp_path):
    args, specs, df = study
    out = tmp_path / "study"
    csv = out / "efficiency.csv"
    df.to_csv(csv, index=False)
    eff.write_study(out, args, specs)
    assert json.loads((out / "study.json").read_text())["reward_names"] == REWARDS
    back = stats.load(csv)
    pd.testing.assert_frame_equal(back, df, check_dtype=False)
    paths, note = rep.write_report(csv, out, [0.2, 0.3, 0.4], png=False)
    md = paths["md"].read_text()
    tables = [ln for ln in md.splitlines() if ln.startswith("| ")]
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in tables]
    assert ["gdpo", "3.0 (2/2: 4, 2)", "≥ 4.0 (1/2: 4, n/r)", "not reached (0/2)"] in rows
    assert ["mrtpo-replay", "4", "0.47 ± 0.04", "0.85 ± 0.07", "0.55 ± 0.07"] in rows
    assert ["gdpo", "3.00 ± 1.41", "–", "–", "0.50 ± 0.00", "–"] in rows  # s/step, generate, logprobs, replay, update
    assert "steps 4; group_size 8" in md
    page = paths["html"].read_text()
    assert page.startswith("<!DOCTYPE html>") and "Plotly.newPlot" in page and "≥ 4.0 (1/2: 4, n/r)" in page
    assert "Initial model (step 0): held-out all-satisfied 0.150." in page
    spec = json.loads(re.search(r'Plotly\.newPlot\(\s*"[^"]+",\s*(\[.*?\]),\s*\{', page, re.S).group(1))
    assert {t["name"] for t in spec if t.get("showlegend")} == {"gdpo", "mrtpo-replay"}
    assert not (out / "efficiency.png").exists()


def test_png_note_without_kaleido(study, tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_kaleido(name, *a, **k):
        if name == "kaleido":
            raise ImportError(name)
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_kaleido)
    note = rep.write_png(rep.efficiency_figure(study[2]), tmp_path / "x.png")
    assert "kaleido is not installed" in note and not (tmp_path / "x.png").exists()


# ---------------------------------------------------------------------------------------------- end to end


@pytest.mark.slow
def test_tiny_study_end_to_end(micro_model, tmp_path, capfd):
    """2 methods x 1 seed x 2 steps with the micro model: runs, step-0 eval, CSV, report; a rerun reuses all."""
    out = tmp_path / "e2e"
    argv = ["--model", str(micro_model), "--methods", "gdpo", "mrtpo-span", "--seeds", "0", "--steps", "2",
            "--eval-every", "1", "--eval-prompts", "3", "--group-size", "2", "--prompts-per-step", "2",
            "--max-new-tokens", "6", "--jobs", "2", "--out", str(out)]
    assert eff.main(argv) == 0
    text = capfd.readouterr().out
    assert "gdpo-s0: completed" in text and "mrtpo-span-s0: completed" in text
    df = stats.load(out / "efficiency.csv")
    assert set(df["method"]) == {"gdpo", "mrtpo-span"}
    ev = df[df["metric"] == "eval/all_satisfied"]
    assert sorted(ev["step"].unique()) == [0, 1, 2]  # initial model, then every step
    assert (df[df["metric"] == "time/step"]["value"] > 0).all()
    for name in ("efficiency.md", "efficiency.html", "study.json", "initial_eval.json"):
        assert (out / name).is_file(), name
    assert "## Steps to reach a held-out all-satisfied rate" in text  # the table is printed
    for run in ("gdpo-s0", "mrtpo-span-s0"):
        assert [p.name for p in (out / "runs" / run / "checkpoints").iterdir()] == ["step_000002"]
    assert set(json.loads((out / "model_ids.json").read_text())) == {"gdpo-s0", "mrtpo-span-s0"}
    assert eff.main(argv) == 0
    assert "2 runs reused, 0 to train" in capfd.readouterr().out
    pd.testing.assert_frame_equal(stats.load(out / "efficiency.csv"), df)


def test_markdown_flags_targets_the_initial_model_meets(study):
    md = rep.markdown_report(study[2], [0.1, 0.2])
    assert "Initial model (step 0): held-out all-satisfied 0.150." in md
    assert "Target(s) 0.1 are already met by the initial model" in md
    assert "already met" not in rep.markdown_report(study[2], [0.2, 0.3])


# ---------------------------------------------------------------------------------------------- paired by seed


def test_bootstrap_identical_arms_and_constant_shift():
    assert stats.bootstrap_interval([0.0, 0.0, 0.0]) == (0.0, 0.0, 0.0)  # identical arms: [0, 0]
    assert stats.bootstrap_interval([1.0, 1.0], geometric=True) == (1.0, 1.0, 1.0)  # equal steps: ratio [1, 1]
    point, lo, hi = stats.bootstrap_interval([0.1] * 5)  # a shift of 0.1 on every seed
    assert point == pytest.approx(0.1) and lo == pytest.approx(0.1) and hi == pytest.approx(0.1)


def test_bootstrap_hand_computed_intervals():
    # [0, 1]: resample means 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4 -> both 2.5% tails sit on the ends.
    assert stats.bootstrap_interval([0.0, 1.0]) == (0.5, 0.0, 1.0)
    # [0, 0, 3]: the mean is 3 * k/3 = k with k ~ Binomial(3, 1/3); P(k=0) = 8/27 > 2.5%, P(k=3) = 1/27 > 2.5%.
    assert stats.bootstrap_interval([0.0, 0.0, 3.0]) == (1.0, 0.0, 3.0)
    # ratios 2 and 1/2: log means -ln2, 0, ln2 (1/4, 1/2, 1/4) -> geometric mean 1, interval [1/2, 2].
    point, lo, hi = stats.bootstrap_interval([2.0, 0.5], geometric=True)
    assert (point, lo, hi) == (pytest.approx(1.0), pytest.approx(0.5), pytest.approx(2.0))
    # A fixed RNG: the same values give the same interval; a different seed may not.
    v = [0.3, -0.1, 0.2, 0.05]
    assert stats.bootstrap_interval(v) == stats.bootstrap_interval(v)
    assert -0.1 < stats.bootstrap_interval(v)[1] < stats.bootstrap_interval(v)[2] < 0.3
    assert all(math.isnan(x) for x in stats.bootstrap_interval([]))
    point, lo, hi = stats.bootstrap_interval([0.2])  # one seed: a point without an interval
    assert point == 0.2 and math.isnan(lo) and math.isnan(hi)
    assert all(math.isnan(x) for x in stats.bootstrap_interval([1.0, 0.0], geometric=True))


def test_paired_differences_hand_computed(study):
    rows = stats.paired_differences(study[2], [0.2, 0.3, 0.4]).set_index(["method", "measure"])
    assert set(rows.index.get_level_values(0)) == {"mrtpo-replay"}  # gdpo is the baseline
    # all satisfied at step 4: mrtpo 0.5, 0.45 vs gdpo 0.3, 0.2 -> diffs 0.2, 0.25.
    r = rows.loc[("mrtpo-replay", "eval/all_satisfied")]
    assert r["n"] == 2 and (r["point"], r["low"], r["high"]) == (pytest.approx(0.225), pytest.approx(0.2),
                                                                  pytest.approx(0.25))
    # kind `other` (custom families a:x, b:y): per seed the mean of the two rewards.
    # gdpo (0.7+0.4)/2, (0.6+0.3)/2 = 0.55, 0.45; mrtpo (0.8+0.6)/2, (0.9+0.5)/2 = 0.7, 0.7 -> diffs 0.15, 0.25.
    r = rows.loc[("mrtpo-replay", "other")]
    assert (r["point"], r["low"], r["high"]) == (pytest.approx(0.2), pytest.approx(0.15), pytest.approx(0.25))
    # steps to >= 0.3: mrtpo 2, 4; gdpo 4, unreached (last evaluated step 4) -> ratios 0.5, 1.
    r = rows.loc[("mrtpo-replay", "steps>=0.3")]
    assert (r["point"], r["low"], r["high"]) == (pytest.approx(math.sqrt(0.5)), pytest.approx(0.5), pytest.approx(1.0))
    assert (r["censored_method"], r["censored_baseline"]) == (0, 1)
    # >= 0.4: gdpo never (4, 4), mrtpo 4, 4 -> [1, 1], both gdpo seeds censored.
    r = rows.loc[("mrtpo-replay", "steps>=0.4")]
    assert (r["point"], r["low"], r["high"], r["censored_baseline"]) == (1.0, 1.0, 1.0, 2)
    assert rep.verdict_sentences(rows.reset_index()) == [
        "mrtpo-replay beats GDPO beyond the interval on: all satisfied, other."]
    header, table = rep.paired_table(rows.reset_index())
    assert header[:3] == ["method", "seeds", "steps to all-satisfied ≥ 0.2"]
    assert table[0][:2] == ["mrtpo-replay", "2"] and "1.00 [1.00, 1.00]*" in table[0]
    assert "+0.23 [+0.20, +0.25]" in table[0]


def _copy_method(df: pd.DataFrame, source: str, name: str, shift: float = 0.0) -> pd.DataFrame:
    """`df` plus the runs of `source` renamed `name`, held-out reward rates shifted by `shift` (all-satisfied kept)."""
    extra = df[df["method"] == source].copy()
    extra["method"] = name
    rewards = extra["metric"].str.startswith(stats.EVAL_REWARD_PREFIX)
    extra.loc[rewards, "value"] = extra.loc[rewards, "value"] + shift
    return pd.concat([df, extra], ignore_index=True)


def test_paired_identical_arm_and_known_shift_by_kind(study):
    df = study[2].replace({"metric": {"eval/reward/a:x": "eval/reward/task:arithmetic",
                                      "eval/reward/b:y": "eval/reward/keywords:forbidden_words"}})
    df = _copy_method(_copy_method(df, "gdpo", "twin"), "gdpo", "shifted", shift=0.1)
    rows = stats.paired_differences(df, [0.2, 0.3]).set_index(["method", "measure"])
    for measure in ("eval/all_satisfied", "correctness", "safety"):  # an identical arm: [0, 0]
        assert tuple(rows.loc[("twin", measure), ["point", "low", "high"]]) == (0.0, 0.0, 0.0)
    for target in ("steps>=0.2", "steps>=0.3"):  # same steps on every seed: ratio [1, 1]
        assert tuple(rows.loc[("twin", target), ["point", "low", "high"]]) == (1.0, 1.0, 1.0)
    for measure in ("correctness", "safety"):  # +0.1 on every seed: [0.1, 0.1]
        assert list(rows.loc[("shifted", measure), ["point", "low", "high"]]) == pytest.approx([0.1, 0.1, 0.1])
    lines = rep.verdict_sentences(rows.reset_index())
    assert "twin beats GDPO beyond the interval on none." in lines
    assert "shifted beats GDPO beyond the interval on: safety, correctness." in lines


def test_paired_section_without_gdpo_and_in_report(study, tmp_path):
    df = study[2]
    assert stats.paired_differences(df[df["method"] != "gdpo"], [0.3]).empty
    assert "No gdpo runs" in "\n".join(rep.paired_section(df[df["method"] != "gdpo"], [0.3]))
    md = rep.markdown_report(df, [0.2, 0.3, 0.4])
    assert "## Paired differences against GDPO (bootstrap 95% over seeds)" in md
    assert "mrtpo-replay beats GDPO beyond the interval on: all satisfied, other." in md
    page = rep.html_page(rep.efficiency_figure(df), df, [0.2, 0.3, 0.4], None)
    assert "+0.23 [+0.20, +0.25]" in page


def test_one_seed_gives_no_interval_and_no_verdict(study):
    one = study[2][study[2]["seed"] == 0]
    rows = stats.paired_differences(one, [0.3])
    assert rows["n"].max() == 1 and rows["low"].isna().all()
    assert rep.verdict_sentences(rows) == ["mrtpo-replay: one paired seed, so no interval and no verdict."]
    header, table = rep.paired_table(rows)
    assert table[0][header.index("all satisfied")] == "+0.20"  # 0.5 - 0.3 at step 4, seed 0


def test_credit_placement_hand_computed():
    # two runs of one method: per run the mean over steps, per kind the mean over its rewards, then over seeds
    rows = []
    for seed, (ovl, kw, arith) in enumerate([((0.2, 0.4), (0.5, 0.7), 0.9), ((0.6, 0.6), (0.1, 0.1), 0.5)]):
        for step, o in zip((1, 2), ovl, strict=True):
            rows.append(("mrtpo-swap", seed, step, "span/overlap", o))
            rows.append(("mrtpo-swap", seed, step, "span/keywords:existence/mass_in", kw[step - 1]))
            rows.append(("mrtpo-swap", seed, step, "span/keywords:forbidden_words/mass_in", 0.0))
            rows.append(("mrtpo-swap", seed, step, "span/task:arithmetic/mass_control", arith))
        rows.append(("mrtpo-swap", seed, 3, "span/task:arithmetic/mass_control", float("nan")))  # skipped
    df = pd.DataFrame(rows, columns=["method", "seed", "step", "metric", "value"])
    cp = stats.credit_placement(df).set_index(["kind", "measure"])
    # overlap: run means 0.3 and 0.6 -> 0.45, std of (0.3, 0.6)
    assert cp.at[("overlap", "overlap"), "mean"] == pytest.approx(0.45)
    assert cp.at[("overlap", "overlap"), "std"] == pytest.approx(math.sqrt(0.045))  # sample std of (0.3, 0.6)
    # content (keywords:existence): run means 0.6 and 0.1 -> 0.35; safety (forbidden words) 0
    assert cp.at[("content", "mass_in"), "mean"] == pytest.approx(0.35)
    assert cp.at[("safety", "mass_in"), "mean"] == 0.0
    assert cp.at[("correctness", "mass_control"), "mean"] == pytest.approx(0.7) and cp["n"].eq(2).all()
    header, table = rep.credit_table(df)
    assert header[:2] == ["method", "overlap"] and table[0][:2] == ["mrtpo-swap", "0.45"]
    assert table[0][header.index("correctness: mass_in / ceiling · control")] == "– / – · 0.70"
    assert "## Where the credit went" in rep.markdown_report(df, [0.5])


def test_controls_table_hand_computed():
    """lift gap = lift - lift_rotated and retained, per kind, mean over steps then seeds (issue 28)."""
    rows = []
    for seed, (lift, rot, kept) in enumerate([(3.0, 1.0, 0.4), (2.0, 2.0, 0.6)]):
        for step in (1, 2):
            rows += [("mrtpo-js", seed, step, "span/keywords:existence/lift", lift),
                     ("mrtpo-js", seed, step, "span/keywords:existence/lift_rotated", rot),
                     ("mrtpo-js", seed, step, "span/keywords:existence/retained", kept),
                     ("gdpo", seed, step, "span/keywords:existence/lift", 1.0),
                     ("gdpo", seed, step, "span/keywords:existence/lift_rotated", 1.0),
                     ("gdpo", seed, step, "span/keywords:existence/retained", 1.0)]
    df = pd.DataFrame(rows, columns=["method", "seed", "step", "metric", "value"])
    header, table = rep.controls_table(df)
    assert header == ["method", "content: lift gap · retained"]
    by = {r[0]: r[1] for r in table}
    assert by["mrtpo-js"] == "+1.00 · 0.50"  # lift (3 + 2) / 2 = 2.5, rotated 1.5; retained (0.4 + 0.6) / 2
    assert by["gdpo"] == "+0.00 · 1.00"
    assert "## Controls a useless router cannot win" in rep.markdown_report(df, [0.5])
    # runs from before these metrics: no table
    old = df[~df["metric"].str.endswith(("lift_rotated", "retained"))]
    assert rep.controls_table(old) == ([], [])


# ---------------------------------------------------------------------------------------------- study v3


def test_study_v3_fills_its_preregistered_settings_and_flags_override_them(tmp_path):
    args = eff.resolve_args(eff.build_parser().parse_args(["--study", "v3", "--out", str(tmp_path)]))
    assert args.methods == ["gdpo", "mrtpo-js", "mrtpo-js-mass", "mrtpo-auto"] and args.seeds == list(range(12))
    assert (args.model, args.steps, args.eval_every, args.eval_prompts) == ("tiny-multi", 150, 10, 128)
    assert args.heldout.endswith("multi-heldout-128.jsonl") and eff.count_prompts(args.heldout) >= 128
    assert args.max_new_tokens == 96 and args.group_size == 8 and args.prompts_per_step == 4
    specs = {s.name: s.fields for s in eff.plan_runs(args)}
    assert specs["mrtpo-js-s0"]["routing_clip"] == "clip" and specs["mrtpo-js-mass-s0"]["routing_clip"] == "mass"
    assert specs["mrtpo-auto-s0"]["relevance"] == "auto" and specs["mrtpo-js-s0"]["relevance"] == "js"
    mine = eff.resolve_args(eff.build_parser().parse_args(["--study", "v3", "--seeds", "3", "--steps", "5"]))
    assert mine.seeds == [3] and mine.steps == 5 and mine.eval_prompts == 128


def test_more_eval_prompts_than_the_held_out_set_holds_is_refused(tmp_path, capsys):
    # multi-heldout.jsonl holds 60 prompts: asking for 128 would silently score 60
    with pytest.raises(eff.ConfigError, match="holds 60 prompts"):
        eff.plan_runs(eff.resolve_args(eff.build_parser().parse_args(
            ["--setting", "multi", "--eval-prompts", "128", "--out", str(tmp_path)])))
    assert eff.main(["--setting", "multi", "--eval-prompts", "61", "--out", str(tmp_path), "--steps", "1"]) == 2
    assert "multi-heldout.jsonl holds 60 prompts" in capsys.readouterr().err


def test_a_run_recorded_before_routing_clip_is_reused_by_an_arm_that_clips(tmp_path):
    args = make_args(tmp_path)
    spec = eff.plan_runs(args)[2]  # mrtpo-replay-s0: pinned to routing_clip clip
    recorded = {k: v for k, v in spec.fields.items() if k != "routing_clip"}
    assert eff.config_conflicts(recorded, spec.fields) == []
    assert eff.config_conflicts({**recorded, "routing_clip": "mass"}, spec.fields) == [
        "routing_clip: 'mass' != 'clip'"]


def test_a_study_carried_to_another_checkout_keeps_its_runs(tmp_path):
    wanted = str((REPO_ROOT / "sample_data/prompts/multi.jsonl").resolve())
    assert eff.same_repo_file("/elsewhere/repo/sample_data/prompts/multi.jsonl", wanted)
    assert not eff.same_repo_file("/elsewhere/repo/sample_data/prompts/default.jsonl", wanted)
    assert not eff.same_repo_file("sample_data/prompts/multi.jsonl", wanted)  # only absolute records
    assert not eff.same_repo_file("/x/multi.jsonl", str(tmp_path / "multi.jsonl"))  # outside the checkout
    args = make_args(tmp_path)
    spec = eff.plan_runs(args)[0]
    moved = {**spec.fields, "prompt_set": "/other/root/" + str(Path(spec.fields["prompt_set"]).relative_to(
        REPO_ROOT.resolve()))}
    assert eff.config_conflicts(moved, spec.fields) == []


def test_runs_are_trained_seed_by_seed_so_a_stopped_study_leaves_whole_seeds(tmp_path, monkeypatch):
    order = []

    def fake_run_one(spec, decision, out, progress, keep, model_ids, model_id):
        order.append(spec.name)
        return eff.Outcome(spec, decision, "completed", 0.0)

    monkeypatch.setattr(eff, "run_one", fake_run_one)
    monkeypatch.setattr(eff, "write_report", lambda *a, **k: 0)
    monkeypatch.setattr(eff, "write_endpoints", lambda *a, **k: 0)
    rc = eff.main(["--out", str(tmp_path / "s"), "--methods", "gdpo", "mrtpo-js", "--seeds", "0", "1",
                   "--steps", "2", "--eval-every", "1", "--no-initial-eval", "--jobs", "1"])
    assert rc == 0
    assert order == ["gdpo-s0", "mrtpo-js-s0", "gdpo-s1", "mrtpo-js-s1"]
    order.clear()
    assert eff.main(["--out", str(tmp_path / "s"), "--methods", "gdpo", "--seeds", "0", "--steps", "2",
                     "--no-initial-eval", "--collect-only"]) == 0
    assert order == []  # --collect-only trains nothing


def test_the_report_is_skipped_with_a_note_where_plotly_is_missing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(eff.importlib.util, "find_spec", lambda name: None if name == "plotly" else object())
    assert eff.write_report(tmp_path / "efficiency.csv", tmp_path, [0.2], "minmax") == 0
    assert "efficiency report skipped: plotly is not installed" in capsys.readouterr().out
    assert not (tmp_path / "efficiency.md").exists()
