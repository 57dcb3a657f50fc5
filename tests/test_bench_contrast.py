"""`mrtpo bench contrast` (core/tools/bench_contrast.py): the per-family test behind the `auto` relevance."""

import math

import pytest
import torch

from core.tools import bench_contrast as bc
from core.verifiers import build


def test_reads_argument_rule():
    assert bc.reads_argument(0.10, 0.11)  # a swap moves the argument about as much as a removal
    assert not bc.reads_argument(0.0006, 0.109)  # the forbidden-word case of issue 28
    assert bc.reads_argument(0.25, 1.0) and not bc.reads_argument(0.249, 1.0)
    assert not bc.reads_argument(0.0, 0.0) and not bc.reads_argument(float("nan"), 1.0)


def test_argument_probability_and_effect_by_hand():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]]))
    p = bc.argument_probability(logits, [1, 2])
    assert p.tolist() == pytest.approx([0.5, 0.9])
    assert bc.contrast_effects(p, torch.tensor([0.4, 0.1])) == pytest.approx(0.8)
    assert math.isnan(bc.contrast_effects(torch.tensor([]), torch.tensor([])))


def test_argument_strings():
    assert bc.argument_strings(build("task:arithmetic", answer=9)) == ["9"]
    assert bc.argument_strings(build("keywords:forbidden_words", forbidden_words=["green"])) == ["green"]


def test_the_benchmark_runs_on_tiny_multi(tmp_path, capsys):
    code = bc.main(["--prompts", "2", "--samples", "2", "--max-new-tokens", "16", "--out", str(tmp_path)])
    assert code == 0
    text = (tmp_path / "contrast-tiny-multi.md").read_text()
    assert "| family | samples | effect swap |" in text and "reads argument" in capsys.readouterr().out
