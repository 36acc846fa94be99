"""Writing events in the transaction of the change they report, and sequencing them for the feed.

Single transitions and writes add their events here (one INSERT per transaction step, a batch's in
one); bulk moves write theirs in the engine's statements (memory.engine.*.lifecycle), from the
rows they move. What must happen once events commit (waking the webhook deliveries) registers with
`after_events`, from governance's AppConfig.ready(), so memory imports no governance."""

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Protocol, TypeVar

from django.db import router, transaction
from django.db.models import F, Max, Min

from memory.outbox.models import Event, EventLog, EventType

# The event each transition writes (memory.models.TRANSITIONS names the transitions). A forget
# writes none per record: the forget request writes one `memory.forgotten` naming the request and
# its records (governance.forget).
EVENT_OF_TRANSITION: dict[str, str | None] = {
    "promote": EventType.PROMOTED,
    "reject": EventType.REJECTED,
    "confirm": EventType.CONFIRMED,
    "retire": EventType.RETIRED,
    "supersede": EventType.SUPERSEDED,
    "expire": EventType.EXPIRED,
    "restore": EventType.RESTORED,
    "forget": None,
    "revoke": EventType.REVOKED,
}

_AFTER_EVENTS: list[Callable[[], None]] = []


class _Record(Protocol):
    pk: Any
    tenant_id: int
    agent_id: int
    purpose: str
    version: int
    status: str
    authority: str
    kind_id: int


def after_events(callback: Callable[[], None]) -> None:
    """Call `callback()` after each transaction that wrote events commits. It must not raise."""
    if callback not in _AFTER_EVENTS:
        _AFTER_EVENTS.append(callback)


def events_committed_soon() -> None:
    """Run the `after_events` callbacks once the current transaction commits."""
    for callback in _AFTER_EVENTS:
        transaction.on_commit(callback, robust=True)


def write_event_of(record: _Record, event_type: str, *, now: datetime) -> None:
    """The event of one record's change, in the caller's transaction."""
    Event.objects.create(**_record_fields(record, event_type, now))
    events_committed_soon()


R = TypeVar("R", bound=_Record)


def write_events_of(records: Iterable[R], type_of: Callable[[R], str], *, now: datetime) -> None:
    """The events of several records' changes, one INSERT."""
    events = [Event(**_record_fields(record, type_of(record), now)) for record in records]
    if events:
        Event.objects.bulk_create(events)
        events_committed_soon()


def write_events(events: Iterable[Mapping[str, Any]], *, now: datetime) -> None:
    """Events that name no single record (a forget request, a proposal, an alert, a golden run),
    each given as its fields (`type`, `tenant_id`, `data`, ...), in one INSERT."""
    rows = [Event(occurred_at=now, **fields) for fields in events]
    if rows:
        Event.objects.bulk_create(rows)
        events_committed_soon()


def _record_fields(record: _Record, event_type: str, now: datetime) -> dict[str, Any]:
    return {
        "type": event_type,
        "occurred_at": now,
        "tenant_id": record.tenant_id,
        "agent_id": record.agent_id,
        "purpose": record.purpose,
        "record_id": record.pk,
        "version": record.version,
        "status": record.status,
        "authority": record.authority,
        "kind_id": record.kind_id,
    }


def sequence_events() -> int:
    """Give every committed event without a position the next positions, in insert order, and
    return the last position handed out. Serialised by the event log's row lock: an event still
    uncommitted is invisible here and gets a later position once it commits, so positions grow in
    the order events become visible and a reader past a position misses nothing."""
    log = EventLog.objects.filter(pk=1).values_list("last_position", flat=True).first()
    pending = Event.objects.filter(position__isnull=True)
    if log is not None and not pending.exists():
        return log
    using = router.db_for_write(Event)
    with transaction.atomic(using=using):
        EventLog.objects.get_or_create(pk=1)
        last = EventLog.objects.select_for_update().values_list("last_position", flat=True).get(pk=1)
        first = pending.aggregate(first=Min("seq"))["first"]
        if first is None:
            return last
        # Only from `first` on: an event with a smaller seq that commits while this runs would
        # land below `last`; it is left for the next run, which places it after.
        pending.filter(seq__gte=first).update(position=F("seq") + (last + 1 - first))
        last = Event.objects.aggregate(last=Max("position"))["last"] or last
        EventLog.objects.filter(pk=1).update(last_position=last)
        return last
