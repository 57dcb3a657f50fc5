"""Data and checks shared by several test files (imported as `from helpers import ...`; the fixtures that
use them are in conftest.py). Test files never import from each other."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.run.store import CREDIT_SCHEMA, credit_path

# Under CI (env CI set and not "0"/"false", as GitHub Actions and most CI services set it) a test whose tool is
# missing fails instead of skipping: a green CI build means the test ran.
IN_CI = os.environ.get("CI", "").lower() not in ("", "0", "false")


def require(condition: bool, why: str, fix: str) -> None:
    """Skip the test with `why` when `condition` is false; under CI fail it instead, saying how to `fix` it."""
    if not condition:
        if IN_CI:
            pytest.fail(f"{why} (CI=true: this test must run; {fix})")
        pytest.skip(why)

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

# Verifier specs (family, kwargs) that the verifier tests run every family through.
VERIFIER_SPECS = [
    ("keywords:existence", {"keywords": ["light"]}),
    ("keywords:existence", {"keywords": ["a", "ab", "İ"]}),
    ("keywords:forbidden_words", {"forbidden_words": ["bad", "a"]}),
    ("keywords:frequency", {"keyword": "a", "frequency": 2, "relation": "at least"}),
    ("keywords:frequency", {"keyword": "ab", "frequency": 2, "relation": "less than"}),
    ("startend:end_checker", {"end_phrase": "That is all."}),
    ("startend:end_checker", {"end_phrase": "İ a"}),
    ("startend:start_checker", {"start_phrase": "Dear a"}),
    ("change_case:english_lowercase", {}),
    ("change_case:english_capital", {}),
    ("length_constraints:number_words", {"num_words": 3, "relation": "at least"}),
    ("length_constraints:number_sentences", {"num_sentences": 2, "relation": "less than"}),
    ("detectable_format:json_format", {}),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}),
    ("punctuation:no_comma", {}),
    ("detectable_format:title", {}),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2}),
    ("detectable_content:number_placeholders", {"num_placeholders": 1}),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}),
    ("detectable_content:postscript", {"postscript_marker": "P.P.S"}),
    ("detectable_content:postscript", {"postscript_marker": "Note:"}),
    ("task:arithmetic", {"answer": 7}),
    ("keywords:letter_frequency", {"letter": "a", "let_frequency": 3, "let_relation": "at least"}),
    ("keywords:letter_frequency", {"letter": "i", "let_frequency": 2, "let_relation": "less than"}),
    ("change_case:capital_word_frequency", {"capital_frequency": 2, "capital_relation": "at least"}),
    ("change_case:capital_word_frequency", {"capital_frequency": 1, "capital_relation": "less than"}),
    ("language:response_language", {"language": "en"}),
    ("language:response_language", {"language": "fr"}),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}),
    ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "ab"}),
    ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 1, "nth_paragraph": 1, "first_word": "a"}),
    ("detectable_format:multiple_sections", {"section_spliter": "SECTION", "num_sections": 2}),
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 1}),
    ("detectable_format:constrained_response", {}),
    ("startend:quotation", {}),
    ("combination:two_responses", {}),
    ("combination:repeat_prompt", {"prompt_to_repeat": "Say a b."}),
    ("combination:repeat_prompt", {"prompt_to_repeat": "İ a"}),
]
# The 25 instruction ids of IFEval (google-research instruction_following_eval).
IFEVAL_IDS = [
    "keywords:existence", "keywords:frequency", "keywords:forbidden_words", "keywords:letter_frequency",
    "language:response_language", "length_constraints:number_sentences", "length_constraints:number_paragraphs",
    "length_constraints:number_words", "length_constraints:nth_paragraph_first_word",
    "detectable_content:number_placeholders", "detectable_content:postscript",
    "detectable_format:number_bullet_lists", "detectable_format:constrained_response",
    "detectable_format:number_highlighted_sections", "detectable_format:multiple_sections",
    "detectable_format:json_format", "detectable_format:title", "combination:two_responses",
    "combination:repeat_prompt", "startend:end_checker", "change_case:capital_word_frequency",
    "change_case:english_capital", "change_case:english_lowercase", "punctuation:no_comma", "startend:quotation",
]  # fmt: skip


def assert_well_formed(result, text):
    assert 0.0 <= result.score <= 1.0
    previous_end = 0
    for start, end in result.spans:
        assert isinstance(start, int) and isinstance(end, int)
        assert previous_end <= start < end <= len(text)
        previous_end = end


def start_stand_in(tmp_path: Path, mode: str) -> tuple[subprocess.Popen, Path]:
    """Start tests/stand_in_trainer.py (`stubborn` ignores SIGTERM, `cooperative` honours it) as a process named
    like the installed `mrtpo train`, writing run `r` of `tmp_path/runs`; returns (process, run folder) once it
    has written its 3 complete steps and a half-written 4th."""
    script = tmp_path / "bin" / "mrtpo"
    script.parent.mkdir()
    script.write_text((Path(__file__).parent / "stand_in_trainer.py").read_text())
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.Popen([sys.executable, str(script), "train", mode, str(tmp_path / "runs"), "r"],
                            stdout=subprocess.PIPE, env=env, start_new_session=True)
    assert proc.stdout.readline().strip() == b"ready"
    return proc, tmp_path / "runs" / "r"


def write_schema_1(path: Path, frame: pd.DataFrame, with_skipped: bool = True) -> Path:
    """One step's credit file as schema 1 wrote it (the runs shipped before schema 3 are such files): the long
    frame's columns in CREDIT_SCHEMA's order and types, `distance` / `distance_skipped` under their schema-1 names
    `js` / `js_skipped` (the oldest files have no `js_skipped`: `with_skipped=False`), one row group, metadata
    version "1". `frame`: one step's long credit map (CREDIT_SCHEMA's columns); returns the file written."""
    names = {"distance": "js", "distance_skipped": "js_skipped"}
    fields = [pa.field(names.get(f.name, f.name), f.type) for f in CREDIT_SCHEMA
              if with_skipped or f.name != "distance_skipped"]
    back = {v: k for k, v in names.items()}
    columns = {}
    for f in fields:
        values = frame[back.get(f.name, f.name)]
        values = values.astype(str).tolist() if pa.types.is_string(f.type) else values.to_numpy()
        columns[f.name] = pa.array(values, f.type)  # a numpy NaN stays NaN (not null), as schema 1 wrote it
    table = pa.table(columns, schema=pa.schema(fields, metadata={b"mrtpo_schema_version": b"1"}))
    out = credit_path(path, int(frame["step"].iloc[0]))
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, out)
    return out


class _TableParser(HTMLParser):
    """The cells of every `<table data-mrtpo="table">` (`mrtpo_viz.ui.tables`): a list of tables, each a list of
    rows, each a list of (cell text, is a <th>)."""

    def __init__(self):
        super().__init__()
        self.tables: list[list[list[tuple[str, bool]]]] = []
        self.cell: list[str] | None = None
        self.header = False
        self.inside = False

    def handle_starttag(self, tag, attrs):
        if tag == "table" and ("data-mrtpo", "table") in attrs:
            self.inside = True
            self.tables.append([])
        elif self.inside and tag == "tr":
            self.tables[-1].append([])
        elif self.inside and tag in ("td", "th"):
            self.cell, self.header = [], tag == "th"

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)

    def handle_endtag(self, tag):
        if self.inside and tag in ("td", "th") and self.cell is not None:
            self.tables[-1][-1].append(("".join(self.cell), self.header))
            self.cell = None
        elif tag == "table":
            self.inside = False


def html_tables(at) -> list[pd.DataFrame]:
    """The tables `ui.html_table` drew on an AppTest page, in order (`tables_in`)."""
    return tables_in("".join(element.proto.body for element in at.get("html")))


def pick_tables(at) -> dict[str, tuple[pd.DataFrame, int, list[str]]]:
    """The tables `ui.pick_table` drew on an AppTest page, by key: (the table, every cell as its text; the position
    of the row shown as selected; the addresses of its links, in order)."""
    found = {}
    for element in at.get("bidi_component"):
        if element.proto.component_name == "mrtpo_pick_table":
            data = json.loads(element.proto.json)
            links = [html.unescape(a) for a in re.findall(r'<a href="([^"]*)"', data["html"])]
            found[element.key] = (tables_in(data["html"])[0], data["selected"], links)
    return found


def tables_in(text: str) -> list[pd.DataFrame]:
    """The `<table data-mrtpo="table">` of an HTML text, every cell as its text; a table with row labels (a <th>
    first in each body row) has them as its index. `numeric` turns number columns back into numbers."""
    parser = _TableParser()
    parser.feed(text)
    frames = []
    for head, *body in parser.tables:
        labelled = bool(body) and all(row[0][1] for row in body)
        columns = [cell for cell, _ in head]
        frame = pd.DataFrame([[cell for cell, _ in row] for row in body], columns=columns)
        frames.append(frame.set_index(columns[0]).rename_axis(columns[0] or None) if labelled else frame)
    return frames


def numeric(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with each column whose non-empty cells all read as numbers as floats ("" -> NaN)."""
    out = frame.copy()
    for column in out.columns:
        cells = out[column].replace("", None)
        try:
            out[column] = pd.to_numeric(cells).astype("float64")
        except (ValueError, TypeError):
            pass
    return out



APP = str(Path(__file__).resolve().parent.parent / "app.py")


def open_page(name: str, query: dict):
    """AppTest of page `mrtpo_viz/pages/<name>.py` after the app's first run (its navigation), with `query` in its
    URL; the page ran without an exception."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.query_params.update(query)
    at.switch_page(f"mrtpo_viz/pages/{name}.py").run()
    assert not at.exception, at.exception
    return at
