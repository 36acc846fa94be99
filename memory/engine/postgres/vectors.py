"""PostgreSQL's semantic index storage at run time (`memory.engine._vectors`, bound here): ids
bound as one array (`= ANY(%s)`), record ids as uuid, `clock_timestamp()` as the clock, vectors
read in binary (raw bytes rather than hex text), and a reconciliation that first waits for every
writer that started before it (a SHARE lock on the records, released at once). A
statement-level function `<name>_sync()` on the records (`ddl_v3`, version 2's design) keeps the
rows in step.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django.db import connections

from memory.engine._vectors import Vectors, execute
from memory.engine.postgres import ddl_v3 as ddl
from memory.engine.postgres import search
from memory.engine.routing import read_alias


def _fetch_binary(sql: str, params: Any) -> list[tuple]:
    import psycopg

    connection = connections[read_alias()]  # a replica when the caller allowed one (memory.replicas)
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, params, binary=True)
        return cursor.fetchall()


def _wait_for_writers() -> None:
    execute(f"LOCK TABLE {ddl.RECORDS} IN SHARE MODE")


def _uuids(record_ids: Sequence) -> list[uuid.UUID]:
    return [uuid.UUID(str(pk)) for pk in record_ids]


_store = Vectors(
    ddl=ddl,
    drop_storage=search.drop_storage,
    ids_sql=lambda column, placeholder: f"{column} = ANY({placeholder})",
    ids_value=_uuids,
    key=lambda pk: pk,
    time_value=lambda moment: moment,
    clock_sql="clock_timestamp()",
    wait_for_writers=_wait_for_writers,
    fetch_vectors=_fetch_binary,
)

create_storage = _store.create_storage
reconcile = _store.reconcile
repair_storage = _store.repair_storage
count_rows = _store.count_rows
pending = _store.pending
store_vectors = _store.store_vectors
purge_records = _store.purge_records
read_scope = _store.read_scope
read_fresh = _store.read_fresh
read_candidates = _store.read_candidates
read_checked = _store.read_checked
read_partition = _store.read_partition
embedded_ids = _store.embedded_ids
tenant_counts = _store.tenant_counts
analyze = _store.analyze
newest_embedded = _store.newest_embedded
clock = _store.clock
read_rows = _store.read_rows
