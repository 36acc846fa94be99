"""Where a semantic index lives: one table per index, a row per `active` record with a copy of the
fields recall's hard filters and priors read (the same as a lexical index copies), the record's
`content_hash`, and its embedding as float32 bytes (`vector`, NULL while pending). It works the
same on PostgreSQL and SQLite: no vector extension (pgvector is not packaged here); recall reads
the scope's vectors and scores them with numpy (`memory.search.semantic`).

Triggers on the records keep the rows in step in the same transaction as every record change, as
for a lexical index: a record that becomes active gets a pending row, a record that stops being
active (forgotten, expired, superseded, quarantined again) loses its row and its vector at once,
and a change of content makes the row pending again (a changed scope or time keeps the vector).
Embeddings are never computed in a trigger or a request: the Celery task
`memory.tasks.embed_records` fills pending rows after the write commits, and a build fills all
of them.

This module is the backend-neutral face of that storage (each database's statements live in
`memory.engine.<database>.vectors`). The names follow `memory.search.storage`, so its
`drop_storage`, `storage_exists`, `triggers_present` and `drop_storage_except` serve both kinds
of index.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from memory.engine import current


def create_storage(name: str) -> int:
    """Create the index's table and triggers and a pending row for every active record; returns
    how many rows it holds. Any previous storage under the name is dropped first (a cache)."""
    return current().vectors.create_storage(name)


def reconcile(name: str) -> None:
    """Make the rows match the active records, keeping the vectors of unchanged records."""
    current().vectors.reconcile(name)


def repair_storage(name: str) -> int:
    """Recreate a missing table or triggers without losing the vectors already computed."""
    return current().vectors.repair_storage(name)


def count_rows(name: str, *, embedded: bool = False) -> int:
    return current().vectors.count_rows(name, embedded=embedded)


def pending(name: str, *, record_ids: Sequence | None = None, limit: int) -> list[tuple[uuid.UUID, str, str]]:
    """Up to `limit` pending rows (of `record_ids` when given) as (record id, content hash,
    content), the content read from the record itself."""
    return current().vectors.pending(name, record_ids=record_ids, limit=limit)


def store_vectors(name: str, rows: Sequence[tuple[uuid.UUID, str, bytes]]) -> int:
    """Write embeddings for (record id, content hash, vector bytes), each only if the row is still
    pending for that content. Returns how many were stored."""
    return current().vectors.store_vectors(name, rows)


def purge_records(name: str, record_ids: Sequence[uuid.UUID]) -> int:
    """Delete the given records' rows (and so their vectors); returns how many were still there."""
    return current().vectors.purge_records(name, record_ids)


def read_scope(name: str, where: str, params: dict) -> list[tuple]:
    """(record id, vector bytes) of the rows matching `where` (alias `d`) that have a vector."""
    return current().vectors.read_scope(name, where, params)


def read_rows(name: str, record_ids: Sequence) -> dict:
    """record id (as a UUID) -> (authority, confidence, confirmed_at) of the given rows."""
    return current().vectors.read_rows(name, record_ids)


def read_fresh(name: str, since: datetime, where: str, params: dict) -> list[tuple]:
    """(record id, vector bytes) of the rows matching `where` whose vector was stored after `since`."""
    return current().vectors.read_fresh(name, since, where, params)


def read_candidates(name: str, record_ids: Sequence[uuid.UUID], where: str, params: dict) -> list[tuple]:
    """(record id, vector bytes) of the given records whose rows match `where` and hold a vector."""
    return current().vectors.read_candidates(name, record_ids, where, params)


def read_checked(name: str, record_ids: Sequence[uuid.UUID], since: datetime, where: str, params: dict) -> list[tuple]:
    """In one statement, checked against `where`: (record id, None, authority, confidence,
    confirmed_at) of the given records whose rows hold a vector, then (record id, vector bytes,
    the same three) of the rows whose vector was stored after `since`."""
    return current().vectors.read_checked(name, record_ids, since, where, params)


def read_partition(name: str, tenant_id: int, *, after: uuid.UUID | None, limit: int) -> list[tuple[uuid.UUID, bytes]]:
    """Up to `limit` (record id, vector bytes) of a tenant's embedded rows in record id order after `after`."""
    return current().vectors.read_partition(name, tenant_id, after=after, limit=limit)


def embedded_ids(name: str, record_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Those of the given records whose rows still hold a vector."""
    return current().vectors.embedded_ids(name, record_ids)


def tenant_counts(name: str) -> dict[int, int]:
    """tenant id -> rows holding a vector."""
    return current().vectors.tenant_counts(name)


def analyze(name: str) -> None:
    """Refresh the database's statistics of the index's table (after a build filled it)."""
    current().vectors.analyze(name)


def newest_embedded(name: str) -> datetime | None:
    """When the index's most recent vector was stored (None: none recorded)."""
    return current().vectors.newest_embedded(name)


def clock() -> datetime:
    """The database's clock, the one `embedded_at` is written with."""
    return current().vectors.clock()
