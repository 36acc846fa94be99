"""Words as the dedup detector compares them: Snowball English stems with irregular forms and a
short list of everyday synonyms folded onto one form, and the lexicon's antonym pairs, exclusive
classes and value words in that form."""

from collections import defaultdict
from functools import lru_cache

import snowballstemmer

from governance.dedup import lexicon

_STEMMER = snowballstemmer.stemmer("english")


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return _STEMMER.stemWord(lexicon.IRREGULAR_FORMS.get(word, word))


def _build_canonical() -> dict[str, str]:
    canonical: dict[str, str] = {}
    for group in lexicon.SYNONYM_GROUPS:
        head = _stem(group[0])
        for word in group:
            canonical.setdefault(_stem(word), head)
    return canonical


_CANONICAL = _build_canonical()


@lru_cache(maxsize=200_000)
def canonical_stem(word: str) -> str:
    stem = _stem(word)
    return _CANONICAL.get(stem, stem)


ANTONYMS = frozenset(frozenset({canonical_stem(a), canonical_stem(b)}) for a, b in lexicon.ANTONYM_PAIRS)


def _build_classes() -> dict[str, frozenset[str]]:
    """stem -> the exclusive classes it belongs to ("window" is a seat and a platform)."""
    classes: dict[str, set[str]] = defaultdict(set)
    for name, words in lexicon.EXCLUSIVE_CLASSES.items():
        for word in words.split():
            classes[canonical_stem(word)].add(name)
    return {stem: frozenset(names) for stem, names in classes.items()}


CLASSES = _build_classes()
LEXICON_STEMS = frozenset(CLASSES) | frozenset(stem for pair in ANTONYMS for stem in pair)
VALUE_WORDS = lexicon.MONTHS | lexicon.WEEKDAYS | lexicon.CURRENCY_AND_ZONE_CODES


@lru_cache(maxsize=200_000)
def frame_stem(word: str) -> str:
    """A word's stem for blocking, with a negating prefix taken off, so "unversioned" is blocked
    with "versioned". A wrong strip ("invoice" -> "voice") is harmless here: the same word always
    maps to the same frame stem, and blocking only decides which pairs get compared."""
    for prefix in lexicon.NEGATING_PREFIXES:
        if word.startswith(prefix) and len(word) - len(prefix) >= 4:
            return canonical_stem(word[len(prefix) :])
    return canonical_stem(word)
