"""The built-in families' old home, kept as an import path: IFEval's families live in `core.verifiers.ifeval`
(one module per IFEval group), `task:arithmetic` in `core.verifiers.task`, the kinds of reward in
`core.verifiers.shared.kinds`. This module re-exports their public names."""

from core.verifiers.ifeval.change_case import CapitalWordFrequency, EnglishCapital, EnglishLowercase
from core.verifiers.ifeval.combination import RepeatPrompt, TwoResponses
from core.verifiers.ifeval.common import RELATIONS, SWAP_END_PHRASES, SWAP_START_PHRASES, SWAP_WORDS
from core.verifiers.ifeval.detectable_content import NumberPlaceholders, Postscript
from core.verifiers.ifeval.detectable_format import (
    CONSTRAINED_OPTIONS,
    ConstrainedResponse,
    JsonFormat,
    MultipleSections,
    NumberBulletLists,
    NumberHighlightedSections,
    Title,
)
from core.verifiers.ifeval.keywords import ForbiddenWords, KeywordExistence, KeywordFrequency, LetterFrequency
from core.verifiers.ifeval.language import ResponseLanguage
from core.verifiers.ifeval.length_constraints import (
    NthParagraphFirstWord,
    NumberParagraphs,
    NumberSentences,
    NumberWords,
)
from core.verifiers.ifeval.punctuation import NoComma
from core.verifiers.ifeval.scan import _bracket_matches, _bullet_matches, _title_matches
from core.verifiers.ifeval.startend import EndChecker, Quotation, StartChecker
from core.verifiers.shared.kinds import OTHER_KIND, REWARD_KIND, REWARD_KINDS, reward_kind
from core.verifiers.task import Arithmetic

__all__ = [
    "CONSTRAINED_OPTIONS", "OTHER_KIND", "RELATIONS", "REWARD_KIND", "REWARD_KINDS", "SWAP_END_PHRASES",
    "SWAP_START_PHRASES", "SWAP_WORDS", "Arithmetic", "CapitalWordFrequency", "ConstrainedResponse", "EndChecker",
    "EnglishCapital", "EnglishLowercase", "ForbiddenWords", "JsonFormat", "KeywordExistence", "KeywordFrequency",
    "LetterFrequency", "MultipleSections", "NoComma", "NthParagraphFirstWord", "NumberBulletLists",
    "NumberHighlightedSections", "NumberParagraphs", "NumberPlaceholders", "NumberSentences", "NumberWords",
    "Postscript", "Quotation", "RepeatPrompt", "ResponseLanguage", "StartChecker", "Title", "TwoResponses",
    "_bracket_matches", "_bullet_matches", "_title_matches", "reward_kind",
]  # fmt: skip
