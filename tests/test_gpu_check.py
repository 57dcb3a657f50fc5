"""examples/gpu_check.sh: its CPU dry run end to end (the same steps and files as on a GPU), and one line with exit
status 2 for each thing it needs that is missing (issue 27: the GPU check runs unattended)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "gpu_check.sh"
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}

pytestmark = pytest.mark.subprocess


def _run(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env={**ENV, **env},
                          timeout=900)


@pytest.mark.parametrize("args, env, says", [
    (["--bogus"], {}, "unknown argument --bogus"),
    (["--results"], {}, "--results needs a folder"),
    ([], {"PYTHON": "/nonexistent/python3"}, "no /nonexistent/python3 on PATH"),
    (["--dry-run"], {"VENV": "/nonexistent-venv"}, "--dry-run uses the project's environment /nonexistent-venv"),
])
def test_what_is_missing_is_one_line_and_exit_2(args, env, says, tmp_path):
    r = _run(*args, "--results", str(tmp_path / "out"), **env) if args != ["--results"] else _run(*args, **env)
    assert r.returncode == 2, r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu_check: ") and says in lines[0]


def test_an_old_python_is_refused_before_anything_is_installed(tmp_path):
    old = tmp_path / "python3.10"
    old.write_text("#!/bin/sh\n[ \"$1\" = -V ] && echo 'Python 3.10.12' && exit 0\nexit 1\n")
    old.chmod(0o755)
    r = _run("--results", str(tmp_path / "out"), PYTHON=str(old))
    assert r.returncode == 2 and "needs Python >= 3.11 (TRL 1.16); " in r.stderr and "3.10.12" in r.stderr
    assert not (tmp_path / "out").exists()  # refused before the results folder, the environment or pip


@pytest.mark.slow
@pytest.mark.trl
def test_dry_run_writes_every_figure(tmp_path):
    pytest.importorskip("trl")
    out = tmp_path / "results"
    r = _run("--dry-run", "--results", str(out), VENV=sys.prefix)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    versions = json.loads((out / "versions.json").read_text())
    assert versions["device"] == "cpu" and versions["torch"] and versions["trl"] and versions["transformers"]
    assert "1 passed" in (out / "equivalence.txt").read_text()
    trl_out = (out / "bench-trl.txt").read_text()
    assert "MRTPO/GDPO" in trl_out and trl_out.rstrip().endswith("exit 0")
    assert (out / "bench-builtin.txt").read_text().rstrip().endswith("exit 0")
    summary = (out / "summary.md").read_text()
    assert "Every step passed." in summary and "## bench-trl" in summary and "torch" in summary
