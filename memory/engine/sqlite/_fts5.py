"""SQLite's FTS5 outside the app's connection: a private in-memory database per thread holding
scratch FTS5 tables, so text can be analysed by the very tokenizer an index uses (the query's
terms, as-of recall's historical texts) without a statement on the app's connection and without
anything written to disk."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Sequence

from django.db import connection

from memory.search.recipes import ANALYSERS

_SCRATCH = threading.local()


def fts_phrase(text: str) -> str:
    """A string as one FTS5 phrase: double quotes doubled, so nothing in it is query syntax."""
    return '"' + text.replace('"', '""') + '"'


def fts5_scratch(tokenizer: str, name: str, columns: str, *, extra: Sequence[str] = ()) -> tuple[sqlite3.Connection, str]:
    """A private in-memory SQLite database (one per thread and process, opened with the driver of
    the app's connection, so the same FTS5 code as the index's) holding the FTS5 table `name`
    (columns, tokenizer one of ANALYSERS) and any `extra` DDL, made once. Callers work inside
    BEGIN ... ROLLBACK, so no text they analyse outlives the call, and the app's own connection
    runs no statement for it and writes nothing to a temporary file."""
    known = sorted(a["sqlite"] for a in ANALYSERS.values())
    if tokenizer not in known:  # never splice anything else into DDL
        raise ValueError("Unknown analyser.")
    table = f"{name}_{known.index(tokenizer)}"
    scratch = _SCRATCH
    if getattr(scratch, "pid", None) != os.getpid():  # a forked process opens its own
        scratch.pid, scratch.tables = os.getpid(), set()
        scratch.db = connection.Database.connect(":memory:", isolation_level=None)  # type: ignore[attr-defined]  # the driver
    if table not in scratch.tables:
        scratch.db.execute(f"CREATE VIRTUAL TABLE {table} USING fts5({columns}, tokenize='{tokenizer}')")
        for ddl in extra:
            scratch.db.execute(ddl.format(table=table))
        scratch.tables.add(table)
    return scratch.db, table


def fts5_tokens(tokenizer: str, texts: Sequence[str]) -> list[list[str]]:
    """Each text's tokens as an FTS5 table with `tokenizer` (one of ANALYSERS) stores them, read
    from a scratch table (`fts5_scratch`): a temp FTS5 table on recall's own connection would cost
    several statements a recall and, as SQLite's connections last one request, its creation each
    time."""
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
