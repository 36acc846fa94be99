"""PostgreSQL's lexical index storage at run time: build, drop, purge, sweep and inspect an index's
tables, at the current storage version (`VERSION`, whose DDL is `ddl_v<VERSION>`; migrations
call the pinned versions directly).

An index `<name>` holds `active` records, and records expired in time until the sweep deletes
them (`sweep_expired`), with a copy of the fields recall's hard filters and ranking read and a
word count, so collection statistics come from the index alone: `<name>_stats` per (tenant,
agent, purpose, subject, kind) and `<name>_terms` per (tenant, agent, purpose, term), kept by
statement triggers on `<name>`. A statement-level function `<name>_sync()` on the records feeds
it; a semantic index's `<name>_sync()` is statement-level too (`memory.engine.postgres.vectors`),
one design for both kinds (see `ddl_v1`, `ddl_v2`).

Table and function names derive from the index's primary key, never from user input; the only
recipe values spliced into DDL are the text search configurations the DDL module allows.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from memory.engine.postgres import ddl_v3 as ddl

VERSION = ddl.VERSION
RECORDS = ddl.RECORDS
# An index row's columns (memory.engine.postgres.ranking reads them all but the tsvector).
COLUMNS = ddl.COLUMNS
# How a statistics bucket's `authorities` holds the authorities present, one bit each.
AUTHORITY_BITS = ddl.AUTHORITY_BITS
RECORD_TRIGGERS = ("ins", "upd", "del")


def _execute(sql: str, params: Any = None) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def doclen_sql(expr: str) -> str:
    """Words in `expr`, counted as the index counts a record's (`doclen`)."""
    return ddl.doclen_sql(expr)


def scope_token(tenant_id: int, agent_id: int, purpose: str) -> str:
    """The lexeme an entry's tsvector holds for its scope (no word contains a space)."""
    return f"scope {tenant_id} {agent_id} {purpose}"


def subject_token(subject: str) -> str:
    return f"subject {subject}"


def kind_token(kind_id: int) -> str:
    return f"kind {kind_id}"


def build_storage(name: str, recipe: dict) -> int:
    """Create the index's tables and triggers and fill them from the active records; returns how
    many records it holds. Any previous storage under the name is dropped first (a cache)."""
    drop_storage(name)
    return ddl.lexical_create(name, recipe)


def drop_storage(name: str) -> None:
    """Drop an index's storage, lexical or semantic, with its function and triggers on the records."""
    ddl.drop(name)


def triggers_present(name: str) -> bool:
    """Whether all of the index's triggers on the records exist."""
    expected = [f"{name}_{suffix}" for suffix in RECORD_TRIGGERS]
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(DISTINCT tgname) FROM pg_trigger WHERE tgname = ANY(%s) AND NOT tgisinternal", [expected])
        return cursor.fetchone()[0] == len(expected)


def count_rows(name: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {name}")
        return cursor.fetchone()[0]


def purge_records(name: str, record_ids: Sequence[uuid.UUID]) -> int:
    """Delete the given records' entries; returns how many were still there. The statistics
    triggers delete a bucket (it names its subject) or term the delete empties."""
    if not record_ids:
        return 0
    return _execute(f"DELETE FROM {name} WHERE record_id = ANY(%s)", [list(record_ids)])


def sweep_expired(name: str, *, now: datetime, batch_size: int) -> int:
    """Delete the entries whose time was up at `now` (those of records the expire job expired, and
    of records past their time it has not reached yet; no recall can return either),
    `batch_size` per transaction, walking (expires_at, record_id) past the last batch so that no
    batch re-reads the entries the previous ones deleted; returns how many went."""
    removed, after = 0, None
    while True:
        keyset = "AND (expires_at, record_id) > (%s, %s) " if after else ""
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                f"WITH gone AS (DELETE FROM {name} WHERE record_id = ANY(ARRAY(SELECT record_id FROM {name} WHERE expires_at <= %s "
                f"{keyset}ORDER BY expires_at, record_id LIMIT %s)) RETURNING expires_at, record_id) "
                f"SELECT count(*) OVER (), expires_at, record_id FROM gone ORDER BY expires_at DESC, record_id DESC LIMIT 1",
                [now, *(after or ()), batch_size],
            )
            last = cursor.fetchone()
        done = last[0] if last else 0
        removed += done
        if done < batch_size:
            return removed
        after = (last[1], last[2])


def storage_objects() -> list[str]:
    """Names of every table and function in the schema that may belong to an index's storage
    (`memory_search_...`), whether or not an index row still describes it."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
            "AND tablename LIKE 'memory\\_search\\_%%' UNION "
            "SELECT proname FROM pg_proc WHERE proname LIKE 'memory\\_search\\_%%'"
        )
        return [row[0] for row in cursor.fetchall()]


def lock_bootstrap() -> None:
    """Serialise the first build of a default index between processes, until this transaction ends."""
    _execute("SELECT pg_advisory_xact_lock(hashtext('memory.search.bootstrap'))")
