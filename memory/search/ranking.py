"""Recall's ranking, defined once: BM25 lexical relevance within the hard-filtered scope, plus three
bounded priors (authority, confidence, recency). `score` is the sum of the parts and the rows come
out in that order (ties: lexical relevance, then the most recently confirmed, then the id).

Lexical relevance is Okapi BM25 over the scope (`memory.scope.Scope`: tenant, agent, purpose,
optional subject and kinds) and nothing wider:

    lexical = sum over the distinct query terms t the record contains of
              idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * doclen / avgdl))
    idf(t)  = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

The collection is the scope's active records: N, avgdl and df(t) are kept per scope by the index
(current as of the query), so a word rare for this agent (and subject) weighs more than one that
opens half its memories. A record past its expiry (until the sweep job deletes its entry, whether
or not the expire job has marked it), or outside its valid window, still counts in these
statistics but is never returned. tf is how often the term's stem occurs in the
record, doclen its word count; k1 and b come from the index recipe. Query terms are the recipe's
analysis of the query (stemmed, stop words dropped, each distinct stem once); they reach the
database only as bound parameters inside quoted operands, so no text can make the search invalid.

The priors, each bounded: authority (operator 1.0 ... agent 0.3), confidence (0.5 x the writer's
confidence) and recency (0.5 ** (days since confirmed / 30)). A record that shares no term with
the query can still be returned after the matches, ranked by its priors (and ahead of a match
whose total is lower); a query without usable terms is ranked by the priors alone.

The rows are found without scoring the whole scope: the database's engine
(`memory.engine.<vendor>.ranking`) cuts the scope into disjoint sources, each in rank order and
with the most any of its rows can score, and `merge` opens a source only when the best row in hand
no longer beats its bound. How each database cuts it is said there; the result is the same.
"""

import heapq
import math
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime

from memory.engine import current
from memory.models import Authority
from memory.scope import Scope  # recall's scope; importers of the ranking take it from here too
from memory.search.models import SearchIndex

AUTHORITY_WEIGHT: dict[str, float] = {
    Authority.OPERATOR: 1.0,
    Authority.USER: 0.8,
    Authority.THIRD_PARTY: 0.4,
    Authority.AGENT: 0.3,
}
CONFIDENCE_WEIGHT = 0.5
RECENCY_HALF_LIFE_DAYS = 30.0
RECENCY_MAX = 1.0
PARTS = ("lexical", "authority", "confidence", "recency")
MAX_QUERY_TERMS = 32
WORD = re.compile(r"[^\W_]+")  # a word, as the engines split a query (letters and digits)
# A word counts as common (`common_words`) only in a collection of at least this many records that
# holds it: in a handful of notes, a word in a fifth of them may be the very one asked about.
COMMON_MIN_RECORDS = 20
FIRST_FETCH = 50  # rows a stream reads at first; it reads 4x more each time a consumer goes deeper
# Added to every bound: a score and its bound are sums of the same parts in another order, so in
# floating point a score can come out a few ulps above the bound it equals.
BOUND_SLACK = 1e-9


def idf(n: int, df: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def term_score(weight: float, tf: float, *, k1: float, b: float, doclen: float, avgdl: float) -> float:
    """One term's BM25 part (tf > 0): `weight` (its idf) times the term-frequency part, as the
    engines' SQL computes it (`memory.engine._ranking.tf_part_sql`)."""
    return weight * tf * (k1 + 1) / (tf + k1 * (1 - b + b * doclen / avgdl))


def term_bound(weight: float, max_tf: int | None, *, k1: float, b: float, avgdl: float) -> float:
    """The most one term with idf `weight` can add to a record's lexical score: BM25's term part
    at the highest tf (any tf: k1 + 1) and the shortest record (one word)."""
    if max_tf is None or avgdl <= 0:
        return weight * (k1 + 1)
    return term_score(weight, max_tf, k1=k1, b=b, doclen=1.0, avgdl=avgdl)


def priors(authority: str, confidence: float, confirmed_at: datetime, now: datetime) -> dict[str, float]:
    """The three priors of one record, as the engines' SQL computes them (for rows that come from
    outside the lexical ranking: the semantic index's, as-of recall's)."""
    days = max(0.0, (now - confirmed_at).total_seconds() / 86400.0)
    return {
        "authority": AUTHORITY_WEIGHT.get(authority, 0.0),
        "confidence": CONFIDENCE_WEIGHT * confidence,
        "recency": 0.5 ** (days / RECENCY_HALF_LIFE_DAYS),
    }


def prior_bound(authorities: Iterable[str], max_confidence: float | None) -> float:
    """The most the priors can add for any record of a collection holding these authorities and
    at most this confidence (recency at most RECENCY_MAX)."""
    weights = [AUTHORITY_WEIGHT[a] for a in authorities if a in AUTHORITY_WEIGHT]
    if not weights:
        return BOUND_SLACK
    return max(weights) + CONFIDENCE_WEIGHT * (max_confidence or 0.0) + RECENCY_MAX + BOUND_SLACK


@dataclass(frozen=True)
class Ranked:
    record_id: uuid.UUID
    parts: dict[str, float]
    confirmed: float  # confirmed_at as a POSIX timestamp, for the tie-break
    # how likely the record answers the query, in [0, 1] (`memory.search.rerank`); None: not judged
    relevance: float | None = None

    @property
    def score(self) -> float:
        return sum(self.parts.values())  # PARTS here; with fusion also semantic and fusion

    def sort_key(self) -> tuple:
        return (-self.score, -self.parts["lexical"], -self.confirmed, str(self.record_id))


@dataclass(frozen=True)
class Statistics:
    records: int  # N
    avgdl: float
    prior_bound: float  # the most the priors can add for any record of the scope


@dataclass(frozen=True)
class Term:
    """A query term the scope may contain: its text, its document frequency (None: counted by the
    statement that scores the scope, PostgreSQL's narrowed scopes), and the highest tf it can have
    in a record of the scope (None: unknown)."""

    word: str
    df: int | None
    max_tf: int | None = None


@dataclass(frozen=True)
class Source:
    """Rows in rank order, opened only when needed; `bound` is the most any of them can score."""

    bound: float
    open: Callable[[], Iterator[Ranked]]


def merge(sources: Iterable[Source]) -> Iterator[Ranked]:
    """The rows of all sources in rank order, opening a source only when the best row in hand no
    longer beats its bound. Each record comes from one source."""
    waiting = sorted(sources, key=lambda source: -source.bound)
    heads: list[tuple[tuple, int, Ranked, Iterator[Ranked]]] = []
    opened = 0
    while heads or waiting:
        if waiting and (not heads or heads[0][2].score <= waiting[0].bound):
            rows = waiting.pop(0).open()
            first = next(rows, None)
            if first is not None:
                heapq.heappush(heads, (first.sort_key(), opened, first, rows))
                opened += 1
            continue
        _, order, row, rows = heapq.heappop(heads)
        yield row
        following = next(rows, None)
        if following is not None:
            heapq.heappush(heads, (following.sort_key(), order, following, rows))


# Rows a stream opened now reads at first, when a consumer said (`reading`); else FIRST_FETCH.
_first_fetch: ContextVar[int | None] = ContextVar("first_fetch", default=None)


@contextmanager
def reading(rows: int) -> Iterator[None]:
    """Within: the streams opened read `rows` rows at first (at least FIRST_FETCH), for a consumer
    known to read that many. A statement that scores a common word's records costs about the same
    for 50 rows as for 200 (it scores them all to order them), and was run twice to give 100."""
    token = _first_fetch.set(max(FIRST_FETCH, rows))
    try:
        yield
    finally:
        _first_fetch.reset(token)


def paged(fetch: Callable[[int], list[Ranked]]) -> Iterator[Ranked]:
    """Rows of an ordered query, read FIRST_FETCH at a time (or as many as `reading` says) and 4x
    more whenever the consumer gets past what was read (the query is run again; rows already
    yielded are skipped)."""
    limit, done = _first_fetch.get() or FIRST_FETCH, 0
    while True:
        rows = fetch(limit)
        yield from rows[done:]
        done = len(rows)
        if len(rows) < limit:
            return
        limit *= 4


@dataclass
class Ranking:
    """The scope's records in rank order, fetched lazily as the consumer reads them."""

    index: SearchIndex
    scope: Scope
    analysed: list[tuple[str, str]]  # (term as the index stores it, text that matches it)
    scope_size: int = 0  # records in the scope's collection (N)
    # text that matches a term -> its idf in the scope, once known (a term no record holds has the
    # highest idf the scope allows); the engine reports those it counts while scoring
    idfs: dict[str, float] = field(default_factory=dict)

    @property
    def terms(self) -> list[str]:
        """The query's distinct terms as the index stores them (stems, when the recipe stems)."""
        return [term for term, _ in self.analysed]

    @property
    def query_weight(self) -> float:
        """The most lexical relevance a record can have for this query with each term once (BM25's
        term part is the idf at tf 1 and an average length): the sum of the terms' idf. 0 before
        the rows are read, or for a query without terms."""
        return sum(self.idfs.values())

    def common_words(self, query: str, share: float) -> frozenset[str]:
        """`common_words` of `query` in the scope, once rows have been read."""
        return common_words(self.index, query, analysed=self.analysed, idfs=self.idfs, records=self.scope_size, share=share)

    def __iter__(self) -> Iterator[Ranked]:
        engine = current().ranking
        words = [word for _, word in self.analysed]
        stats, frequencies = engine.collection(self.index, self.scope, words)
        self.scope_size = stats.records
        self.idfs.clear()  # in place: a reader may hold the dict from before the rows were read
        self.idfs.update(
            {word: idf(stats.records, df) for word, (df, _) in zip(words, frequencies, strict=True) if df is not None}
        )
        present = [Term(word, df, max_tf) for word, (df, max_tf) in zip(words, frequencies, strict=True) if df is None or df > 0]
        yield from merge(engine.sources(self.index, self.scope, stats, present, counted=self.idfs.update))


def common_words(
    index: SearchIndex, query: str, *, analysed: Iterable[tuple[str, str]], idfs: Mapping[str, float], records: int, share: float
) -> frozenset[str]:
    """The words of `query` (lower-cased, as WORD splits it) that tell no record of the collection
    from another: each of the terms the index makes of it is in at least `share` of its `records`
    and in at least COMMON_MIN_RECORDS of them (`idfs`: text that matches a term -> its idf, known
    once the rows are read; `analysed`: the query's (term, text) pairs). In a conversation these
    are its speakers' names, which open every turn. Lexical ranking weighs them by their idf; an
    embedding cannot, and in a short turn a name is most of what the model sees, so the semantic
    index is asked without them (`memory.search.semantic.query_text`). Empty when `share` is 0, the
    collection is smaller than COMMON_MIN_RECORDS, or no other word of the query has terms (only
    stop words would be left to embed)."""
    if share <= 0 or records < COMMON_MIN_RECORDS:
        return frozenset()
    ceiling = idf(records, max(COMMON_MIN_RECORDS, math.ceil(share * records)))
    common_texts = {text for text, value in idfs.items() if value <= ceiling}
    if not common_texts:
        return frozenset()
    common_terms = {term for term, text in analysed if text in common_texts}
    words = list(dict.fromkeys(word.lower() for word in WORD.findall(query)))
    analysed_words = [
        (word, terms) for word, terms in zip(words, current().ranking.word_terms(index.recipe, words), strict=True) if terms
    ]
    common = frozenset(word for word, terms in analysed_words if set(terms) <= common_terms)
    # Nothing but stop words would be left ("Who is Maya?"): the query is asked as it is.
    return common if len(common) < len(analysed_words) else frozenset()


def rank(index: SearchIndex, scope: Scope, query: str) -> Ranking:
    return Ranking(index=index, scope=scope, analysed=analyse_query(index, query))


def analyse_query(index: SearchIndex, query: str) -> list[tuple[str, str]]:
    """The query as the index analyses it: its distinct terms in order of appearance (at most
    MAX_QUERY_TERMS), each as (term as stored, text to match it with). Text the database cannot
    hold (NUL, lone surrogates) is treated as a space."""
    text = "".join(" " if ch == "\x00" or "\ud800" <= ch <= "\udfff" else ch for ch in (query or ""))
    if not text.strip():
        return []
    return current().ranking.terms(index.recipe, text)[:MAX_QUERY_TERMS]
