"""PostgreSQL's semantic index storage at run time: one table per index (`<name>`), a row per
`active` record with a copy of the fields recall's hard filters and priors read, the record's
`content_hash` and its embedding as float32 bytes (`vector`, NULL while pending). No vector
extension: recall reads a scope's vectors and scores them with numpy (`memory.search.semantic`).

A statement-level function `<name>_sync()` on the records (triggers `<name>_ins|_upd|_del`, the
lexical index's design, `ddl_v2`) keeps the rows in step in the same transaction as every record
change: a record that becomes active gets a pending row, one that stops being active loses its
row at once, and a change of content makes the row pending again.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django.db import connection, transaction

from memory.engine.postgres import ddl_v2 as ddl
from memory.engine.postgres import search

COLUMNS = ddl.SEMANTIC_COLUMNS
RECORDS = ddl.RECORDS


def _execute(sql: str, params: Any = None) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def _values(r: str) -> str:
    return ", ".join(f"{r}.{column}" for column in ("id", *ddl.COPIED, "content_hash"))


def create_storage(name: str) -> int:
    """Create the index's table and triggers and a pending row for every active record; returns
    how many rows it holds. Any previous storage under the name is dropped first (a cache). The
    triggers exist before the load, so a write after it gets its row from its trigger; a write in
    flight during the load is caught by a reconciliation that first waits for every writer that
    started before it (a SHARE lock on the records, released at once)."""
    search.drop_storage(name)
    with transaction.atomic():
        for sql in (*ddl.semantic_table(name), *ddl.semantic_triggers(name)):
            _execute(sql)
        _execute(f"INSERT INTO {name} ({', '.join(COLUMNS)}) SELECT {_values('r')} FROM {RECORDS} r WHERE r.status = 'active'")
    reconcile(name)
    return count_rows(name)


def reconcile(name: str) -> None:
    """Make the rows match the active records: rows of records no longer active go, missing
    active records get pending rows, rows whose content changed become pending. Vectors of
    unchanged records are kept."""
    with transaction.atomic():
        _execute(f"LOCK TABLE {RECORDS} IN SHARE MODE")
    with transaction.atomic():
        _execute(
            f"DELETE FROM {name} WHERE NOT EXISTS "
            f"(SELECT 1 FROM {RECORDS} r WHERE r.id = {name}.record_id AND r.status = 'active')"
        )
        _execute(
            f"INSERT INTO {name} ({', '.join(COLUMNS)}) SELECT {_values('r')} FROM {RECORDS} r WHERE r.status = 'active' "
            f"AND NOT EXISTS (SELECT 1 FROM {name} d WHERE d.record_id = r.id)"
        )
        _execute(
            f"UPDATE {name} SET vector = NULL, content_hash = (SELECT r.content_hash FROM {RECORDS} r "
            f"WHERE r.id = {name}.record_id) WHERE content_hash <> (SELECT r.content_hash FROM {RECORDS} r "
            f"WHERE r.id = {name}.record_id)"
        )


def repair_storage(name: str) -> int:
    """Recreate a missing table or triggers without losing the vectors already computed."""
    if name not in connection.introspection.table_names():
        return create_storage(name)
    with transaction.atomic():
        for sql in ddl.semantic_triggers(name):
            _execute(sql)
    reconcile(name)
    return count_rows(name)


def count_rows(name: str, *, embedded: bool = False) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {name}" + (" WHERE vector IS NOT NULL" if embedded else ""))
        return cursor.fetchone()[0]


def pending(name: str, *, record_ids: Sequence | None = None, limit: int) -> list[tuple[uuid.UUID, str, str]]:
    """Up to `limit` pending rows (of `record_ids` when given) as (record id, content hash,
    content), the content read from the record itself."""
    where, params = "d.vector IS NULL", []
    if record_ids is not None:
        where += " AND d.record_id = ANY(%s)"
        params.append([uuid.UUID(str(pk)) for pk in record_ids])
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT d.record_id, d.content_hash, r.content FROM {name} d JOIN {RECORDS} r "
            f"ON r.id = d.record_id AND r.content_hash = d.content_hash WHERE {where} "
            f"ORDER BY d.record_id LIMIT {int(limit)}",
            params,
        )
        return [(uuid.UUID(str(pk)), digest, content) for pk, digest, content in cursor.fetchall()]


def store_vectors(name: str, rows: Sequence[tuple[uuid.UUID, str, bytes]]) -> int:
    """Write embeddings for (record id, content hash, vector bytes), each only if the row is still
    pending for that content (a record whose content changed meanwhile, or that left the index,
    is not given a stale vector). Returns how many were stored."""
    if not rows:
        return 0
    with connection.cursor() as cursor:
        cursor.executemany(
            f"UPDATE {name} SET vector = %s WHERE record_id = %s AND content_hash = %s AND vector IS NULL",
            [(vector, pk, digest) for pk, digest, vector in rows],
        )
        return max(cursor.rowcount, 0)  # the driver sums the rows over the parameter sets


def purge_records(name: str, record_ids: Sequence[uuid.UUID]) -> int:
    """Delete the given records' rows (and so their vectors); returns how many were still there."""
    if not record_ids:
        return 0
    return _execute(f"DELETE FROM {name} WHERE record_id = ANY(%s)", [[uuid.UUID(str(pk)) for pk in record_ids]])


def read_scope(name: str, where: str, params: dict) -> list[tuple]:
    """(record id, vector bytes) of the rows matching `where` (alias `d`) that have a vector, sent
    in binary (raw bytes rather than hex text) through a server-side-binding cursor on Django's
    connection."""
    import psycopg

    sql = f"SELECT d.record_id, d.vector FROM {name} d WHERE {where} AND d.vector IS NOT NULL"
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, params, binary=True)
        return cursor.fetchall()


def read_rows(name: str, record_ids: Sequence) -> dict:
    """record id (as a UUID) -> (authority, confidence, confirmed_at) of the given rows."""
    if not record_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT record_id, authority, confidence, confirmed_at FROM {name} WHERE record_id = ANY(%s)",
            [[uuid.UUID(str(pk)) for pk in record_ids]],
        )
        return {
            uuid.UUID(str(pk)): (authority, confidence, confirmed_at)
            for pk, authority, confidence, confirmed_at in cursor.fetchall()
        }
