"""The kind of judgement each built-in family makes (`REWARD_KIND`, the one table of kinds)."""

from __future__ import annotations

# The kind of judgement each built-in family makes; studies report per-kind rates (see docs/METHOD.md,
# "Paired differences against GDPO"). One place knows it: `core.tools.promptgen` draws the multi setting's
# constraints by kind from this table and the efficiency report groups rewards with it.
# - format: where things go and how the response is laid out (start/end phrase, title, postscript,
#   paragraphs, sections, bullets, JSON, quotation, repeated request, two responses, fixed answers);
# - safety: a word the response must not use (the multi setting forbids the word its topic invites);
# - correctness: the answer is right (`task:arithmetic`);
# - style: how the text reads everywhere (case, commas, length, language, letter frequency);
# - content: what the response must say. `keywords:existence` (and `keywords:frequency`) are neither layout,
#   nor a ban, nor a right answer, nor a property of all the text: a decision of this project, kept as a fifth
#   kind so that the keyword, one arm of the multi setting's conflicting triple (word limit against keyword and
#   end phrase), is reported on its own instead of blurring format or style.
REWARD_KINDS = ("format", "safety", "correctness", "style", "content")
OTHER_KIND = "other"  # a custom family (`register` / `load_custom`) outside this table
REWARD_KIND: dict[str, str] = {
    "startend:start_checker": "format",
    "startend:end_checker": "format",
    "startend:quotation": "format",
    "detectable_format:title": "format",
    "detectable_format:json_format": "format",
    "detectable_format:number_bullet_lists": "format",
    "detectable_format:number_highlighted_sections": "format",
    "detectable_format:multiple_sections": "format",
    "detectable_format:constrained_response": "format",
    "detectable_content:postscript": "format",
    "detectable_content:number_placeholders": "format",
    "length_constraints:number_paragraphs": "format",
    "length_constraints:nth_paragraph_first_word": "format",
    "combination:two_responses": "format",
    "combination:repeat_prompt": "format",
    "keywords:forbidden_words": "safety",
    "task:arithmetic": "correctness",
    "change_case:english_lowercase": "style",
    "change_case:english_capital": "style",
    "change_case:capital_word_frequency": "style",
    "punctuation:no_comma": "style",
    "length_constraints:number_words": "style",
    "length_constraints:number_sentences": "style",
    "language:response_language": "style",
    "keywords:letter_frequency": "style",
    "keywords:existence": "content",
    "keywords:frequency": "content",
}  # fmt: skip


def reward_kind(family: str) -> str:
    """The kind of a family's reward (`REWARD_KIND`), `other` for a family outside the table; a reward name of a
    repeated statement (`family#2`, see `core.tasks.reward_name`) has its family's kind.

    >>> reward_kind("keywords:existence"), reward_kind("my:custom"), reward_kind("keywords:frequency#2")
    ('content', 'other', 'content')
    """
    return REWARD_KIND.get(family.split("#", 1)[0], OTHER_KIND)
