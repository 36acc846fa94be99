"""History rows, and moving records in bulk with one history row each.

A single transition saves the record and simple-history writes its row (`_stamp` says who and
why). A bulk move (expire, forget, revoke) writes the records and their history rows in the
database instead, without loading a row into Python, through the database engine's lifecycle
statements (`memory.engine`); its source and target statuses come from
`memory.models.TRANSITIONS`, as a single transition's do.
"""

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from types import ModuleType
from typing import Any

from django.db import router

from memory import engine
from memory.actors import Actor
from memory.metrics import TRANSITIONS as TRANSITION_COUNT
from memory.metrics import count_on_commit
from memory.models import TRANSITIONS, MemoryRecord
from memory.outbox.write import EVENT_OF_TRANSITION, events_committed_soon
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

# The history columns a bulk move fills besides the tracked fields (a test keeps this in
# step with the history model).
HISTORY_COLUMNS = ("history_date", "history_change_reason", "history_type", "history_user_id", "history_actor", "history_note")


def _stamp(record: MemoryRecord, *, actor: Actor, reason: str, note: str = "") -> None:
    """Attach who/why to the instance; simple-history copies it into the history row on save."""
    record._change_reason = reason
    record._history_actor = actor.label
    record._history_note = checked_note(note)
    if actor.user is not None:
        record._history_user = actor.user


def history_values(*, history_date: datetime, actor: Actor, reason: str, note: str = "") -> dict[str, Any]:
    """The HISTORY_COLUMNS of the rows a bulk move writes, by column: what simple-history's own save
    would fill in (an update, `~`), and who acted and why."""
    values = (history_date, reason, "~", actor.user.pk if actor.user is not None else None, actor.label, checked_note(note))
    return dict(zip(HISTORY_COLUMNS, values, strict=True))


def _bulk_move(
    ids: Sequence[uuid.UUID],
    *,
    transition: str,
    now: datetime,
    actor: Actor,
    reason: str,
    note: str = "",
    also: Mapping[str, Any] | None = None,
) -> int:
    """Move records the caller has locked, and selected by `transition`'s source statuses, to its
    target status, setting the fields `also` names as well, with one history row and one outbox
    event each (memory.outbox.write.EVENT_OF_TRANSITION), entirely in
    the database (the engine's `move`: one set-based statement or two, whatever the number of
    records, with the history rows in primary-key order). Returns how many moved."""
    if not ids:
        return 0
    if also and set(also) & {"status", "status_changed_at", "version"}:
        raise ValueError("A bulk move's status comes from TRANSITIONS, not from `also`.")
    using = _database()
    event = EVENT_OF_TRANSITION[transition]
    moved = _lifecycle(using).move(
        list(ids),
        target=TRANSITIONS[transition][1],
        now=now,
        history=history_values(history_date=now, actor=actor, reason=reason, note=note),
        also=also,
        event=event,
        using=using,
    )
    _count_moved(transition, moved)
    if event and moved:
        events_committed_soon()
    return moved


def _count_moved(transition: str, changed: int) -> None:
    """Count a bulk move in the transitions metric, by its transition's name (once it commits)."""
    count_on_commit(TRANSITION_COUNT, transition, changed)


def _database() -> str:
    """The database records are written to: every bulk move, id set and lock runs there."""
    return router.db_for_write(MemoryRecord)


def _lifecycle(using: str) -> ModuleType:
    """The lifecycle statements of the engine for the database `using` (memory.engine)."""
    return engine.current(using).lifecycle
