"""A wheel built from the repository holds the data files its packages read, and `relevance auto` finds its
evidence in an installed (not editable) copy, run from a folder outside the repository."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.subprocess]

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("core", "mrtpo_viz")


def tracked(*paths: str) -> list[str]:
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", *paths], capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines() if line]


def test_a_built_wheel_holds_every_data_file_and_auto_reads_its_evidence_when_installed(tmp_path):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the repository's git checkout (git ls-files)")
    files = tracked(*PACKAGES)
    src = tmp_path / "src"  # a copy, so the build writes its build/ and egg-info folders outside the checkout
    for rel in [*files, "pyproject.toml", "README.md"]:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, src / rel)
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            str(src), "-w", str(tmp_path / "dist")], capture_output=True, text=True)
    assert build.returncode == 0, build.stdout + build.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    data = [rel for rel in files if not rel.endswith(".py")]
    assert "core/evidence/tiny-multi.json" in data  # the files this test is about exist
    assert [rel for rel in data if rel not in names] == []

    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    away = tmp_path / "elsewhere"
    away.mkdir()
    code = ("from core import auto_evidence as a; print(a.FOLDER.parent.parent); print(a.names()); "
            "print(a.describe('tiny-multi', ['punctuation:no_comma']))")
    run = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(site)!r}); {code}"],
                         cwd=away, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    folder, found, described = run.stdout.splitlines()
    assert Path(folder) == site  # the installed copy, not the checkout
    assert found == str(sorted(p.stem for p in (ROOT / "core" / "evidence").glob("*.json")))
    assert "punctuation:no_comma -> " in described
