"""A text as the dedup detector compares it (`TextProfile`), computed once per distinct content:
normalised tokens, content stems, values and names, negation, the frame used for blocking, and the
sides of its contrast structures (governance.dedup.contrast)."""

import itertools
import re
import unicodedata
from dataclasses import dataclass

from governance.dedup import lexicon
from governance.dedup.contrast import NO_GAP, NO_STRUCTURE, gap, may_have_structure, read_contrast
from governance.dedup.stems import LEXICON_STEMS, VALUE_WORDS, canonical_stem, frame_stem

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "`": "'", "\u00b4": "'", "\u02bc": "'"})
# All contractions in one pass: one named group per pattern, earlier patterns win ("won't" before "n't").
_CONTRACTION = re.compile(
    "|".join(f"(?P<c{index}>{pattern})" for index, (pattern, _) in enumerate(lexicon.CONTRACTIONS)), re.IGNORECASE
)
_CONTRACTION_REPLACEMENTS = {f"c{index}": repl for index, (_, repl) in enumerate(lexicon.CONTRACTIONS)}
_EMAIL_SPELLING = re.compile(r"\be-mail", re.IGNORECASE)
_TOKEN = re.compile(r"(?P<num>\d+(?:[.,:/]\d+)*)|(?P<word>[^\W\d_]+)|(?P<sym>[%$\u20ac\u00a3\u00a5\u20b9])")
_THOUSANDS = re.compile(r"^\d{1,3}(?:,\d{3})+$")
_ORDINAL_SUFFIXES = frozenset({"st", "nd", "rd", "th"})
_SENTENCE_END = frozenset(".!?\n")


@dataclass(frozen=True)
class TextProfile:
    """What the comparison needs of one text, computed once per distinct content."""

    normalised: str
    words: frozenset[str]  # every normalised token
    stems: frozenset[str]  # content stems: no stopwords, no negations, synonyms folded
    all_stems: frozenset[str]  # canonical stems of every token, stopwords included (for antonyms, classes)
    values: frozenset[str]  # numbers, dates, currencies, time zones
    cased: frozenset[str]  # tokens written like names here (capitalised mid-sentence, ACRONYM, iPhone)
    negated: bool
    frame: frozenset[str]  # stems used for blocking: content stems without values and lexicon words
    lexicon_stems: frozenset[str]  # all_stems that are antonyms or members of an exclusive class
    # Contrast structures (governance.dedup.contrast): whether the text sets alternatives against each other,
    # and if so which content stems it holds true or chosen (favoured) and which denied or passed
    # over (rejected); `chosen` / `passed_over` are the two sides of its in-clause markers alone.
    contrast: bool = False
    favoured: frozenset[str] = frozenset()
    rejected: frozenset[str] = frozenset()
    chosen: frozenset[str] = frozenset()
    passed_over: frozenset[str] = frozenset()


def _is_sentence_initial(text: str, start: int) -> bool:
    position = start - 1
    while position >= 0 and text[position] in " \t\"'([":
        position -= 1
    return position < 0 or text[position] in _SENTENCE_END


def _looks_like_a_name(word: str, text: str, start: int) -> bool:
    if len(word) < 2 or word.islower():
        return False
    if word.isupper():
        return True  # acronym: PDF, USD, AWS
    if any(ch.isupper() for ch in word[1:]):
        return True  # mixed case: iPhone, macOS
    return word[0].isupper() and not _is_sentence_initial(text, start)


def profile(text: str) -> TextProfile:
    # The cheap checks skip work most texts do not need (this runs once per record in the job).
    prepared = (text if text.isascii() else unicodedata.normalize("NFKC", text)).translate(_APOSTROPHES)
    if "-" in prepared:
        prepared = _EMAIL_SPELLING.sub("email", prepared)
    if "'" in prepared or "nnot" in prepared or "NNOT" in prepared:
        # Every alternative of _CONTRACTION is a named group, so a match always has a lastgroup.
        prepared = _CONTRACTION.sub(lambda match: _CONTRACTION_REPLACEMENTS[match.lastgroup or ""], prepared)

    matches = list(_TOKEN.finditer(prepared))
    # Text written in capitals says nothing about names: then case is ignored.
    words = [match.group() for match in matches if match.lastgroup == "word" and len(match.group()) > 1]
    shouting = bool(words) and sum(1 for word in words if word.isupper()) / len(words) > 0.6

    tokens: list[str] = []
    token_matches: list[re.Match] = []
    values: set[str] = set()
    cased: set[str] = set()
    previous_end, previous_kind = -1, None
    for match in matches:
        kind, raw = match.lastgroup, match.group()
        if kind == "num":
            token = raw.replace(",", "") if _THOUSANDS.match(raw) else raw
            values.add(token)
        elif kind == "sym":
            token = raw
            values.add(token)
        else:
            token = raw.casefold()
            if previous_kind == "num" and match.start() == previous_end and token in _ORDINAL_SUFFIXES:
                previous_end = match.end()
                continue  # 5th -> 5
            if token in lexicon.NUMBER_WORDS:
                token = lexicon.NUMBER_WORDS[token]
                values.add(token)
            elif token in VALUE_WORDS or prepared[match.start() - 1 : match.start()] in ("#", "@"):
                values.add(token)  # a date word, a currency, or an identifier: #channel, @handle
            elif not shouting and not raw.islower() and _looks_like_a_name(raw, prepared, match.start()):
                cased.add(token)
        tokens.append(token)
        token_matches.append(match)
        previous_end, previous_kind = match.end(), kind

    structure = NO_STRUCTURE
    if may_have_structure(tokens, prepared):
        gaps = [NO_GAP] + [gap(prepared[before.end() : match.start()]) for before, match in itertools.pairwise(token_matches)]
        structure = read_contrast(tokens, gaps, values, cased)
    # Structure words ("over", "rather than", "before"...) say how the alternatives relate, not
    # what the claim is about: they are read by `read_contrast` and left out of the stems.
    kept = tokens
    negations = sum(1 for token in tokens if token in lexicon.NEGATIONS)
    if structure is not NO_STRUCTURE:
        kept = [token for index, token in enumerate(tokens) if index not in structure.markers]
        negations -= len(structure.uncounted)
    content = [token for token in kept if token not in lexicon.STOPWORDS and token not in lexicon.NEGATIONS]
    stems = frozenset(canonical_stem(token) for token in content)
    all_stems = frozenset(canonical_stem(token) for token in kept)
    frame = (
        frozenset(
            frame_stem(token)
            for token in content
            if token not in values and token not in cased and canonical_stem(token) not in LEXICON_STEMS
        )
        or stems
    )
    return TextProfile(
        normalised=" ".join(tokens),
        words=frozenset(tokens),
        stems=stems,
        all_stems=all_stems,
        values=frozenset(values),
        cased=frozenset(cased),
        negated=negations % 2 == 1,
        frame=frame,
        lexicon_stems=all_stems & LEXICON_STEMS,
        **structure.signed(tokens),
    )
