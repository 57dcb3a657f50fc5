"""IFEval's 25 instruction ids as this project's verifiers, one module per IFEval group (the id's prefix):
`keywords`, `startend`, `change_case`, `length_constraints`, `detectable_format`, `detectable_content`,
`punctuation`, `language`, `combination`; what they share: `common` (relations, graded counts, swap values) and
`scan` (linear-time matchers). The workbench's own `task:` families are in `core.verifiers.task`, the kinds of
reward in `core.verifiers.shared.kinds`.

Verdicts follow IFEval's strict checks (google-research `instruction_following_eval`,
`instructions.py`) on the same text; every remaining difference, with its reason, is listed in
docs/IFEVAL.md. In short: sentences are split by `text.py`'s Punkt-like splitter (number of sentences, and the
sentences whose Treebank tokens `capital_word_frequency` counts); `language:response_language` detects with
py3langid among the languages a prompt can ask for (see `language.py`), where IFEval uses langdetect; the case
rules check case alone (IFEval also asks langdetect for English); keywords, the section splitter and custom
postscript markers are matched literally (IFEval: unescaped regexes); `letter_frequency` counts a non-letter
"letter" as asked (IFEval draws a random letter). Words are counted as NLTK >= 3.10 counts them (`text.py`).

Every family scores 0 with no spans on an empty or whitespace-only response, as IFEval (which counts an
instruction as followed only when `response.strip()` is non-empty); see `Verifier.verify`.

Spans (what the check inspected), by kind of rule:
- presence rules (keywords, title, placeholders, highlights, bullets, postscript): the items
  found; empty when none was found;
- absence rules (no comma, forbidden words): the violations; empty when the rule holds ("the
  verifier's span only exists when the rule is broken");
- all-text rules (lowercase, capitals): the offending characters, or the whole text when the
  rule holds (every letter was inspected) or when the text has no letter at all;
- counting rules (words, sentences, keyword / letter / capital-word frequency, section headers): every
  counted unit;
- separator rules (paragraphs split by `***` or by blank lines, two responses split by `******`): the
  separators, which decide the count (empty when there is none); `nth_paragraph_first_word` adds the
  first word it compared;
- position rules (start/end phrase, repeated request, quotation marks): the part of the text compared
  (phrase or request: as many characters as it has; quotation: the first and last characters),
  whether it matched or not;
- whole-text rules (response language): the whole text;
- JSON: the block that was parsed; `task:arithmetic`: the first integer, or the whole text when
  it holds none (the whole text was searched).

A family that needs the prompt (`combination:repeat_prompt`) names its argument in `prompt_arg`;
`core.tasks` fills it with the task text when a prompt-set record leaves it out.

Graded variants (`graded=True`) where a family has one; binary otherwise (asking for a graded
variant of a binary-only family raises `VerifierSpecError`).
"""

from core.verifiers.ifeval import (  # noqa: F401  (each module registers its group's families)
    change_case,
    combination,
    detectable_content,
    detectable_format,
    keywords,
    language,
    length_constraints,
    punctuation,
    startend,
)

BUILTIN_MODULE_PREFIX = "core.verifiers.ifeval."  # where IFEval's families live (`is_ifeval_family`)


def is_ifeval_family(cls: type) -> bool:
    """Whether a family class is one of this package's (IFEval's ids and `startend:start_checker`)."""
    return getattr(cls, "__module__", "").startswith(BUILTIN_MODULE_PREFIX)
