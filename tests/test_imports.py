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
# Folder arrows that run back up a circle of folders, each with why it stays (docs/CONTRACTS.md, "Import rules").
BACK_UP: dict[tuple[str, str], str] = {
    ("core/run", "core/integrations"): "`mrtpo train` is one command for both engines: core/run/train_cli.py imports "
    "core.integrations.trl_train inside the function that runs `--backend trl`, so only a TRL run loads TRL",
}


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


def folder_graph(files: dict[str, Path], graph: dict[str, set[str]], root: Path = ROOT) -> dict[str, set[str]]:
    """folder -> the folders its modules import from (a module's folder: the directory of its file, `.` for
    app.py; an import within one folder is no arrow)."""
    where = {m: p.relative_to(root).parent.as_posix() for m, p in files.items()}
    out: dict[str, set[str]] = {f: set() for f in where.values()}
    for module, targets in graph.items():
        out[where[module]].update(where[t] for t in targets if where[t] != where[module])
    return out


def arrows_in_circles(folders: dict[str, set[str]]) -> set[tuple[str, str]]:
    """The folder arrows whose two ends lie in one circle of folders."""
    home = {f: i for i, c in enumerate(circles(folders)) for f in c}
    return {(a, b) for a, bs in folders.items() for b in bs if a in home and home[a] == home.get(b)}


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


def test_folder_graph_finds_a_folder_circle_from_module_imports(tmp_path):
    for folder in ("core", "core/low", "core/high"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "mrtpo_viz").mkdir()
    (tmp_path / "mrtpo_viz" / "__init__.py").write_text("")
    (tmp_path / "app.py").write_text("import core.high.page\n")
    (tmp_path / "core" / "low" / "base.py").write_text("")
    (tmp_path / "core" / "high" / "page.py").write_text("from core.low import base\n")
    files = module_files(tmp_path)
    folders = folder_graph(files, import_graph(files), tmp_path)
    assert folders["."] == {"core/high"} and folders["core/high"] == {"core/low"}
    assert arrows_in_circles(folders) == set()
    (tmp_path / "core" / "low" / "base.py").write_text("def f():\n    from core.high import page\n")
    files = module_files(tmp_path)
    assert arrows_in_circles(folder_graph(files, import_graph(files), tmp_path)) == {
        ("core/low", "core/high"), ("core/high", "core/low")}


def test_folders_import_downwards_but_for_the_arrows_back_up_that_are_explained():
    """Without the arrows of BACK_UP (at most 2, each with its reason) the folders form layers: no circle."""
    files = module_files()
    folders = folder_graph(files, import_graph(files))
    found = arrows_in_circles(folders)
    stale = sorted(a for a in BACK_UP if a not in found)
    assert not stale, "BACK_UP names an arrow that no longer closes a circle: " + ", ".join(map(str, stale))
    left = circles({f: {t for t in ts if (f, t) not in BACK_UP} for f, ts in folders.items()})
    assert not left, "folders importing back up (move what the lower folder needs down, or explain the arrow in " \
        "BACK_UP): " + "; ".join(" <-> ".join(c) for c in left)
    assert len(BACK_UP) <= 2


def test_no_file_of_the_checked_folders_passes_500_lines_unless_it_is_one_topic():
    sizes = {p.relative_to(ROOT).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
             for p in module_files().values()}
    allowed = ONE_TOPIC
    over = sorted(f for f, n in sizes.items() if n > MAX_LINES and f.startswith(SIZE_CHECKED) and f not in allowed)
    assert not over, f"over {MAX_LINES} lines (split by topic, or list it in ONE_TOPIC with its topic): " + ", ".join(
        f"{f} ({sizes[f]})" for f in over)
    stale = [f for f in allowed if sizes.get(f, 0) <= MAX_LINES]
    assert not stale, "listed in ONE_TOPIC but gone or no longer over the limit: " + ", ".join(stale)
