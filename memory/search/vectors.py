"""Where a semantic index lives: one table per index, a row per `active` record with a copy of the
fields recall's hard filters and priors read (the same `COPIED` columns as a lexical index), the
record's `content_hash`, and its embedding as float32 bytes (`vector`, NULL while pending). It works
the same on PostgreSQL and SQLite: no vector extension (pgvector is not packaged here); recall
reads the scope's vectors and scores them with numpy (`memory.search.semantic`).

Triggers on the records keep the rows in step in the same transaction as every record change, as
for a lexical index: a record that becomes active gets a pending row, a record that stops being
active (forgotten, expired, superseded, quarantined again) loses its row and its vector at once,
and a change of content makes the row pending again (a changed scope or time keeps the vector).
Embeddings are never computed in a trigger or a request: the Celery task
`memory.tasks.embed_records` fills pending rows after the write commits, and a build fills all
of them.

The names follow `memory.search.storage` (table `<name>`; PostgreSQL: function `<name>_sync()` and
triggers `<name>_ins|_upd|_del`; SQLite: triggers `<name>_ai|_au|_ad`), so its `drop_storage`,
`storage_exists`, `triggers_present` and `drop_storage_except` serve both kinds of index.
"""

import json
import uuid
from collections.abc import Sequence

from django.db import connection, transaction

from memory.search import storage
from memory.search.storage import COPIED, RECORDS, WATCHED

COLUMNS = ("record_id", *COPIED, "content_hash")


def _execute(sql: str, params=None) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def _values(r: str) -> str:
    return ", ".join(f"{r}.{column}" for column in ("id", *COPIED, "content_hash"))


def _upsert(name: str) -> str:
    """Keeps the vector when the content is unchanged (a confirmation, a new expiry), drops it
    (pending again) when the content changed."""
    copied = ", ".join(f"{column} = excluded.{column}" for column in COPIED)
    return (
        f"ON CONFLICT (record_id) DO UPDATE SET {copied}, "
        f"vector = CASE WHEN {name}.content_hash = excluded.content_hash THEN {name}.vector ELSE NULL END, "
        f"content_hash = excluded.content_hash"
    )


# --------------------------------------------------------------------------------------------
# PostgreSQL


def _pg_table(name: str) -> list[str]:
    return [
        f"""CREATE TABLE {name} (
            record_id uuid PRIMARY KEY, tenant_id bigint NOT NULL, agent_id bigint NOT NULL,
            purpose varchar(100) NOT NULL, subject varchar(200) NOT NULL, kind_id bigint NOT NULL,
            authority varchar(16) NOT NULL, confidence double precision NOT NULL, confirmed_at timestamptz NOT NULL,
            expires_at timestamptz NOT NULL, valid_from timestamptz, valid_to timestamptz,
            content_hash varchar(71) NOT NULL, vector bytea)""",
        f"CREATE INDEX {name}_scope ON {name} (tenant_id, agent_id, purpose, subject)",
        f"CREATE INDEX {name}_pending ON {name} (record_id) WHERE vector IS NULL",
    ]


def _pg_triggers(name: str) -> list[str]:
    columns = ", ".join(COLUMNS)
    changed = " OR ".join(f"OLD.{column} IS DISTINCT FROM NEW.{column}" for column in (*WATCHED, "content_hash"))
    return [
        f"DROP FUNCTION IF EXISTS {name}_sync() CASCADE",  # and its triggers
        f"""CREATE FUNCTION {name}_sync() RETURNS trigger LANGUAGE plpgsql AS $fn$
            BEGIN
              IF TG_OP <> 'DELETE' AND NEW.status = 'active' THEN
                INSERT INTO {name} ({columns}) VALUES ({_values("NEW")}) {_upsert(name)};
              ELSIF TG_OP <> 'INSERT' THEN
                DELETE FROM {name} WHERE record_id = OLD.id;
              END IF;
              RETURN NULL;
            END $fn$""",
        f"""CREATE TRIGGER {name}_ins AFTER INSERT ON {RECORDS} FOR EACH ROW
            WHEN (NEW.status = 'active') EXECUTE FUNCTION {name}_sync()""",
        f"""CREATE TRIGGER {name}_upd AFTER UPDATE ON {RECORDS} FOR EACH ROW
            WHEN ((OLD.status = 'active' OR NEW.status = 'active') AND ({changed})) EXECUTE FUNCTION {name}_sync()""",
        f"""CREATE TRIGGER {name}_del AFTER DELETE ON {RECORDS} FOR EACH ROW
            WHEN (OLD.status = 'active') EXECUTE FUNCTION {name}_sync()""",
    ]


# --------------------------------------------------------------------------------------------
# SQLite


def _sqlite_table(name: str) -> list[str]:
    return [
        f"""CREATE TABLE {name} (
            record_id TEXT PRIMARY KEY, tenant_id INTEGER NOT NULL, agent_id INTEGER NOT NULL, purpose TEXT NOT NULL,
            subject TEXT NOT NULL, kind_id INTEGER NOT NULL, authority TEXT NOT NULL, confidence REAL NOT NULL,
            confirmed_at TEXT NOT NULL, expires_at TEXT NOT NULL, valid_from TEXT, valid_to TEXT,
            content_hash TEXT NOT NULL, vector BLOB)""",
        f"CREATE INDEX {name}_scope ON {name} (tenant_id, agent_id, purpose, subject)",
        f"CREATE INDEX {name}_pending ON {name} (record_id) WHERE vector IS NULL",
    ]


def _sqlite_triggers(name: str) -> list[str]:
    columns = ", ".join(COLUMNS)
    return [
        *(f"DROP TRIGGER IF EXISTS {name}_{suffix}" for suffix in storage.RECORD_TRIGGERS["sqlite"]),
        # `WHERE true`: SQLite's parser needs a WHERE before ON CONFLICT in INSERT ... SELECT.
        f"""CREATE TRIGGER {name}_ai AFTER INSERT ON {RECORDS} WHEN NEW.status = 'active' BEGIN
            INSERT INTO {name} ({columns}) SELECT {_values("NEW")} WHERE true {_upsert(name)}; END""",
        f"""CREATE TRIGGER {name}_au AFTER UPDATE OF {", ".join((*WATCHED, "content_hash"))} ON {RECORDS}
            WHEN OLD.status = 'active' OR NEW.status = 'active' BEGIN
            DELETE FROM {name} WHERE record_id = OLD.id AND NEW.status <> 'active';
            INSERT INTO {name} ({columns}) SELECT {_values("NEW")} WHERE NEW.status = 'active' {_upsert(name)}; END""",
        f"""CREATE TRIGGER {name}_ad AFTER DELETE ON {RECORDS} WHEN OLD.status = 'active' BEGIN
            DELETE FROM {name} WHERE record_id = OLD.id; END""",
    ]


def _table(name: str) -> list[str]:
    return _pg_table(name) if connection.vendor == "postgresql" else _sqlite_table(name)


def _triggers(name: str) -> list[str]:
    return _pg_triggers(name) if connection.vendor == "postgresql" else _sqlite_triggers(name)


# --------------------------------------------------------------------------------------------
# the interface used by memory.search.build, memory.search.semantic and the forget artifact


def create_storage(name: str) -> int:
    """Create the index's table and triggers and a pending row for every active record; returns
    how many rows it holds. Any previous storage under the name is dropped first (a cache).

    PostgreSQL: the triggers exist before the load, so a write after it gets its row from its
    trigger; a write in flight during the load is caught by a reconciliation that first waits for
    every writer that started before it (a SHARE lock on the records, released at once)."""
    storage.drop_storage(name)
    columns = ", ".join(COLUMNS)
    with transaction.atomic():
        for sql in (*_table(name), *_triggers(name)):
            _execute(sql)
        _execute(f"INSERT INTO {name} ({columns}) SELECT {_values('r')} FROM {RECORDS} r WHERE r.status = 'active'")
    if connection.vendor == "postgresql":
        reconcile(name)
    return count_rows(name)


def reconcile(name: str) -> None:
    """Make the rows match the active records: rows of records no longer active go, missing
    active records get pending rows, rows whose content changed become pending. Vectors of
    unchanged records are kept. (After a migration dropped the triggers on SQLite, say.)"""
    columns = ", ".join(COLUMNS)
    with transaction.atomic():
        if connection.vendor == "postgresql":
            _execute(f"LOCK TABLE {RECORDS} IN SHARE MODE")
    with transaction.atomic():
        _execute(
            f"DELETE FROM {name} WHERE NOT EXISTS "
            f"(SELECT 1 FROM {RECORDS} r WHERE r.id = {name}.record_id AND r.status = 'active')"
        )
        _execute(
            f"INSERT INTO {name} ({columns}) SELECT {_values('r')} FROM {RECORDS} r WHERE r.status = 'active' "
            f"AND NOT EXISTS (SELECT 1 FROM {name} d WHERE d.record_id = r.id)"
        )
        _execute(
            f"UPDATE {name} SET vector = NULL, content_hash = (SELECT r.content_hash FROM {RECORDS} r "
            f"WHERE r.id = {name}.record_id) WHERE content_hash <> (SELECT r.content_hash FROM {RECORDS} r "
            f"WHERE r.id = {name}.record_id)"
        )


def repair_storage(name: str) -> int:
    """Recreate a missing table or triggers without losing the vectors already computed."""
    if not storage.storage_exists(name):
        return create_storage(name)
    with transaction.atomic():
        for sql in _triggers(name):
            _execute(sql)
    reconcile(name)
    return count_rows(name)


def count_rows(name: str, *, embedded: bool = False) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {name}" + (" WHERE vector IS NOT NULL" if embedded else ""))
        return cursor.fetchone()[0]


def _ids_param(record_ids: Sequence) -> tuple[str, list | str]:
    """A condition `record_id IN <the ids>` and its parameter, for either database."""
    if connection.vendor == "postgresql":
        return "record_id = ANY(%s)", [uuid.UUID(str(pk)) for pk in record_ids]
    return "record_id IN (SELECT value FROM json_each(%s))", json.dumps([uuid.UUID(str(pk)).hex for pk in record_ids])


def pending(name: str, *, record_ids: Sequence | None = None, limit: int) -> list[tuple[uuid.UUID, str, str]]:
    """Up to `limit` pending rows (of `record_ids` when given) as (record id, content hash,
    content), the content read from the record itself."""
    where, params = "d.vector IS NULL", []
    if record_ids is not None:
        condition, value = _ids_param(record_ids)
        where += f" AND d.{condition}"
        params.append(value)
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
    key = (lambda pk: pk) if connection.vendor == "postgresql" else (lambda pk: pk.hex)
    with connection.cursor() as cursor:
        cursor.executemany(
            f"UPDATE {name} SET vector = %s WHERE record_id = %s AND content_hash = %s AND vector IS NULL",
            [(vector, key(pk), digest) for pk, digest, vector in rows],
        )
        return max(cursor.rowcount, 0)  # both drivers sum the rows over the parameter sets


def purge_records(name: str, record_ids: Sequence[uuid.UUID]) -> int:
    """Delete the given records' rows (and so their vectors); returns how many were still there."""
    if not record_ids:
        return 0
    condition, value = _ids_param(record_ids)
    return _execute(f"DELETE FROM {name} WHERE {condition}", [value])


def read_scope(name: str, where: str, params: dict) -> list[tuple]:
    """(record id, vector bytes) of the rows matching `where` (alias `d`) that have a vector.
    PostgreSQL sends them in binary (raw bytes rather than hex text: about half the time for a
    scope of 100,000), through a server-side-binding cursor on Django's connection."""
    sql = f"SELECT d.record_id, d.vector FROM {name} d WHERE {where} AND d.vector IS NOT NULL"
    if connection.vendor == "postgresql":
        import psycopg

        connection.ensure_connection()
        with psycopg.Cursor(connection.connection) as cursor:
            cursor.execute(sql, params, binary=True)
            return cursor.fetchall()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def read_rows(name: str, record_ids: Sequence) -> dict:
    """record id (as a UUID) -> (authority, confidence, confirmed_at) of the given rows."""
    if not record_ids:
        return {}
    condition, value = _ids_param(record_ids)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT record_id, authority, confidence, confirmed_at FROM {name} WHERE {condition}", [value])
        return {
            uuid.UUID(str(pk)): (authority, confidence, confirmed_at)
            for pk, authority, confidence, confirmed_at in cursor.fetchall()
        }
