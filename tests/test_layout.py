"""docs/CONTRACTS.md's Layout lists every module of `core/` and `mrtpo_viz/` with its one-line role, and nothing
that does not exist: a module added, moved or renamed without its line fails here, naming it."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONTRACTS = ROOT / "docs" / "CONTRACTS.md"
PACKAGES = ("core", "mrtpo_viz")
ENTRY = re.compile(r"[\w.*-]+(/[\w.*-]+)*(\.py|/)")  # a file or folder name, as the Layout's first column holds


def layout_entries(text: str) -> list[str]:
    """The paths the Layout's code block lists. A line's first column (up to two spaces) names one or more
    comma-separated files or folders; an indented line is inside the nearest folder above it with less
    indentation; a line whose first column is not a name (a wrapped description) is skipped."""
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    entries: list[str] = []
    folders: list[tuple[int, str]] = []  # (indentation, path) of the folders the current line may be inside
    for line in block.splitlines():
        names = [n.strip() for n in re.split(r"\s{2,}", line.strip(), maxsplit=1)[0].split(",")]
        if not line.strip() or not all(ENTRY.fullmatch(n) for n in names):
            continue
        indent = len(line) - len(line.lstrip())
        while folders and folders[-1][0] >= indent:
            folders.pop()
        base = folders[-1][1] if folders else ""
        entries += [base + n for n in names]
        if len(names) == 1 and names[0].endswith("/"):
            folders.append((indent, base + names[0]))
    return entries


def modules() -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for package in PACKAGES for p in (ROOT / package).rglob("*.py")
                  if p.name != "__init__.py")


def test_layout_entries_reads_folders_and_skips_wrapped_descriptions():
    text = ("## Layout\n```\ncore/run/        the run\n  step.py        one step,\n"
            "                 wrapped text\n  a.py, b.py     two\n  sub/           a folder\n    c.py  in it\n"
            "  store.py       the store\napp.py           entry\n```\n## Next\n```\nlater.py  not the layout\n```\n")
    assert layout_entries(text) == ["core/run/", "core/run/step.py", "core/run/a.py", "core/run/b.py",
                                    "core/run/sub/", "core/run/sub/c.py", "core/run/store.py", "app.py"]


def test_every_module_has_its_line_in_the_layout():
    listed = [e for e in layout_entries(CONTRACTS.read_text()) if e.endswith(".py")]
    missing = [m for m in modules() if not any(fnmatch.fnmatch(m, pattern) for pattern in listed)]
    assert not missing, ("not listed in docs/CONTRACTS.md, section Layout (add a line with each module's one-line "
                         "role, indented under its folder): " + ", ".join(missing))


def test_the_layout_lists_no_module_that_does_not_exist():
    present = modules()
    stale = [e for e in layout_entries(CONTRACTS.read_text())
             if e.endswith(".py") and e.startswith(PACKAGES) and not any(fnmatch.fnmatch(m, e) for m in present)]
    assert not stale, "docs/CONTRACTS.md, section Layout, lists modules that do not exist: " + ", ".join(stale)
