"""Recall's second stage: the first stage's best rows re-ranked with what one record's words alone
cannot say, and each judged for how likely it is to answer the query.

The first stage is the lexical ranking (`memory.search.ranking`), fused with the semantic index
when one serves (`memory.search.fusion`). The second stage takes its first `rerank_depth` rows (the
recipe's; `memory.search.recipes`), or the whole fused pool when that is larger (the first stage
has read and scored it already), and:

1. **Neighbours.** Records written from one conversation carry its session (provenance
   `session_id`); within one subject and session they are ordered by when they were observed
   (`observed_at`, else when they were written), then when they were written (`created_at`), then
   their turn id in natural order (a shorter id first, so `t9` comes before `t10`), then their id.
   Any records ordered that way form a sequence: a conversation's turns, a document's chunks, a
   tool's successive outputs, as long as the writer gives them a session. A record gains from a
   neighbour that matches more strongly than itself, within `neighbour_window` places of it:
   `neighbour` = `neighbour_weight` x the largest (neighbour's match - its own match) / distance,
   where a row's *match* is its score without the priors and this stage's other parts (BM25;
   fused: BM25 and cosine on the query's scale, 4. below). So the reply to the turn that shares the question's words rises towards it, and
   the best matches themselves are not moved by weaker records around them. Neighbours that are
   not candidates join the pool (their match: their cosine, no lexical share), so a reply that
   shares no word with the question can be returned. They are read in two queries over the
   hard-filtered scope (`ScopedRecords`), never beyond it, together with the candidates' own facts:
   a record out of scope, expired, not valid now or not active is nobody's neighbour.
2. **Time.** The dates and periods the query names (`memory.search.periods.named_periods`,
   relative to the recall's now) are a soft preference: `time` = `time_weight` x a full match (the
   query's weight, the most BM25 a record can have for it; fused: the fusion's WEIGHT) x closeness,
   where closeness is 1 for a record observed in a period (observed_at, else written then) or valid
   during it (a valid_from or valid_to that overlaps it) and halves with each period's width further
   away (nothing beyond about seven widths). With `strip_periods` the date words also leave the
   lexical query.
3. **Brevity.** A turn of a sequence says less the shorter it is: in a conversation the short
   turns are mostly acknowledgements ("Wow, nice!", "Same here.") that match a question through a
   speaker's name or one word. `brevity` = -`brevity_weight` x a full match x (1 - log(1 + length)
   / log(1 + BREVITY_CHARS)), nothing from BREVITY_CHARS characters on, and only for episodic
   records in a sequence (TURN_KINDS): a preference or a fact is distilled, and a note outside a
   sequence is as long as it needs to be.
4. **The query's scale (hybrid).** The first stage fuses BM25 scaled by the pool's best: where
   nothing matches more of the question than a speaker's name, a name-only match counts as a full
   lexical match there. The stage puts each fused row on the query's scale instead: WEIGHT x (ALPHA
   x coverage + (1 - ALPHA) x cosine), the cosine as it is (`fusion` takes the difference, so
   `score` stays the sum of the parts).
5. **Relevance.** Each row's `relevance` in [0, 1]: a logistic function (the recipe's `relevance`
   for the mode, lexical or hybrid) of query-normalised features, so that it reads alike across the
   queries of one index: `coverage` (the row's BM25 over the most BM25 the query allows, i.e. the
   share of the query's idf weight it matches, with a named period counted as one more term a record
   observed then matches), `cosine` (hybrid only) and `neighbour` (the best neighbour's own
   relevance over its distance). Not brevity: it orders turns that match alike, but a short turn
   can be the answer ("Yes, last May."), and a floor must not drop it for its length. A query
   without terms or periods judges nothing: every row is 1. Recall leaves out rows under its floor
   (`min_relevance`) and counts them; when no row the stage could return can reach the floor
   whatever the records say (`_all_under_floor`), the records are not read.

`score_parts` gain `neighbour`, `time` and `brevity` where they add something; `score` stays their
sum. The rows come out in score order (ties: match, the most recently confirmed, the id), the first
stage's later rows after them.
"""

from __future__ import annotations

import math
import uuid
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from itertools import islice
from typing import Any, Protocol

from django.db.models import Q, QuerySet
from django.db.models.functions import Length

from memory.engine import current
from memory.models import MemoryRecord
from memory.search.fusion import ALPHA, WEIGHT, Fusion
from memory.search.periods import Period
from memory.search.ranking import Ranked, priors
from memory.search.recipes import second_stage

PRIORS = ("authority", "confidence", "recency")
ADDED = ("neighbour", "time", "brevity")  # the parts this stage adds
MODES = ("lexical", "hybrid")
CLOSENESS_MIN = 0.01  # closer than about seven widths of the period, or nothing
BREVITY_CHARS = 200  # a turn this long (about two sentences) or longer says enough to lose nothing
TURN_KINDS = frozenset({"episodic"})  # records of what was said or done, as it happened (a turn, an event)


# --------------------------------------------------------------------------------------------
# what the stage reads of the records


@dataclass(frozen=True)
class Facts:
    """What the second stage reads of a record besides its score: its place in a sequence (`group`
    (subject, session), None outside one; `position` within it, in this read), its times, and the
    priors' fields."""

    record_id: uuid.UUID
    group: tuple[str, str] | None
    position: int
    observed: datetime  # observed_at, else created_at
    valid_from: datetime | None
    valid_to: datetime | None
    authority: str
    confidence: float
    confirmed_at: datetime
    kind: str = ""  # the kind's name
    length: int = 0  # characters of content


class Records(Protocol):
    """Where the stage reads facts: the hard-filtered scope, and nothing beyond it."""

    def around(self, ids: Collection[uuid.UUID], window: int) -> list[Facts]:
        """Those of `ids` in the scope, and the records of the scope within `window` places of one
        of them in its sequence, with their positions (0 outside a sequence)."""
        ...


FIELDS = (
    "id",
    "subject",
    "session_id",
    "observed_at",
    "created_at",
    "valid_from",
    "valid_to",
    "authority",
    "confidence",
    "confirmed_at",
)


def _aware(value: Any) -> Any:
    return value.replace(tzinfo=UTC) if isinstance(value, datetime) and value.tzinfo is None else value


def _facts(row: Sequence[Any], position: int = 0) -> Facts:
    pk, subject, session, observed_at, created_at, valid_from, valid_to, authority, confidence, confirmed_at, kind, length = row[
        :12
    ]
    return Facts(
        record_id=pk,
        group=(subject, session) if session else None,
        position=position,
        observed=_aware(observed_at or created_at),
        valid_from=_aware(valid_from),
        valid_to=_aware(valid_to),
        authority=authority,
        confidence=float(confidence),
        confirmed_at=_aware(confirmed_at),
        kind=kind or "",
        length=int(length or 0),
    )


class ScopedRecords:
    """`Records` over the hard-filtered queryset recall loads its items from: two queries for the
    candidates' facts and their neighbours (a window over the candidates' sequences)."""

    def __init__(self, records: QuerySet[MemoryRecord], *, owner: Q | None = None) -> None:
        # `owner` bounds the first read (which sequences the candidates are in, by id alone); the
        # second reads `records` only, so what comes back is always in their scope.
        self.records = records.order_by().annotate(content_length=Length("content"))
        self.owned = records.model.objects.filter(owner or Q()).order_by()

    def around(self, ids: Collection[uuid.UUID], window: int) -> list[Facts]:
        if not ids:
            return []
        ids = list(ids)
        # Two reads. First each candidate's sequence (subject and session) by its id alone (the
        # second read applies the scope), then the scope's records of those sequences, which the
        # engine reads one sequence at a time (PostgreSQL through the sequence index,
        # memory_sequence_idx: one descent per sequence) rather than through a subject's or the
        # whole scope's records (`memory.engine.<vendor>.ranking.sequence_window`). The window
        # marks each row within `window` places of a candidate, and only those rows come back.
        # Candidates outside a sequence come back too (their facts, in the same read): each is
        # alone in its window, the partition of the subject's records without a session being only
        # the candidates among them.
        placed = list(self.owned.filter(pk__in=ids).values_list("pk", "subject", "session_id"))
        sequences = sorted({(subject, session) for _, subject, session in placed if session})
        lone = [pk for pk, _, session in placed if not session]
        rows = current().ranking.sequence_window(
            self.records, [*FIELDS, "kind__name", "content_length"], ids=ids, sequences=sequences, lone=lone, window=window
        )
        return [_facts(row, int(row[-1]) if row[2] else 0) for row in rows]


def _natural(turn: str) -> tuple:
    return (len(turn), turn)


class ListedRecords:
    """`Records` over records already in memory (as-of recall's reconstruction, tests): anything
    with the fields of FIELDS and `turn_id`, all of them in the scope."""

    def __init__(self, records: Iterable[Any]) -> None:
        self.by_id: dict[uuid.UUID, Any] = {record.id: record for record in records}
        sequences: dict[tuple[str, str], list[Any]] = defaultdict(list)
        for record in self.by_id.values():
            if record.session_id:
                sequences[(record.subject, record.session_id)].append(record)
        self.places: dict[uuid.UUID, tuple[tuple[str, str], int]] = {}
        self.sequences: dict[tuple[str, str], list[Any]] = {}
        for group, members in sequences.items():
            members.sort(
                key=lambda r: (_aware(r.observed_at or r.created_at), _aware(r.created_at), *_natural(r.turn_id), str(r.id))
            )
            self.sequences[group] = members
            for place, record in enumerate(members, start=1):
                self.places[record.id] = (group, place)

    def _row(self, record: Any, place: int = 0) -> Facts:
        kind = getattr(getattr(record, "kind", None), "name", "")  # (loaded with the record: select_related)
        return _facts([*(getattr(record, name) for name in FIELDS), kind, len(getattr(record, "content", "") or "")], place)

    def around(self, ids: Collection[uuid.UUID], window: int) -> list[Facts]:
        found: dict[uuid.UUID, Facts] = {}
        for pk in ids:
            if pk in self.by_id and pk not in self.places:  # outside a sequence: itself alone
                found.setdefault(pk, self._row(self.by_id[pk]))
            if pk not in self.places:
                continue
            group, place = self.places[pk]
            members = self.sequences[group]
            for at in range(max(1, place - window), min(len(members), place + window) + 1):
                record = members[at - 1]
                found.setdefault(record.id, self._row(record, at))
        return list(found.values())


# --------------------------------------------------------------------------------------------
# the settings and the query


@dataclass(frozen=True)
class Settings:
    """The second stage's part of an index recipe (`memory.search.recipes.second_stage`)."""

    depth: int
    neighbour_window: int
    neighbour_weight: float
    time_weight: float
    brevity_weight: float
    strip_periods: bool
    common_share: float  # the semantic query leaves out words this common in the scope (`semantic_common_share`)
    min_relevance: Mapping[str, float]  # the default floor per mode
    relevance: Mapping[str, Mapping[str, float]]

    @classmethod
    def of(cls, recipe: Mapping[str, Any]) -> Settings:
        found = second_stage(dict(recipe))
        return cls(
            depth=int(found["rerank_depth"]),
            neighbour_window=int(found["neighbour_window"]),
            neighbour_weight=float(found["neighbour_weight"]),
            time_weight=float(found["time_weight"]),
            brevity_weight=float(found["brevity_weight"]),
            strip_periods=bool(found["strip_periods"]),
            common_share=float(found["semantic_common_share"]),
            min_relevance=_floors(found["min_relevance"]),
            relevance=found["relevance"],
        )


def _floors(given: Any) -> dict[str, float]:
    if isinstance(given, Mapping):
        return {mode: float(given.get(mode, 0.0)) for mode in MODES}
    return dict.fromkeys(MODES, float(given))


@dataclass(frozen=True)
class Query:
    """What the stage knows of the query: its terms' idf in the scope (`Ranking.idfs`), the periods
    it names, and whether a semantic index was fused in."""

    idfs: Mapping[str, float]
    periods: Sequence[Period] = ()
    mode: str = "lexical"

    @property
    def weight(self) -> float:
        return sum(self.idfs.values())

    @property
    def period_weight(self) -> float:
        """What a named period counts for in `coverage`: as much as the query's most specific term
        (1 for a query of dates only)."""
        if not self.periods:
            return 0.0
        return max(self.idfs.values(), default=0.0) or 1.0

    @property
    def judged(self) -> bool:
        return self.weight > 0 or bool(self.periods)


# --------------------------------------------------------------------------------------------
# the features


def match(row: Ranked) -> float:
    """A row's score without the priors and this stage's parts: its BM25, or its fused relevance."""
    return sum(value for name, value in row.parts.items() if name not in PRIORS and name not in ADDED)


def closeness(facts: Facts | None, periods: Sequence[Period]) -> float:
    """1 for a record observed in one of the periods or valid during one, halving with each width
    of the period it is away from it; 0 without periods or facts."""
    if facts is None or not periods:
        return 0.0
    best = 0.0
    for period in periods:
        if facts.valid_from is not None or facts.valid_to is not None:
            starts_before_end = facts.valid_from is None or facts.valid_from < period.end
            ends_after_start = facts.valid_to is None or facts.valid_to > period.start
            if starts_before_end and ends_after_start:
                return 1.0
        observed = facts.observed
        if period.start.tzinfo is None:  # periods are naive only for a naive now
            observed = observed.replace(tzinfo=None)
        if period.start <= observed < period.end:
            return 1.0
        width = (period.end - period.start).total_seconds()
        away = (period.start - observed if observed < period.start else observed - period.end).total_seconds()
        best = max(best, 0.5 ** (away / width))
    return best if best >= CLOSENESS_MIN else 0.0


def _logistic(value: float) -> float:
    if value < -60:
        return 0.0
    return 1.0 / (1.0 + math.exp(-value))


def coverage(row: Ranked, query: Query, near: float = 0.0) -> float:
    """The share of the query's weight the row matches (its BM25 over the query's; a named period
    counts as one more term, matched by `near`, the row's closeness), in [0, 1]."""
    total = query.weight + query.period_weight
    if total <= 0:
        return 0.0
    return max(0.0, min(1.0, (row.parts.get("lexical", 0.0) + near * query.period_weight) / total))


def own_logit(row: Ranked, query: Query, coefficients: Mapping[str, float], near: float = 0.0) -> float:
    """The relevance logit from the row's own features (coverage; cosine when fused)."""
    value = coefficients.get("bias", 0.0) + coefficients.get("coverage", 0.0) * coverage(row, query, near)
    if query.mode == "hybrid":
        value += coefficients.get("cosine", 0.0) * row.parts.get("semantic", 0.0)
    return value


def brevity(facts: Facts | None) -> float:
    """How short a turn of a sequence is, in [0, 1): 1 - log(1 + its length) / log(1 + BREVITY_CHARS),
    0 at BREVITY_CHARS characters and beyond. Only for the records of a sequence of a kind that
    records what was said as it was said (TURN_KINDS): a distilled memory (a preference, a fact) or a
    note outside a sequence is as long as it needs to be, and an unknown record loses nothing."""
    if facts is None or facts.group is None or facts.kind not in TURN_KINDS:
        return 0.0
    return max(0.0, 1.0 - math.log1p(facts.length) / math.log1p(BREVITY_CHARS))


def on_query_scale(row: Ranked, query: Query) -> Ranked:
    """A fused row with its fused relevance put on the query's scale: WEIGHT x (ALPHA x coverage +
    (1 - ALPHA) x cosine), `fusion` taking the difference from BM25 and cosine. The first stage
    scales BM25 by the pool's best, so where nothing matches more of the question than a speaker's
    name, a name-only match counts as a full lexical match; here it counts for the share of the
    question it matches, and the cosine for itself (not min-max scaled over the pool)."""
    lexical, cosine = row.parts.get("lexical", 0.0), row.parts.get("semantic", 0.0)
    share = max(0.0, min(1.0, lexical / query.weight)) if query.weight > 0 else 0.0
    fused = WEIGHT * (ALPHA * share + (1 - ALPHA) * cosine)
    return replace(row, parts={**row.parts, "fusion": fused - lexical - cosine})


# --------------------------------------------------------------------------------------------
# the stage


def _neighbours(placed: list[Facts], window: int) -> dict[uuid.UUID, list[tuple[uuid.UUID, int]]]:
    """record id -> [(neighbour id, distance)] within `window` places in the read sequences."""
    by_group: dict[tuple[str, str], list[Facts]] = defaultdict(list)
    for facts in placed:
        if facts.group is not None:
            by_group[facts.group].append(facts)
    found: dict[uuid.UUID, list[tuple[uuid.UUID, int]]] = defaultdict(list)
    for members in by_group.values():
        members.sort(key=lambda f: f.position)
        for i, facts in enumerate(members):
            for other in members[i + 1 :]:
                distance = other.position - facts.position
                if distance > window:
                    break
                found[facts.record_id].append((other.record_id, distance))
                found[other.record_id].append((facts.record_id, distance))
    return found


def rerank(
    rows: Iterator[Ranked],
    *,
    settings: Settings,
    query: Query,
    records: Records,
    now: datetime,
    fusion: Fusion | None = None,
    floor: float = 0.0,
    scan: int | None = None,
    observe: Callable[[Ranked, dict[str, float]], None] | None = None,
) -> Iterator[Ranked]:
    """The first stage's `rows` re-ranked (the first `settings.depth`, or the fused pool, and their neighbours), each
    with `neighbour`, `time` and `relevance`; then the first stage's later rows as they come, judged
    on their own features, up to the first whose relevance is under `floor` (they are weaker than
    every re-ranked row, and the rows after it weaker still). `scan`: the most rows the consumer
    examines (None: unknown); when it examines no more than the head and nothing the reads could
    add or change can pass the floor (`_all_under_floor`), the records are not read. `observe`
    (the tuning script's) is given each re-ranked row with its relevance features."""
    head = list(islice(rows, settings.depth))
    if fusion is not None and fusion.size > len(head):  # the whole fused pool: the first stage read it anyway
        head += islice(rows, fusion.size - len(head))
    coefficients = settings.relevance.get(query.mode) or settings.relevance.get("lexical") or {}
    nb_coefficient = coefficients.get("neighbour", 0.0)
    pool: dict[uuid.UUID, Ranked] = {row.record_id: row for row in head}
    facts: dict[uuid.UUID, Facts] = {}
    links: dict[uuid.UUID, list[tuple[uuid.UUID, int]]] = {}
    window = settings.neighbour_window if settings.neighbour_weight > 0 or nb_coefficient else 0
    read = bool(head) and (window > 0 or settings.brevity_weight > 0 or bool(query.periods))
    if read and observe is None and fusion is None and scan is not None and len(head) >= scan:
        read = not _all_under_floor(head, query, coefficients, floor)
    if read:
        placed = records.around(list(pool), window)  # the candidates' facts come with their neighbours
        links = _neighbours(placed, window)
        outside = [found.record_id for found in placed if found.record_id not in pool]
        if fusion is not None and outside:  # their cosines in one read, not one each
            fusion.similarity.prefetch(outside)
        for found in placed:
            facts[found.record_id] = found
            if found.record_id not in pool:
                pool[found.record_id] = _outside_row(found, now=now, fusion=fusion)
    if fusion is not None:
        pool = {pk: on_query_scale(row, query) for pk, row in pool.items()}
    full = WEIGHT if fusion is not None else (query.weight or 1.0)
    near = {pk: closeness(facts.get(pk), query.periods) for pk in pool}
    short = {pk: brevity(facts.get(pk)) for pk in pool}
    logits = {pk: own_logit(row, query, coefficients, near[pk]) for pk, row in pool.items()}
    own = {pk: _logistic(logit) for pk, logit in logits.items()}
    matched = {pk: match(row) for pk, row in pool.items()}  # (the parts added below are not in it)
    reranked = []
    for pk, row in pool.items():
        gain, support, mine = 0.0, 0.0, matched[pk]
        for other, distance in links.get(pk, ()):
            gain = max(gain, (matched[other] - mine) / distance)
            support = max(support, own[other] / distance)
        added = {
            "neighbour": settings.neighbour_weight * gain,
            "time": settings.time_weight * full * near[pk],
            "brevity": -settings.brevity_weight * full * short[pk],
        }
        parts = {name: value for name, value in added.items() if value}
        relevance = _logistic(logits[pk] + nb_coefficient * support) if query.judged else 1.0
        if observe is not None:
            cosine = row.parts.get("semantic", 0.0) if query.mode == "hybrid" else 0.0
            features = {"coverage": coverage(row, query, near[pk]), "cosine": cosine, "neighbour": support, "time": near[pk]}
            observe(row, {**features, "brevity": short[pk]})
        reranked.append(replace(row, parts={**row.parts, **parts}, relevance=relevance))
    reranked.sort(key=lambda row: (-row.score, -matched[row.record_id], -row.confirmed, str(row.record_id)))
    yield from reranked
    for row in rows:
        if row.record_id in pool:
            continue
        relevance = _logistic(own_logit(row, query, coefficients)) if query.judged else 1.0
        yield replace(row, relevance=relevance)
        if relevance < floor:
            return


def _all_under_floor(head: list[Ranked], query: Query, coefficients: Mapping[str, float], floor: float) -> bool:
    """Whether every row the stage could return from `head` (lexical mode) is under `floor`
    whatever the records say: the query is judged and names no period (closeness would add to
    coverage), and neither a head row nor a neighbour outside it (no lexical share: the bias alone)
    reaches the floor even with the most support a neighbour could lend it (the best own relevance
    among them, at distance 1). Scores may change with the reads; which rows are under the floor
    cannot, and a consumer that examines no more than the head (`rerank`'s `scan`) skips and counts
    the same rows either way."""
    if floor <= 0 or not query.judged or query.periods:
        return False
    logits = [coefficients.get("bias", 0.0), *(own_logit(row, query, coefficients) for row in head)]
    lift = max(coefficients.get("neighbour", 0.0), 0.0) * _logistic(max(logits))
    return all(_logistic(logit + lift) < floor for logit in logits)


def _outside_row(found: Facts, *, now: datetime, fusion: Fusion | None) -> Ranked:
    """A neighbour the first stage did not rank this far: no lexical share (it is past the rows
    read), its cosine when fused (put on the query's scale with the rest of the pool)."""
    prior = priors(found.authority, found.confidence, found.confirmed_at, now)
    confirmed = found.confirmed_at.timestamp()
    if fusion is not None:
        return fusion.fused_row(found.record_id, 0.0, prior, confirmed)
    return Ranked(record_id=found.record_id, parts={"lexical": 0.0, **prior}, confirmed=confirmed)


def above_floor(relevance: float | None, floor: float) -> bool:
    """Whether a row's relevance passes the floor (a row not judged always does)."""
    return relevance is None or relevance >= floor
