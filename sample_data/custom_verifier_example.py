"""Example of custom verifiers: register your own constraint families.

Name this file (or an importable module) in the run config, `custom_verifiers =
"sample_data/custom_verifier_example.py"` (or `--custom-verifiers ...` on the command line);
the trainer calls `core.verifiers.load_custom(...)` before it loads the prompt set, so a prompt
set can then use the families below:

    {"key": "c1", "task": "Write a short note about rain.",
     "constraints": [{"family": "custom:exclamations", "kwargs": {"at_least": 2}},
                     {"family": "custom:max_word_length", "kwargs": {"max_len": 6}}]}

A verifier returns a score in [0, 1] and the character spans of the text it inspected (used to
draw the verifier's view over the credit heatmap and for the span-agreement metrics). It must
be deterministic. `verify` never raises: an exception inside a custom check is logged and
scores 0, but do test your check on odd text (empty, unicode) all the same.

Try it:
    >>> from core.verifiers import build, load_custom
    >>> added = load_custom("sample_data/custom_verifier_example.py")
    >>> build("custom:exclamations", at_least=2).verify("Rain! Rain!")
    VerifyResult(score=1.0, spans=((4, 5), (10, 11)))
    >>> build("custom:max_word_length", max_len=4).verify("a long sentence")
    VerifyResult(score=0.0, spans=((7, 15),))
"""

from __future__ import annotations

import re

from core.verifiers import Param, Verifier, as_int, register


# 1. A plain function: `fn(text, **kwargs) -> score` or `(score, spans)`. `sentence` is the
#    constraint sentence (a format string over the kwargs); `params` declares and checks the
#    arguments (bad ones raise VerifierSpecError when the prompt set is loaded).
@register(
    "custom:exclamations",
    sentence="Use at least {at_least} exclamation marks.",
    params={"at_least": Param(as_int(1), help="an integer >= 1")},
)
def exclamations(text: str, at_least: int) -> tuple[float, list[tuple[int, int]]]:
    """At least `at_least` '!' characters; spans: each '!'."""
    spans = [(m.start(), m.end()) for m in re.finditer("!", text)]
    return float(len(spans) >= at_least), spans


# 2. A Verifier subclass, for a graded variant or anything more involved.
@register("custom:max_word_length")
class MaxWordLength(Verifier):
    """No word longer than `max_len` letters. Graded: share of words within the limit.
    Spans: the words that are too long (empty when the rule holds)."""

    has_graded = True
    params = {"max_len": Param(as_int(1), help="an integer >= 1")}

    def sentence(self) -> str:
        return f"Use no word longer than {self.kwargs['max_len']} letters."

    def check(self, text: str):
        words = [m.span() for m in re.finditer(r"\w+", text)]
        too_long = [(s, e) for s, e in words if e - s > self.kwargs["max_len"]]
        if self.graded:
            return (1 - len(too_long) / len(words)) if words else 1.0, too_long
        return float(not too_long), too_long
