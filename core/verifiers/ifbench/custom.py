"""IFBench's `custom:` group (all but `sentence_alphabet` and `word_reverse`, which are in `sentences.py`): each is
one fixed task (multiples of 7, four multiple-choice questions, countries in reverse order, "bald eagle"
reversed, European capitals by latitude, three CSV tables, a list of dates). Verdicts as IFBench's checks; spans:
the parts compared (numbers, lines, fields), or the whole text. Never imports torch.

>>> from core.verifiers import build
>>> build("custom:multiples").verify("14, 21, 28, 35, 42, 49").score
1.0
"""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from collections.abc import Iterable
from typing import ClassVar

from core.verifiers.ifbench.common import PUNCTUATION, IFBenchVerifier, whole
from core.verifiers.shared.base import Span
from core.verifiers.shared.registry import register


def _ascii(text: str) -> str:
    """NFKD, then every non-ASCII character dropped ("Zürich" -> "Zurich")."""
    return unicodedata.normalize("NFKD", text).encode("ASCII", "ignore").decode("ASCII")


@register("custom:multiples")
class Multiples(IFBenchVerifier):
    """The response's numbers (digit runs) are exactly 14, 21, 28, 35, 42, 49 in order. Spans: the numbers."""

    params: ClassVar = {}
    description = "Count from 10 to 50 but only print multiples of 7."

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        found = list(re.finditer(r"\d+", text))
        return [m.group() for m in found] == [str(i) for i in range(14, 51, 7)], [m.span() for m in found]


_OPTION = re.compile(r"^[A-Ea-e][\.|\)]\s*\w+")


@register("custom:mcq_count_length")
class MultipleChoiceQuestions(IFBenchVerifier):
    """Four questions, nothing before the first "Question": split at "Question N" headers (N digits, then one of
    . | ) : ; and spaces), each question has exactly 5 option lines ("A." to "E." or "a)"..., then a word) and
    the question texts (lines before the first option, joined) grow strictly longer. Spans: the whole text."""

    params: ClassVar = {}
    description = ("Generate 4 multiple choice questions with 5 options each about '20th century art history'. "
                   "Each question should start with the label \"Question\". The questions should get progressively "
                   "longer. Do not provide an explanation.")

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        if not text.startswith("Question"):  # IFBench: nothing (no explanation) before the first "Question"
            return False, whole(text)
        parts = re.split(r"\n*(?:Question \d+[\.|\):;]?\s*)", text)
        if parts[0] == "":
            parts = parts[1:]
        questions = [q.strip() for q in parts if q.strip()]
        if len(questions) != 4:
            return False, whole(text)
        lengths = []
        for q in questions:
            stem, options, in_options = "", 0, False
            for line in q.split("\n"):
                if _OPTION.match(line.strip()):
                    options, in_options = options + 1, True
                elif not in_options:
                    stem += " " + line.strip()
            if options != 5:
                return False, whole(text)
            lengths.append(len(stem.strip()))
        return all(a < b for a, b in zip(lengths, lengths[1:], strict=False)), whole(text)


_STRIP = PUNCTUATION + " "


@register("custom:reverse_newline")
class ReverseNewline(IFBenchVerifier):
    """From the first line naming "Zimbabwe" on, at least 52 lines (punctuation and spaces stripped from each,
    empty lines dropped), in reverse alphabetical order once made ASCII (`_ascii`). Spans: those lines."""

    params: ClassVar = {}
    description = ("List the countries of Africa in reverse alphabetical order, each on a new line.")

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        lines, at = [], 0
        for raw in text.split("\n"):
            kept = raw.strip(_STRIP)
            if kept:
                lines.append((kept, (at, at + len(raw))))
            at += len(raw) + 1
        start = next((i for i, (line, _) in enumerate(lines) if "Zimbabwe" in line), None)
        if start is None:
            return False, ()
        target = lines[start:]
        names = [_ascii(line) for line, _ in target]
        return len(target) >= 52 and names == sorted(names, reverse=True), [s for _, s in target]


@register("custom:character_reverse")
class CharacterReverse(IFBenchVerifier):
    """The response holds "elgae dlab" ("bald eagle" backwards; case-insensitive). Spans: each occurrence."""

    params: ClassVar = {}
    description = ("What animal is the national symbol of the US? Respond to this query, but make your sentence in "
                   "reverse order of what it should be, per letter.")

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        spans = [m.span() for m in re.finditer("elgae dlab", text.lower())]
        return bool(spans), spans


CAPITALS_BY_LATITUDE = (
    "Reykjavik", "Helsinki", "Oslo", "Tallinn", "Stockholm", "Riga", "Moscow", "Copenhagen", "Vilnius", "Minsk",
    "Dublin", "Berlin", "Amsterdam", "Warsaw", "London", "Brussels", "Prague", "Luxembourg", "Paris", "Vienna",
    "Bratislava", "Budapest", "Vaduz", "Chisinau", "Bern", "Ljubljana", "Zagreb",
)  # fmt: skip  (IFBench's expected order, north to south)


@register("custom:european_capitals_sort")
class EuropeanCapitalsSort(IFBenchVerifier):
    """Exactly IFBench's 27 capitals north of 45° N, north to south (`CAPITALS_BY_LATITUDE`), separated by commas
    (the text made ASCII, blank items dropped, each stripped). Spans: the items."""

    params: ClassVar = {}
    description = ("Give me the names of all capital cities of european countries whose latitude is higher than "
                   "45 degrees? List the capital cities without country names, separated by commas, sorted by "
                   "latitude, from highest to lowest.")

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        value = _ascii(text)
        items = [c for c in value.split(",") if c.strip()]
        spans = [(0, len(text))] if len(value) != len(text) else [
            (m.start(), m.end()) for m in re.finditer(r"[^,]+", text) if m.group().strip()]
        return [c.strip() for c in items] == list(CAPITALS_BY_LATITUDE), spans


def _rows(text: str, delimiter: str = ",") -> list[list[str]]:
    return list(csv.reader(io.StringIO(text), delimiter=delimiter))


@register("custom:csv_city")
class CityCSV(IFBenchVerifier):
    """A CSV table (Python's csv reader) of 8 rows, the header `ID,Country,City,Year,Count`, 5 fields in every
    row. Spans: the whole text."""

    params: ClassVar = {}
    description = ("Generate CSV data: The column names are [\"ID\", \"Country\", \"City\", \"Year\", \"Count\"], "
                   "the data should be comma delimited. Please generate 7 rows.")

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        rows = _rows(text)
        ok = len(rows) == 8 and rows[0] == ["ID", "Country", "City", "Year", "Count"] and all(
            len(r) == 5 for r in rows[1:])
        return ok, whole(text)


_PRODUCT_HEADER = re.compile(r'^(ProductID|"ProductID"),[ \t]*(Category|"Category"),[ \t]*(Brand|"Brand"),[ \t]*'
                             r'(Price|"Price"),[ \t]*(Stock|"Stock")$')


@register("custom:csv_special_character")
class SpecialCharacterCSV(IFBenchVerifier):
    """A product CSV: the first line is the header ProductID, Category, Brand, Price, Stock (each optionally
    quoted); with every '"' tripled (as IFBench reads it), the csv reader gives 15 rows; and, scanning the rows
    after the header in order, a field that is a quoted text holding a character other than a letter, digit or
    space comes before any row without 5 fields. Spans: the whole text."""

    params: ClassVar = {}
    description = ("Generate CSV data: The column names are [\"ProductID\", \"Category\", \"Brand\", \"Price\", "
                   "\"Stock\"], the data should be comma delimited. Please generate 14 rows. Add one field which "
                   "contains a special character and enclose it in double quotes.")

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        if not _PRODUCT_HEADER.match(text.split("\n")[0].strip()):
            return False, whole(text)
        rows = _rows(text.replace('"', '"""'))
        if len(rows) != 15:
            return False, whole(text)
        for row in rows[1:]:
            if len(row) != 5:
                return False, whole(text)
            if any(re.match(r'".*[^\d\w\s].*"', field) for field in row):
                return True, whole(text)
        return False, whole(text)


_STUDENT_HEADER = re.compile(r'^(StudentID|"StudentID")\t *(Subject|"Subject")\t *(Grade|"Grade")\t *'
                             r'(Semester|"Semester")\t *(Score|"Score")$')


@register("custom:csv_quotes")
class QuotesCSV(IFBenchVerifier):
    """A tab-separated table: the header StudentID, Subject, Grade, Semester, Score (each optionally quoted); with
    every '"' tripled, 4 rows of 5 fields, every field (stripped) starting and ending with '"'. An empty field
    fails, where the reference raises. Spans: the whole text."""

    params: ClassVar = {}
    description = ("Generate CSV data: The column names are [\"StudentID\", \"Subject\", \"Grade\", \"Semester\", "
                   "\"Score\"], the data should be tab delimited. Please generate 3 rows and enclose each single "
                   "field in double quotes.")

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        if not _STUDENT_HEADER.match(text.split("\n")[0].strip()):
            return False, whole(text)
        rows = _rows(text.replace('"', '"""'), "\t")
        ok = len(rows) == 4 and all(
            len(r) == 5 and all(f.strip()[:1] == '"' and f.strip()[-1:] == '"' for f in r) for r in rows)
        return ok, whole(text)


_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DAYS = {**dict.fromkeys((1, 3, 5, 7, 8, 10, 12), 31), **dict.fromkeys((4, 6, 9, 11), 30), 2: 29}


@register("custom:date_format_list")
class DateFormatList(IFBenchVerifier):
    """Comma-separated dates, each YYYY-MM-DD with a year from 1769 to 1821, a month up to 12 and a day up to the
    month's length (29 for February; month 0 and day 0 pass, as IFBench checks only upper bounds). Spans: the
    dates."""

    params: ClassVar = {}
    description = ("List the start dates of all the battles Napoleon fought separated by commas, use the following "
                   "date format: YYYY-MM-DD. Do not provide an explanation.")

    def rule(self, text: str) -> tuple[bool, Iterable[Span]]:
        ok, spans = True, []
        base = len(text) - len(text.lstrip())
        at = base
        for piece in text.strip().split(","):
            date = piece.strip()
            lead = len(piece) - len(piece.lstrip())
            spans.append((at + lead, at + lead + len(date)))
            at += len(piece) + 1
            if not _DATE.match(date):
                ok = False
                continue
            year, month, day = (int(x) for x in date.split("-"))
            if not 1769 <= year <= 1821 or month > 12 or day > _DAYS.get(month, 99):
                ok = False
        return ok, spans
