"""SQLite's lifecycle statements: bulk moves of records with their history rows, the expire job's
batches, record-id sets bound as one parameter, and (nothing to take) locks.

A bulk move is two statements, the records' UPDATE and one INSERT ... SELECT copying them into the
history table (what simple-history would write, without loading a row into Python). Which
statuses a statement selects and which it writes are the caller's (`memory.models.TRANSITIONS`,
read by `memory.services`): nothing here names a status. The PostgreSQL engine offers the same
functions.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import BooleanField, F
from django.db.models.expressions import RawSQL

from memory.models import MemoryRecord
from memory.outbox.models import Event

# Where the expire job's walk stands, between two batches: ("index", (expires_at, id) of the last
# record selected, or None at the start). Opaque to the caller, which hands it back.
Position = tuple[Any, ...]


def id_set(ids: Sequence[uuid.UUID], *, as_text: bool = False) -> RawSQL:
    """Record ids as a subquery over one parameter, a JSON list, for `pk__in=` (or
    `record_id__in=`); `as_text`: the ids as `str(pk)` writes them, for text columns."""
    return RawSQL("SELECT value FROM json_each(%s)", (json.dumps([str(pk) if as_text else pk.hex for pk in ids]),))


def take_locks(keys: Sequence[int], *, shared: bool = False, using: str = DEFAULT_DB_ALIAS) -> None:
    """Nothing to take: every writing transaction begins IMMEDIATE (config.settings), so writers
    already run one at a time and a check made inside the transaction holds until it commits."""


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
    and one outbox event of type `event` each (if given); the history rows and events are written
    in primary-key order. Two statements however many records (the ids travel as one parameter),
    and a third for the events; returns how many moved."""
    if not ids:
        return 0
    records = MemoryRecord.objects.db_manager(using).filter(pk__in=id_set(ids))
    changed = records.update(status=target, status_changed_at=now, version=F("version") + 1, **(also or {}))
    tracked = [f for f in MemoryRecord.history.model._meta.concrete_fields if not f.name.startswith("history_")]
    select_sql, select_params = records.order_by().values(*[f.attname for f in tracked]).query.sql_with_params()
    connection = connections[using]
    quote = connection.ops.quote_name
    columns = [quote(cast(str, f.column)) for f in tracked]
    sql = (
        f"INSERT INTO {quote(MemoryRecord.history.model._meta.db_table)} ({', '.join(columns + [quote(c) for c in history])}) "
        f"SELECT {', '.join('s.' + c for c in columns)}, {', '.join(['%s'] * len(history))} FROM ({select_sql}) s "
        f"ORDER BY s.{quote(cast(str, MemoryRecord._meta.pk.column))}"
    )
    values = [connection.ops.adapt_datetimefield_value(v) if isinstance(v, datetime) else v for v in history.values()]
    # The placeholders of the history columns come first in the statement, the subquery's after.
    with connection.cursor() as cursor:
        cursor.execute(sql, [*values, *select_params])
        if event:
            _write_events(cursor, records, event=event, now=now)
    return changed


def _write_events(cursor: Any, records: Any, *, event: str, now: datetime) -> None:
    """One outbox event per record `records` selects (memory.outbox), in one INSERT ... SELECT."""
    connection = cursor.db
    quote = connection.ops.quote_name
    fields = ("tenant_id", "agent_id", "purpose", "id", "version", "status", "authority", "kind_id")
    targets = ("tenant_id", "agent_id", "purpose", "record_id", "version", "status", "authority", "kind_id")
    select_sql, select_params = records.order_by().values(*fields).query.sql_with_params()
    cursor.execute(
        f"INSERT INTO {quote(Event._meta.db_table)} (uid, type, occurred_at, data, {', '.join(quote(t) for t in targets)}) "
        f"SELECT lower(hex(randomblob(16))), %s, %s, '{{}}', {', '.join('s.' + quote(f) for f in fields)} "
        f"FROM ({select_sql}) s ORDER BY s.{quote('id')}",
        [event, connection.ops.adapt_datetimefield_value(now), *select_params],
    )


def expiry_start(*, statuses: Collection[str], now: datetime, batch_size: int, walk: str | None, using: str) -> Position:
    """Where the expire job's walk begins. SQLite has one walk, along the expiry index in
    (expires_at, id) order; `walk` is PostgreSQL's choice and ignored here."""
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
    """One batch of the expire job's walk from `position`: a locking read of up to `batch_size`
    due records, then their move. Returns how many records moved and where the next batch starts
    (None: the walk is over)."""
    connection = connections[using]
    due = (
        MemoryRecord.objects.db_manager(using)
        .select_for_update(skip_locked=True)
        .filter(status__in=statuses, expires_at__lte=now)
    )
    after = position[1]
    if after is not None:
        # Each batch starts after the last one, along the expiry index: it never re-reads the entries
        # of records earlier batches expired. A row comparison: the index scan starts there (an OR
        # of the two would not).
        table = connection.ops.quote_name(MemoryRecord._meta.db_table)
        due = due.filter(RawSQL(f"({table}.expires_at, {table}.id) > (%s, %s)", after, output_field=BooleanField()))
    rows = list(due.order_by("expires_at", "pk").values_list("expires_at", "pk")[:batch_size])
    if not rows:
        return 0, None
    moved = move([pk for _, pk in rows], target=target, now=now, history=history, event=event, using=using)
    if len(rows) < batch_size:
        return moved, None
    keyset = (MemoryRecord._meta.get_field("expires_at"), MemoryRecord._meta.pk)
    last = tuple(field.get_db_prep_value(value, connection) for field, value in zip(keyset, rows[-1], strict=True))
    return moved, ("index", last)
