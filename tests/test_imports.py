"""The project's import graph (every `import` of `core/`, `mrtpo_viz/` and app.py, function-level ones too): no
module imports back into a circle, and no file of core/verifiers/, core/run/ or mrtpo_viz/ passes 500 lines
unless it is listed below with its one topic."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("core", "mrtpo_viz")
MAX_LINES = 500
SIZE_CHECKED = ("core/verifiers/", "core/run/", "mrtpo_viz/")
# Files over MAX_LINES that hold one topic, each with why it stays whole.
ONE_TOPIC: dict[str, str] = {}
# Files over MAX_LINES that another branch splits (remove the line when that branch is merged: the test says so).
SPLIT_ELSEWHERE: dict[str, str] = {"mrtpo_viz/figures.py": "issue 46 splits it into the mrtpo_viz/figures/ package"}


def module_files(root: Path = ROOT) -> dict[str, Path]:
    out = {"app": root / "app.py"}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def import_graph(files: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the project's modules it imports (a name imported from a module counts as that module, or as
    the submodule of that name when there is one)."""

    def known(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                targets = [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            graph[module].update(t for t in map(known, targets) if t and t != module)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_circles_finds_a_circle_and_nothing_in_a_tree(tmp_path):
    (tmp_path / "core").mkdir()
    (tmp_path / "mrtpo_viz").mkdir()
    (tmp_path / "app.py").write_text("import core.a\n")
    (tmp_path / "core" / "__init__.py").write_text("")
    (tmp_path / "core" / "a.py").write_text("from core import b\n")
    (tmp_path / "core" / "b.py").write_text("def f():\n    from . import c\n")  # a function-level import counts
    (tmp_path / "core" / "c.py").write_text("from core.a import x\n")
    (tmp_path / "mrtpo_viz" / "__init__.py").write_text("from core.c import y\n")
    graph = import_graph(module_files(tmp_path))
    assert graph["core.b"] == {"core.c"} and graph["mrtpo_viz"] == {"core.c"}
    assert circles(graph) == [["core.a", "core.b", "core.c"]]
    (tmp_path / "core" / "c.py").write_text("import json\n")
    assert circles(import_graph(module_files(tmp_path))) == []


def test_no_module_imports_back_into_a_circle():
    found = circles(import_graph(module_files()))
    assert not found, "import circles (move what the lower module needs further down): " + "; ".join(
        " <-> ".join(c) for c in found)


def test_no_file_of_the_checked_folders_passes_500_lines_unless_it_is_one_topic():
    sizes = {p.relative_to(ROOT).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
             for p in module_files().values()}
    allowed = {**ONE_TOPIC, **SPLIT_ELSEWHERE}
    over = sorted(f for f, n in sizes.items() if n > MAX_LINES and f.startswith(SIZE_CHECKED) and f not in allowed)
    assert not over, f"over {MAX_LINES} lines (split by topic, or list it in ONE_TOPIC with its topic): " + ", ".join(
        f"{f} ({sizes[f]})" for f in over)
    stale = [f for f in allowed if sizes.get(f, 0) <= MAX_LINES]
    assert not stale, "listed in ONE_TOPIC or SPLIT_ELSEWHERE but gone or no longer over the limit: " + ", ".join(stale)
