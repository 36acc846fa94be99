"""SQLite's semantic index storage at run time (`memory.engine._vectors`, bound here): ids bound
as one JSON parameter (`IN (SELECT value FROM json_each(%s))`: SQLite binds a parameter per value
otherwise, and limits how many a statement takes), record ids as hex text, times as UTC text in
the form Django stores them. SQLite has one writer at a time, so a load needs no reconciliation
after it. Row-level triggers `<name>_ai|_au|_ad` on the records (`ddl_v3`, version 1's design)
keep the rows in step.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from django.db import connection

from memory.engine._vectors import Vectors
from memory.engine.sqlite import ddl_v3 as ddl
from memory.engine.sqlite import search


def _ids(record_ids: Sequence) -> str:
    return json.dumps([uuid.UUID(str(pk)).hex for pk in record_ids])


def _text(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _fetch(sql: str, params: Any) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


_store = Vectors(
    ddl=ddl,
    drop_storage=search.drop_storage,
    ids_sql=lambda column, placeholder: f"{column} IN (SELECT value FROM json_each({placeholder}))",
    ids_value=_ids,
    key=lambda pk: pk.hex,
    time_value=_text,
    clock_sql=ddl.NOW,
    wait_for_writers=None,
    fetch_vectors=_fetch,
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
