"""Shared fixtures: a tiny prompt set and the micro policy model (built once per session), the verifier
registry restored after every test (a test that registers a custom family leaves no trace for the next), the test
order options, and the Hypothesis profiles."""

from __future__ import annotations

import json
import os
import random

import pytest
from helpers import IN_CI, LETTERS_VERIFIER, MICRO_PROMPTS
from hypothesis import settings

os.environ.setdefault("OMP_NUM_THREADS", "1")

# Property tests (Hypothesis): under CI (env CI set and not "0"/"false") every run draws the same examples, so a
# red build means a change broke something, never an unlucky draw; a failure prints the example to keep as a
# fixed case. `make test-explore` runs them with fresh random seeds (profile "explore") to find new ones.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, database=None, print_blob=True)
if IN_CI:
    settings.load_profile("ci")


def pytest_addoption(parser):
    group = parser.getgroup("order", "test order (to check that no test depends on another running first)")
    group.addoption("--reverse", action="store_true", help="run the selected tests in reverse order")
    group.addoption("--shuffle", type=int, metavar="SEED", help="run the selected tests in a random order from SEED")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--reverse"):
        items.reverse()
    seed = config.getoption("--shuffle")
    if seed is not None:
        random.Random(seed).shuffle(items)


@pytest.fixture(scope="session")
def prompt_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("prompts") / "micro.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in MICRO_PROMPTS))
    return path


@pytest.fixture(scope="session")
def micro_model(tmp_path_factory):
    from core.tools.fixtures import make_micro_model

    return make_micro_model(tmp_path_factory.mktemp("models") / "micro")


@pytest.fixture(scope="session")
def letters_setup(tmp_path_factory):
    """(prompt set path, custom verifier path): the micro prompts, each with the test:letters reward too."""
    folder = tmp_path_factory.mktemp("letters")
    verifier = folder / "letters_verifier.py"
    verifier.write_text(LETTERS_VERIFIER)
    prompts = folder / "letters.jsonl"
    records = [{**r, "constraints": [*r["constraints"], {"family": "test:letters", "kwargs": {}}]} for r in MICRO_PROMPTS]
    prompts.write_text("".join(json.dumps(r) + "\n" for r in records))
    return prompts, verifier


@pytest.fixture
def make_cfg(micro_model, letters_setup, tmp_path):
    """make(**overrides) -> a TrainConfig on the micro model and the letters prompts (3 steps, CPU, nothing
    checkpointed) in this test's folder: the built-in trainer's tests and the controls' tests build runs with it."""
    from core.config import TrainConfig

    prompts, verifier = letters_setup

    def make(**overrides):
        fields = dict(
            model=str(micro_model), prompt_set=str(prompts), custom_verifiers=str(verifier), runs_dir=str(tmp_path),
            group_size=4, prompts_per_step=2, max_new_tokens=10, steps=3, lr=1e-2, checkpoint_every=0, device="cpu",
            replay_chunk=8,
        )
        fields.update(overrides)
        return TrainConfig(**fields)

    return make


@pytest.fixture(autouse=True)
def restore_verifier_registry():
    """Put the verifier family registry (and the record of custom files loaded) back as it was before the test:
    families a test registers (`mine:short`, `test:raises`, ...) must not leak into tests that compare
    `families()` with the built-in table (tests/test_promptgen.py), whatever order the tests run in."""
    from core.verifiers.shared import base
    from core.verifiers.shared import registry as reg

    registry, loaded = dict(reg._REGISTRY), dict(base._LOADED_PATHS)
    yield
    reg._REGISTRY.clear()
    reg._REGISTRY.update(registry)
    base._LOADED_PATHS.clear()
    base._LOADED_PATHS.update(loaded)
