"""PostgreSQL's lifecycle statements: bulk moves of records with their history rows, the expire
job's batches, record-id sets bound as one parameter, and transaction-scoped advisory locks.

A bulk move is one statement: the records' UPDATE and the history INSERT ... SELECT from its
RETURNING, no key travelling to Python and back. Which statuses a statement selects and which it
writes are the caller's (`memory.models.TRANSITIONS`, read by `memory.services`): nothing here
names a status. The SQLite engine offers the same functions.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field
from django.db.models.expressions import RawSQL

from memory.models import MemoryRecord
from memory.outbox.models import Event

# Where the expire job's walk stands, between two batches: ("index", (expires_at, id) of the last
# record selected, or None at the start), or ("blocks", first page of the next range, pages in
# the table, pages per range). Opaque to the caller, which hands it back for the next batch.
Position = tuple[Any, ...]

# The table's size in pages; its parameter is the table's name.
_PAGES = "SELECT pg_relation_size(%s::regclass) / current_setting('block_size')::int"


def id_set(ids: Sequence[uuid.UUID], *, as_text: bool = False) -> RawSQL:
    """Record ids as a subquery over one uuid[] parameter, for `pk__in=` (or `record_id__in=`);
    `as_text`: the ids as `str(pk)` writes them, for text columns."""
    cast = "::text" if as_text else ""
    return RawSQL(f"SELECT unnest(%s::uuid[]){cast}", (_uuid_array(ids),))


def take_locks(keys: Sequence[int], *, shared: bool = False, using: str = DEFAULT_DB_ALIAS) -> None:
    """Take the advisory locks `keys` (signed 64-bit) until the transaction ends, in the order
    given (the caller sorts them), shared or exclusive. They live in the server's lock table:
    taking one writes nothing to disk and logs nothing."""
    function = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    with connections[using].cursor() as cursor:
        # unnest keeps the array's order, so every transaction takes its locks in one order
        cursor.execute(f"SELECT count({function}(k)) FROM unnest(%s::bigint[]) AS k", [list(keys)])


def move(
    ids: Sequence[uuid.UUID],
    *,
    target: str,
    now: datetime,
    history: Mapping[str, Any],
    also: Mapping[str, Any] | None = None,
    event: str | None = None,
    using: str,
) -> int:
    """Move the records `ids` (locked by the caller) to status `target` at `now`, setting the
    fields `also` names as well, with one history row each whose extra columns are `history`,
    and one outbox event of type `event` each (if given); the history rows and events are
    written in primary-key order. One statement; returns how many moved."""
    if not ids:
        return 0
    connection = connections[using]
    also = dict(also or {})
    sql = "WITH selected (at) AS (SELECT unnest(%s::uuid[])), " + _moved_sql(
        connection, match="r.id = selected.at", history=history, also=also, ordered=True, event=event
    )
    params = [
        _uuid_array(ids),
        *_move_params(connection, target=target, now=now, also=also),
        *_history_params(connection, history),
        *_event_params(connection, event, now),
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0]


def expiry_start(*, statuses: Collection[str], now: datetime, batch_size: int, walk: str | None, using: str) -> Position:
    """Where the expire job's walk begins, and which walk it takes (`walk`, chosen here unless
    given, for tests): along the expiry index in (expires_at, id) order ("index"), or, when at
    least as many records are due as the table has pages, through the table in physical order
    ("blocks"). Records sharing one expires_at follow each other in id order, which is random on
    disk, so a large expiry along the index touched every page of the table again in every batch,
    and after each checkpoint wrote each page whole to the WAL again; through the table, each page
    is written once, as one plain UPDATE of them all would."""
    connection = connections[using]
    table = _table(connection)
    with connection.cursor() as cursor:
        cursor.execute(f"{_PAGES}, greatest(reltuples, 0) FROM pg_class WHERE oid = %s::regclass", [table, table])
        pages, tuples = cursor.fetchone()
        if walk is None:
            # Counted along the expiry index, and never more than `pages`: cheap when few are due.
            due, due_params = _due(connection, statuses=statuses, now=now)
            cursor.execute(f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {due} LIMIT %s) d", [*due_params, max(pages, 1)])
            walk = "blocks" if cursor.fetchone()[0] >= max(pages, 1) else "index"
    if walk == "blocks":
        # About `batch_size` rows per range, from the table's average rows per page.
        step = max(1, int(batch_size * pages / tuples) if tuples > 0 else batch_size // 20)
        return ("blocks", 0, pages, step)
    return ("index", None)


def expire_batch(
    position: Position,
    *,
    statuses: Collection[str],
    target: str,
    now: datetime,
    batch_size: int,
    history: Mapping[str, Any],
    event: str | None = None,
    using: str,
) -> tuple[int, Position | None]:
    """One batch of the expire job's walk from `position`, in one statement: the selection,
    locking with SKIP LOCKED (a row another transaction holds is left for the next run), the
    UPDATE, which checks status and time again on the row's newest version, and the history
    INSERT from its RETURNING. Returns how many records moved and where the next batch starts
    (None: the walk is over)."""
    connection = connections[using]
    table = _table(connection)
    due, due_params = _due(connection, statuses=statuses, now=now)
    moved_params = [
        *_move_params(connection, target=target, now=now),
        *due_params,
        *_history_params(connection, history),
        *_event_params(connection, event, now),
    ]
    recheck, _ = _due(connection, statuses=statuses, now=now, alias="r.")
    if position[0] == "blocks":
        _, start, pages, step = position
        if start >= pages:  # pages added while the run went (new versions of records moved by updates) are walked too
            with connection.cursor() as cursor:
                cursor.execute(_PAGES, [table])
                pages = cursor.fetchone()[0]
            if start >= pages:
                return 0, None
        selected = f"SELECT ctid FROM {table} WHERE ctid >= %s::tid AND ctid < %s::tid AND {due} FOR UPDATE SKIP LOCKED"
        moved = _moved_sql(connection, match="r.ctid = selected.at", recheck=recheck, history=history, event=event)
        with connection.cursor() as cursor:
            cursor.execute(
                f"WITH selected (at) AS MATERIALIZED ({selected}), {moved}",
                [f"({start},0)", f"({start + step},0)", *due_params, *moved_params],
            )
            return cursor.fetchone()[0], ("blocks", start + step, pages, step)
    after = position[1]
    # Each batch starts after the last one, along the expiry index: it never re-reads the entries
    # of records earlier batches expired (dead until vacuum, and when many records share one
    # expires_at, read again from the heap by every batch). A row comparison: the index scan
    # starts there (an OR of the two would not).
    keyset = "AND (expires_at, id) > (%s, %s) " if after else ""
    selected = f"SELECT id, expires_at FROM {table} WHERE {due} {keyset}ORDER BY expires_at, id LIMIT %s FOR UPDATE SKIP LOCKED"
    moved = _moved_sql(connection, match="r.id = selected.at", recheck=recheck, history=history, event=event)
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH selected (at, expires_at) AS MATERIALIZED ({selected}), {moved}, "
            f"(SELECT count(*) FROM selected), last.* FROM (SELECT expires_at, at FROM selected "
            f"ORDER BY expires_at DESC, at DESC LIMIT 1) last",
            [*due_params, *(after or ()), batch_size, *moved_params],
        )
        row = cursor.fetchone()
    if row is None:  # nothing was due
        return 0, None
    done, selected_count, *last = row
    return done, (("index", tuple(last)) if selected_count >= batch_size else None)


def _uuid_array(ids: Sequence[uuid.UUID]) -> str:
    """A uuid[] literal: one short parameter however many ids (a list would bind one each)."""
    return "{" + ",".join(pk.hex for pk in ids) + "}"


def _table(connection: BaseDatabaseWrapper) -> str:
    return connection.ops.quote_name(MemoryRecord._meta.db_table)


def _due(connection: BaseDatabaseWrapper, *, statuses: Collection[str], now: datetime, alias: str = "") -> tuple[str, list[Any]]:
    """Records in one of `statuses` whose expiry has come by `now`: the condition (on the table
    `alias` names, if any) and its parameters."""
    condition = f"{alias}status = ANY(%s) AND {alias}expires_at <= %s"
    return condition, [sorted(statuses), connection.ops.adapt_datetimefield_value(now)]


def _tracked() -> list[Field]:
    """The record's fields the history model copies (its own `history_*` columns left out)."""
    return [f for f in MemoryRecord.history.model._meta.concrete_fields if not f.name.startswith("history_")]


def _field(name: str) -> Field:
    """The record's concrete field `name` (a column of its table)."""
    return cast(Field, MemoryRecord._meta.get_field(name))


def _column(connection: BaseDatabaseWrapper, field: Field) -> str:
    return connection.ops.quote_name(cast(str, field.column))


def _move_params(connection: BaseDatabaseWrapper, *, target: str, now: datetime, also: Mapping[str, Any] | None = None) -> list:
    """The parameters of `_moved_sql`'s SET clause, in its order."""
    extra = [_field(name).get_db_prep_save(value, connection) for name, value in (also or {}).items()]
    return [target, connection.ops.adapt_datetimefield_value(now), *extra]


def _event_params(connection: BaseDatabaseWrapper, event: str | None, now: datetime) -> list:
    """The parameters of `_moved_sql`'s event INSERT (none without an event)."""
    return [event, connection.ops.adapt_datetimefield_value(now)] if event else []


def _history_params(connection: BaseDatabaseWrapper, history: Mapping[str, Any]) -> list:
    return [connection.ops.adapt_datetimefield_value(v) if isinstance(v, datetime) else v for v in history.values()]


def _moved_sql(
    connection: BaseDatabaseWrapper,
    *,
    match: str,
    history: Mapping[str, Any],
    recheck: str = "TRUE",
    also: Mapping[str, Any] | None = None,
    ordered: bool = False,
    event: str | None = None,
) -> str:
    """The rest of a `WITH selected (at ...) AS (...)` statement that moves the records `match`
    finds (`r` a record, `selected.at` a selected key) and still satisfy `recheck` to a status,
    with one history row each (`history` names its columns besides the record's fields; in
    primary-key order if `ordered`), and selects how many moved, as its first column.
    With `event`, one outbox event per moved record too (memory.outbox), in the same statement.
    Parameters: `_move_params`, `recheck`'s, `_history_params`, then `_event_params`. The UPDATE evaluates
    `recheck` again on the newest version of a row changed meanwhile, so a record another
    transaction moved is left."""
    quote = connection.ops.quote_name
    columns = [_column(connection, f) for f in _tracked()]
    history_columns = [quote(name) for name in history]
    sets = "".join(f", {_column(connection, _field(name))} = %s" for name in also or {})
    order = f" ORDER BY moved.{_column(connection, _field('id'))}" if ordered else ""
    return (
        f"moved AS (UPDATE {_table(connection)} r SET {quote('status')} = %s, {quote('status_changed_at')} = %s, "
        f"{quote('version')} = r.{quote('version')} + 1{sets} FROM selected WHERE {match} AND {recheck} "
        f"RETURNING {', '.join('r.' + c for c in columns)}), "
        f"written AS (INSERT INTO {quote(MemoryRecord.history.model._meta.db_table)} "
        f"({', '.join(columns + history_columns)}) "
        f"SELECT {', '.join('moved.' + c for c in columns)}, {', '.join(['%s'] * len(history_columns))} FROM moved{order} RETURNING 1) "
        f"{_evented_sql(connection, order) if event else ''}"
        f"SELECT (SELECT count(*) FROM written)"
    )


def _evented_sql(connection: BaseDatabaseWrapper, order: str) -> str:
    """The CTE that writes one outbox event per moved record (its type and time are parameters);
    PostgreSQL runs a data-modifying CTE whether or not the statement reads it."""
    quote = connection.ops.quote_name
    fields = ("tenant_id", "agent_id", "purpose", "id", "version", "status", "authority", "kind_id")
    targets = ("tenant_id", "agent_id", "purpose", "record_id", "version", "status", "authority", "kind_id")
    return (
        f", evented AS (INSERT INTO {quote(Event._meta.db_table)} (uid, type, occurred_at, data, {', '.join(quote(t) for t in targets)}) "
        f"SELECT gen_random_uuid(), %s, %s, '{{}}'::jsonb, {', '.join('moved.' + _column(connection, _field(f)) for f in fields)} "
        f"FROM moved{order} RETURNING 1) "
    )
