"""PostgreSQL's side of recall's ranking: the scope as SQL, the query's analysis, the collection's
statistics, the sources `memory.search.ranking.merge` reads, and the analysis of historical texts
for as-of recall. `memory.search.ranking` says what is computed; this module how PostgreSQL finds
the rows without scoring the whole scope.

N, avgdl and the priors' bound come from the index's statistics table; across a purpose, df(t)
and the highest tf of each term from its terms table (a lookup). A term's bound is its BM25 part
at that highest tf. Within a subject or kinds of at most NARROW_COUNTED records, one statement
reads the records holding any of the words, counts each word's df among them and scores them
(every record, in a scope of at most SMALL_SCOPE); the rest are walked by their priors only if one
of them could still come first. Otherwise (a purpose, or a larger narrowed scope, whose df are GIN
counts) the scope is cut into disjoint sources, each with the most any of its records can score,
and a source is read only when the best row in hand no longer beats its bound (threshold
algorithm; `_SourcePlan` chooses them):
- when few records hold any of the rarer query terms (ANY_WHOLE, the sum of their df): those
  records, scored in one statement, and the records holding none of them, walked;
- the records holding two or more of the rarer query terms: one source per combination of them,
  or one statement for all when few such records are expected (terms independent);
- the records holding at most one of them: one walk, newest-confirmed first, each row scored on
  every word and yielded once no unread one can beat it (`memory.engine.postgres._walk`); given
  up, where it stopped, for each rarer term's records scored whole (and the none-of-them records
  walked on) once it has read WALK_SHARE of what that would read, or once its best row cannot
  beat its bound;
- with more rarer terms than SUBSET_TERMS: one source per term, rarest first (MaxScore), and the
  records holding none of them walked.
A term in COMMON_SHARE of the scope or more only adds to the bounds (its idf is low). So four words
that each open a sixth of the scope are settled by the few records holding all four, a rare word
by its own records, and recent records holding one common-ish word by a page of the walk. The
result is exact; only the amount of work depends on the data.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property, partial
from itertools import combinations
from typing import Any

from django.db import connection

from memory.engine._ranking import ORDER_SQL, authority_sql, confidence_sql, fetch, ranked, recipe_params, tf_part_sql
from memory.engine.postgres import search
from memory.engine.postgres._sequences import sequence_window as sequence_window
from memory.engine.postgres._walk import KEYSET, GiveUp, Position, PriorsWalk
from memory.scope import Scope
from memory.search.models import SearchIndex
from memory.search.ranking import (
    BOUND_SLACK,
    RECENCY_HALF_LIFE_DAYS,
    RECENCY_MAX,
    Ranked,
    Source,
    Statistics,
    Term,
    idf,
    merge,
    paged,
    prior_bound,
    term_bound,
)
from memory.search.recipes import stop_words

COMMON_SHARE = 0.25  # a term in this share of the scope's records is scored by the walk by priors
SMALL_SCOPE = 500  # a scope this small is scored whole, in one statement
SUBSET_TERMS = 6  # up to this many rarer terms, one source per combination of them (else per term)
WALK_SHARE = 0.25  # the walk of the one-term sets reads at most this share of their records
SEVERAL_WHOLE = 5000  # records expected (terms independent) to hold two rarer terms, at most, to find them in one statement
ANY_WHOLE = 5000  # records holding any rarer term, at most (the sum of their df), to score them all in one statement
NARROW_COUNTED = 20_000  # a subject or kinds scope this small counts df where it scores
PAGE = 500  # rows the priors-only walk reads at a time
PAGE_BEST = 50  # rows of a page loaded at first: its best (the rest when the walk needs them)
# What the statements read of an index row: every column but the tsvector, which only the GIN
# index needs (carried through the counted statement's materialized scan, it costs a good part of it).
SCORED_COLUMNS = ", ".join(column for column in search.COLUMNS if column != "vector")
# date_part, not extract: the same float8 (extract computes a numeric first, three times slower).
RECENCY = (
    f"power(0.5::float8, greatest(0.0, date_part('epoch', %(now)s - d.confirmed_at) / 86400.0) / {RECENCY_HALF_LIFE_DAYS!r})"
)


# --------------------------------------------------------------------------------------------
# the interface every engine offers


def scope_where(scope: Scope, alias: str = "d", *, timely: bool = True) -> tuple[str, dict[str, Any]]:
    """The scope's filter over an index's copy of the record columns (alias `alias`) and its
    parameters; `timely=False` leaves out expiry and validity."""
    where = f"{alias}.tenant_id = %(tenant)s AND {alias}.agent_id = %(agent)s AND {alias}.purpose = %(purpose)s"
    if scope.subject is not None:
        where += f" AND {alias}.subject = %(subject)s"
    if scope.kind_ids is not None:
        where += f" AND {alias}.kind_id = ANY(%(kinds)s)"
    if timely:
        where += f" AND {_timely(alias)}"
    return where, {
        "tenant": scope.tenant_id,
        "agent": scope.agent_id,
        "purpose": scope.purpose,
        "subject": scope.subject,
        "kinds": list(scope.kind_ids or ()),
        "now": connection.ops.adapt_datetimefield_value(scope.now),
    }


def record_key(record_id: uuid.UUID) -> Any:
    """A record id as the index tables return it (a UUID)."""
    return record_id


def terms(recipe: dict, text: str) -> list[tuple[str, str]]:
    """The query's lexemes in order of appearance, each once, as (term as stored, text to match)."""
    rows = fetch(
        "SELECT lexeme FROM unnest(to_tsvector(%(config)s::regconfig, %(text)s)) ORDER BY positions[1] NULLS LAST, lexeme",
        {"config": recipe["analyser"]["postgresql"], "text": text},
    )
    # The `english` configuration drops stop words itself; `simple` leaves the words as they
    # are, so the recipe's list applies to them here.
    drop = stop_words(recipe) if recipe["analyser"]["postgresql"] == "simple" else frozenset()
    return [(lexeme, lexeme) for (lexeme,) in rows if lexeme not in drop]


def word_terms(recipe: dict, words: Sequence[str]) -> list[list[str]]:
    """Each of `words` analysed alone, as `terms` would store it (its lexemes; none for a stop
    word), in one statement."""
    if not words:
        return []
    rows = fetch(
        "SELECT u.n, t.lexeme FROM unnest(%(words)s::text[]) WITH ORDINALITY AS u(w, n) "
        "CROSS JOIN LATERAL unnest(to_tsvector(%(config)s::regconfig, u.w)) AS t ORDER BY u.n, t.lexeme",
        {"config": recipe["analyser"]["postgresql"], "words": list(words)},
    )
    drop = stop_words(recipe) if recipe["analyser"]["postgresql"] == "simple" else frozenset()
    found: list[list[str]] = [[] for _ in words]
    for n, lexeme in rows:
        if lexeme not in drop:
            found[int(n) - 1].append(lexeme)
    return found


def collection(index: SearchIndex, scope: Scope, words: list[str]) -> tuple[Statistics, list[tuple[int | None, int | None]]]:
    """The scope's statistics and, per word, (df, highest tf), in one statement: N, avgdl and the
    priors' bound from the statistics table; across a purpose df from the terms table; within a
    subject or kinds, where the purpose has the term at all, None (counted by the statement that
    scores the scope, `_counted`) when the scope has at most NARROW_COUNTED records, else a GIN
    count (scope lexemes AND the term). The highest tf is the purpose's, a bound for any narrower
    scope."""
    name = index.storage_name
    narrowed = scope.subject is not None or scope.kind_ids is not None
    df = (
        f"CASE WHEN t.docs IS NULL THEN 0 WHEN st.docs <= {int(NARROW_COUNTED)} THEN NULL "
        f"ELSE (SELECT count(*) FROM {name} d WHERE d.vector @@ u.q) END"
        if narrowed
        else "coalesce(t.docs, 0)"
    )
    scope_query = _scope_tsquery(scope)
    rows = fetch(
        f"SELECT st.docs, st.words, st.authorities, st.max_confidence, {df}, t.max_tf "
        f"FROM (SELECT coalesce(sum(docs), 0) AS docs, coalesce(sum(words), 0) AS words, "
        f"coalesce(bit_or(authorities), 0) AS authorities, max(max_confidence) AS max_confidence "
        f"FROM {name}_stats s WHERE {_where(scope, alias='s', timely=False)}) st "
        f"LEFT JOIN LATERAL unnest(%(words)s::text[], %(queries)s::tsquery[]) WITH ORDINALITY AS u(w, q, n) ON true "
        f"LEFT JOIN {name}_terms t ON t.tenant_id = %(tenant)s AND t.agent_id = %(agent)s AND t.purpose = %(purpose)s "
        f"AND t.lexeme = u.w ORDER BY u.n",
        _params(index, scope, words=words, queries=[f"{scope_query} & {_lexeme(word)}" for word in words]),
    )
    docs, total_words, bits, max_confidence = rows[0][:4]
    authorities = [name for name, bit in search.AUTHORITY_BITS.items() if int(bits) & bit]
    stats = Statistics(
        records=int(docs),
        avgdl=(int(total_words) / int(docs)) if docs else 0.0,
        prior_bound=prior_bound(authorities, max_confidence),
    )
    return stats, [(None if count is None else int(count), max_tf) for *_, count, max_tf in rows] if words else []


def sources(
    index: SearchIndex,
    scope: Scope,
    stats: Statistics,
    present: list[Term],
    counted: Callable[[dict[str, float]], None] | None = None,
) -> list[Source]:
    """Disjoint sources whose union is the scope, each with the most any of its records can score,
    opened by `merge` only when needed: a narrowed scope whose df are counted where it is scored
    (`_counted_sources`, which hands `counted` each word's idf as that statement computed it), else
    as `_SourcePlan` chooses them. Whatever the split, the rows and their order are the same; only
    the work differs."""
    if any(term.df is None for term in present):
        return _counted_sources(index, scope, stats, [term.word for term in present], counted)
    return _SourcePlan(index, scope, stats, present).sources()


def analyse_history(recipe: dict, rows: Sequence, words: Sequence[str]) -> tuple[dict[int, int], dict[tuple[int, str], int]]:
    """(history id -> word count, (history id, word) -> occurrences) of the history rows' contents,
    analysed where they are kept by `to_tsvector` with the recipe's configuration (occurrences per
    lexeme, as the index stores them); the word count is the index's `doclen_sql`."""
    table = rows[0]._meta.db_table
    sql = (
        f"SELECT h.history_id, {search.doclen_sql('h.content')}, "
        f"(SELECT coalesce(jsonb_object_agg(u.lexeme, cardinality(u.positions)), '{{}}'::jsonb) "
        f"FROM unnest(to_tsvector(%(config)s::regconfig, h.content)) u WHERE u.lexeme = ANY(%(words)s)) "
        f"FROM {table} h WHERE h.history_id = ANY(%(ids)s)"
    )
    found = fetch(
        sql, {"config": recipe["analyser"]["postgresql"], "words": list(words), "ids": [row.history_id for row in rows]}
    )
    doclens, tfs = {}, {}
    for history_id, doclen, counts in found:
        doclens[history_id] = int(doclen)
        if isinstance(counts, str):  # Django leaves jsonb undecoded on its connections
            counts = json.loads(counts)
        for word, count in (counts or {}).items():
            tfs[(history_id, word)] = int(count)
    return doclens, tfs


# --------------------------------------------------------------------------------------------
# choosing the sources


class _SourcePlan:
    """The sources of a scope whose df are all known, chosen by the terms' frequencies:

    - A scope of at most SMALL_SCOPE records: one source, scored in one statement.
    - When at most ANY_WHOLE records hold any of the rarer terms (the sum of their df): those
      records, scored in one statement, and the records holding none of them, walked.
    - The records holding two or more of the rarer terms (at most SUBSET_TERMS of them): one
      source per combination, the records holding exactly those (of the rarer terms), bound by
      what those terms and the common ones can add, plus the priors; a combination whose bound
      cannot reach the rows in hand is never read, so when four terms each open a sixth of the
      scope, the few records holding all four settle the query. When few records are expected to
      hold two of them (SEVERAL_WHOLE, the terms taken as independent), one statement reads them
      all instead: a statement per combination passes over the terms' postings again each time,
      often to find nothing.
    - The records holding at most one of them: one walk newest-confirmed first, its bound the
      largest single term's plus the common terms'. When the words hardly vary in tf, the best of
      those records are recent and a page settles them; when the bound is loose (a high highest
      tf), the walk cannot yield before reading most of the scope, so it gives up (`_give_up`)
      for each term's records older than where it stopped, scored whole through the GIN index,
      and the records holding none of them, walked on.
    - With more rarer terms than SUBSET_TERMS: one source per term, rarest first (MaxScore): the
      records containing it and none of the rarer ones; and the none-of-them walk.

    A term in at least COMMON_SHARE of the scope's records is common: a source of its own would
    score most of the scope to find a few rows, while what it adds is small against the priors
    (its idf is low). The plan's state: the terms rarest first (`words`, their `idfs` and
    `bounds`), how many of them are rarer (`rare`), and what the common ones add (`common_bound`).
    """

    def __init__(self, index: SearchIndex, scope: Scope, stats: Statistics, present: list[Term]) -> None:
        self.index, self.scope, self.stats = index, scope, stats
        ordered = sorted(present, key=lambda term: (term.df, term.word))
        self.words = [term.word for term in ordered]
        self.dfs = [term.df or 0 for term in ordered]  # all known (and above 0) here: `sources` checked
        self.idfs = [idf(stats.records, df) for df in self.dfs]
        k1, b = float(index.recipe["k1"]), float(index.recipe["b"])
        self.bounds = [
            term_bound(weight, term.max_tf, k1=k1, b=b, avgdl=stats.avgdl)
            for weight, term in zip(self.idfs, ordered, strict=True)
        ]
        self.rare = sum(1 for df in self.dfs if df < COMMON_SHARE * stats.records)  # the first `rare` terms
        self.common_bound = sum(self.bounds[self.rare :])

    def sources(self) -> list[Source]:
        if self.stats.records <= SMALL_SCOPE:  # one statement scores them all: cheaper than any choosing
            return [Source(math.inf, self._step((), ()))]
        if self.rare and sum(self.dfs[: self.rare]) <= ANY_WHOLE:  # few matches: score them all at once
            return [self._any(), self._none_walk()]
        if self.rare > SUBSET_TERMS:
            return [*self._per_term(), self._none_walk()]
        several = self._several()
        if not self.rare:
            return [*several, self._none_walk()]
        return [*several, self._one_term_walk()]

    @cached_property
    def several_query(self) -> str:
        """The records holding two or more of the rarer terms, as a tsquery ("": fewer than two)."""
        pairs = combinations(range(self.rare), 2)
        return " | ".join(f"({_lexeme(self.words[i])} & {_lexeme(self.words[j])})" for i, j in pairs)

    def _step(self, include: Sequence[int], exclude: Sequence[int], **options: Any) -> Callable[[], Iterator[Ranked]]:
        return _step(self.index, self.scope, self.stats, self.words, self.idfs, include, exclude, **options)

    def _subset(self, include: Sequence[int], exclude: Sequence[int], lexical_bound: float, **options: Any) -> Source:
        return Source(lexical_bound + self.stats.prior_bound, self._step(include, exclude, **options))

    def _any(self) -> Source:
        """The records holding any of the rarer terms, in one statement: when they are few, one pass
        over their postings costs less than choosing among them (a walk, then each term's records)."""
        query = _any(self.words[: self.rare])
        return Source(sum(self.bounds) + self.stats.prior_bound, self._step((), (), query=query))

    def _per_term(self) -> list[Source]:
        """One source per rarer term, rarest first: its records holding none of the rarer ones."""
        return [self._subset([i], range(i), sum(self.bounds[i:])) for i in range(self.rare)]

    def _several(self) -> list[Source]:
        """The records holding two or more of the rarer terms: one statement for all when few are
        expected (one pass over the terms' postings), else one source per combination."""
        if not self.several_query:
            return []
        expected = _expected_several([df / self.stats.records for df in self.dfs[: self.rare]]) * self.stats.records
        if expected <= SEVERAL_WHOLE:
            return [Source(sum(self.bounds) + self.stats.prior_bound, self._step((), (), query=f"({self.several_query})"))]
        found = []
        for size in range(2, self.rare + 1):
            for include in combinations(range(self.rare), size):
                exclude = [j for j in range(self.rare) if j not in include]
                found.append(self._subset(include, exclude, sum(self.bounds[j] for j in include) + self.common_bound))
        return found

    def _none_walk(self, after: Position | None = None) -> Source:
        """The records holding none of the rarer terms, walked by their priors (from `after`)."""
        query = _subset_query(self.words, (), range(self.rare))
        walk = partial(_walk, self.index, self.scope, self.stats, self.words, self.idfs, query, self.common_bound, after=after)
        return Source(self.common_bound + self.stats.prior_bound, walk)

    def _one_term_walk(self) -> Source:
        """The records holding at most one of the rarer terms: walked by their priors first, given
        up for `_give_up` once the walk has read WALK_SHARE of what scoring those sets would read,
        or once its bound shows it cannot yield a row before reading them all."""
        lexical_bound = max(self.bounds[: self.rare]) + self.common_bound
        budget = max(PAGE, int(WALK_SHARE * sum(self.dfs[: self.rare])))
        query = f"!({self.several_query})" if self.several_query else ""
        walk = partial(
            _walk,
            self.index,
            self.scope,
            self.stats,
            self.words,
            self.idfs,
            query,
            lexical_bound,
            budget=budget,
            give_up=self._give_up,
        )
        return Source(lexical_bound + self.stats.prior_bound, walk)

    def _give_up(self, after: Position, pending: list[Ranked]) -> Iterator[Ranked]:
        """The walk gave up at `after`: what it read and did not yield, then each rarer term's
        records older than that (scored whole), and the records holding none of them, walked on."""
        rest = [Source(max(row.score for row in pending) + BOUND_SLACK, lambda: iter(pending))] if pending else []
        for j in range(self.rare):
            others = [k for k in range(self.rare) if k != j]
            rest.append(self._subset((j,), others, self.bounds[j] + self.common_bound, before=after))
        return merge([*rest, self._none_walk(after)])


def _expected_several(shares: Sequence[float]) -> float:
    """The share of records holding at least two of the terms, were they independent."""
    none = math.prod(1 - p for p in shares)
    one = sum(p * math.prod(1 - q for k, q in enumerate(shares) if k != i) for i, p in enumerate(shares))
    return max(0.0, 1 - none - one)


def _counted_sources(
    index: SearchIndex,
    scope: Scope,
    stats: Statistics,
    words: list[str],
    counted: Callable[[dict[str, float]], None] | None = None,
) -> list[Source]:
    """A narrowed scope of at most NARROW_COUNTED records (a subject's, or some kinds'): the
    records holding any of the words, scored in one statement that also counts each word's df
    among them (`_counted`), and the rest walked by their priors, read only if one of them can
    still beat the matches in hand. At most SMALL_SCOPE records: every record in the one
    statement. The GIN counts this replaces read every word's postings across the purpose again,
    once per word, before the same rows were read to score them."""
    if stats.records <= SMALL_SCOPE:
        return [Source(math.inf, _counted(index, scope, stats, words, every=True, counted=counted))]
    return [
        Source(math.inf, _counted(index, scope, stats, words, every=False, counted=counted)),
        Source(stats.prior_bound, partial(_walk, index, scope, stats, [], [], f"!{_any(words)}", 0.0)),
    ]


# --------------------------------------------------------------------------------------------
# the statements


def _timely(alias: str = "d") -> str:
    return (
        f"{alias}.expires_at > %(now)s AND ({alias}.valid_from IS NULL OR {alias}.valid_from <= %(now)s)"
        f" AND ({alias}.valid_to IS NULL OR {alias}.valid_to > %(now)s)"
    )


def _where(scope: Scope, *, alias: str = "d", timely: bool = True) -> str:
    return scope_where(scope, alias, timely=timely)[0]


def _params(index: SearchIndex, scope: Scope, **extra: Any) -> dict[str, Any]:
    """Every statement's parameters: the scope's, BM25's, and `extra`."""
    return {**scope_where(scope)[1], **recipe_params(index), **extra}


def _lexeme(lexeme: str) -> str:
    """A lexeme as a quoted tsquery operand: whatever it contains, it stays one operand."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def _any(lexemes: Sequence[str]) -> str:
    return "(" + " | ".join(map(_lexeme, lexemes)) + ")"


def _scope_tsquery(scope: Scope) -> str:
    """The scope as the index's scope lexemes (tenant, agent and purpose; the subject; any of the
    kinds), for the GIN index to find its rows."""
    parts = [_lexeme(f"scope {scope.tenant_id} {scope.agent_id} {scope.purpose}")]
    if scope.subject is not None:
        parts.append(_lexeme(f"subject {scope.subject}"))
    if scope.kind_ids is not None:
        parts.append(_any([f"kind {k}" for k in scope.kind_ids]) if scope.kind_ids else "'kind none'")
    return " & ".join(parts)


def _subset_query(words: list[str], include: Sequence[int], exclude: Sequence[int]) -> str:
    """The records containing every term of `include` and none of `exclude`, as a tsquery ("":
    every record)."""
    return " & ".join([*(_lexeme(words[j]) for j in include), *([f"!{_any([words[j] for j in exclude])}"] if exclude else [])])


def _select(lexical: str) -> str:
    # confirmed_at as seconds since the epoch (a float8 holds every microsecond of this era
    # exactly, so the order is the same): thousands of rows a recall, and a timestamp costs
    # far more to load in Python than a float.
    return (
        f"d.record_id, {lexical} AS lexical, {authority_sql('d', '::float8')} AS authority, "
        f"{confidence_sql('d')} AS confidence, {RECENCY} AS recency, "
        f"date_part('epoch', d.confirmed_at) AS confirmed_at"
    )


def _matching(index: SearchIndex) -> str:
    """The index's rows matching `%(query)s` (a tsquery holding the scope's lexemes), as `d`, found
    through the GIN index alone: fenced (OFFSET 0), so the scope's columns are checked on its rows
    rather than the planner adding a b-tree scan of the whole scope to intersect with them."""
    return f"(SELECT {SCORED_COLUMNS} FROM {index.storage_name} d WHERE d.vector @@ %(query)s::tsquery OFFSET 0) d"


def _lexical(
    words: list[str], idfs: Sequence[float] = (), *, tfs: str = "f", weights: Sequence[str] | None = None
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
    bound = {**{f"w{j}": word for j, word in enumerate(words)}, **{f"idf{j}": weight for j, weight in enumerate(idfs)}}
    return counts, lexical, bound


def _step(
    index: SearchIndex,
    scope: Scope,
    stats: Statistics,
    words: list[str],
    idfs: Sequence[float],
    include: Sequence[int],
    exclude: Sequence[int],
    before: Position | None = None,
    query: str = "",
) -> Callable[[], Iterator[Ranked]]:
    """The scope's records containing every term of `include` and none of `exclude` (indexes into
    `words`) and matching `query` (a tsquery, if given), scored on all the words, in rank order;
    only those older than a walk's position `before`, if given."""
    query = " & ".join(filter(None, [_scope_tsquery(scope), _subset_query(words, include, exclude), query]))
    counts, lexical, terms_bound = _lexical(words, idfs)
    sql = (
        f"SELECT ranked.* FROM (SELECT {_select(lexical)} FROM {_matching(index)} "
        f"CROSS JOIN LATERAL (SELECT {counts} OFFSET 0) f WHERE {_where(scope)}"
        f"{f' AND {KEYSET}' if before else ''} OFFSET 0) ranked {ORDER_SQL} LIMIT %(limit)s"
    )
    position = {"after_at": before[0], "after_id": before[1]} if before else {}

    def read(limit: int) -> list[Ranked]:
        bound = _params(index, scope, query=query, avgdl=stats.avgdl or 1.0, limit=limit, **terms_bound, **position)
        return [ranked(row) for row in fetch(sql, bound)]

    return lambda: paged(read)


def _counted(
    index: SearchIndex,
    scope: Scope,
    stats: Statistics,
    words: list[str],
    *,
    every: bool,
    counted: Callable[[dict[str, float]], None] | None = None,
) -> Callable[[], Iterator[Ranked]]:
    """The scope's records holding any of `words` (`every`: all its records), in rank order, with
    each word's df counted among the records read, which are all that can hold it. The collection
    counts records past their time too (see `memory.search.ranking`), so the rows are read
    regardless of time and only the timely ones ranked. Each row also carries the words' idf as
    counted, handed to `counted` (word -> idf) from the first row read."""
    query = _scope_tsquery(scope) + ("" if every else f" & {_any(words)}")
    counts, lexical, terms_bound = _lexical(words, tfs="d", weights=[f"c.w{j}" for j in range(len(words))])
    weights = (
        ", ".join(
            f"ln(1 + (%(n)s::float8 - count(t{j}) + 0.5::float8) / (count(t{j}) + 0.5::float8)) AS w{j}"
            for j in range(len(words))
        )
        or "1 AS w"
    )
    idfs = ", ".join(f"c.w{j}" for j in range(len(words))) or "1 AS w"
    sql = (
        f"WITH m AS MATERIALIZED (SELECT d.record_id, d.doclen, d.authority, d.confidence, d.confirmed_at, "
        f"{_timely()} AS timely, {counts} "
        f"FROM {_matching(index)} WHERE {_where(scope, timely=False)}), "
        f"c AS MATERIALIZED (SELECT {weights} FROM m) "
        f"SELECT ranked.* FROM (SELECT {_select(lexical)}, {idfs} FROM m d CROSS JOIN c WHERE d.timely OFFSET 0) ranked "
        f"{ORDER_SQL} LIMIT %(limit)s"
    )

    def read(limit: int) -> list[Ranked]:
        bound = _params(index, scope, query=query, n=stats.records, avgdl=stats.avgdl or 1.0, limit=limit, **terms_bound)
        rows = fetch(sql, bound)
        if rows and counted is not None:
            counted({word: float(weight) for word, weight in zip(words, rows[0][6 : 6 + len(words)], strict=True)})
        return [ranked(row) for row in rows]

    return lambda: paged(read)


def _walk(
    index: SearchIndex,
    scope: Scope,
    stats: Statistics,
    words: list[str],
    idfs: Sequence[float],
    query: str,
    lexical_bound: float,
    *,
    after: Position | None = None,
    budget: int | None = None,
    give_up: GiveUp | None = None,
) -> Iterator[Ranked]:
    """The scope's records matching `query` (a tsquery; "": all), best first, each scored on all the
    words and read newest-confirmed first (from after the position `after`, if given) by a
    `PriorsWalk`; none of them adds more than `lexical_bound` from the words."""
    where = _where(scope)
    if query:
        # In a form the GIN index cannot serve: the walk reads the scope's recency index and
        # checks each row, never every match across all tenants gathered to be sorted (a plan
        # the planner may otherwise pick when its estimates are off).
        where += " AND coalesce(d.vector @@ %(query)s::tsquery, false)"
    counts, lexical, terms_bound = _lexical(words, idfs)
    rows_sql = (
        f"SELECT {_select(lexical)}, d.confirmed_at AS at FROM {index.storage_name} d "
        f"CROSS JOIN LATERAL (SELECT {counts} OFFSET 0) f "
        f"WHERE {where}{{range}} ORDER BY d.confirmed_at DESC, d.record_id DESC"
    )
    return iter(
        PriorsWalk(
            rows_sql,
            _params(index, scope, query=query, avgdl=stats.avgdl or 1.0, **terms_bound),
            static_bound=stats.prior_bound - RECENCY_MAX + lexical_bound,
            page=PAGE,
            page_best=PAGE_BEST,
            after=after,
            budget=budget,
            give_up=give_up,
        )
    )
