"""History rows, and moving records in bulk with one history row each.

A single transition saves the record and simple-history writes its row (`_stamp` says who and
why). A bulk move (expire, forget, revoke) writes the records and their history rows in the
database instead, without loading a row into Python; its source and target statuses come from
`memory.models.TRANSITIONS`, as a single transition's do.
"""

import uuid
from datetime import datetime

from django.db import connections, router
from django.db.models import F, QuerySet

from memory.actors import Actor
from memory.metrics import TRANSITIONS as TRANSITION_COUNT
from memory.metrics import count_on_commit
from memory.models import TRANSITIONS, MemoryRecord
from memory.policy import checked_note

# Fields a transition may change; bulk updates write exactly these.
TRANSITION_FIELDS = [
    "status",
    "status_changed_at",
    "version",
    "trust",
    "reviewed_by",
    "reviewed_at",
    "confirmed_at",
    "expires_at",
]

# The history columns `_copy_into_history` fills besides the tracked fields (a test keeps this in
# step with the history model).
HISTORY_COLUMNS = ("history_date", "history_change_reason", "history_type", "history_user_id", "history_actor", "history_note")


def _stamp(record: MemoryRecord, *, actor: Actor, reason: str, note: str = "") -> None:
    """Attach who/why to the instance; simple-history copies it into the history row on save."""
    record._change_reason = reason
    record._history_actor = actor.label
    record._history_note = checked_note(note)
    if actor.user is not None:
        record._history_user = actor.user


def _bulk_transition(ids: list[uuid.UUID], *, transition: str, now: datetime, actor: Actor, reason: str, note: str = "") -> int:
    """Move a batch of locked records to `transition`'s target status with one history row each,
    entirely in the database: one UPDATE for the records, one INSERT ... SELECT copying them into
    the history table (what simple-history would write, without loading a row into Python). The
    caller holds the row locks and selected them by the transition's source statuses."""
    if not ids:
        return 0
    target = TRANSITIONS[transition][1]
    changed = MemoryRecord.objects.filter(pk__in=ids).update(status=target, status_changed_at=now, version=F("version") + 1)
    _copy_into_history(ids, history_date=now, actor=actor, reason=reason, note=note)
    _count_moved(transition, changed)
    return changed


def _count_moved(transition: str, changed: int) -> None:
    """Count a bulk move in the transitions metric, by its transition's name."""
    count_on_commit(TRANSITION_COUNT, transition, changed)


def _bulk_transition_in_place(
    selected: QuerySet, *, transition: str, now: datetime, actor: Actor, reason: str, note: str = ""
) -> int:
    """PostgreSQL: `_bulk_transition` of the records `selected` (a queryset of primary keys, which
    may lock them: `select_for_update(skip_locked=True)`) as one statement, without the keys
    travelling to Python and back: the selection, the UPDATE and the history INSERT ... SELECT from
    its RETURNING. Returns how many records moved."""
    connection = connections[router.db_for_write(MemoryRecord)]
    selected_sql, selected_params = selected.query.sql_with_params()
    sql = f"WITH selected (at) AS ({selected_sql}), {_in_place_transition_sql(connection, match='r.id = selected.at')}"
    params = (
        *selected_params,
        TRANSITIONS[transition][1],
        connection.ops.adapt_datetimefield_value(now),
        *_history_params(history_date=now, actor=actor, reason=reason, note=note),
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        changed = cursor.fetchone()[0]
    _count_moved(transition, changed)
    return changed


def _history_tracked_fields() -> list:
    return [f for f in MemoryRecord.history.model._meta.concrete_fields if not f.name.startswith("history_")]


def _history_params(*, history_date: datetime, actor: Actor, reason: str, note: str) -> tuple:
    """The values of HISTORY_COLUMNS, in that order."""
    connection = connections[router.db_for_write(MemoryRecord)]
    return (
        connection.ops.adapt_datetimefield_value(history_date),
        reason,
        "~",
        actor.user.pk if actor.user is not None else None,
        actor.label,
        checked_note(note),
    )


def _copy_into_history(ids: list[uuid.UUID], *, history_date: datetime, actor: Actor, reason: str, note: str) -> None:
    history = MemoryRecord.history.model
    tracked = _history_tracked_fields()
    rows = MemoryRecord.objects.filter(pk__in=ids).order_by().values(*[f.attname for f in tracked])
    select_sql, select_params = rows.query.sql_with_params()
    connection = connections[router.db_for_write(MemoryRecord)]
    quote = connection.ops.quote_name
    columns = [quote(f.column) for f in tracked]
    extras = list(HISTORY_COLUMNS)
    sql = (
        f"INSERT INTO {quote(history._meta.db_table)} ({', '.join(columns + [quote(c) for c in extras])}) "
        f"SELECT {', '.join('s.' + c for c in columns)}, %s, %s, %s, %s, %s, %s FROM ({select_sql}) s"
    )
    # The placeholders of the history columns come first in the statement, the subquery's after.
    params = (*_history_params(history_date=history_date, actor=actor, reason=reason, note=note), *select_params)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _in_place_transition_sql(connection, *, match: str, recheck: str = "TRUE") -> str:
    """The rest of a `WITH selected (at ...) AS (...)` statement that moves the records `match`
    finds (`r` a record, `selected.at` a selected key) and still satisfy `recheck` to a status,
    with one history row each, and selects how many moved, as its first column. Parameters: the
    status, the moment, `recheck`'s, then `_history_params`. The UPDATE evaluates `recheck` again on
    the newest version of a row changed meanwhile, so a record another transaction moved is left.
    PostgreSQL only."""
    quote = connection.ops.quote_name
    table = quote(MemoryRecord._meta.db_table)
    columns = [quote(f.column) for f in _history_tracked_fields()]
    return (
        f"moved AS (UPDATE {table} r SET {quote('status')} = %s, {quote('status_changed_at')} = %s, "
        f"{quote('version')} = r.{quote('version')} + 1 FROM selected WHERE {match} AND {recheck} "
        f"RETURNING {', '.join('r.' + c for c in columns)}), "
        f"written AS (INSERT INTO {quote(MemoryRecord.history.model._meta.db_table)} "
        f"({', '.join(columns + [quote(c) for c in HISTORY_COLUMNS])}) "
        f"SELECT {', '.join('moved.' + c for c in columns)}, %s, %s, %s, %s, %s, %s FROM moved RETURNING 1) "
        f"SELECT (SELECT count(*) FROM written)"
    )
