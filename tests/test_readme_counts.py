"""README's test table states how many tests `make test` and `make test-fast` run: the numbers `pytest
--collect-only` gives for every test and for the unit tier (the Makefile's FAST_TESTS marker expression)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def table_counts(readme: str) -> dict[str, int]:
    """{"make test": n, "make test-fast": n} from the rows of README's test table ("| `make test` | ... | 1,767
    tests, ...|")."""
    out = {}
    for command in ("make test", "make test-fast"):
        row = re.search(rf"^\| `{command}` \|.*?\| ([\d,]+) tests\b", readme, re.MULTILINE)
        if row:
            out[command] = int(row.group(1).replace(",", ""))
    return out


def collected(output: str) -> tuple[int, int]:
    """(selected, all) from pytest's `-q --collect-only -m ...` last line ("1121/1767 tests collected (646
    deselected) in 8.62s"; "1767 tests collected in 9.35s" when nothing is deselected)."""
    found = re.search(r"^(\d+)(?:/(\d+))? tests? collected", output, re.MULTILINE)
    assert found, output[-2000:]
    return int(found.group(1)), int(found.group(2) or found.group(1))


def test_table_counts_and_collected_read_their_lines():
    readme = ("| command | what | time here |\n|---|---|---|\n| `make test` | every test | 1,767 tests, a while |\n"
              "| `make test-fast` | the unit tier: `pytest -m \"not slow\"` | 1121 tests, 50 s |\n")
    assert table_counts(readme) == {"make test": 1767, "make test-fast": 1121}
    assert collected("x\n\n1121/1767 tests collected (646 deselected) in 8.62s\n") == (1121, 1767)
    assert collected("1767 tests collected in 9.35s\n") == (1767, 1767)


@pytest.mark.subprocess
def test_the_readmes_test_counts_are_what_pytest_collects():
    fast = re.search(r"^FAST_TESTS := (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE).group(1).strip()
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", fast],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    fast_n, all_n = collected(out.stdout)
    stated = table_counts((ROOT / "README.md").read_text())
    assert stated == {"make test": all_n, "make test-fast": fast_n}, (
        f"README.md's test table says {stated}; pytest collects {all_n} tests for `make test` and {fast_n} for "
        "`make test-fast`: write those numbers in the table")
