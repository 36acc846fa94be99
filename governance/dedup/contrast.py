"""Contrast structures: which alternatives a text sets against each other, and which side it takes.

Order changes meaning: "prefers phone over email" and "prefers email over phone" have the same
words. So a text that sets alternatives against each other is read as a signed claim: each
content stem is held true / chosen / done first (+) or denied / passed over / done later (-).
- In-clause markers ("X over Y", "X rather than Y", "X instead of Y", "X more than Y", "prefers X
  to Y", "X before Y", "X then Y"; reversed: "X less than Y", "X after Y"; fronted: "instead of
  Y, X", "before Y, X"): the chosen side keeps the clause's sign, the other side gets the
  opposite. A side is the words between the marker and the clause edge, the next marker or a
  word that starts an adjunct ("for invoices"); on the left it is as many words as the right
  side has (alternatives are parallel phrases) and stops at the verb of choosing ("prefers").
  A marker before a quantity ("over 500 EUR", "before 9 am") compares values, not alternatives.
- Negated alternatives: "X, not Y", "X but not Y", "X and not Y", "wants not X but Y". The
  negation is spent on the contrast and not counted as negating the claim.
- Clauses ("email is fine, but do not call"): each has the sign of its own negations (which deny
  what follows them, not the subject before them); "instead" or a leading "rather" make the
  clause before the rejected one. Commas split clauses only before a negation or "instead", so
  a list after a negation ("no calls, emails or texts") stays one clause.
Two contrast texts contradict when their sides are swapped (each favours something the other
rejects); a contrast text and a plain one when the plain one claims the side passed over
(governance.dedup.comparison).
"""

import re
from dataclasses import dataclass
from typing import Any

from governance.dedup import lexicon
from governance.dedup.stems import canonical_stem

# What separates a token from the one before it.
NO_GAP, COMMA, BREAK = 0, 1, 2
_BREAK_CHARS = frozenset(".;:!?()[]{}\n")
_COMMA_CHARS = frozenset(",\u2013\u2014")


def gap(between: str) -> int:
    """What separates a token from the one before it, given the text between them."""
    if not between or between == " ":
        return NO_GAP
    if any(ch in _BREAK_CHARS for ch in between):
        return BREAK
    if any(ch in _COMMA_CHARS for ch in between) or " - " in between:
        return COMMA
    return NO_GAP


_MARKER_HEADS = frozenset(marker[0] for marker in lexicon.CONTRAST_MARKERS)
_STRUCTURE_WORDS = _MARKER_HEADS | lexicon.CONTRAST_CONJUNCTIONS | lexicon.REPLACING_ADVERBS | lexicon.PREFER_TO_VERBS
_CLAUSE_SPLIT = re.compile(r"[,;:.!?()\[\]{}\n\u2013\u2014]| - ")


def may_have_structure(tokens: list[str], prepared: str) -> bool:
    """A cheap pre-check (this runs for every record): a structure word, or a negation in a text
    of more than one clause."""
    if not _STRUCTURE_WORDS.isdisjoint(tokens):
        return True
    if lexicon.NEGATIONS.isdisjoint(tokens):
        return False
    return bool(_CLAUSE_SPLIT.search(prepared.rstrip(" .!?\n\t\"'"))) or not {"and", "or"}.isdisjoint(tokens)


_OVER_PARTICLES = frozenset(canonical_stem(word) for word in lexicon.OVER_PARTICLE_VERBS)


@dataclass(frozen=True)
class Structure:
    markers: frozenset[int] = frozenset()  # token positions that are structure words
    uncounted: frozenset[int] = frozenset()  # negations spent on a contrast, or "not" in "not only"
    contrast: bool = False
    signs: tuple[tuple[int, int], ...] = ()  # (content token position, +1 / -1) of a contrast text
    chosen: frozenset[int] = frozenset()
    passed_over: frozenset[int] = frozenset()

    def signed(self, tokens: list[str]) -> dict[str, Any]:
        if not self.contrast:
            return {}
        favoured = {canonical_stem(tokens[i]) for i, sign in self.signs if sign > 0}
        rejected = {canonical_stem(tokens[i]) for i, sign in self.signs if sign < 0}
        chosen = {canonical_stem(tokens[i]) for i in self.chosen}
        passed_over = {canonical_stem(tokens[i]) for i in self.passed_over}
        # A stem on both sides ("does not want calls but wants email": "want") takes no side.
        return {
            "contrast": True,
            "favoured": frozenset(favoured - rejected),
            "rejected": frozenset(rejected - favoured),
            "chosen": frozenset(chosen - passed_over),
            "passed_over": frozenset(passed_over - chosen),
        }


NO_STRUCTURE = Structure()


def read_contrast(tokens: list[str], gaps: list[int], values: set[str], cased: set[str]) -> Structure:
    """The contrast structure of one text's tokens (`gaps`: what separates each from the one
    before, see `gap`; `values` and `cased`: its value tokens and the tokens written like names)."""
    return ContrastReader(tokens, gaps, values, cased).read()


class ContrastReader:
    """Reads one text's contrast structure in four phases, each adding to the state below: the
    clauses and what opened each; alternatives set against each other by a negation; clauses
    replaced by "instead"; alternatives set against each other by an in-clause marker. Then each
    content word gets its sign."""

    def __init__(self, tokens: list[str], gaps: list[int], values: set[str], cased: set[str]) -> None:
        self.tokens, self.gaps, self.values, self.cased = tokens, gaps, values, cased
        self.count = len(tokens)
        self.markers: set[int] = set()  # positions of structure words, left out of the stems
        # negations that negate nothing ("not only") or that set two alternatives against each other
        # ("email, not phone"): the sides carry those, the count of negations does not
        self.uncounted: set[int] = {
            i for i in range(self.count - 1) if tokens[i] == "not" and tokens[i + 1] in lexicon.NOT_NEGATING_AFTER_NOT
        }
        self.chosen: set[int] = set()  # positions on the side a contrast holds true, chooses or does first
        self.passed_over: set[int] = set()  # positions on the other side
        self.clauses: list[list[int]] = [[]]  # token positions of each clause
        self.openers: list[str] = ["start"]  # what opened each clause
        self.replaced: set[int] = set()  # clauses rejected by a later "instead"

    def read(self) -> Structure:
        self.split_clauses()
        self.read_negated_alternatives()
        self.read_replaced_clauses()
        self.read_in_clause_markers()
        return self.signed_structure()

    # -- what a token is

    def negation(self, i: int) -> bool:
        return self.tokens[i] in lexicon.NEGATIONS and i not in self.uncounted

    def content(self, i: int) -> bool:
        # a name spelt like a stopword ("US", "IT") is an alternative here
        token = self.tokens[i]
        return (
            (token not in lexicon.STOPWORDS or token in self.cased) and token not in lexicon.NEGATIONS and i not in self.markers
        )

    def side_word(self, i: int) -> bool:
        return self.content(i) and self.tokens[i] not in lexicon.SIDE_FILLERS

    def right_side(self, start: int, upper: int) -> list[int]:
        """The side words from `start` up to `upper` or a word that ends a side."""
        side: list[int] = []
        for i in range(start, upper):
            if self.tokens[i] in lexicon.SIDE_ENDINGS:
                break
            if self.side_word(i):
                side.append(i)
        return side

    def left_side(self, end: int, lower: int, size: int) -> list[int]:
        """The `size` side words nearest before `end`, not before `lower`, not past the verb of choosing."""
        side: list[int] = []
        for i in range(end - 1, lower - 1, -1):
            if len(side) == size or self.tokens[i] in lexicon.CHOICE_VERBS or self.tokens[i] in lexicon.SIDE_ENDINGS:
                break
            if self.side_word(i):
                side.append(i)
        return side[::-1]

    # -- 1. clauses, each with what opened it

    def comma_opens_clause(self, i: int) -> bool:
        tokens, segment = self.tokens, [i]
        while segment[-1] + 1 < self.count and self.gaps[segment[-1] + 1] == NO_GAP:
            segment.append(segment[-1] + 1)
        if any(tokens[j] in lexicon.CLAUSE_NEGATIONS and self.negation(j) for j in segment[:3]):
            return True
        return any(tokens[j] == "instead" and (j + 1 >= self.count or tokens[j + 1] != "of") for j in segment)

    def split_clauses(self) -> None:
        tokens, clauses, openers = self.tokens, self.clauses, self.openers
        for i, token in enumerate(tokens):
            opener = None
            if token in lexicon.CONTRAST_CONJUNCTIONS:
                self.markers.add(i)
                clauses.append([])
                openers.append(token)
                continue
            if self.gaps[i] == BREAK:
                opener = "break"
            elif self.gaps[i] == COMMA and self.comma_opens_clause(i):
                opener = "comma"
            elif (
                token in ("and", "or")
                and i + 1 < self.count
                and tokens[i + 1] in lexicon.CLAUSE_NEGATIONS
                and self.negation(i + 1)
            ):
                opener = "and"
            if opener and clauses[-1]:
                clauses.append([])
                openers.append(opener)
            clauses[-1].append(i)
        kept = [number for number, clause in enumerate(clauses) if clause]
        self.clauses, self.openers = [clauses[n] for n in kept], [openers[n] for n in kept]

    # -- 2. alternatives set against each other by a negation: "X, not Y", "X but not Y", "X and
    # not Y" (the negated clause is Y alone, its parallel is the end of the clause before) and
    # "not X but Y" (X runs from the negation to "but", its parallel opens the next clause)

    def read_negated_alternatives(self) -> None:
        tokens, clauses, openers = self.tokens, self.clauses, self.openers
        for number, clause in enumerate(clauses):
            head = clause[0]
            if number and openers[number] != "break" and tokens[head] in lexicon.CLAUSE_NEGATIONS and self.negation(head):
                right = self.right_side(head + 1, clause[-1] + 1)
                left = self.left_side(clauses[number - 1][-1] + 1, clauses[number - 1][0], len(right))
                if right and left:
                    self.uncounted.add(head)
                    self.chosen.update(left)
                    self.passed_over.update(right)
            elif number + 1 < len(clauses) and openers[number + 1] == "but":
                negated_at = next(
                    (
                        i
                        for i in clause
                        if tokens[i] in lexicon.CLAUSE_NEGATIONS
                        and self.negation(i)
                        and (i == head or (tokens[i - 1] not in lexicon.STOPWORDS and tokens[i - 1] not in lexicon.NEGATIONS))
                    ),
                    None,
                )  # "wants not X but Y", not "does not want X but Y"
                if negated_at is not None:
                    passed = self.right_side(negated_at + 1, clause[-1] + 1)
                    parallel = [i for i in clauses[number + 1] if self.side_word(i)][: len(passed)]
                    if passed and parallel:
                        self.uncounted.add(negated_at)
                        self.chosen.update(parallel)
                        self.passed_over.update(passed)

    # -- 3. "instead" / a leading "rather" (not "instead of", "rather than"): the clause before is
    # the one rejected

    def read_replaced_clauses(self) -> None:
        tokens = self.tokens
        for number, clause in enumerate(self.clauses):
            for position, i in enumerate(clause):
                next_token = tokens[i + 1] if i + 1 < self.count else None
                if (tokens[i] == "instead" and next_token != "of") or (
                    tokens[i] == "rather" and position == 0 and next_token != "than"
                ):
                    self.markers.add(i)
                    if number:
                        self.replaced.add(number - 1)

    # -- 4. in-clause markers: "X over Y", "X rather than Y", "X before Y", fronted "instead of Y, X"

    def read_in_clause_markers(self) -> None:
        tokens = self.tokens
        for clause in self.clauses:
            found = self.clause_markers(clause)
            for number, (start, end, reversed_marker) in enumerate(found):
                lower = found[number - 1][1] if number else clause[0]
                upper = found[number + 1][0] if number + 1 < len(found) else clause[-1] + 1
                right = self.right_side(end, upper)
                if not right:
                    continue
                left = self.left_side(start, lower, len(right))
                if tokens[right[0]] in self.values and not any(tokens[i] in self.values for i in left):
                    continue  # "over 500 EUR", "before 9 am": a quantity, not an alternative
                if left:
                    main, phrase = left, right
                else:
                    # fronted: "instead of Y, X" / "before Y, X": the phrase runs to the comma
                    comma = next((i for i in range(end + 1, upper) if self.gaps[i] != NO_GAP), None)
                    phrase = [i for i in right if comma is not None and i < comma]
                    main = [i for i in right if comma is not None and i >= comma]
                    if not phrase or not main:
                        continue
                first, second = (phrase, main) if reversed_marker else (main, phrase)
                self.markers.update(range(start, end))
                self.chosen.update(first)
                self.passed_over.update(second)

    def clause_markers(self, clause: list[int]) -> list[tuple[int, int, bool]]:
        """(start, end, reversed) of each in-clause contrast marker, left to right."""
        tokens = self.tokens
        found: list[tuple[int, int, bool]] = []
        last = clause[-1]
        i = clause[0]
        prefer_at = None
        while i <= last:
            token = tokens[i]
            if token in lexicon.PREFER_TO_VERBS and prefer_at is None:
                prefer_at = i
            match = None
            if token in _MARKER_HEADS:
                for marker in lexicon.CONTRAST_MARKERS:
                    end = i + len(marker)
                    if end - 1 <= last and tuple(tokens[i:end]) == marker:
                        match = (i, end, marker in lexicon.REVERSED_MARKERS)
                        break
            elif (
                token == "to"
                and prefer_at is not None
                and i > prefer_at + 1
                and not any(start <= i < end for start, end, _ in found)
                and i < last
                and tokens[i + 1] not in lexicon.INFINITIVE_VERBS
            ):
                match = (i, i + 1, False)
                prefer_at = len(tokens)  # only the first "to" after "prefers"
            if match is not None and self.sets_alternatives(clause, match[0], match[1]):
                start, end, reversed_marker = match
                if tokens[start] == "than" and any(
                    tokens[j] in lexicon.LESSER_COMPARATIVES for j in range(max(clause[0], start - 3), start)
                ):
                    reversed_marker = True  # "less often than"
                found.append((start, end, reversed_marker))
                i = end
                continue
            i += 1
        return found

    def sets_alternatives(self, clause: list[int], start: int, end: int) -> bool:
        """Whether a marker word sets alternatives against each other here (the side checks that
        need the sides themselves, such as "over 500 EUR", are made in `read_in_clause_markers`)."""
        tokens = self.tokens
        head = tokens[start]
        previous = tokens[start - 1] if start > clause[0] else None
        following = next(
            (tokens[i] for i in range(end, clause[-1] + 1) if tokens[i] not in lexicon.STOPWORDS or tokens[i] in self.cased),
            None,
        )
        if following is None:
            return False
        if head == "over" and end - start == 1:
            if previous is not None and previous not in self.cased and canonical_stem(previous) in _OVER_PARTICLES:
                return False  # "took over", "handed over"
            if following in lexicon.TIME_SPANS:
                return False  # "over the weekend"
        return not (head == "then" and previous in lexicon.NOT_A_SEQUENCE_BEFORE_THEN)  # "since then", "by then"

    # -- the signs

    def signed_structure(self) -> Structure:
        """A clause is denied if it has an odd number of negations, or is rejected by "instead".
        Each content word's sign: a negation denies what follows it in its clause, not what comes
        before ("Omar | does not want calls"); a clause replaced by "instead" is denied as a whole
        unless it already is; the side passed over takes the opposite of its clause's sign."""
        clauses, replaced = self.clauses, self.replaced
        denied = [
            sum(1 for i in clause if self.negation(i)) % 2 == 1 or number in replaced for number, clause in enumerate(clauses)
        ]
        if not (self.chosen or replaced or len(set(denied)) > 1):
            return Structure(markers=frozenset(self.markers), uncounted=frozenset(self.uncounted))
        signed: list[tuple[int, int]] = []
        for number, clause in enumerate(clauses):
            sign = -1 if number in replaced and not sum(1 for i in clause if self.negation(i)) % 2 else 1
            for i in clause:
                if self.negation(i):
                    sign = -sign
                elif self.content(i):
                    signed.append((i, -sign if i in self.passed_over else sign))
        return Structure(
            markers=frozenset(self.markers),
            uncounted=frozenset(self.uncounted),
            contrast=True,
            signs=tuple(signed),
            chosen=frozenset(self.chosen),
            passed_over=frozenset(self.passed_over),
        )
