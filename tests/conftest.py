"""Shared fixtures: a tiny prompt set and the micro policy model (built once per session)."""

from __future__ import annotations

import json
import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

# Four prompts, four rewards: a writing task with keyword / no-comma, one with lowercase, two arithmetic ones.
MICRO_PROMPTS = [
    {"key": "w1", "task": "Write a short note about rivers.", "constraints": [
        {"family": "keywords:existence", "kwargs": {"keywords": ["steady"]}},
        {"family": "punctuation:no_comma", "kwargs": {}}]},
    {"key": "w2", "task": "Write a short note about mountains.", "constraints": [
        {"family": "change_case:english_lowercase", "kwargs": {}},
        {"family": "punctuation:no_comma", "kwargs": {}}]},
    {"key": "a1", "task": "What is 3 plus 4?", "constraints": [
        {"family": "task:arithmetic", "kwargs": {"answer": 7}},
        {"family": "change_case:english_lowercase", "kwargs": {}}]},
    {"key": "a2", "task": "What is 2 plus 5?", "constraints": [
        {"family": "task:arithmetic", "kwargs": {"answer": 7}},
        {"family": "keywords:existence", "kwargs": {"keywords": ["seven"]}}]},
]
MICRO_REWARDS = ["keywords:existence", "punctuation:no_comma", "change_case:english_lowercase", "task:arithmetic"]


@pytest.fixture(scope="session")
def prompt_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("prompts") / "micro.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in MICRO_PROMPTS))
    return path


@pytest.fixture(scope="session")
def micro_model(tmp_path_factory):
    from core.testing import make_micro_model

    return make_micro_model(tmp_path_factory.mktemp("models") / "micro")


# A custom verifier (loaded through the `custom_verifiers` config field) whose graded score varies
# with any text, so that rewards differ inside every group even for the random micro model.
LETTERS_VERIFIER = '''
from core.verifiers import register


@register("test:letters", sentence="Use mostly letters.")
def letter_share(text):
    """Share of characters that are ASCII letters; spans: every letter."""
    spans = [(i, i + 1) for i, c in enumerate(text) if c.isascii() and c.isalpha()]
    return (len(spans) / len(text) if text else 0.0), spans
'''


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
