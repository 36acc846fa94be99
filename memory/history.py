"""What every historical row carries beyond simple-history's own columns: who acted when the actor
is not a Django user, and the note given with the change (so the note limit is defined here).

A leaf module: `memory.models` and `memory.search.models` both build their history on it, and
`memory.models` imports `memory.search.models` to register its model, so neither may be imported
from here.
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from django.db import models

if TYPE_CHECKING:
    from django.contrib.auth.models import User

NOTE_MAX_CHARS = 500  # a reviewer's or job's note on a transition, as the history row keeps it


class HistoryActor(models.Model):
    """Extra column on every historical row: who acted when the actor is not a Django user
    (an agent token, a scheduled job), and the note a reviewer gave. Filled from the instance's
    `_history_actor` / `_history_note` (see memory.apps) or from bulk `custom_historical_attrs`."""

    history_actor = models.CharField(max_length=200, blank=True, default="")
    history_note = models.CharField(max_length=NOTE_MAX_CHARS, blank=True, default="")

    class Meta:
        abstract = True


class HistoryContext:
    """A mixin of the models that keep a history, declaring what is not a column: what a save tells
    simple-history about the change, set on the instance just before it: the transition
    (`_change_reason`), the actor and the note (copied into the row by memory.apps), and the user
    when a person acted (`_history_user`). Which of them a given save sets is up to its caller."""

    _change_reason: str
    _history_actor: str
    _history_note: str
    _history_user: "User"


@dataclass(frozen=True)
class HistoryPartition:
    """One partition of the records' history table (PostgreSQL partitions it by month; SQLite keeps
    one plain table and lists none)."""

    name: str
    lower: datetime | None  # None: the default partition, which takes rows no month covers
    upper: datetime | None
    rows: int  # the planner's estimate (pg_class.reltuples); -1 before the table was first analysed


def month_start(moment: datetime) -> datetime:
    """The start (UTC) of the calendar month that holds `moment`: history's partitions' bounds."""
    moment = moment.astimezone(UTC)
    return datetime(moment.year, moment.month, 1, tzinfo=UTC)


def history_horizon(now: datetime, retention_days: int) -> datetime | None:
    """The start of the month that holds `now - retention_days` (UTC): history before it is
    dropped, a month at a time. None when `retention_days` is 0 (history kept for ever)."""
    if retention_days <= 0:
        return None
    return month_start(now - timedelta(days=retention_days))
