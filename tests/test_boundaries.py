"""Import boundaries: the app side never loads torch, the core never loads streamlit/plotly, and the
library never imports the tools."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess  # every test imports modules in a fresh interpreter

ROOT = Path(__file__).resolve().parent.parent
# Modules the app (or a torch-free command) imports: loading any of them must not load torch.
TORCH_FREE = [
    "app", "mrtpo_viz", "core", "core.paths", "core.presets", "core.choices", "core.config", "core.prompt_sets", "core.processes", "core.contrast", "core.cli", "core.tasks", "core.verifiers",
    "core.run", "core.run.names", "core.run.schema", "core.run.store", "core.run.credit_format", "core.run.liveness", "core.run.train_log", "core.run.train_cli", "core.tools", "core.tools.promptgen",
    "core.verifiers.shared.language",
    "core.tools.efficiency", "mrtpo_viz.form", "mrtpo_viz.figures.panels", "mrtpo_viz.server.serve", "mrtpo_viz.server.asgi",
    "mrtpo_viz.tools.efficiency_report", "mrtpo_viz.tools.efficiency_stats", "mrtpo_viz.tools.synthetic", "mrtpo_viz.tools.bench_app",
    "mrtpo_viz.tools.bench_server",
]
TOOLS = ("core.tools", "mrtpo_viz.tools")


def loaded_modules(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print('\\n'.join(sys.modules))"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


def module_file(name: str) -> Path | None:
    path = ROOT / name.replace(".", "/")
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


@pytest.mark.parametrize("module", TORCH_FREE)
def test_app_side_never_imports_torch(module):
    assert module_file(module) is not None, f"{module} is listed as torch-free but does not exist"
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


def imported_modules(src: Path) -> set[str]:
    """Every module a file imports (absolute names, at any depth of the file)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(src.read_text(), filename=str(src))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_the_library_never_imports_the_tools():
    offenders = []
    for src in sorted([*(ROOT / "core").rglob("*.py"), *(ROOT / "mrtpo_viz").rglob("*.py"), ROOT / "app.py"]):
        module = ".".join(src.relative_to(ROOT).with_suffix("").parts)
        if module.startswith(TOOLS):
            continue
        bad = sorted(n for n in imported_modules(src) if n.startswith(tuple(t + "." for t in TOOLS)) or n in TOOLS)
        if bad:
            offenders.append(f"{module}: {bad}")
    assert not offenders, offenders


def test_algorithms_never_load_models_or_files():
    """core.algos is the maths: it takes tensors (and a model to run), never loads a model, reads a file or
    knows about runs (transformers appears only for its KV-cache class)."""
    for src in sorted((ROOT / "core" / "algos").rglob("*.py")):
        bad = sorted(n for n in imported_modules(src) if n.startswith(("core.run", "core.model", "core.tools")))
        assert not bad, f"{src}: {bad}"
        text = src.read_text()
        for call in ("from_pretrained", "open(", "read_text", "torch.load"):
            assert call not in text, f"{src} calls {call}"


def test_integrations_are_imported_only_when_used():
    """Only the command that selects an engine imports its integration, inside the function that runs it (so
    `mrtpo train` with the built-in backend, the app and the library never load TRL); tools may use them."""
    for src in sorted([*(ROOT / "core").rglob("*.py"), *(ROOT / "mrtpo_viz").rglob("*.py"), ROOT / "app.py"]):
        module = ".".join(src.relative_to(ROOT).with_suffix("").parts)
        if module.startswith(("core.integrations", *TOOLS)):
            continue
        tree = ast.parse(src.read_text(), filename=str(src))
        top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        names = {a.name for n in top for a in n.names} | {n.module or "" for n in top if isinstance(n, ast.ImportFrom)}
        assert not any(n.startswith(("core.integrations", "trl")) for n in names), f"{module} imports {names}"
    mods = loaded_modules("import core.cli, core.run.train_cli, core.run.lifecycle, core.run.step")
    assert "trl" not in mods and "core.integrations.trl" not in mods
