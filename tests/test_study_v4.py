"""Study v4's tables recomputed from a small fixture CSV (hand-computed), and its plan's refusals."""

from __future__ import annotations

import pandas as pd
import pytest

from core.tools import study_v4
from core.tools import study_v4_report as rep


def fixture() -> pd.DataFrame:
    """3 seeds x 2 prompts x 2 evaluations; js beats gdpo by 0.1 on every prompt of every seed, shuffle by
    0.1, 0.0, 0.2 by seed (a spread the paired t sees)."""
    rows = []
    for arm, bonus in (("gdpo", [0, 0, 0]), ("mrtpo-js", [0.1, 0.1, 0.1]), ("mrtpo-js-shuffle", [0.1, 0.0, 0.2])):
        for seed in range(3):
            for step in (10, 20):
                for prompt in ("a", "b"):
                    for set_name in ("heldout", "ood"):
                        rows.append([arm, seed, step, set_name, prompt, rep.ALL, 0.2 + bonus[seed]])
                        rows.append([arm, seed, step, set_name, prompt, "eval/reward/punctuation:no_comma",
                                     0.5 + bonus[seed]])
            rows.append([arm, seed, 20, "train", "", "span/punctuation:no_comma/retained", 0.4 + seed / 10])
            rows.append([arm, seed, 20, "run", "", rep.DONE, 1.0])
    rows.append(["mrtpo-span", 0, 10, "heldout", "a", rep.ALL, 0.9])  # no DONE row: not counted
    return pd.DataFrame(rows, columns=rep.CSV_COLUMNS)


def test_recompute_from_fixture_csv(tmp_path, capsys):
    df = fixture()
    held = rep.per_prompt(df, "heldout")
    assert set(held["arm"]) == {"gdpo", "mrtpo-js", "mrtpo-js-shuffle"}  # the unfinished run is left out
    js = rep.compare(held, "mrtpo-js", "gdpo", n_boot=200)
    assert js["mean"] == pytest.approx(0.1) and js["boot_lo"] == pytest.approx(0.1) == pytest.approx(js["boot_hi"])
    sh = rep.compare(held, "mrtpo-js-shuffle", "gdpo", n_boot=2000)
    # diffs 0.1, 0.0, 0.2: mean 0.1, sd 0.1, t(2) 97.5% = 4.303 -> half-width 4.303 * 0.1 / sqrt(3) = 0.2484
    assert sh["mean"] == pytest.approx(0.1) and sh["hi"] - sh["mean"] == pytest.approx(0.2484, abs=1e-3)
    assert 0.0 <= sh["boot_lo"] < 0.1 < sh["boot_hi"] <= 0.2  # resampled seeds span the per-seed differences
    # Holm: js's p (zero spread: 0) and shuffle's t = 0.1 / (0.1 / sqrt 3) = 1.732, p(2 df) = 0.2254 -> x1
    table = rep.comparison_table(held, ["gdpo", "mrtpo-js", "mrtpo-js-shuffle"], n_boot=200)
    assert "| mrtpo-js | 3 | 0.300 | +0.100 |" in table and "beats GDPO" in table
    assert "| mrtpo-js-shuffle | 3 |" in table and "0.225 | not shown |" in table
    text = rep.report(df, n_boot=200)
    assert "Key contrast" in text and "per reward kind" in text and "final values" in text and "ood" in text
    share = rep.constraint_share(df, "heldout")  # one reward per prompt here: its score, averaged over steps
    assert share[share["arm"] == "mrtpo-js"]["value"].tolist() == pytest.approx([0.6] * 6)
    assert "share of a prompt's constraints satisfied" in text
    # the exploratory key contrast per kind: js minus shuffle, 0.1 - (0.1, 0.0, 0.2) by seed = 0, +0.1, -0.1
    by_kind = rep.kind_table(df, "heldout", ["mrtpo-js"], baseline="mrtpo-js-shuffle", n_boot=200)
    assert "| style | mrtpo-js | 3 | +0.000 | [-0.248, +0.248] |" in by_kind and "Key contrast per reward kind, held-out" in text
    assert by_kind.split("\n")[-1] in text
    assert rep.kept_mass(df, ["gdpo", "mrtpo-js"]) == {"gdpo": pytest.approx(0.5), "mrtpo-js": pytest.approx(0.5)}
    assert "Advantage mass kept" in text and "mrtpo-js-shuffle 0.500" in text
    assert rep.scale_factors(df, arm="gdpo") == {"punctuation:no_comma": pytest.approx(0.5)}
    path = tmp_path / "s.csv.gz"
    df.to_csv(path, index=False)
    assert study_v4.main(["report", "--from-csv", str(path)]) == 0
    assert capsys.readouterr().out == rep.report(pd.read_csv(path, keep_default_na=False))


def test_plan_refuses_arms_the_checkout_lacks(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(study_v4, "CSV", tmp_path / "none.csv.gz")
    monkeypatch.setattr(study_v4, "SCALES", tmp_path / "no-scales.json")  # before the pilot
    rows = study_v4.plan(["gdpo", "mrtpo-js-shuffle", "gdpo-scaled"], [0], set())
    by_arm = {r["arm"]: r for r in rows}
    assert by_arm["gdpo"]["state"] == "to run"
    if "routing_shuffle" not in {f.name for f in study_v4.dataclasses.fields(study_v4.TrainConfig)}:
        assert by_arm["mrtpo-js-shuffle"]["state"] == "refused"
        assert "routing_shuffle" in by_arm["mrtpo-js-shuffle"]["reason"]
    assert by_arm["gdpo-scaled"]["state"] == "refused"
    assert study_v4.main(["run", "--dry-run", "--seeds", "0", "1", "--csv", str(tmp_path / "none.csv.gz")]) == 0
    assert "12 runs: 0 done, 10 to run, 2 refused" in capsys.readouterr().out
    monkeypatch.setattr(study_v4, "SCALES", study_v4.REPO_ROOT / "docs" / "results" / "study-v4-scales.json")
    assert study_v4.arm_error("gdpo-scaled") == ""  # the pilot's factors are in the repository
    assert study_v4.run_fields("gdpo-scaled", 0, tmp_path, 150)["reward_scales"]["task:arithmetic"] == 0.8414


def test_smoke_settings_never_write_the_study_csv(capsys):
    assert study_v4.main(["run", "--steps", "2", "--seeds", "0", "--arms", "gdpo"]) == 2
    assert "give another --csv" in capsys.readouterr().err


def test_prompt_rows_hand_computed():
    nan = float("nan")
    # 2 prompts x 2 samples, rewards a, b; prompt p2 has no b (NaN: does not apply)
    rewards = [[1.0, 1.0], [1.0, 0.0],  # p1: all satisfied 1, 0 -> 0.5; a 1.0; b 0.5
               [0.5, nan], [1.0, nan]]  # p2: 0, 1 -> 0.5; a 0.75; no b row
    rows = {(k, m): v for k, m, v in rep.prompt_rows(rewards, ["p1", "p2"], ["a", "b"], 2)}
    assert rows == {("p1", rep.ALL): 0.5, ("p1", "eval/reward/a"): 1.0, ("p1", "eval/reward/b"): 0.5,
                    ("p2", rep.ALL): 0.5, ("p2", "eval/reward/a"): 0.75,
                    ("", rep.ALL): 0.5, ("", "eval/reward/a"): 0.875, ("", "eval/reward/b"): 0.5}


@pytest.mark.slow
@pytest.mark.subprocess
def test_run_trains_scores_appends_and_resumes(tmp_path, capsys):
    """Two tiny runs end to end: trained, every checkpoint scored on both sets per prompt, appended whole with
    their run/complete row, checkpoints deleted; a second call finds nothing to run."""
    csv, out = tmp_path / "s.csv.gz", tmp_path / "out"
    argv = ["run", "--arms", "gdpo", "mrtpo-js-shuffle", "--seeds", "3", "--steps", "2", "--eval-prompts", "2",
            "--out", str(out), "--csv", str(csv)]
    assert study_v4.main(argv) == 0
    df = pd.read_csv(csv, keep_default_na=False)
    assert set(df[df["metric"] == rep.DONE]["arm"]) == {"gdpo", "mrtpo-js-shuffle", rep.INITIAL}
    run = df[(df["arm"] == "mrtpo-js-shuffle") & (df["set"] != "train")]
    per = run[(run["metric"] == rep.ALL) & (run["prompt"] != "")]
    assert sorted(set(per["set"])) == ["heldout", "ood"] and len(per) == 2 * 2  # 2 prompts x 2 sets at step 2
    assert set(per["step"]) == {2}
    assert (df[(df["arm"] == rep.INITIAL) & (df["set"] == "heldout")]["step"] == 0).all()
    assert "span/task:arithmetic/retained" in set(df[(df["arm"] == "mrtpo-js-shuffle") & (df["set"] == "train")]
                                                  ["metric"]) or df["metric"].str.match(r"span/.+/retained").any()
    assert not (out / "runs" / "gdpo-s3" / "checkpoints").exists()
    capsys.readouterr()
    assert study_v4.main(argv) == 0
    assert "0 to run" in capsys.readouterr().out
    assert len(pd.read_csv(csv, keep_default_na=False)) == len(df)
    assert "mrtpo-js-shuffle | 1 |" in rep.report(df, n_boot=50)


@pytest.mark.subprocess
def test_the_larger_machine_script_dry_runs(tmp_path):
    import subprocess
    import sys

    from core.paths import REPO_ROOT

    out = subprocess.run(["bash", str(REPO_ROOT / "examples" / "study_v4.sh"), "--dry-run", "--seeds", "5",
                          "--csv", str(tmp_path / "none.csv.gz")], capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "PY": sys.executable, "JOBS": "3"})
    assert out.returncode == 0, out.stderr
    assert "mrtpo-js-shuffle-s5: to run" in out.stdout and "with 3 jobs" in out.stdout
    assert "study command exit 0" in out.stdout


def test_a_resumed_runs_extra_checkpoint_is_not_an_evaluation():
    """A run stopped at step 45 and resumed has a checkpoint there, which is scored; the endpoint averages the
    pre-registered evaluations (multiples of 10) only."""
    df = fixture()
    extra = pd.DataFrame([["gdpo", 0, 45, "heldout", p, rep.ALL, 0.95] for p in ("a", "b")], columns=rep.CSV_COLUMNS)
    held = rep.per_prompt(pd.concat([df, extra], ignore_index=True), "heldout")
    assert held[(held["arm"] == "gdpo") & (held["seed"] == 0)]["value"].tolist() == pytest.approx([0.2, 0.2])
