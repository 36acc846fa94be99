"""Recall's ranking over records as they were at a past moment (`memory.asof`), by the same rules
and scoring functions as `memory.search.ranking`, over texts the search index no longer holds.

The index tables hold today's active records only, so the historical rows are analysed here, by
the database, with the serving lexical index's recipe: on PostgreSQL `to_tsvector` with its text
search configuration (occurrences per lexeme, as the index stores them), on SQLite the recipe's
FTS5 tokenizer in a private scratch table (ranking.fts5_scratch), matched and counted the way the index is
(`highlight()` marks). The word count is the index's `doclen_sql`. BM25's collection (N, the
average length, each term's document frequency) is the scope's records that were active then,
including those already past expiry or outside their valid window (as the index counts them);
only the timely ones are ranked. Terms add up rarest first, as on PostgreSQL; the priors are
`ranking.priors` with recency measured at that moment; rows come out in `Ranked.sort_key` order.
"""

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection

from memory.search.models import SearchIndex
from memory.search.ranking import Ranked, analyse_query, fts5_scratch, fts_phrase, idf, priors, term_score
from memory.search.storage import doclen_sql


@dataclass
class AsOfRanking:
    terms: list[str]
    rows: list[Ranked] = field(default_factory=list)


def rank_rows(index: SearchIndex, rows: Sequence, query: str, *, now: datetime, timely: Callable[[object], bool]) -> AsOfRanking:
    """`rows` (history rows: the collection) ranked for `query`; only those `timely` accepts."""
    analysed = analyse_query(index, query)
    ranking = AsOfRanking(terms=[term for term, _ in analysed])
    if not rows:
        return ranking
    words = [word for _, word in analysed]
    doclens, tfs = _analyse_rows(index, rows, words)
    n = len(rows)
    avgdl = (sum(doclens.values()) / n) or 1.0
    frequencies = {word: sum(1 for key in doclens if tfs.get((key, word), 0) > 0) for word in words}
    present = sorted(((word, df) for word, df in frequencies.items() if df > 0), key=lambda item: (item[1], item[0]))
    weights = [(word, idf(n, df)) for word, df in present]
    k1, b = float(index.recipe["k1"]), float(index.recipe["b"])
    for row in rows:
        if not timely(row):
            continue
        lexical = 0.0
        for word, weight in weights:
            tf = float(tfs.get((row.history_id, word), 0))
            if tf > 0:
                lexical += term_score(weight, tf, k1=k1, b=b, doclen=doclens[row.history_id], avgdl=avgdl)
        parts = {"lexical": lexical, **priors(row.authority, row.confidence, row.confirmed_at, now)}
        ranking.rows.append(Ranked(record_id=uuid.UUID(str(row.id)), parts=parts, confirmed=row.confirmed_at.timestamp()))
    ranking.rows.sort(key=Ranked.sort_key)
    return ranking


def _analyse_rows(index, rows, words) -> tuple[dict[int, int], dict[tuple[int, str], int]]:
    """(history id -> word count, (history id, word) -> occurrences) for the rows' contents."""
    if connection.vendor == "postgresql":
        return _postgres(index, rows, words)
    return _sqlite(index, rows, words)


def _postgres(index, rows, words):
    config = index.recipe["analyser"]["postgresql"]
    table = rows[0]._meta.db_table
    sql = (
        f"SELECT h.history_id, {doclen_sql('h.content', vendor='postgresql')}, "
        f"(SELECT coalesce(jsonb_object_agg(u.lexeme, cardinality(u.positions)), '{{}}'::jsonb) "
        f"FROM unnest(to_tsvector(%(config)s::regconfig, h.content)) u WHERE u.lexeme = ANY(%(words)s)) "
        f"FROM {table} h WHERE h.history_id = ANY(%(ids)s)"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, {"config": config, "words": list(words), "ids": [row.history_id for row in rows]})
        fetched = cursor.fetchall()
    doclens, tfs = {}, {}
    for history_id, doclen, counts in fetched:
        doclens[history_id] = int(doclen)
        if isinstance(counts, str):  # Django leaves jsonb undecoded on its connections
            counts = json.loads(counts)
        for word, count in (counts or {}).items():
            tfs[(history_id, word)] = int(count)
    return doclens, tfs


def _sqlite(index, rows, words):
    """The contents go into a scratch FTS5 table with the index's tokenizer (a private in-memory
    database, rolled back afterwards: memory.search.ranking.fts5_scratch) and are matched per word
    as the index matches them."""
    db, scratch = fts5_scratch(index.recipe["analyser"]["sqlite"], "asof_docs", "body")
    doclens, tfs = {}, {}
    db.execute("BEGIN")
    try:
        db.executemany(f"INSERT INTO {scratch}(rowid, body) VALUES (?, ?)", [(row.history_id, row.content) for row in rows])
        doclens = {
            rowid: int(doclen)
            for rowid, doclen in db.execute(f"SELECT rowid, {doclen_sql('body', vendor='sqlite')} FROM {scratch}").fetchall()
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
