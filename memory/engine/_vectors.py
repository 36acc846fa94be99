"""A semantic index's storage, written once for both engines: one table per index (`<name>`), a
row per `active` record with a copy of the fields recall's hard filters and priors read, the
record's `content_hash`, its embedding as float32 bytes (`vector`, NULL while pending) and when
that was stored (`embedded_at`). Each engine's `vectors` module binds this to its DDL and to its
spelling of what differs: how a list of ids is bound, a record id's stored form, the clock, and
how a reconciliation waits for the writers in flight.

The triggers (`ddl_v<N>.semantic_triggers`, one design per database) keep the rows in step with
the records in the same transaction as every record change: a record that becomes active gets a
pending row, one that stops being active loses its row at once, and a change of content makes the
row pending again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

from django.db import connection, transaction

PRIORS = "d.authority, d.confidence, d.confirmed_at"


def execute(sql: str, params: Any = None) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


@dataclass(frozen=True)
class Vectors:
    """The storage's statements for one engine. `ids_sql` renders "column is one of the ids bound
    to this placeholder", `ids_value` the ids as that one parameter, `key` a record id in its
    stored form, `time_value` a moment as the table stores it; `wait_for_writers` (or None) runs
    before a reconciliation so it sees every write that started before it; `fetch_vectors` reads
    (record id, vector) rows of a statement (an engine may send the bytes in binary)."""

    ddl: ModuleType
    drop_storage: Callable[[str], None]
    ids_sql: Callable[[str, str], str]
    ids_value: Callable[[Sequence], Any]
    key: Callable[[uuid.UUID], Any]
    time_value: Callable[[datetime], Any]
    clock_sql: str
    wait_for_writers: Callable[[], None] | None
    fetch_vectors: Callable[[str, Any], list[tuple]]

    def _values(self, r: str) -> str:
        return ", ".join(f"{r}.{column}" for column in ("id", *self.ddl.COPIED, "content_hash"))

    def create_storage(self, name: str) -> int:
        """Create the index's table and triggers and a pending row for every active record; returns
        how many rows it holds. Any previous storage under the name is dropped first (a cache). The
        triggers exist before the load, so a write after it gets its row from its trigger; a write
        in flight during the load is caught by the reconciliation that follows (which first waits
        for every writer that started before it, where the database has concurrent writers)."""
        self.drop_storage(name)
        columns = ", ".join(self.ddl.SEMANTIC_COLUMNS)
        with transaction.atomic():
            for sql in (*self.ddl.semantic_table(name), *self.ddl.semantic_triggers(name)):
                execute(sql)
            execute(
                f"INSERT INTO {name} ({columns}) SELECT {self._values('r')} FROM {self.ddl.RECORDS} r WHERE r.status = 'active'"
            )
        if self.wait_for_writers is not None:
            self.reconcile(name)
        # Statistics for the rows just loaded: without them the planner takes the pending rows
        # for a handful and reads every one of them for each chunk the build embeds.
        self.analyze(name)
        return self.count_rows(name)

    def reconcile(self, name: str) -> None:
        """Make the rows match the active records: rows of records no longer active go, missing
        active records get pending rows, rows whose content changed become pending. Vectors of
        unchanged records are kept."""
        records, columns = self.ddl.RECORDS, ", ".join(self.ddl.SEMANTIC_COLUMNS)
        if self.wait_for_writers is not None:
            with transaction.atomic():
                self.wait_for_writers()
        with transaction.atomic():
            execute(
                f"DELETE FROM {name} WHERE NOT EXISTS "
                f"(SELECT 1 FROM {records} r WHERE r.id = {name}.record_id AND r.status = 'active')"
            )
            execute(
                f"INSERT INTO {name} ({columns}) SELECT {self._values('r')} FROM {records} r WHERE r.status = 'active' "
                f"AND NOT EXISTS (SELECT 1 FROM {name} d WHERE d.record_id = r.id)"
            )
            execute(
                f"UPDATE {name} SET vector = NULL, content_hash = (SELECT r.content_hash FROM {records} r "
                f"WHERE r.id = {name}.record_id) WHERE content_hash <> (SELECT r.content_hash FROM {records} r "
                f"WHERE r.id = {name}.record_id)"
            )

    def repair_storage(self, name: str) -> int:
        """Recreate a missing table or triggers without losing the vectors already computed."""
        if name not in connection.introspection.table_names():
            return self.create_storage(name)
        with transaction.atomic():
            for sql in self.ddl.semantic_triggers(name):
                execute(sql)
        self.reconcile(name)
        return self.count_rows(name)

    def count_rows(self, name: str, *, embedded: bool = False) -> int:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {name}" + (" WHERE vector IS NOT NULL" if embedded else ""))
            return cursor.fetchone()[0]

    def pending(self, name: str, *, record_ids: Sequence | None = None, limit: int) -> list[tuple[uuid.UUID, str, str]]:
        """Up to `limit` pending rows (of `record_ids` when given) as (record id, content hash,
        content), the content read from the record itself."""
        where, params = "d.vector IS NULL", []
        if record_ids is not None:
            where += f" AND {self.ids_sql('d.record_id', '%s')}"
            params.append(self.ids_value(record_ids))
        # The content is read per row, for the rows the limit keeps: as a join, PostgreSQL estimates
        # that almost no pending row matches its record on two columns, and joins every pending row
        # of the table to pick the first few (seconds per chunk at a million). The triggers keep a
        # pending row's content_hash the record's, so a row without content is a row in flight.
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT d.record_id, d.content_hash, (SELECT r.content FROM {self.ddl.RECORDS} r "
                f"WHERE r.id = d.record_id AND r.content_hash = d.content_hash) FROM {name} d WHERE {where} "
                f"ORDER BY d.record_id LIMIT {int(limit)}",
                params,
            )
            return [(uuid.UUID(str(pk)), digest, content) for pk, digest, content in cursor.fetchall() if content is not None]

    def store_vectors(self, name: str, rows: Sequence[tuple[uuid.UUID, str, bytes]]) -> int:
        """Write embeddings for (record id, content hash, vector bytes), each only if the row is
        still pending for that content (a record whose content changed meanwhile, or that left the
        index, is not given a stale vector), with the moment it was stored. Returns how many."""
        if not rows:
            return 0
        with connection.cursor() as cursor:
            cursor.executemany(
                f"UPDATE {name} SET vector = %s, embedded_at = {self.ddl.EMBEDDED_NOW} "
                "WHERE record_id = %s AND content_hash = %s AND vector IS NULL",
                [(vector, self.key(pk), digest) for pk, digest, vector in rows],
            )
            return max(cursor.rowcount, 0)  # the driver sums the rows over the parameter sets

    def purge_records(self, name: str, record_ids: Sequence[uuid.UUID]) -> int:
        """Delete the given records' rows (and so their vectors); returns how many were still there."""
        if not record_ids:
            return 0
        return execute(f"DELETE FROM {name} WHERE {self.ids_sql('record_id', '%s')}", [self.ids_value(record_ids)])

    def read_scope(self, name: str, where: str, params: dict) -> list[tuple]:
        """(record id, vector bytes) of the rows matching `where` (alias `d`) that have a vector."""
        return self.fetch_vectors(f"SELECT d.record_id, d.vector FROM {name} d WHERE {where} AND d.vector IS NOT NULL", params)

    def read_fresh(self, name: str, since: datetime, where: str, params: dict) -> list[tuple]:
        """(record id, vector bytes) of the rows matching `where` whose vector was stored after
        `since` (found by the index on `embedded_at`)."""
        # Fenced (MATERIALIZED): the few fresh rows first, by their index, then the scope's
        # filters on them; a planner choosing the scope's index would read the whole scope.
        return self.fetch_vectors(
            f"WITH d AS MATERIALIZED (SELECT * FROM {name} WHERE vector IS NOT NULL "
            f"AND embedded_at > %(embedded_since)s) SELECT d.record_id, d.vector FROM d WHERE {where}",
            {**params, "embedded_since": self.time_value(since)},
        )

    def read_candidates(self, name: str, record_ids: Sequence[uuid.UUID], where: str, params: dict) -> list[tuple]:
        """(record id, vector bytes) of the given records whose rows match `where` and have a
        vector: the candidates an approximate search proposed, checked against the hard filters."""
        if not record_ids:
            return []
        # Fenced (MATERIALIZED): the candidates by primary key first, then the scope's filters.
        return self.fetch_vectors(
            f"WITH d AS MATERIALIZED (SELECT * FROM {name} WHERE {self.ids_sql('record_id', '%(candidates)s')} "
            f"AND vector IS NOT NULL) SELECT d.record_id, d.vector FROM d WHERE {where}",
            {**params, "candidates": self.ids_value(record_ids)},
        )

    def read_checked(self, name: str, record_ids: Sequence[uuid.UUID], since: datetime, where: str, params: dict) -> list[tuple]:
        """An approximate search's candidates and fresh rows in one statement, both checked against
        `where`: (record id, None, authority, confidence, confirmed_at) of each of the given records
        whose row matches and holds a vector, then (record id, vector bytes, the same three) of
        every matching row whose vector was stored after `since` (a candidate can be both)."""
        # Fenced (MATERIALIZED): the candidates by primary key and the fresh rows by their index
        # first, then the scope's filters on them; a planner choosing the scope's index would read
        # the whole scope.
        return self.fetch_vectors(
            f"WITH c AS MATERIALIZED (SELECT * FROM {name} WHERE {self.ids_sql('record_id', '%(candidates)s')} "
            f"AND vector IS NOT NULL), f AS MATERIALIZED (SELECT * FROM {name} WHERE vector IS NOT NULL "
            f"AND embedded_at > %(embedded_since)s) "
            f"SELECT d.record_id, NULL, {PRIORS} FROM c d WHERE {where} "
            f"UNION ALL SELECT d.record_id, d.vector, {PRIORS} FROM f d WHERE {where}",
            {**params, "candidates": self.ids_value(record_ids), "embedded_since": self.time_value(since)},
        )

    def read_partition(self, name: str, tenant_id: int, *, after: uuid.UUID | None, limit: int) -> list[tuple]:
        """Up to `limit` (record id as a UUID, vector bytes) of the tenant's embedded rows, in
        record id order after `after`: a build's read, chunk by chunk."""
        where, params = "d.tenant_id = %(tenant)s", {"tenant": tenant_id}
        if after is not None:
            where += " AND d.record_id > %(after)s"
            params["after"] = self.key(after)
        rows = self.fetch_vectors(
            f"SELECT d.record_id, d.vector FROM {name} d WHERE {where} AND d.vector IS NOT NULL "
            f"ORDER BY d.record_id LIMIT {int(limit)}",
            params,
        )
        return [(uuid.UUID(str(pk)), vector) for pk, vector in rows]

    def embedded_ids(self, name: str, record_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        """Those of the given records whose rows still hold a vector."""
        if not record_ids:
            return set()
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT record_id FROM {name} WHERE {self.ids_sql('record_id', '%s')} AND vector IS NOT NULL",
                [self.ids_value(record_ids)],
            )
            return {uuid.UUID(str(pk)) for (pk,) in cursor.fetchall()}

    def tenant_counts(self, name: str) -> dict[int, int]:
        """tenant id -> rows holding a vector."""
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT tenant_id, count(*) FROM {name} WHERE vector IS NOT NULL GROUP BY tenant_id")
            return {int(tenant): count for tenant, count in cursor.fetchall()}

    def analyze(self, name: str) -> None:
        """Refresh the planner's statistics of the table (after a build filled it)."""
        execute(f"ANALYZE {name}")

    def newest_embedded(self, name: str) -> datetime | None:
        """When the most recent vector was stored (None: none since version 3)."""
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT max(embedded_at) FROM {name} WHERE vector IS NOT NULL")
            newest = cursor.fetchone()[0]
        return newest if newest is None or isinstance(newest, datetime) else datetime.fromisoformat(newest).replace(tzinfo=UTC)

    def clock(self) -> datetime:
        """The database's clock, as `embedded_at` is written with it."""
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {self.clock_sql}")
            now = cursor.fetchone()[0]
        return now if isinstance(now, datetime) else datetime.fromisoformat(now).replace(tzinfo=UTC)

    def read_rows(self, name: str, record_ids: Sequence) -> dict:
        """record id (as a UUID) -> (authority, confidence, confirmed_at) of the given rows."""
        if not record_ids:
            return {}
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT d.record_id, {PRIORS} FROM {name} d WHERE {self.ids_sql('d.record_id', '%s')}",
                [self.ids_value(record_ids)],
            )
            return {
                uuid.UUID(str(pk)): (authority, confidence, confirmed_at)
                for pk, authority, confidence, confirmed_at in cursor.fetchall()
            }
