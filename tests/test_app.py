"""Every page of the app on a run-store fixture (Streamlit AppTest): no exception, the key elements present.

The fixture writes synthetic runs through core.run.store's writer (an MRTPO and a GDPO run), a corrupt run
folder, a crashed run and a "running" run whose pid is this test process (alive, but not a trainer).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.run.store import RunStore
from mrtpo_viz import launcher
from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, write_synthetic_run

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
N_TOKENS = 24


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    write_synthetic_run(root, "mrtpo-demo", steps=3, rewards=DEFAULT_REWARDS, n_tokens=N_TOKENS)
    write_synthetic_run(root, "gdpo-demo", steps=3, method="gdpo", rewards=DEFAULT_REWARDS, n_tokens=N_TOKENS,
                        seed=1)
    # corrupt: unreadable config, a torn metrics line in the middle, a garbage credit file, no status
    broken = root / "broken"
    (broken / "credit").mkdir(parents=True)
    (broken / "config.json").write_text("{not json")
    (broken / "metrics.jsonl").write_text('{"step": 1, "reward/all_satisfied": 0.5}\n{"step": 2, "rew\n'
                                          '{"step": 3, "reward/all_satisfied": 0.7}\n')
    (broken / "credit" / "step_000001.parquet").write_bytes(b"PAR1 not really")
    # crashed: says running, its process is gone
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    w = write_synthetic_run(root, "crashed", steps=1, rewards=DEFAULT_REWARDS[:2], n_tokens=8, state="running",
                            pid=dead.pid)
    (w.path / "train.log").write_text("step 1/5\nTraceback (most recent call last):\nRuntimeError: boom in step 2\n")
    # live: running, pid alive (this process), so the pages poll and show a Stop button
    write_synthetic_run(root, "live", steps=2, rewards=DEFAULT_REWARDS[:2], n_tokens=8, state="running",
                        pid=os.getpid())
    old = os.environ.get("MRTPO_RUNS_DIR")
    os.environ["MRTPO_RUNS_DIR"] = str(root)
    yield root
    if old is None:
        os.environ.pop("MRTPO_RUNS_DIR", None)
    else:
        os.environ["MRTPO_RUNS_DIR"] = old


def page(name: str, runs_dir: Path, **session) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in session.items():
        at.session_state[k] = v
    at.run()
    assert not at.exception, at.exception
    if name != "runs":
        at.switch_page(f"mrtpo_viz/pages/{name}.py").run()
        assert not at.exception, at.exception
    return at


def charts(at: AppTest) -> list:
    return at.get("plotly_chart")


def html_of(at: AppTest) -> str:
    return "".join(h.proto.body for h in at.get("html"))


def run_path(runs_dir: Path, name: str) -> str:
    return str(runs_dir / name)


def test_runs_page_lists_runs_and_flags_broken_ones(runs_dir):
    at = page("runs", runs_dir)
    table = at.dataframe[0].value
    assert {"mrtpo-demo", "gdpo-demo", "broken", "crashed", "live"} <= set(table["run"])
    states = dict(zip(table["run"], table["state"], strict=True))
    assert "crashed" in states["crashed"] and "running" in states["live"] and "completed" in states["mrtpo-demo"]
    warnings = " ".join(w.value for w in at.warning)
    assert "broken" in warnings and "config.json is unreadable" in warnings
    assert any("crashed" in e.label for e in at.expander)
    assert any("boom in step 2" in c.value for c in at.code)


def test_launch_form_shows_errors_next_to_fields_and_starts_nothing(runs_dir):
    before = sorted(p.name for p in runs_dir.iterdir())
    at = page("launch", runs_dir)
    assert at.number_input(key="lf_group_size").value == 8
    at.number_input(key="lf_group_size").set_value(1)
    at.number_input(key="lf_lr").set_value(-1.0)
    at.text_input(key="lf_model_folder").set_value(str(runs_dir / "no-such-model"))
    next(b for b in at.button if b.label == "Start training").click()
    at.run()
    assert not at.exception
    errors = [e.value for e in at.error]
    # each field's own message (as TrainConfig words it) is on the page
    _, expected = launcher.validate({"group_size": 1, "lr": -1.0, "model": str(runs_dir / "no-such-model")})
    assert set(expected) == {"group_size", "lr", "model"}
    for message in expected.values():
        assert message in errors
    assert any("Nothing was started" in e for e in errors)
    assert sorted(p.name for p in runs_dir.iterdir()) == before  # no run folder, no staging log


def test_launch_lists_active_runs_and_stop_checks_the_pid(runs_dir):
    at = page("launch", runs_dir)
    stop = at.button(key="stop_live")
    stop.click()
    at.run()
    assert not at.exception
    assert any("not a trainer process" in i.value for i in at.info)  # this test process is never signalled


def test_launch_reward_weights_follow_the_prompt_set(runs_dir, prompt_file):
    at = page("launch", runs_dir)
    at.selectbox[0].set_value("other file…").run()
    at.text_input(key="lf_prompt_other").set_value(str(prompt_file)).run()
    assert not at.exception
    weight_keys = {n.key for n in at.number_input if n.key and n.key.startswith("lfw_")}
    assert weight_keys == {"lfw_keywords:existence", "lfw_punctuation:no_comma",
                           "lfw_change_case:english_lowercase", "lfw_task:arithmetic"}
    at.text_input(key="lf_prompt_other").set_value(str(runs_dir / "missing.jsonl")).run()
    assert any("Prompt set" in e.value for e in at.error)


def test_curves_page_draws_every_panel(runs_dir):
    at = page("curves", runs_dir, mrtpo_run=run_path(runs_dir, "mrtpo-demo"))
    assert len(charts(at)) == 10  # 9 panels + the held-out eval (the fixture logs it at its last step)
    assert at.multiselect[0].value == [run_path(runs_dir, "mrtpo-demo")]
    at.multiselect[0].set_value([run_path(runs_dir, "mrtpo-demo"), run_path(runs_dir, "gdpo-demo")]).run()
    assert not at.exception and len(charts(at)) == 10


def test_curves_page_survives_a_corrupt_run_and_shows_crashes(runs_dir):
    at = page("curves", runs_dir, mrtpo_runs=[run_path(runs_dir, "broken"), run_path(runs_dir, "crashed")])
    assert any("metrics.jsonl line 2" in w.value for w in at.warning)
    assert any("crashed" in e.value and "boom" in e.value for e in at.error)


def test_token_credit_page_renders_tokens_spans_and_tables(runs_dir):
    at = page("credit", runs_dir, mrtpo_run=run_path(runs_dir, "mrtpo-demo"))
    html = html_of(at)
    assert html.count('<span class="tok" ') == N_TOKENS
    assert '<i class="b" style="background:' in html  # span overlays
    assert "Prompt" in html and "credit of keywords:existence" in html
    rewards = at.dataframe[0].value
    assert rewards["reward"].tolist() == list(DEFAULT_REWARDS)
    assert {b.label for b in at.get("download_button")} >= {"Step credit CSV", "Step credit Parquet",
                                                            "Sample credit CSV", "Sample credit Parquet"}
    at.radio[0].set_value("one row per reward").run()
    html = html_of(at)
    stated = int(rewards["score"].notna().sum())  # a reward the prompt does not state gets no row
    assert 0 < stated <= len(DEFAULT_REWARDS)
    assert not at.exception and html.count('<span class="tok" ') == N_TOKENS * (stated + 1)
    assert 'data-row="total advantage"' in html


def test_token_credit_filters_by_outcome(runs_dir):
    at = page("credit", runs_dir, mrtpo_run=run_path(runs_dir, "mrtpo-demo"))
    at.selectbox[3].set_value("keywords:existence")  # "Outcome of"
    at.selectbox[4].set_value("satisfied").run()  # "Outcome"
    assert not at.exception
    for opt in at.selectbox[5].options:  # every sample listed satisfies the keyword reward
        assert opt.split(" · ")[2][0] == "✓"


def test_token_credit_opens_the_target_of_another_page(runs_dir):
    target = {"run": run_path(runs_dir, "mrtpo-demo"), "step": 2, "sample": 5, "reward": "punctuation:no_comma"}
    at = page("credit", runs_dir, credit_target=target)
    assert at.selectbox[1].value == 2 and at.selectbox[5].value == 5
    assert at.selectbox[6].value == "punctuation:no_comma"
    assert "credit of punctuation:no_comma" in html_of(at)


def test_token_credit_escapes_a_script_token(runs_dir):
    df = RunStore(runs_dir / "mrtpo-demo").credit(3)
    sample = int(df.loc[df["token"].str.contains("<script>"), "sample"].iloc[0])
    at = page("credit", runs_dir, credit_target={"run": run_path(runs_dir, "mrtpo-demo"), "step": 3,
                                                 "sample": sample})
    html = html_of(at)
    assert "&lt;script&gt;" in html and "<script>" not in html


def test_token_credit_warns_on_a_corrupt_credit_map(runs_dir):
    at = page("credit", runs_dir, mrtpo_run=run_path(runs_dir, "broken"))
    assert any("unreadable" in w.value for w in at.warning)


def test_js_page(runs_dir):
    at = page("js", runs_dir, mrtpo_run=run_path(runs_dir, "mrtpo-demo"))
    assert len(charts(at)) == 6
    assert any("was not computed" in c.value and "group advantage of 0" in c.value for c in at.caption)
    table = at.dataframe[0].value
    assert table["reward"].tolist() == list(DEFAULT_REWARDS)
    both = table.dropna(subset=["js_in", "js_out"])  # the lowercase verifier inspects every token: no "out"
    assert len(both) == 3 and (both["js_in"] > both["js_out"]).all()  # the synthetic JS peaks inside spans
    at = page("js", runs_dir, mrtpo_run=run_path(runs_dir, "gdpo-demo"))
    assert any("no JS distances" in i.value for i in at.info) and not charts(at)


def test_debugger_ranks_disagreement_and_opens_token_credit(runs_dir):
    at = page("debugger", runs_dir, mrtpo_run=run_path(runs_dir, "mrtpo-demo"))
    assert len(charts(at)) == 2
    table = at.dataframe[0].value
    assert len(table) > 0 and (table["disagreement"].diff().dropna() <= 1e-9).all()
    assert table["open"].iloc[0].startswith("credit?run=mrtpo-demo&step=")
    first = table.iloc[0]
    next(b for b in at.button if b.label.startswith("Open step")).click()
    at.run()
    assert not at.exception
    assert at.title[0].value == "Token credit"
    assert at.selectbox[1].value == first["step"] and at.selectbox[5].value == first["sample"]


def test_verifier_playground(runs_dir):
    at = page("debugger", runs_dir)
    args = at.text_area(key="play_args_keywords:existence")
    args.set_value('{"keywords": ["river"]}')
    at.text_area(key="play_text").set_value("The river, the River.").run()
    assert not at.exception
    assert at.metric[0].value == "1" and at.metric[1].value == "2"
    assert html_of(at).count('class="vspan"') == 2
    at.text_area(key="play_args_keywords:existence").set_value("{bad json").run()
    assert not at.exception and any("not valid JSON" in e.value for e in at.error)
    at.text_area(key="play_args_keywords:existence").set_value('{"keyword": "x"}').run()
    assert not at.exception and any("unknown argument" in e.value for e in at.error)
    at.selectbox(key="play_family").set_value("punctuation:no_comma").run()
    assert not at.exception and at.metric[0].value == "0"


def test_compare_page(runs_dir):
    at = page("compare", runs_dir, mrtpo_runs=[run_path(runs_dir, "mrtpo-demo"), run_path(runs_dir, "gdpo-demo")])
    assert len(charts(at)) == 1
    table = at.dataframe[0].value
    assert table["run"].tolist() == ["mrtpo-demo", "gdpo-demo"] and table["method"].tolist() == ["mrtpo", "gdpo"]
    assert {"≥ 0.25", "≥ 0.5", "≥ 0.75"} <= set(table.columns)
    at.radio[0].set_value("eval").run()
    assert not at.exception and at.dataframe[0].value["steps logged"].tolist() == [3, 3]
    at.text_input[0].set_value("0.5, banana").run()
    assert not at.exception and any("Targets" in e.value for e in at.error)


def test_app_modules_never_import_torch():
    code = ("import mrtpo_viz.analysis, mrtpo_viz.figures, mrtpo_viz.heatmap, mrtpo_viz.launcher, "
            "mrtpo_viz.loaders, mrtpo_viz.ui, mrtpo_viz.tools.synthetic, mrtpo_viz.tools.bench_app, mrtpo_viz.paths\n"
            "import sys; assert 'torch' not in sys.modules and 'transformers' not in sys.modules")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
