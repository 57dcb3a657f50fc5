"""Import boundaries: the app side never loads torch, the core never loads streamlit/plotly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TORCH_FREE = [
    "app", "mrtpo_viz", "core", "core.store", "core.cli", "core.config", "core.verifiers", "core.tasks", "core.promptgen",
    "core.efficiency", "mrtpo_viz.efficiency_report",
]


def loaded_modules(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print('\\n'.join(sys.modules))"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


def _importable(name: str) -> bool:
    path = ROOT / (name.replace(".", "/"))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


@pytest.mark.parametrize("module", TORCH_FREE)
def test_app_side_never_imports_torch(module):
    if not _importable(module):
        pytest.skip(f"{module} does not exist yet")
    if module == "app":
        # Run the real app, every page of it, in this fresh interpreter: what it loads is what a user's server loads.
        code = (
            "import glob\nfrom streamlit.testing.v1 import AppTest\n"
            "at = AppTest.from_file('app.py', default_timeout=60).run()\n"
            "assert not at.exception, at.exception\n"
            "for page in sorted(glob.glob('mrtpo_viz/pages/*.py')):\n"
            "    if not page.endswith('__init__.py'):\n"
            "        at.switch_page(page).run()\n"
        )
    else:
        code = f"import {module}"
    mods = loaded_modules(code)
    assert "torch" not in mods and "transformers" not in mods


def test_viz_pages_never_import_torch():
    pages = sorted((ROOT / "mrtpo_viz").rglob("*.py"))
    for page in pages:
        text = page.read_text()
        assert "import torch" not in text and "from torch" not in text, page


def test_core_never_imports_streamlit_or_plotly():
    for src in sorted((ROOT / "core").rglob("*.py")):
        text = src.read_text()
        for banned in ("import streamlit", "from streamlit", "import plotly", "from plotly"):
            assert banned not in text, f"{src} has {banned!r}"
