"""The project's own IFEval-format prompt set: `sample_data/prompts/ifeval-style.jsonl`, for `mrtpo eval`.

Records in IFEval's input format (`key`, `prompt`, `instruction_id_list`, `kwargs` in google-research's shape:
only the arguments an instruction uses). Not IFEval's text: each prompt is one of this module's `TASKS` followed
by the sentences the project's verifiers state for their constraints (`Verifier.sentence()`), so a model is asked
for each instruction in one fixed wording. Every one of IFEval's 25 instruction ids is the first instruction of
`n / 25` prompts (rounded up); 0-2 more are drawn among the ids that can hold together with it (`CONFLICTS`: no
lowercase with capitals, nothing else with JSON, ...). `combination:repeat_prompt` asks to repeat the prompt
without its own sentence, which goes last. Deterministic for a given (n, seed).

    python -m core.tools.ifeval_prompts --out sample_data/prompts/ifeval-style.jsonl   # rewrites the shipped set

Never imports torch.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

from core.verifiers import build

IFEVAL_IDS = (
    "keywords:existence", "keywords:forbidden_words", "keywords:frequency", "keywords:letter_frequency",
    "startend:end_checker", "startend:quotation", "change_case:english_lowercase", "change_case:english_capital",
    "change_case:capital_word_frequency", "length_constraints:number_words", "length_constraints:number_sentences",
    "length_constraints:number_paragraphs", "length_constraints:nth_paragraph_first_word",
    "detectable_format:json_format", "detectable_format:number_bullet_lists",
    "detectable_format:number_highlighted_sections", "detectable_format:title", "detectable_format:multiple_sections",
    "detectable_format:constrained_response", "detectable_content:number_placeholders",
    "detectable_content:postscript", "punctuation:no_comma", "language:response_language",
    "combination:two_responses", "combination:repeat_prompt",
)  # fmt: skip

TASKS = (
    "Write a short story about a clockmaker who repairs a clock that runs backwards.",
    "Describe a quiet morning at a fishing harbour.",
    "Explain to a ten-year-old why the sky changes colour at sunset.",
    "Write a product description for a lamp that dims itself when you yawn.",
    "Give advice to someone starting their first vegetable garden.",
    "Write a letter to a neighbour asking them to water your plants next week.",
    "Summarise the life cycle of a frog.",
    "Describe the best way to pack a suitcase for a week of hiking.",
    "Write a review of an imaginary restaurant that serves only soup.",
    "Explain how a bicycle gear system makes climbing hills easier.",
    "Write a short speech for the opening of a new public library.",
    "Describe a city street during a summer thunderstorm.",
    "Write a note to a colleague thanking them for their help on a project.",
    "Explain what a budget is and why a family might keep one.",
    "Write a short poem about a lighthouse in winter.",
    "Describe how to make a simple paper boat.",
    "Write an announcement for a neighbourhood clean-up day.",
    "Explain why bees matter for farms and orchards.",
    "Write a diary entry of a cat that has just moved to a new house.",
    "Give three tips for staying focused while studying at home.",
    "Describe a train journey through mountains at night.",
    "Write a welcome message for new members of a chess club.",
    "Explain how rain forms, for a school newsletter.",
    "Write a short biography of an imaginary inventor of the umbrella.",
    "Describe the smells and sounds of a busy bakery at dawn.",
    "Write an invitation to a birthday picnic in the park.",
    "Explain the rules of a simple card game you invent.",
    "Write a complaint to a company about a toaster that burns every slice.",
    "Describe what a day on a small island without cars might be like.",
    "Write a short guide to caring for a houseplant that needs little light.",
)

KEYWORDS = ("lantern", "harbour", "patience", "copper", "meadow", "whisper", "compass", "orchard", "velvet", "signal")
FORBIDDEN = ("very", "really", "thing", "good", "nice", "great", "just", "also")
END_PHRASES = ("Is there anything else I can help with?", "Let me know if you have questions.", "That is all.",
               "Thank you for reading.")
FIRST_WORDS = ("first", "then", "finally", "however", "today", "meanwhile")
SPLITTERS = ("Section", "SECTION", "PART")
# IFEval's languages (a few of its 30): a response in one of them can be checked by the detector.
LANGUAGES = ("es", "fr", "de", "it", "pt", "hi", "ru", "ja", "sw", "fi")

# Pairs of ids that cannot (or can barely) hold together in one response; a prompt never states both.
_CASE = ("change_case:english_lowercase", "change_case:english_capital", "change_case:capital_word_frequency")
_LAYOUT = ("length_constraints:number_paragraphs", "length_constraints:nth_paragraph_first_word",
           "detectable_format:multiple_sections", "combination:two_responses", "detectable_format:json_format",
           "detectable_format:constrained_response", "startend:quotation", "combination:repeat_prompt")
_ENGLISH_WORDS = ("keywords:existence", "keywords:frequency", "startend:end_checker", *_CASE,
                  "detectable_format:constrained_response", "combination:repeat_prompt",
                  "length_constraints:nth_paragraph_first_word", "detectable_format:multiple_sections")
CONFLICTS = {
    *((a, b) for a in _CASE for b in _CASE if a != b),
    *((a, b) for a in _LAYOUT for b in _LAYOUT if a != b),
    *(("change_case:english_lowercase", b) for b in ("detectable_content:postscript", "detectable_format:title",
                                                     "detectable_content:number_placeholders")),
    *(("language:response_language", b) for b in _ENGLISH_WORDS),
    *(("detectable_format:json_format", b) for b in (
        "punctuation:no_comma", "detectable_format:title", "detectable_content:postscript",
        "detectable_format:number_bullet_lists", "detectable_format:number_highlighted_sections",
        "startend:end_checker", "length_constraints:number_sentences")),
    *(("detectable_format:constrained_response", b) for b in (
        "length_constraints:number_words", "length_constraints:number_sentences", "startend:end_checker",
        "detectable_format:number_bullet_lists", "detectable_format:number_highlighted_sections",
        "detectable_content:number_placeholders", "keywords:frequency", "keywords:letter_frequency")),
}  # fmt: skip
CONFLICTS |= {(b, a) for a, b in CONFLICTS}


def _kwargs(family: str, rng: random.Random) -> dict[str, Any]:
    """Arguments for one instruction, drawn from rng (IFEval's argument names)."""
    relation = rng.choice(("less than", "at least"))
    if family == "keywords:existence":
        return {"keywords": rng.sample(KEYWORDS, rng.randint(1, 2))}
    if family == "keywords:forbidden_words":
        return {"forbidden_words": rng.sample(FORBIDDEN, rng.randint(1, 3))}
    if family == "keywords:frequency":
        return {"keyword": rng.choice(KEYWORDS), "frequency": rng.randint(2, 4), "relation": "at least"}
    if family == "keywords:letter_frequency":
        return {"letter": rng.choice("bcdgklmpwy"), "let_frequency": rng.randint(3, 8), "let_relation": relation}
    if family == "startend:end_checker":
        return {"end_phrase": rng.choice(END_PHRASES)}
    if family == "change_case:capital_word_frequency":
        return {"capital_frequency": rng.randint(2, 6), "capital_relation": relation}
    if family == "length_constraints:number_words":
        return {"num_words": rng.choice((40, 60, 80, 120, 150, 200)), "relation": relation}
    if family == "length_constraints:number_sentences":
        return {"num_sentences": rng.randint(2, 8), "relation": relation}
    if family == "length_constraints:number_paragraphs":
        return {"num_paragraphs": rng.randint(2, 4)}
    if family == "length_constraints:nth_paragraph_first_word":
        n = rng.randint(2, 4)
        return {"num_paragraphs": n, "nth_paragraph": rng.randint(1, n), "first_word": rng.choice(FIRST_WORDS)}
    if family == "detectable_format:number_bullet_lists":
        return {"num_bullets": rng.randint(2, 5)}
    if family == "detectable_format:number_highlighted_sections":
        return {"num_highlights": rng.randint(1, 3)}
    if family == "detectable_format:multiple_sections":
        return {"section_spliter": rng.choice(SPLITTERS), "num_sections": rng.randint(2, 4)}
    if family == "detectable_content:number_placeholders":
        return {"num_placeholders": rng.randint(1, 4)}
    if family == "detectable_content:postscript":
        return {"postscript_marker": rng.choice(("P.S.", "P.P.S"))}
    if family == "language:response_language":
        return {"language": rng.choice(LANGUAGES)}
    return {}


def generate(n: int = 125, seed: int = 0) -> list[dict[str, Any]]:
    """`n` IFEval-format records (module docstring); prompt i states `IFEVAL_IDS[i % 25]` first.

    >>> generate(1)[0]["instruction_id_list"][0]
    'keywords:existence'
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    rng = random.Random(f"ifeval-style:{seed}")
    records = []
    for i in range(n):
        ids = [IFEVAL_IDS[i % len(IFEVAL_IDS)]]
        for _ in range(rng.choice((0, 1, 1, 2))):
            fits = [f for f in IFEVAL_IDS if f not in ids and all((f, g) not in CONFLICTS for g in ids)]
            if fits:
                ids.append(rng.choice(fits))
        if "combination:repeat_prompt" in ids:  # its sentence goes last: the request is everything before it
            ids.remove("combination:repeat_prompt")
            ids.append("combination:repeat_prompt")
        task = TASKS[rng.randrange(len(TASKS))]
        kwargs = [_kwargs(f, rng) for f in ids]
        sentences = [build(f, **k).sentence() for f, k in zip(ids, kwargs, strict=True)
                     if f != "combination:repeat_prompt"]
        request = " ".join([task, *sentences])
        prompt = request
        if ids[-1] == "combination:repeat_prompt":
            kwargs[-1] = {"prompt_to_repeat": request}
            prompt = request + " " + build(ids[-1], **kwargs[-1]).sentence()
        records.append({"key": 9001 + i, "prompt": prompt, "instruction_id_list": ids, "kwargs": kwargs})
    return records


def write(path: str | Path, n: int = 125, seed: int = 0) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in generate(n, seed)), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.tools.ifeval_prompts", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="JSONL file to write")
    parser.add_argument("--n", type=int, default=125, help="prompts (default 125: each of the 25 ids first 5 times)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"wrote {write(args.out, args.n, args.seed)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
