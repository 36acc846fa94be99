"""SQLite's side of recall's ranking: the scope as SQL, the query's analysis, the collection's
statistics, the sources `memory.search.ranking.merge` reads, and the analysis of historical texts
for as-of recall. `memory.search.ranking` says what is computed; this module how SQLite (the
embedded default, for smaller collections) finds the rows: every matching record is scored in one
statement (FTS5 matches per term within the scope's tokens; tf counted from `highlight()`), and
the rest ranked by their priors in another.

The index's FTS5 table carries the scope as tokens (`search.scope_token`, `subject_token`,
`kind_token`), so the ranking statements render the scope as an FTS5 match on them plus the time
conditions on the copied columns (`_match`, `_timely`); the vector tables, which have no FTS5
part, are filtered on the copied columns (`scope_where`).
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from django.db import connection

from memory.engine._ranking import ORDER_SQL, authority_sql, confidence_sql, fetch, ranked, recipe_params, tf_part_sql
from memory.engine.sqlite import search
from memory.engine.sqlite._fts5 import fts5_scratch, fts5_tokens, fts_phrase
from memory.engine.sqlite._sequences import sequence_window as sequence_window
from memory.scope import Scope
from memory.search.models import SearchIndex
from memory.search.ranking import RECENCY_HALF_LIFE_DAYS, WORD, Ranked, Source, Statistics, Term, idf, paged, prior_bound
from memory.search.recipes import stop_words

RECENCY = f"power(0.5, max(0.0, julianday(%(now)s) - julianday(d.confirmed_at)) / {RECENCY_HALF_LIFE_DAYS!r})"


# --------------------------------------------------------------------------------------------
# the interface every engine offers


def scope_where(scope: Scope, alias: str = "d", *, timely: bool = True) -> tuple[str, dict[str, Any]]:
    """The scope's filter over an index's copy of the record columns (alias `alias`) and its
    parameters (scalars only: SQLite's query logging quotes each one); `timely=False` leaves out
    expiry and validity."""
    where = f"{alias}.tenant_id = %(tenant)s AND {alias}.agent_id = %(agent)s AND {alias}.purpose = %(purpose)s"
    if scope.subject is not None:
        where += f" AND {alias}.subject = %(subject)s"
    if scope.kind_ids is not None:
        where += f" AND {alias}.kind_id IN (SELECT value FROM json_each(%(kinds)s))"
    if timely:
        where += f" AND {_timely(alias)}"
    return where, {
        "tenant": scope.tenant_id,
        "agent": scope.agent_id,
        "purpose": scope.purpose,
        "subject": scope.subject,
        "kinds": json.dumps(list(scope.kind_ids or ())),
        "now": connection.ops.adapt_datetimefield_value(scope.now),
    }


def record_key(record_id: uuid.UUID) -> Any:
    """A record id as the index tables return it (hex text)."""
    return record_id.hex


def terms(recipe: dict, text: str) -> list[tuple[str, str]]:
    """The query's terms: unicode61 splits on everything but letters and digits; the recipe's stop
    words go first (before stemming, as PostgreSQL does); the rest are stemmed by the index's own
    tokenizer (`fts5_tokens`), and each distinct stem is kept once."""
    drop = stop_words(recipe)
    words = list(dict.fromkeys(w for w in WORD.findall(text.lower()) if w not in drop))
    if not words:
        return []
    kept: dict[str, str] = {}  # stem(s) -> the first word with them (the stemmer is not idempotent)
    for word, stems in zip(words, fts5_tokens(recipe["analyser"]["sqlite"], words), strict=True):
        if stems:
            kept.setdefault(" ".join(stems), word)
    return list(kept.items())


def word_terms(recipe: dict, words: Sequence[str]) -> list[list[str]]:
    """Each of `words` (as `terms` splits a text) analysed alone, as `terms` would store it: its
    stems, as one term; none for a stop word."""
    drop = stop_words(recipe)
    lowered = [word.lower() for word in words]
    kept = [word for word in lowered if word not in drop]
    stems = dict(zip(kept, fts5_tokens(recipe["analyser"]["sqlite"], kept), strict=True)) if kept else {}
    return [[" ".join(stems[word])] if stems.get(word) else [] for word in lowered]


def collection(index: SearchIndex, scope: Scope, words: list[str]) -> tuple[Statistics, list[tuple[int | None, int | None]]]:
    """The scope's statistics and, per word, (df, None): FTS5 keeps no bound on tf."""
    frequencies = _document_frequencies(index, scope, words) if words else []
    return _statistics(index, scope), [(df, None) for df in frequencies]


def sources(
    index: SearchIndex,
    scope: Scope,
    stats: Statistics,
    present: list[Term],
    counted: Callable[[dict[str, float]], None] | None = None,
) -> list[Source]:
    """Two sources: the records holding any of the words, scored (read first: no bound), and the
    others by their priors. (`counted` is never called: every df is known beforehand here.)"""
    words = [term.word for term in present]
    idfs = [idf(stats.records, int(term.df or 0)) for term in present]
    found = [Source(stats.prior_bound, partial(paged, partial(_by_priors, index, scope, words)))]
    if words:
        found.append(Source(math.inf, partial(paged, partial(_matches, index, scope, stats, words, idfs))))
    return found


def analyse_history(recipe: dict, rows: Sequence, words: Sequence[str]) -> tuple[dict[int, int], dict[tuple[int, str], int]]:
    """(history id -> word count, (history id, word) -> occurrences) of the history rows' contents:
    they go into a scratch FTS5 table with the recipe's tokenizer (`fts5_scratch`: a private
    in-memory database, rolled back afterwards) and are matched per word as the index matches
    them; the word count is the index's `doclen_sql`."""
    db, scratch = fts5_scratch(recipe["analyser"]["sqlite"], "asof_docs", "body")
    doclens, tfs = {}, {}
    db.execute("BEGIN")
    try:
        db.executemany(f"INSERT INTO {scratch}(rowid, body) VALUES (?, ?)", [(row.history_id, row.content) for row in rows])
        doclens = {
            rowid: int(doclen)
            for rowid, doclen in db.execute(f"SELECT rowid, {search.doclen_sql('body')} FROM {scratch}").fetchall()
        }
        for word in words:
            # tf: the word's marks in highlight(), minus any such character the text holds
            for rowid, body, marked in db.execute(
                f"SELECT rowid, body, highlight({scratch}, 0, char(1), '') FROM {scratch} WHERE {scratch} MATCH ?",
                [f"body : {fts_phrase(word)}"],
            ).fetchall():
                tfs[(rowid, word)] = marked.count("\x01") - body.count("\x01")
    finally:
        db.execute("ROLLBACK")
    return doclens, tfs


# --------------------------------------------------------------------------------------------
# the statements


def _timely(alias: str = "d") -> str:
    return (
        f"{alias}.expires_at > %(now)s AND ({alias}.valid_from IS NULL OR {alias}.valid_from <= %(now)s) "
        f"AND ({alias}.valid_to IS NULL OR {alias}.valid_to > %(now)s)"
    )


def _match(scope: Scope) -> str:
    """The scope (tenant, agent and purpose; the subject; any of the kinds) as an FTS5 match on the
    index's scope tokens."""
    parts = [f"scope : {fts_phrase(search.scope_token(scope.tenant_id, scope.agent_id, scope.purpose))}"]
    if scope.subject is not None:
        parts.append(f"subj : {fts_phrase(search.subject_token(scope.subject))}")
    if scope.kind_ids is not None:
        kinds = [f"kind : {fts_phrase(search.kind_token(k))}" for k in scope.kind_ids] or [f"kind : {fts_phrase('none')}"]
        parts.append("(" + " OR ".join(kinds) + ")")
    return " AND ".join(parts)


def _params(index: SearchIndex, scope: Scope, **extra: Any) -> dict[str, Any]:
    """Every scoring statement's parameters: the scope's, BM25's, and `extra`."""
    return {**scope_where(scope)[1], **recipe_params(index), **extra}


def _from(t: str) -> str:
    return f"FROM {t} JOIN {t}_doc d ON d.id = {t}.rowid WHERE {t} MATCH"


def _select(lexical: str) -> str:
    return (
        f"d.record_id, {lexical} AS lexical, {authority_sql('d')} AS authority, "
        f"{confidence_sql('d')} AS confidence, {RECENCY} AS recency, d.confirmed_at"
    )


def _statistics(index: SearchIndex, scope: Scope) -> Statistics:
    t, match = index.storage_name, _match(scope)
    docs, avgdl, max_confidence = fetch(
        f"SELECT count(*), coalesce(avg(d.doclen), 0.0), max(d.confidence) {_from(t)} %(match)s", {"match": match}
    )[0]
    authorities = [a for (a,) in fetch(f"SELECT DISTINCT d.authority {_from(t)} %(match)s", {"match": match})]
    return Statistics(records=int(docs), avgdl=float(avgdl), prior_bound=prior_bound(authorities, max_confidence))


def _document_frequencies(index: SearchIndex, scope: Scope, words: list[str]) -> list[int]:
    t, match = index.storage_name, _match(scope)
    counts = " UNION ALL ".join(f"SELECT {i}, count(*) {_from(t)} %(q{i})s" for i in range(len(words)))
    rows = fetch(
        f"SELECT * FROM ({counts}) ORDER BY 1",
        {f"q{i}": f"{match} AND body : {fts_phrase(word)}" for i, word in enumerate(words)},
    )
    return [int(count) for _, count in rows]


def _matches(
    index: SearchIndex, scope: Scope, stats: Statistics, words: list[str], idfs: Sequence[float], limit: int
) -> list[Ranked]:
    """Every record of the scope containing a term, scored: per term, its FTS5 matches with tf
    counted from the term's marks in highlight() (minus any such character already there)."""
    t, match = index.storage_name, _match(scope)
    branches = " UNION ALL ".join(
        f"SELECT d.id AS key, {i} AS term, d.doclen, d.body, highlight({t}, {search.BODY_COLUMN}, char(1), '') AS hl "
        f"{_from(t)} %(q{i})s AND {_timely()}"
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
        SELECT ranked.* FROM (SELECT {_select("l.lexical")} FROM lexical l JOIN {t}_doc d ON d.id = l.key) ranked
        {ORDER_SQL} LIMIT %(limit)s"""
    params = _params(
        index,
        scope,
        idfs=json.dumps(list(idfs)),
        avgdl=stats.avgdl or 1.0,
        limit=limit,
        **{f"q{i}": f"{match} AND body : {fts_phrase(word)}" for i, word in enumerate(words)},
    )
    return [ranked(row) for row in fetch(sql, params)]


def _by_priors(index: SearchIndex, scope: Scope, exclude: list[str], limit: int) -> list[Ranked]:
    """The scope's timely records holding none of the words `exclude`, best by their priors."""
    t, match = index.storage_name, _match(scope)
    if exclude:
        match = f"({match}) NOT (" + " OR ".join(f"body : {fts_phrase(word)}" for word in exclude) + ")"
    sql = (
        f"SELECT ranked.* FROM (SELECT {_select('0.0')} {_from(t)} %(match)s AND {_timely()}) ranked {ORDER_SQL} LIMIT %(limit)s"
    )
    return [ranked(row) for row in fetch(sql, _params(index, scope, match=match, limit=limit))]
