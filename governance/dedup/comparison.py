"""Comparing two texts: their similarity (a soft Jaccard index of content stems, spelling variants
counted as shared) and the contradiction between them, if any (negation, value, antonym,
exclusive, order), with the similarity of the rest once the contradicting words are set aside.
See governance.dedup.detect for what each contradiction means and how the thresholds were chosen."""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from rapidfuzz.distance import Indel

from governance.dedup import lexicon
from governance.dedup.stems import ANTONYMS, CLASSES, canonical_stem
from governance.dedup.text import TextProfile

DUPLICATE_THRESHOLD = 0.6
CONFLICT_THRESHOLD = 0.5
FUZZY_TOKEN_SIMILARITY = 0.8


def _fuzzy_matches(only_a: Iterable[str], only_b: Iterable[str]) -> list[tuple[str, str]]:
    """Pairs of unshared stems that are one word spelt two ways (greedy, best first)."""
    words_b = [b for b in only_b if len(b) >= 4 and not b[0].isdigit()]
    candidates = []
    for a in only_a:
        if len(a) < 4 or a[0].isdigit():
            continue
        for b in words_b:
            # Indel similarity is at most 2*min/(len_a+len_b): skip pairs of very different length.
            if 2 * min(len(a), len(b)) < FUZZY_TOKEN_SIMILARITY * (len(a) + len(b)):
                continue
            score = Indel.normalized_similarity(a, b)
            if score >= FUZZY_TOKEN_SIMILARITY:
                candidates.append((score, a, b))
    used_a, used_b, matches = set(), set(), []
    for _, a, b in sorted(candidates, reverse=True):
        if a not in used_a and b not in used_b:
            used_a.add(a)
            used_b.add(b)
            matches.append((a, b))
    return matches


def soft_jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    common = len(a & b)
    fuzzy = 0
    best_case = min(len(a), len(b))  # every unshared stem of the smaller set matched as a variant
    # Spelling variants only matter if they could lift the score to a threshold that decides.
    if best_case > common and best_case / (len(a) + len(b) - best_case) >= min(DUPLICATE_THRESHOLD, CONFLICT_THRESHOLD):
        fuzzy = len(_fuzzy_matches(a - b, b - a))
    matched = common + fuzzy
    return matched / (len(a) + len(b) - matched)


@dataclass(frozen=True)
class Comparison:
    similarity: float  # soft Jaccard of the content stems
    contradiction: str | None  # negation, value, antonym, exclusive
    masked_similarity: float  # similarity with the contradicting words set aside
    refinement: bool  # one side names a value the other lacks

    @property
    def is_conflict(self) -> bool:
        return self.contradiction is not None and self.masked_similarity >= CONFLICT_THRESHOLD

    @property
    def is_duplicate(self) -> bool:
        return self.contradiction is None and not self.refinement and self.similarity >= DUPLICATE_THRESHOLD


def _prefix_negations(words: Iterable[str], others: frozenset[str]) -> Iterator[tuple[str, str]]:
    """(base, negated) pairs where a word of `others` is a word of `words` with a negating prefix:
    "available" / "unavailable"."""
    for word in others:
        for prefix in lexicon.NEGATING_PREFIXES:
            if word.startswith(prefix) and len(word) - len(prefix) >= 4 and word[len(prefix) :] in words:
                yield word[len(prefix) :], word


def _swapped(a: TextProfile, b: TextProfile) -> set[str]:
    """Between two contrast texts: the stems on opposite sides, if the sides are swapped (each
    favours something the other rejects). Opposition in one direction only is no swap: "do not
    send the invoice by post; send it by email instead" / "send the invoice by email, not by post"
    differ only in which clause names the invoice."""
    one_way, other_way = a.favoured & b.rejected, a.rejected & b.favoured
    return set(one_way | other_way) if one_way and other_way else set()


def _against_the_choice(contrast: TextProfile, plain: TextProfile) -> set[str]:
    """Between a text with in-clause markers and a plain text: what the plain text asserts of the
    side passed over (or, negated, denies of the side chosen): "prefers phone" against "prefers
    email over phone". A plain text that names both sides ("prefers email; avoid phone") says
    which it prefers in words this reading does not know: nothing is counted against it."""
    chosen, passed_over = plain.stems & contrast.chosen, plain.stems & contrast.passed_over
    if chosen and passed_over:
        return set()
    return set(chosen if plain.negated else passed_over)


def _contrast_reason(a: TextProfile, b: TextProfile) -> tuple[str | None, set[str]]:
    """The contradiction the contrast structures show, if any, and the words to set aside when
    judging whether the rest is the same claim. Swapped words are shared by both texts, so none
    are set aside (else only the words around them would be left: "only" in "only after the
    review"); a plain claim for the side passed over is set aside like a contradicting value."""
    if a.contrast and b.contrast:
        opposed, masked = _swapped(a, b), set()
    elif a.contrast or b.contrast:
        contrast, plain = (a, b) if a.contrast else (b, a)
        opposed = masked = _against_the_choice(contrast, plain)
    else:
        return None, set()
    if not opposed:
        return None, set()
    return ("negation" if a.negated != b.negated else "order"), masked


def compare(a: TextProfile, b: TextProfile) -> Comparison:
    similarity = soft_jaccard(a.stems, b.stems)
    reasons: list[str] = []
    masked: set[str] = set()

    # Order: the same words on swapped sides ("email over phone" / "phone over email").
    # Negation: one text denies what the other holds; between two contrast texts the sides say
    # it (an odd number of negations may be spent on "not email but phone"), otherwise the count.
    contrast_reason, contrast_words = _contrast_reason(a, b)
    if contrast_reason == "order":
        reasons.append("order")
        masked |= contrast_words
    if contrast_reason == "negation" or (a.negated != b.negated and not (a.contrast and b.contrast)):
        reasons.append("negation")

    names = a.cased | b.cased
    values_a = a.values | (a.words & names)
    values_b = b.values | (b.words & names)
    only_a, only_b = values_a - values_b, values_b - values_a
    if only_a and only_b:
        reasons.append("value")
        masked |= {canonical_stem(v) for v in only_a | only_b} | only_a | only_b
    refinement = bool(only_a) != bool(only_b)

    # Only the lexicon words one side has and the other lacks can make an antonym or exclusive pair.
    lexicon_a, lexicon_b = a.lexicon_stems - b.all_stems, b.lexicon_stems - a.all_stems
    antonyms = {(x, y) for x in lexicon_a for y in lexicon_b if frozenset({x, y}) in ANTONYMS}
    words_a, words_b = a.words - b.words, b.words - a.words
    antonyms |= {(canonical_stem(x), canonical_stem(y)) for x, y in _prefix_negations(words_a, words_b)}
    antonyms |= {(canonical_stem(y), canonical_stem(x)) for x, y in _prefix_negations(words_b, words_a)}
    if antonyms:
        reasons.append("antonym")
        masked |= {word for pair in antonyms for word in pair}
    exclusive = {(x, y) for x in lexicon_a for y in lexicon_b if CLASSES.get(x, frozenset()) & CLASSES.get(y, frozenset())}
    if exclusive:
        reasons.append("exclusive")
        masked |= {word for pair in exclusive for word in pair}

    if not reasons:
        return Comparison(similarity=similarity, contradiction=None, masked_similarity=similarity, refinement=refinement)
    masked_similarity = soft_jaccard(a.stems - masked, b.stems - masked)
    # The most specific reason names the proposal's method.
    reason = next(r for r in ("value", "order", "exclusive", "antonym", "negation") if r in reasons)
    return Comparison(similarity=similarity, contradiction=reason, masked_similarity=masked_similarity, refinement=refinement)
