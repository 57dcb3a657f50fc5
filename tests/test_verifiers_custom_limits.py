"""Custom verifiers that hang, exit or raise (issue 45, class 4): a check past its time limit scores 0 with one
warning per family, a stop works while a check hangs, and `sys.exit` on import or in a check, or a `sentence()`
that raises, is one line naming the module and what it did (`mrtpo train`: exit 2 before the run starts; a check
that exits ends the run `failed` with that line)."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import MICRO_PROMPTS

from core import verifiers
from core.run.store import RunStore
from core.verifiers import VerifierExit, VerifierSpecError, build, load_custom, register

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}

HANGS = '''
import os, time
from core.verifiers import register


@register("test:hangs", sentence="Take your time.")
def hangs(text):
    """Hangs on every text (a busy loop that also swallows ordinary exceptions); touches MARK first."""
    if os.environ.get("MARK"):
        open(os.environ["MARK"], "a").close()
    while True:
        try:
            time.sleep(0.01)
        except Exception:
            pass
'''
EXITS = '''
from core.verifiers import register


@register("test:exits", sentence="Be brief.")
def exits(text):
    raise SystemExit(3)
'''


@pytest.fixture
def limit():
    yield verifiers.set_time_limit
    verifiers.set_time_limit(verifiers.shared.base.DEFAULT_TIME_LIMIT)
    verifiers.shared.base._TIMED_OUT.clear()


def test_a_check_past_the_time_limit_scores_0_with_one_warning_per_family(tmp_path, limit, caplog):
    (tmp_path / "hangs.py").write_text(HANGS)
    load_custom(str(tmp_path / "hangs.py"))
    limit(0.2)
    v = build("test:hangs")
    caplog.set_level(logging.WARNING, logger="core.verifiers.shared.base")
    start = time.monotonic()
    assert [v.verify("some text").score for _ in range(3)] == [0.0, 0.0, 0.0]
    assert time.monotonic() - start < 3
    warned = [r.getMessage() for r in caplog.records if "time limit" in r.getMessage()]
    assert len(warned) == 1 and "test:hangs" in warned[0] and "hangs.py" in warned[0] and "0.2 s" in warned[0]


def test_the_built_in_families_have_no_time_limit(limit):
    limit(1e-6)
    assert build("keywords:existence", keywords=["river"]).verify("The River runs. " * 2000).score == 1.0


def test_a_check_that_calls_sys_exit_is_a_verifier_exit_naming_its_module(tmp_path):
    (tmp_path / "exits.py").write_text(EXITS)
    load_custom(str(tmp_path / "exits.py"))
    with pytest.raises(VerifierExit, match=r"verifier test:exits \(.*exits\.py\) called sys\.exit\(3\) in its check"):
        build("test:exits").verify("hello")


def test_a_module_that_exits_on_import_is_a_spec_error_naming_it(tmp_path):
    (tmp_path / "bye.py").write_text("import sys\nsys.exit(5)\n")
    with pytest.raises(VerifierSpecError, match=r"bye\.py' called sys\.exit\(5\)"):
        load_custom(str(tmp_path / "bye.py"))


def test_a_sentence_that_raises_is_a_spec_error_when_the_prompt_set_loads(tmp_path):
    from core.tasks import PromptSetError, load_prompt_set

    @register("test:badsentence", sentence=lambda: 1 / 0)
    def anything(text):
        return 1.0

    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"key": "a", "task": "Hi.", "constraints": [{"family": "test:badsentence"}]}) + "\n")
    with pytest.raises(PromptSetError, match=r"p\.jsonl:1: constraint 'test:badsentence' \(.*\): its sentence\(\) "
                                             r"raised ZeroDivisionError"):
        load_prompt_set(prompts)


def _setup(tmp_path: Path, module: str, family: str, text: str) -> tuple[Path, Path]:
    verifier = tmp_path / f"{family.split(':')[1]}_verifier.py"
    verifier.write_text(text)
    prompts = tmp_path / "prompts.jsonl"
    records = [{**r, "constraints": [*r["constraints"], {"family": family, "kwargs": {}}]} for r in MICRO_PROMPTS]
    prompts.write_text("".join(json.dumps(r) + "\n" for r in records))
    return prompts, verifier


def _train_args(micro_model, prompts, verifier, runs, steps=1, *extra):
    return [sys.executable, "-m", "core.cli", "train", "--model", str(micro_model), "--prompt-set", str(prompts),
            "--custom-verifiers", str(verifier), "--runs-dir", str(runs), "--run-name", "r", "--steps", str(steps),
            "--group-size", "2", "--prompts-per-step", "1", "--max-new-tokens", "6", "--device", "cpu", *extra]


@pytest.mark.subprocess
@pytest.mark.parametrize(("module", "says"), [
    ("import sys\nsys.exit(5)\n", r"custom_verifiers: cannot load .*bye_verifier\.py.*called sys\.exit\(5\)"),
    ("from core.verifiers import register\n@register('test:bye', sentence=lambda: 1 / 0)\ndef f(text):\n"
     "    return 1.0\n", r"constraint 'test:bye' \(.*bye_verifier\.py\): its sentence\(\) raised ZeroDivisionError"),
])  # fmt: skip
def test_mrtpo_train_refuses_an_exiting_module_or_a_raising_sentence_in_one_line(tmp_path, micro_model, module, says):
    import re

    prompts, verifier = _setup(tmp_path, module, "test:bye", module)
    out = subprocess.run(_train_args(micro_model, prompts, verifier, tmp_path / "runs"), cwd=ROOT, env=ENV,
                         capture_output=True, text=True, timeout=120)
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith("mrtpo train: error: "), out.stderr[-2000:]
    assert re.search(says, lines[0]), lines[0]


@pytest.mark.subprocess
def test_a_check_that_exits_fails_the_run_with_one_line(tmp_path, micro_model):
    prompts, verifier = _setup(tmp_path, EXITS, "test:exits", EXITS)
    out = subprocess.run(_train_args(micro_model, prompts, verifier, tmp_path / "runs"), cwd=ROOT, env=ENV,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-3000:]
    errors = [line for line in out.stderr.splitlines() if line.startswith("mrtpo train: error: ")]
    assert len(errors) == 1 and "verifier test:exits" in errors[0] and "exits_verifier.py" in errors[0]
    assert "called sys.exit(3) in its check" in errors[0]
    status = RunStore(tmp_path / "runs" / "r").status()
    assert status["state"] == "failed" and "called sys.exit(3)" in status["error"]


@pytest.mark.subprocess
@pytest.mark.slow
def test_a_hanging_check_is_cut_at_its_limit_and_a_sigterm_during_it_stops_the_run(tmp_path, micro_model):
    prompts, verifier = _setup(tmp_path, HANGS, "test:hangs", HANGS)
    out = subprocess.run(_train_args(micro_model, prompts, verifier, tmp_path / "runs", 1,
                                     "--verifier-time-limit", "0.3"), cwd=ROOT, env=ENV, capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    assert RunStore(tmp_path / "runs" / "r").status()["state"] == "completed"
    assert out.stderr.count("ran past its time limit of 0.3 s") == 1, out.stderr[-3000:]

    mark = tmp_path / "hanging"
    proc = subprocess.Popen(_train_args(micro_model, prompts, verifier, tmp_path / "runs2", 5,
                                        "--verifier-time-limit", "60"), cwd=ROOT, env={**ENV, "MARK": str(mark)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not mark.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert mark.exists(), proc.communicate(timeout=5)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        took = time.monotonic() - sent
    finally:
        proc.kill()
    assert took < 20, took  # not the 60 s limit: the stop ends the hanging check
    assert RunStore(tmp_path / "runs2" / "r").status()["state"] == "stopped"
