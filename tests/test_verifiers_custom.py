"""Custom verifiers: the shipped example, loading by path and by module name, errors."""

from __future__ import annotations

import doctest
import sys
from pathlib import Path

import pytest

from core.tasks import load_prompt_set
from core.verifiers import VerifierSpecError, VerifyResult, build, families, load_custom, register

EXAMPLE = Path(__file__).resolve().parent.parent / "sample_data" / "custom_verifier_example.py"


def test_example_registers_its_families_and_loading_twice_is_a_noop():
    load_custom(str(EXAMPLE))
    assert {"custom:exclamations", "custom:max_word_length"} <= set(families())
    assert load_custom(str(EXAMPLE)) == []
    ver = build("custom:exclamations", at_least=2)
    assert ver.sentence() == "Use at least 2 exclamation marks."
    assert ver.verify("Hi! Yes!") == VerifyResult(1.0, ((2, 3), (7, 8)))
    assert ver.verify("Hi!").score == 0.0
    graded = build("custom:max_word_length", max_len=3, graded=True)
    assert graded.verify("a big elephant").score == pytest.approx(2 / 3)
    with pytest.raises(VerifierSpecError, match="custom:exclamations.*at_least"):
        build("custom:exclamations", at_least=0)


def test_example_docstring_runs():
    load_custom(str(EXAMPLE))
    module = sys.modules[next(n for n in sys.modules if n.startswith("mrtpo_custom_custom_verifier_example"))]
    assert doctest.testmod(module).failed == 0


def test_prompt_set_with_custom_family(tmp_path):
    load_custom(str(EXAMPLE))
    path = tmp_path / "custom.jsonl"
    path.write_text(
        '{"key": "c1", "task": "Write about rain.", "constraints": '
        '[{"family": "custom:exclamations", "kwargs": {"at_least": 1}}]}\n'
    )
    (item,) = load_prompt_set(path)
    assert item.prompt() == "Write about rain. Use at least 1 exclamation marks."
    assert item.contrastive_prompt(0) == "Write about rain."


def test_load_by_module_name(tmp_path, monkeypatch):
    (tmp_path / "my_rules.py").write_text(
        "from core.verifiers import register\n"
        "@register('mine:short', sentence='Be brief.')\n"
        "def short(text):\n"
        "    return float(len(text) < 10)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_custom("my_rules") == ["mine:short"]
    ver = build("mine:short")
    assert ver.sentence() == "Be brief." and ver.verify("tiny") == VerifyResult(1.0, ())


def test_a_raising_custom_check_scores_zero_instead_of_raising():
    @register("test:raises")
    def raises(text):
        raise RuntimeError("boom")

    assert build("test:raises").verify("anything") == VerifyResult(0.0, ())


def test_custom_results_are_clamped_and_normalised():
    @register("test:sloppy")
    def sloppy(text):
        return 7, [(5, 2), (-3, 2), (1, 100), (0, 1)]

    assert build("test:sloppy").verify("abcd") == VerifyResult(1.0, ((0, 4),))


def test_load_errors(tmp_path):
    with pytest.raises(VerifierSpecError, match="no such file"):
        load_custom(str(tmp_path / "missing.py"))
    with pytest.raises(VerifierSpecError, match="cannot import module 'no_such_module_xyz'"):
        load_custom("no_such_module_xyz")
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('bad module')\n")
    with pytest.raises(VerifierSpecError, match="importing .*broken.py.* failed"):
        load_custom(str(broken))


def test_clashing_family_id_is_refused():
    with pytest.raises(VerifierSpecError, match="already registered"):

        @register("punctuation:no_comma")
        def other(text):
            return 1.0

    assert build("punctuation:no_comma").verify("a,b").score == 0.0  # the built-in is untouched
