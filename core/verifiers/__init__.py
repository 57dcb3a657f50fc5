"""Verifiers: pure functions `text -> (score in [0, 1], inspected spans)` built from a constraint
spec (family id + arguments), plus the constraint sentence a prompt states for them.

Public entry points: `build(family_id, **kwargs)`, `register(family_id)`, `load_custom(...)`,
`families()`. Never imports torch.

Layout, by benchmark and group: `ifeval/` (IFEval's 25 ids, one module per IFEval group), `ifbench/` (IFBench's
58 ids, one module per group), `task` (the workbench's own `task:` families), and below them all `shared/`: `base`
(Verifier, VerifyResult, argument specs, a custom check's time limit), `registry` (register, build, load_custom),
`kinds` (REWARD_KIND) and the text helpers `text`, `punkt`, `language`. What each IFEval family scores, which spans it reports (and the rule for
negative constraints: spans only where the rule is broken), its graded variant and where it differs from IFEval:
`core.verifiers.ifeval`. Word and sentence counting (no NLTK data): `core.verifiers.shared.text`.
Custom families: `register` / `load_custom`, example in `sample_data/custom_verifier_example.py`.

>>> from core.verifiers import build
>>> v = build("keywords:existence", keywords=["green"])
>>> v.sentence()
'Include the keyword green.'
>>> v.verify("A green field.")
VerifyResult(score=1.0, spans=((2, 7),))
"""

# The old module `core.verifiers.families` (re-exports), loaded here before the function `families` is bound:
# loading a submodule later would set the package's attribute `families` to the module.
from core.verifiers import families as _families  # noqa: F401
from core.verifiers import ifbench as _ifbench  # noqa: F401  (registers IFBench's families)
from core.verifiers import ifeval as _ifeval  # noqa: F401  (registers IFEval's families)
from core.verifiers import task as _task  # noqa: F401  (registers the workbench's task: families)
from core.verifiers.shared.base import (
    Param,
    Span,
    Verifier,
    VerifierExit,
    VerifierSpecError,
    VerifyResult,
    as_choice,
    as_int,
    as_text,
    as_word_list,
    module_of,
    normalize_spans,
    set_time_limit,
)
from core.verifiers.shared.registry import build, families, family_class, load_custom, register
from core.verifiers.shared.text import count_sentences, count_words, sentence_spans, word_spans

__all__ = [
    "Param",
    "Span",
    "Verifier",
    "VerifierExit",
    "VerifierSpecError",
    "VerifyResult",
    "as_choice",
    "as_int",
    "as_text",
    "as_word_list",
    "build",
    "count_sentences",
    "count_words",
    "families",
    "family_class",
    "load_custom",
    "module_of",
    "normalize_spans",
    "register",
    "set_time_limit",
    "sentence_spans",
    "word_spans",
]
