"""Recall's ranking, defined once: BM25 lexical relevance within the hard-filtered scope, plus three
bounded priors (authority, confidence, recency). `score` is the sum of the parts and the rows come
out in that order (ties: lexical relevance, then the most recently confirmed, then the id).

Lexical relevance is Okapi BM25 over the scope (tenant, agent, purpose, optional subject and kinds)
and nothing wider:

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

How the rows are found without scoring the whole scope:
- PostgreSQL: N, avgdl and the priors' bound come from the index's statistics table; across a
  purpose, df(t) and the highest tf of each term from its terms table (a lookup). A term's bound
  is its BM25 part at that highest tf. Within a subject or kinds of at most NARROW_COUNTED
  records, one statement reads the records holding any of the words, counts each word's df among
  them and scores them (every record, in a scope of at most SMALL_SCOPE); the rest are
  walked by their priors only if one of them could still come first. Otherwise (a purpose, or a
  larger narrowed scope, whose df are GIN counts) the scope is cut into disjoint sources, each
  with the most any of its records can score, and a source is read only when the best row in hand
  no longer beats its bound (threshold algorithm):
  - the records holding two or more of the rarer query terms: one source per combination of
    them, or one statement for all when few such records are expected (terms independent);
  - the records holding at most one of them: one walk, newest-confirmed first, each row scored on
    every word and yielded once no unread one can beat it; given up, where it stopped, for each
    rarer term's records scored whole (and the none-of-them records walked on) once it has read
    WALK_SHARE of what that would read, or once its best row cannot beat its bound;
  - with more rarer terms than SUBSET_TERMS: one source per term, rarest first (MaxScore), and
    the records holding none of them walked.
  A term in COMMON_SHARE of the scope or more only adds to the bounds (its idf is low). So four
  words that each open a sixth of the scope are settled by the few records holding all four, a
  rare word by its own records, and recent records holding one common-ish word by a page of the
  walk. The result is exact; only the amount of work depends on the data.
- SQLite (the embedded default, smaller): every matching record is scored in one statement (FTS5
  matches per term within the scope's tokens; tf counted from `highlight()`), and the rest ranked
  by their priors in another.
"""

import heapq
import json
import math
import os
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import combinations

from django.db import connection

from memory.models import Authority
from memory.search import storage
from memory.search.models import SearchIndex
from memory.search.recipes import ANALYSERS, stop_words

AUTHORITY_WEIGHT = {Authority.OPERATOR: 1.0, Authority.USER: 0.8, Authority.THIRD_PARTY: 0.4, Authority.AGENT: 0.3}
CONFIDENCE_WEIGHT = 0.5
RECENCY_HALF_LIFE_DAYS = 30.0
RECENCY_MAX = 1.0
PARTS = ("lexical", "authority", "confidence", "recency")
MAX_QUERY_TERMS = 32
FIRST_FETCH = 50  # rows a stream reads at first; it reads 4x more each time a consumer goes deeper
COMMON_SHARE = 0.25  # PostgreSQL: a term in this share of the scope's records is scored by the walk by priors
SMALL_SCOPE = 500  # PostgreSQL: a scope this small is scored whole, in one statement
SUBSET_TERMS = 6  # PostgreSQL: up to this many rarer terms, one source per combination of them (else per term)
WALK_SHARE = 0.25  # PostgreSQL: the walk of the one-term sets reads at most this share of their records
SEVERAL_WHOLE = (
    5000  # PostgreSQL: records expected (terms independent) to hold two rarer terms, at most, to find them in one statement
)
NARROW_COUNTED = 20_000  # PostgreSQL: a subject or kinds scope this small counts df where it scores
# PostgreSQL: what the statements read of an index row: every column but the tsvector, which only
# the GIN index needs (carried through the counted statement's materialized scan of a subject's
# 4,449 matching rows, it cost about 7 of 22 ms).
SCORED_COLUMNS = ", ".join(column for column in storage.PG_COLUMNS if column != "vector")


def idf(n: int, df: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


@dataclass(frozen=True)
class Scope:
    """Recall's hard filters, as the index applies them."""

    tenant_id: int
    agent_id: int
    purpose: str
    now: datetime
    subject: str | None = None
    kind_ids: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Ranked:
    record_id: uuid.UUID
    parts: dict[str, float]
    confirmed: float  # confirmed_at as a POSIX timestamp, for the tie-break

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


def term_bound(weight: float, max_tf: int | None, *, k1: float, b: float, avgdl: float) -> float:
    """The most one term with idf `weight` can add to a record's lexical score: BM25's term part
    at the highest tf (any tf: k1 + 1) and the shortest record (one word)."""
    if max_tf is None or avgdl <= 0:
        return weight * (k1 + 1)
    return term_score(weight, max_tf, k1=k1, b=b, doclen=1.0, avgdl=avgdl)


def _expected_several(shares: Sequence[float]) -> float:
    """The share of records holding at least two of the terms, were they independent."""
    none = math.prod(1 - p for p in shares)
    one = sum(p * math.prod(1 - q for k, q in enumerate(shares) if k != i) for i, p in enumerate(shares))
    return max(0.0, 1 - none - one)


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


def paged(fetch: Callable[[int], list[Ranked]]) -> Iterator[Ranked]:
    """Rows of an ordered query, read FIRST_FETCH at a time and 4x more whenever the consumer gets
    past what was read (the query is run again; rows already yielded are skipped)."""
    limit, done = FIRST_FETCH, 0
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

    @property
    def terms(self) -> list[str]:
        """The query's distinct terms as the index stores them (stems, when the recipe stems)."""
        return [term for term, _ in self.analysed]

    def __iter__(self) -> Iterator[Ranked]:
        engine = _engine()
        words = [word for _, word in self.analysed]
        stats, terms = engine.collection(self.index, self.scope, words)
        self.scope_size = stats.records
        present = [Term(word, df, max_tf) for word, (df, max_tf) in zip(words, terms, strict=True) if df is None or df > 0]
        sources = engine.sources(self.index, self.scope, stats, present)
        yield from merge(sources)


def rank(index: SearchIndex, scope: Scope, query: str) -> Ranking:
    return Ranking(index=index, scope=scope, analysed=analyse_query(index, query))


def analyse_query(index: SearchIndex, query: str) -> list[tuple[str, str]]:
    """The query as the index analyses it: its distinct terms in order of appearance (at most
    MAX_QUERY_TERMS), each as (term as stored, text to match it with). Text the database cannot
    hold (NUL, lone surrogates) is treated as a space."""
    text = "".join(" " if ch == "\x00" or "\ud800" <= ch <= "\udfff" else ch for ch in (query or ""))
    if not text.strip():
        return []
    return _engine().terms(index.recipe, text)[:MAX_QUERY_TERMS]


def _engine():
    return _POSTGRES if connection.vendor == "postgresql" else _SQLITE


# --------------------------------------------------------------------------------------------
# SQL shared by both databases


def _authority_sql(alias: str, real: str = "") -> str:
    cases = " ".join(f"WHEN '{name}' THEN {weight!r}{real}" for name, weight in AUTHORITY_WEIGHT.items())
    return f"(CASE {alias}.authority {cases} ELSE 0.0{real} END)"


def _confidence_sql(alias: str) -> str:
    return f"({CONFIDENCE_WEIGHT!r} * {alias}.confidence)"


def tf_part_sql(tf: str, doclen: str, real: str = "") -> str:
    """BM25's term-frequency part as SQL (tf > 0); idf comes from Python (`idf()`). `real` casts the
    parameters (PostgreSQL reads a bare literal as numeric, and numeric arithmetic on every row's
    length costs more than the rest of its score)."""
    k1, b, avgdl = (f"%({name})s{real}" for name in ("k1", "b", "avgdl"))
    return f"{tf} * ({k1} + 1) / ({tf} + {k1} * (1 - {b} + {b} * {doclen} / {avgdl}))"


def term_score(weight: float, tf: float, *, k1: float, b: float, doclen: float, avgdl: float) -> float:
    """One term's BM25 part in Python (tf > 0): `weight` (its idf) times `tf_part_sql`'s value."""
    return weight * tf * (k1 + 1) / (tf + k1 * (1 - b + b * doclen / avgdl))


ORDER_SQL = "ORDER BY lexical + authority + confidence + recency DESC, lexical DESC, confirmed_at DESC, record_id"


def _rows(sql: str, params: dict) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _ranked(row: tuple) -> Ranked:
    record_id, lexical, authority, confidence, recency, confirmed_at = row[:6]
    parts = {"lexical": float(lexical), "authority": float(authority), "confidence": float(confidence), "recency": float(recency)}
    if isinstance(confirmed_at, str):  # SQLite keeps UTC times as text
        confirmed_at = datetime.fromisoformat(confirmed_at).replace(tzinfo=UTC)
    if isinstance(confirmed_at, datetime):
        confirmed_at = confirmed_at.timestamp()
    if not isinstance(record_id, uuid.UUID):
        record_id = uuid.UUID(str(record_id))
    return Ranked(record_id=record_id, parts=parts, confirmed=float(confirmed_at))


def _params(index: SearchIndex, scope: Scope, **extra) -> dict:
    """Every query's parameters; scalars only (SQLite's query logging quotes each one), so the
    PostgreSQL queries add the kinds array themselves."""
    return {
        "tenant": scope.tenant_id,
        "agent": scope.agent_id,
        "purpose": scope.purpose,
        "subject": scope.subject,
        "now": connection.ops.adapt_datetimefield_value(scope.now),
        "k1": float(index.recipe["k1"]),
        "b": float(index.recipe["b"]),
        **extra,
    }


def priors(authority: str, confidence: float, confirmed_at: datetime, now: datetime) -> dict[str, float]:
    """The three priors of one record, as the SQL below computes them (for rows that come from
    outside the lexical ranking: the semantic index's)."""
    days = max(0.0, (now - confirmed_at).total_seconds() / 86400.0)
    return {
        "authority": AUTHORITY_WEIGHT.get(authority, 0.0),
        "confidence": CONFIDENCE_WEIGHT * confidence,
        "recency": 0.5 ** (days / RECENCY_HALF_LIFE_DAYS),
    }


# Added to every bound: a score and its bound are sums of the same parts in another order, so in
# floating point a score can come out a few ulps above the bound it equals.
BOUND_SLACK = 1e-9


def _prior_bound(authorities: Iterable[str], max_confidence: float | None) -> float:
    weights = [AUTHORITY_WEIGHT[a] for a in authorities if a in AUTHORITY_WEIGHT]
    if not weights:
        return BOUND_SLACK
    return max(weights) + CONFIDENCE_WEIGHT * (max_confidence or 0.0) + RECENCY_MAX + BOUND_SLACK


# --------------------------------------------------------------------------------------------
# PostgreSQL


def _tsquery_lexeme(lexeme: str) -> str:
    """A lexeme as a quoted tsquery operand: whatever it contains, it stays one operand."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def _any(lexemes: Sequence[str]) -> str:
    return "(" + " | ".join(map(_tsquery_lexeme, lexemes)) + ")"


class _Postgres:
    # date_part, not extract: the same float8 (extract computes a numeric first, three times slower).
    RECENCY = (
        f"power(0.5::float8, greatest(0.0, date_part('epoch', %(now)s - d.confirmed_at) / 86400.0) / {RECENCY_HALF_LIFE_DAYS!r})"
    )
    PAGE = 500  # rows the priors-only walk reads at a time
    PAGE_BEST = 50  # rows of a page loaded at first: its best (the rest when the walk needs them)

    def terms(self, recipe: dict, text: str) -> list[tuple[str, str]]:
        rows = _rows(
            "SELECT lexeme FROM unnest(to_tsvector(%(config)s::regconfig, %(text)s)) ORDER BY positions[1] NULLS LAST, lexeme",
            {"config": recipe["analyser"]["postgresql"], "text": text},
        )
        # The `english` configuration drops stop words itself; `simple` leaves the words as they
        # are, so the recipe's list applies to them here.
        drop = stop_words(recipe) if recipe["analyser"]["postgresql"] == "simple" else frozenset()
        return [(lexeme, lexeme) for (lexeme,) in rows if lexeme not in drop]

    def _scope_tsquery(self, scope: Scope) -> str:
        parts = [_tsquery_lexeme(f"scope {scope.tenant_id} {scope.agent_id} {scope.purpose}")]
        if scope.subject is not None:
            parts.append(_tsquery_lexeme(f"subject {scope.subject}"))
        if scope.kind_ids is not None:
            parts.append(_any([f"kind {k}" for k in scope.kind_ids]) if scope.kind_ids else "'kind none'")
        return " & ".join(parts)

    def _where(self, scope: Scope, *, alias: str = "d", timely: bool = True) -> str:
        where = f"{alias}.tenant_id = %(tenant)s AND {alias}.agent_id = %(agent)s AND {alias}.purpose = %(purpose)s"
        if scope.subject is not None:
            where += f" AND {alias}.subject = %(subject)s"
        if scope.kind_ids is not None:
            where += f" AND {alias}.kind_id = ANY(%(kinds)s)"
        if timely:
            where += f" AND {self._timely(alias)}"
        return where

    @staticmethod
    def _timely(alias: str = "d") -> str:
        return (
            f"{alias}.expires_at > %(now)s AND ({alias}.valid_from IS NULL OR {alias}.valid_from <= %(now)s)"
            f" AND ({alias}.valid_to IS NULL OR {alias}.valid_to > %(now)s)"
        )

    def _params(self, index: SearchIndex, scope: Scope, **extra) -> dict:
        return _params(index, scope, kinds=list(scope.kind_ids or ()), **extra)

    def _select(self, lexical: str) -> str:
        # confirmed_at as seconds since the epoch (a float8 holds every microsecond of this era
        # exactly, so the order is the same): thousands of rows a recall, and a timestamp costs
        # far more to load in Python than a float.
        return (
            f"d.record_id, {lexical} AS lexical, {_authority_sql('d', '::float8')} AS authority, "
            f"{_confidence_sql('d')} AS confidence, {self.RECENCY} AS recency, "
            f"date_part('epoch', d.confirmed_at) AS confirmed_at"
        )

    def collection(
        self, index: SearchIndex, scope: Scope, words: list[str]
    ) -> tuple[Statistics, list[tuple[int | None, int | None]]]:
        """The scope's statistics and, per word, (df, highest tf), in one statement: N, avgdl and
        the priors' bound from the statistics table; across a purpose df from the terms table;
        within a subject or kinds, where the purpose has the term at all, None (counted by the
        statement that scores the scope, `_counted`) when the scope has at most NARROW_COUNTED
        records, else a GIN count (scope lexemes AND the term). The highest tf is the purpose's, a
        bound for any narrower scope."""
        name = index.storage_name
        narrowed = scope.subject is not None or scope.kind_ids is not None
        df = (
            f"CASE WHEN t.docs IS NULL THEN 0 WHEN st.docs <= {int(NARROW_COUNTED)} THEN NULL "
            f"ELSE (SELECT count(*) FROM {name} d WHERE d.vector @@ u.q) END"
            if narrowed
            else "coalesce(t.docs, 0)"
        )
        scope_query = self._scope_tsquery(scope)
        rows = _rows(
            f"SELECT st.docs, st.words, st.authorities, st.max_confidence, {df}, t.max_tf "
            f"FROM (SELECT coalesce(sum(docs), 0) AS docs, coalesce(sum(words), 0) AS words, "
            f"coalesce(bit_or(authorities), 0) AS authorities, max(max_confidence) AS max_confidence "
            f"FROM {name}_stats s WHERE {self._where(scope, alias='s', timely=False)}) st "
            f"LEFT JOIN LATERAL unnest(%(words)s::text[], %(queries)s::tsquery[]) WITH ORDINALITY AS u(w, q, n) ON true "
            f"LEFT JOIN {name}_terms t ON t.tenant_id = %(tenant)s AND t.agent_id = %(agent)s AND t.purpose = %(purpose)s "
            f"AND t.lexeme = u.w ORDER BY u.n",
            self._params(index, scope, words=words, queries=[f"{scope_query} & {_tsquery_lexeme(word)}" for word in words]),
        )
        docs, total_words, bits, max_confidence = rows[0][:4]
        authorities = [name for name, bit in storage.AUTHORITY_BITS.items() if int(bits) & bit]
        stats = Statistics(
            records=int(docs),
            avgdl=(int(total_words) / int(docs)) if docs else 0.0,
            prior_bound=_prior_bound(authorities, max_confidence),
        )
        return stats, [(None if count is None else int(count), max_tf) for *_, count, max_tf in rows] if words else []

    def sources(self, index: SearchIndex, scope: Scope, stats: Statistics, present: list[Term]) -> list[Source]:
        """Disjoint sources whose union is the scope, each with the most any of its records can
        score, opened by `merge` only when needed:

        - A narrowed scope whose df are counted where it is scored (`_counted_sources`).
        - The records holding two or more of the rarer terms (at most SUBSET_TERMS of them): one
          source per combination, the records holding exactly those (of the rarer terms), bound
          by what those terms and the common ones can add, plus the priors; a combination whose
          bound cannot reach the rows in hand is never read, so when four terms each open a sixth
          of the scope, the few records holding all four settle the query. When few records are
          expected to hold two of them (SEVERAL_WHOLE, the terms taken as independent), one
          statement reads them all instead: a statement per combination passes over the terms'
          postings again each time, about 10 ms for common words of a large purpose, often to
          find nothing.
        - The records holding at most one of them: one walk newest-confirmed first, its bound the
          largest single term's plus the common terms'. When the words hardly vary in tf, the best
          of those records are recent and a page settles them; when the bound is loose (a high
          highest tf), the walk cannot yield before reading most of the scope, so it gives up (see
          `_by_priors`) for each term's records older than where it stopped, scored whole through
          the GIN index (a pair of words in 4% of 100,000 records walked to the end: 1.2 s;
          scored whole: 70 ms), and the records holding none of them, walked on.
        - With more rarer terms than SUBSET_TERMS: one source per term, rarest first (MaxScore):
          the records containing it and none of the rarer ones; and the none-of-them walk.
        A scope of at most SMALL_SCOPE records is one source, scored in one statement.

        A term in at least COMMON_SHARE of the scope's records is common: a source of its own
        would score most of the scope to find a few rows, while what it adds is small against the
        priors (its idf is low). Whatever the split, the rows and their order are the same; only
        the work differs."""
        if any(term.df is None for term in present):
            return self._counted_sources(index, scope, stats, [term.word for term in present])
        k1, b, avgdl = float(index.recipe["k1"]), float(index.recipe["b"]), stats.avgdl
        ordered = sorted(present, key=lambda term: (term.df, term.word))
        words = [term.word for term in ordered]
        idfs = [idf(stats.records, term.df) for term in ordered]
        if stats.records <= SMALL_SCOPE:  # one statement scores them all: cheaper than any choosing
            return [Source(math.inf, self._step(index, scope, stats, words, idfs, (), ()))]
        rare = [term for term in ordered if term.df < COMMON_SHARE * stats.records]
        bounds = [term_bound(weight, term.max_tf, k1=k1, b=b, avgdl=avgdl) for weight, term in zip(idfs, ordered, strict=True)]
        common_bound = sum(bounds[len(rare) :])
        sources = []

        def source(include: Sequence[int], exclude: Sequence[int], lexical_bound: float) -> Source:
            return Source(lexical_bound + stats.prior_bound, self._step(index, scope, stats, words, idfs, include, exclude))

        none_query = self._subset_query(words, (), range(len(rare)))

        def none_walk(after: tuple | None = None) -> Source:
            return Source(
                common_bound + stats.prior_bound,
                lambda: self._by_priors(index, scope, stats, words, idfs, none_query, common_bound, after=after),
            )

        if len(rare) > SUBSET_TERMS:
            for i in range(len(rare)):
                sources.append(source([i], range(i), sum(bounds[i:])))
            return [*sources, none_walk()]
        several = " | ".join(
            f"({_tsquery_lexeme(words[i])} & {_tsquery_lexeme(words[j])})" for i, j in combinations(range(len(rare)), 2)
        )
        if several and _expected_several([term.df / stats.records for term in rare]) * stats.records <= SEVERAL_WHOLE:
            # Few records are expected to hold two of the rarer terms: one statement finds them
            # all (one pass over the terms' postings, where a statement per combination makes one
            # each, 10 ms apiece for the common words of a large purpose, often to find none).
            sources.append(
                Source(
                    sum(bounds) + stats.prior_bound, self._step(index, scope, stats, words, idfs, (), (), query=f"({several})")
                )
            )
        else:
            for size in range(2, len(rare) + 1):
                for include in combinations(range(len(rare)), size):
                    exclude = [j for j in range(len(rare)) if j not in include]
                    sources.append(source(include, exclude, sum(bounds[j] for j in include) + common_bound))
        if not rare:
            return [*sources, none_walk()]

        def whole(after: tuple, pending: list[Ranked]) -> Iterator[Ranked]:
            # The walk gave up at `after`: what it read and did not yield, then each rarer term's
            # records older than that (scored whole), and the records holding none of them, walked on.
            rest = [Source(max(row.score for row in pending) + BOUND_SLACK, lambda: iter(pending))] if pending else []
            for j in range(len(rare)):
                others = [k for k in range(len(rare)) if k != j]
                rest.append(
                    Source(
                        bounds[j] + common_bound + stats.prior_bound,
                        self._step(index, scope, stats, words, idfs, (j,), others, before=after),
                    )
                )
            return merge([*rest, none_walk(after)])

        # The records holding at most one of the rarer terms: walked by their priors first, given up
        # for `whole` once the walk has read WALK_SHARE of what scoring those sets would read, or
        # once its bound shows it cannot yield a row before reading them all.
        lexical_bound = max(bounds[: len(rare)]) + common_bound
        budget = max(self.PAGE, int(WALK_SHARE * sum(term.df for term in rare)))
        sources.append(
            Source(
                lexical_bound + stats.prior_bound,
                lambda: self._by_priors(
                    index,
                    scope,
                    stats,
                    words,
                    idfs,
                    f"!({several})" if several else "",
                    lexical_bound,
                    budget=budget,
                    give_up=whole,
                ),
            )
        )
        return sources

    def _counted_sources(self, index: SearchIndex, scope: Scope, stats: Statistics, words: list[str]) -> list[Source]:
        """A narrowed scope of at most NARROW_COUNTED records (a subject's, or some kinds'): the
        records holding any of the words, scored in one statement that also counts each word's df
        among them (`_counted`), and the rest walked by their priors, read only if one of them can
        still beat the matches in hand. At most SMALL_SCOPE records: every record in the one
        statement. The GIN counts this replaces read every word's postings across the purpose
        again, once per word, before the same rows were read to score them."""
        if stats.records <= SMALL_SCOPE:
            return [Source(math.inf, self._counted(index, scope, stats, words, every=True))]
        rest = f"!{_any(words)}"
        return [
            Source(math.inf, self._counted(index, scope, stats, words, every=False)),
            Source(stats.prior_bound, lambda: self._by_priors(index, scope, stats, [], [], rest, 0.0)),
        ]

    def _counted(self, index, scope, stats, words: list[str], *, every: bool) -> Callable[[], Iterator[Ranked]]:
        """The scope's records holding any of `words` (`every`: all its records), in rank order,
        with each word's df counted among the records read, which are all that can hold it. The
        collection counts records past their time too (see the module's docstring), so the rows
        are read regardless of time and only the timely ones ranked."""
        query = self._scope_tsquery(scope) + ("" if every else f" & {_any(words)}")
        counts, lexical, terms = self._lexical(words, tfs="d", weights=[f"c.w{j}" for j in range(len(words))])
        weights = (
            ", ".join(
                f"ln(1 + (%(n)s::float8 - count(t{j}) + 0.5::float8) / (count(t{j}) + 0.5::float8)) AS w{j}"
                for j in range(len(words))
            )
            or "1 AS w"
        )
        sql = (
            f"WITH m AS MATERIALIZED (SELECT d.record_id, d.doclen, d.authority, d.confidence, d.confirmed_at, "
            f"{self._timely()} AS timely, {counts} "
            f"FROM {self._matching(index)} WHERE {self._where(scope, timely=False)}), "
            f"c AS MATERIALIZED (SELECT {weights} FROM m) "
            f"SELECT ranked.* FROM (SELECT {self._select(lexical)} FROM m d CROSS JOIN c WHERE d.timely OFFSET 0) ranked "
            f"{ORDER_SQL} LIMIT %(limit)s"
        )

        def fetch(limit: int) -> list[Ranked]:
            params = self._params(index, scope, query=query, n=stats.records, avgdl=stats.avgdl or 1.0, limit=limit, **terms)
            return [_ranked(row) for row in _rows(sql, params)]

        return lambda: paged(fetch)

    @staticmethod
    def _matching(index: SearchIndex) -> str:
        """The index's rows matching `%(query)s` (a tsquery holding the scope's lexemes), as `d`,
        found through the GIN index alone: fenced (OFFSET 0), so the scope's columns are checked on
        its rows rather than the planner adding a b-tree scan of the whole scope to it (37,500
        entries read to intersect with 5,800 matches: 8 of 49 ms)."""
        return f"(SELECT {SCORED_COLUMNS} FROM {index.storage_name} d WHERE d.vector @@ %(query)s::tsquery OFFSET 0) d"

    @staticmethod
    def _subset_query(words: list[str], include: Sequence[int], exclude: Sequence[int]) -> str:
        """The records containing every term of `include` and none of `exclude`, as a tsquery
        ("": every record)."""
        return " & ".join(
            [*(_tsquery_lexeme(words[j]) for j in include), *([f"!{_any([words[j] for j in exclude])}"] if exclude else [])]
        )

    KEYSET = "(d.confirmed_at, d.record_id) < (%(after_at)s::timestamptz, %(after_id)s::uuid)"  # older than a walk's position
    FROM_KEYSET = "(d.confirmed_at, d.record_id) >= (%(last_at)s::timestamptz, %(last_id)s::uuid)"  # down to a page's last row

    def _step(
        self,
        index,
        scope,
        stats,
        words,
        idfs,
        include: Sequence[int],
        exclude: Sequence[int],
        before: tuple | None = None,
        query: str = "",
    ) -> Callable[[], Iterator[Ranked]]:
        """The scope's records containing every term of `include` and none of `exclude` (indexes
        into `words`) and matching `query` (a tsquery, if given), scored on all the words, in rank
        order; only those older than a walk's position `before` ((confirmed_at as text, record
        id)), if given."""
        query = " & ".join(filter(None, [self._scope_tsquery(scope), self._subset_query(words, include, exclude), query]))
        counts, lexical, terms = self._lexical(words, idfs)
        sql = (
            f"SELECT ranked.* FROM (SELECT {self._select(lexical)} FROM {self._matching(index)} "
            f"CROSS JOIN LATERAL (SELECT {counts} OFFSET 0) f WHERE {self._where(scope)}"
            f"{f' AND {self.KEYSET}' if before else ''} OFFSET 0) ranked {ORDER_SQL} LIMIT %(limit)s"
        )
        position = {"after_at": before[0], "after_id": before[1]} if before else {}

        def fetch(limit: int) -> list[Ranked]:
            params = self._params(index, scope, query=query, avgdl=stats.avgdl or 1.0, limit=limit, **terms, **position)
            return [_ranked(row) for row in _rows(sql, params)]

        return lambda: paged(fetch)

    def _lexical(
        self, words: list[str], idfs: Sequence[float] = (), *, tfs: str = "f", weights: Sequence[str] | None = None
    ) -> tuple[str, str, dict]:
        """(the columns reading each term's tf from the record's lexeme -> occurrences map, the BM25
        sum over them, as SQL over `d` and those columns under the alias `tfs` (its lateral `f`);
        their parameters). Each term's idf is `idfs` (bound) or, given, the SQL of `weights`."""
        weights = weights if weights is not None else [f"%(idf{j})s" for j in range(len(words))]
        counts = ", ".join(f"(d.tf ->> %(w{j})s)::float8 AS t{j}" for j in range(len(words))) or "1 AS t"
        lexical = (
            " + ".join(
                f"(CASE WHEN {tfs}.t{j} > 0 THEN {weights[j]} * {tf_part_sql(f'{tfs}.t{j}', 'd.doclen', '::float8')} ELSE 0 END)"
                for j in range(len(words))
            )
            or "0.0::float8"
        )
        params = {**{f"w{j}": word for j, word in enumerate(words)}, **{f"idf{j}": weight for j, weight in enumerate(idfs)}}
        return counts, lexical, params

    def _by_priors(
        self,
        index,
        scope,
        stats,
        words,
        idfs,
        query: str,
        lexical_bound: float,
        *,
        after: tuple | None = None,
        budget: int | None = None,
        give_up: Callable[[tuple, list[Ranked]], Iterator[Ranked]] | None = None,
    ) -> Iterator[Ranked]:
        """The scope's records matching `query` (a tsquery; "": all), best first: walked
        newest-confirmed first (from after the position `after`, if given), a page at a time,
        each scored on all the words; a row is yielded once no unread row (confirmed no later than
        the last read, so with no more recency, and with at most `lexical_bound` from the words)
        can beat it. Of each page only its best rows are loaded at first; the rest of a page waits
        under the score of its best row not loaded, and is read before any row it could beat is
        yielded. With `give_up`: once `budget` rows are read, or a page ends with the best row in
        hand unable to beat even a record confirmed long ago (so nothing could be yielded before
        the walk's end), the rest comes from `give_up(position, rows read and not yielded)`."""
        where = self._where(scope)
        if query:
            # In a form the GIN index cannot serve: the walk reads the scope's recency index and
            # checks each row, never every match across all tenants gathered to be sorted (a
            # plan the planner may otherwise pick when its estimates are off).
            where += " AND coalesce(d.vector @@ %(query)s::tsquery, false)"
        counts, lexical, terms = self._lexical(words, idfs)
        rows_sql = (
            f"SELECT {self._select(lexical)}, d.confirmed_at AS at FROM {index.storage_name} d "
            f"CROSS JOIN LATERAL (SELECT {counts} OFFSET 0) f "
            f"WHERE {where}{{range}} ORDER BY d.confirmed_at DESC, d.record_id DESC"
        )
        # What Python loads of a row: the id as text (only the rows yielded become UUIDs, in
        # `_ranked`), and confirmed_at as text too, which with the id is a page's keyset.
        loaded = "p.record_id::text, p.lexical, p.authority, p.confidence, p.recency, p.confirmed_at, p.at::text"
        # A page returns its PAGE_BEST best rows and the next best (whose score bounds the rest,
        # read only if the walk needs them), its last row (the walk's position) and how many it
        # read: most of a page is never yielded, and loading 500 rows into Python cost more than
        # reading them. (Top-N sorts of the page: a full sort of it cost as much as reading it.)
        page_sql = (
            f"WITH p AS MATERIALIZED ({rows_sql} LIMIT %(limit)s) "
            f"(SELECT {loaded}, (SELECT count(*) FROM p), false FROM p {ORDER_SQL} LIMIT %(best)s + 1) UNION ALL "
            f"(SELECT {loaded}, (SELECT count(*) FROM p), true FROM p ORDER BY p.at, p.record_id LIMIT 1)"
        )
        held_sql = f"SELECT {loaded} FROM ({rows_sql}) p"
        params = self._params(index, scope, query=query, limit=self.PAGE, best=self.PAGE_BEST, avgdl=stats.avgdl or 1.0, **terms)
        static_bound = stats.prior_bound - RECENCY_MAX + lexical_bound
        # Rows wait as raw tuples under Ranked.sort_key's order (the score summed as Ranked sums it,
        # the id as text as it compares them): only the rows yielded become Ranked.
        pending: list[tuple[tuple, tuple]] = []
        pushed: set[str] = set()  # ids of the rows put in `pending`
        # Pages whose rows past their best wait unread: (the most any of them scores, the page's
        # range: the position before it (None: the walk's start) and its last row's).
        held: list[tuple[float, tuple | None, tuple]] = []
        read = 0

        def push(rows) -> None:
            for row in rows:
                if row[0] not in pushed:
                    record_id, lexical, authority, confidence, recency, confirmed = row[:6]
                    heapq.heappush(
                        pending, ((-(lexical + authority + confidence + recency), -lexical, -confirmed, record_id), row)
                    )
                    pushed.add(row[0])

        def read_held(newer: tuple | None, last: tuple) -> None:
            """Every row of the range (newer than `newer`, down to `last`) not yet in hand."""
            bounds = [self.FROM_KEYSET] + ([self.KEYSET] if newer else [])
            position = {"last_at": last[0], "last_id": last[1], **({"after_at": newer[0], "after_id": newer[1]} if newer else {})}
            push(_rows(held_sql.format(range="".join(f" AND {b}" for b in bounds)), {**params, **position}))

        unread_bound, exhausted, start, checked = math.inf, False, after, True
        while True:
            best = -pending[0][0][0] if pending else -math.inf
            held_bound = held[0][0] if held else -math.inf
            if best > unread_bound and best > held_bound:
                yield _ranked(heapq.heappop(pending)[1])
            elif held and held_bound >= unread_bound:  # the rows a page held back may come first
                _, newer, last = held.pop(0)
                read_held(newer, last)
            elif exhausted:
                return
            elif not checked and (read >= budget or ((pending or held) and max(best, held_bound) <= static_bound)):
                # Given up (`give_up` was given): every row read and not yielded goes on with the rest.
                if held:
                    read_held(start, after)
                yield from give_up(after, [_ranked(row) for _, row in sorted(pending)])
                return
            else:
                page = _rows(
                    page_sql.format(range=f" AND {self.KEYSET}" if after else ""),
                    {**params, "after_at": after[0], "after_id": after[1]} if after else params,
                )
                count = page[0][7] if page else 0
                read += count
                exhausted = count < self.PAGE
                checked = give_up is None or exhausted
                best_rows = [row for row in page if not row[8]]  # in rank order
                push(best_rows[: self.PAGE_BEST])
                if count:
                    last = page[-1]
                    if len(best_rows) > self.PAGE_BEST:
                        held.append((sum(best_rows[self.PAGE_BEST][1:5]), after, (last[6], last[0])))
                        held.sort(key=lambda h: -h[0])
                    after = (last[6], last[0])
                    unread_bound = -math.inf if exhausted else static_bound + float(last[4])
                else:
                    unread_bound = -math.inf


# --------------------------------------------------------------------------------------------
# SQLite


def fts_phrase(text: str) -> str:
    """A string as one FTS5 phrase: double quotes doubled, so nothing in it is query syntax."""
    return '"' + text.replace('"', '""') + '"'


_FTS5_SCRATCH = threading.local()


def fts5_scratch(tokenizer: str, name: str, columns: str, *, extra: Sequence[str] = ()):
    """A private in-memory SQLite database (one per thread and process, opened with the driver of
    the app's connection, so the same FTS5 code as the index's) holding the FTS5 table `name`
    (columns, tokenizer one of ANALYSERS) and any `extra` DDL, made once. Callers work inside
    BEGIN ... ROLLBACK, so no text they analyse outlives the call, and the app's own connection
    runs no statement for it and writes nothing to a temporary file."""
    known = sorted(a["sqlite"] for a in ANALYSERS.values())
    if tokenizer not in known:  # never splice anything else into DDL
        raise ValueError("Unknown analyser.")
    table = f"{name}_{known.index(tokenizer)}"
    scratch = _FTS5_SCRATCH
    if getattr(scratch, "pid", None) != os.getpid():  # a forked process opens its own
        scratch.pid, scratch.tables = os.getpid(), set()
        scratch.db = connection.Database.connect(":memory:", isolation_level=None)
    if table not in scratch.tables:
        scratch.db.execute(f"CREATE VIRTUAL TABLE {table} USING fts5({columns}, tokenize='{tokenizer}')")
        for ddl in extra:
            scratch.db.execute(ddl.format(table=table))
        scratch.tables.add(table)
    return scratch.db, table


def fts5_tokens(tokenizer: str, texts: Sequence[str]) -> list[list[str]]:
    """Each text's tokens as an FTS5 table with `tokenizer` (one of ANALYSERS) stores them, read
    from a scratch table (fts5_scratch): a temp FTS5 table on recall's own connection cost six
    statements a recall and, as SQLite's connections last one request, its creation each time."""
    db, table = fts5_scratch(
        tokenizer, "terms", "w", extra=["CREATE VIRTUAL TABLE {table}_v USING fts5vocab({table}, 'instance')"]
    )
    db.execute("BEGIN")
    try:
        db.executemany(f"INSERT INTO {table}(rowid, w) VALUES (?, ?)", enumerate(texts, start=1))
        rows = db.execute(f'SELECT doc, term FROM {table}_v ORDER BY doc, "offset"').fetchall()
    finally:
        db.execute("ROLLBACK")
    tokens: list[list[str]] = [[] for _ in texts]
    for doc, term in rows:
        tokens[doc - 1].append(term)
    return tokens


class _SQLite:
    RECENCY = f"power(0.5, max(0.0, julianday(%(now)s) - julianday(d.confirmed_at)) / {RECENCY_HALF_LIFE_DAYS!r})"
    TIME = (
        "d.expires_at > %(now)s AND (d.valid_from IS NULL OR d.valid_from <= %(now)s) "
        "AND (d.valid_to IS NULL OR d.valid_to > %(now)s)"
    )

    def terms(self, recipe: dict, text: str) -> list[tuple[str, str]]:
        """unicode61 splits on everything but letters and digits; the recipe's stop words go
        first (before stemming, as PostgreSQL does); the rest are stemmed by the index's own
        tokenizer (`fts5_tokens`), and each distinct stem is kept once."""
        drop = stop_words(recipe)
        words = list(dict.fromkeys(w for w in re.findall(r"[^\W_]+", text.lower()) if w not in drop))
        if not words:
            return []
        kept: dict[str, str] = {}  # stem(s) -> the first word with them (the stemmer is not idempotent)
        for word, stems in zip(words, fts5_tokens(recipe["analyser"]["sqlite"], words), strict=True):
            if stems:
                kept.setdefault(" ".join(stems), word)
        return list(kept.items())

    def _match(self, scope: Scope) -> str:
        parts = [f"scope : {fts_phrase(storage.scope_token(scope.tenant_id, scope.agent_id, scope.purpose))}"]
        if scope.subject is not None:
            parts.append(f"subj : {fts_phrase(storage.subject_token(scope.subject))}")
        if scope.kind_ids is not None:
            kinds = [f"kind : {fts_phrase(storage.kind_token(k))}" for k in scope.kind_ids] or [f"kind : {fts_phrase('none')}"]
            parts.append("(" + " OR ".join(kinds) + ")")
        return " AND ".join(parts)

    def _from(self, t: str) -> str:
        return f"FROM {t} JOIN {t}_doc d ON d.id = {t}.rowid WHERE {t} MATCH"

    def _select(self, lexical: str) -> str:
        return (
            f"d.record_id, {lexical} AS lexical, {_authority_sql('d')} AS authority, "
            f"{_confidence_sql('d')} AS confidence, {self.RECENCY} AS recency, d.confirmed_at"
        )

    def collection(self, index: SearchIndex, scope: Scope, words: list[str]) -> tuple[Statistics, list[tuple[int, int | None]]]:
        """The scope's statistics and, per word, (df, None): FTS5 keeps no bound on tf."""
        frequencies = self.document_frequencies(index, scope, words) if words else []
        return self.statistics(index, scope), [(df, None) for df in frequencies]

    def statistics(self, index: SearchIndex, scope: Scope) -> Statistics:
        t = index.storage_name
        docs, avgdl, max_confidence = _rows(
            f"SELECT count(*), coalesce(avg(d.doclen), 0.0), max(d.confidence) {self._from(t)} %(match)s",
            {"match": self._match(scope)},
        )[0]
        authorities = [
            a for (a,) in _rows(f"SELECT DISTINCT d.authority {self._from(t)} %(match)s", {"match": self._match(scope)})
        ]
        return Statistics(records=int(docs), avgdl=float(avgdl), prior_bound=_prior_bound(authorities, max_confidence))

    def document_frequencies(self, index: SearchIndex, scope: Scope, words: list[str]) -> list[int]:
        t, match = index.storage_name, self._match(scope)
        counts = " UNION ALL ".join(f"SELECT {i}, count(*) {self._from(t)} %(q{i})s" for i in range(len(words)))
        rows = _rows(
            f"SELECT * FROM ({counts}) ORDER BY 1",
            {f"q{i}": f"{match} AND body : {fts_phrase(word)}" for i, word in enumerate(words)},
        )
        return [int(count) for _, count in rows]

    def sources(self, index: SearchIndex, scope: Scope, stats: Statistics, present: list[Term]) -> list[Source]:
        words = [term.word for term in present]
        idfs = [idf(stats.records, term.df) for term in present]
        sources = [Source(stats.prior_bound, lambda: paged(lambda limit: self._by_priors(index, scope, words, limit)))]
        if words:
            sources.append(Source(math.inf, lambda: paged(lambda limit: self._matches(index, scope, stats, words, idfs, limit))))
        return sources

    def _matches(self, index, scope, stats, words, idfs, limit) -> list[Ranked]:
        """Every record of the scope containing a term, scored: per term, its FTS5 matches with tf
        counted from the term's marks in highlight() (minus any such character already there)."""
        t, match = index.storage_name, self._match(scope)
        branches = " UNION ALL ".join(
            f"SELECT d.id AS key, {i} AS term, d.doclen, d.body, highlight({t}, {storage.BODY_COLUMN}, char(1), '') AS hl "
            f"{self._from(t)} %(q{i})s AND {self.TIME}"
            for i in range(len(words))
        )
        # MATERIALIZED: highlight() must run in the statement that reads the FTS5 table, not in a
        # query the planner flattened it into.
        sql = f"""
            WITH marked AS MATERIALIZED ({branches}), hits AS (
              SELECT key, term, doclen,
                     (length(hl) - length(replace(hl, char(1), ''))) - (length(body) - length(replace(body, char(1), ''))) AS tf
              FROM marked
            ), lexical AS (
              SELECT h.key, sum(w.value * {tf_part_sql("h.tf", "h.doclen")}) AS lexical
              FROM hits h JOIN json_each(%(idfs)s) w ON w.key = h.term GROUP BY h.key
            )
            SELECT ranked.* FROM (SELECT {self._select("l.lexical")} FROM lexical l JOIN {t}_doc d ON d.id = l.key) ranked
            {ORDER_SQL} LIMIT %(limit)s"""
        params = _params(
            index,
            scope,
            idfs=json.dumps(idfs),
            avgdl=stats.avgdl or 1.0,
            limit=limit,
            **{f"q{i}": f"{match} AND body : {fts_phrase(word)}" for i, word in enumerate(words)},
        )
        return [_ranked(row) for row in _rows(sql, params)]

    def _by_priors(self, index, scope, exclude: list[str], limit: int) -> list[Ranked]:
        t, match = index.storage_name, self._match(scope)
        if exclude:
            match = f"({match}) NOT (" + " OR ".join(f"body : {fts_phrase(word)}" for word in exclude) + ")"
        sql = (
            f"SELECT ranked.* FROM (SELECT {self._select('0.0')} {self._from(t)} %(match)s AND {self.TIME}) ranked "
            f"{ORDER_SQL} LIMIT %(limit)s"
        )
        return [_ranked(row) for row in _rows(sql, _params(index, scope, match=match, limit=limit))]


_POSTGRES = _Postgres()
_SQLITE = _SQLite()
