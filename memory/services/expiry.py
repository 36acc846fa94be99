"""The expire job's walk: every active or quarantined record past `expires_at` gets the `expire`
transition, in locked batches that skip what another transaction holds; each batch writes its
outbox events (memory.outbox) in the statements that move its records."""

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from memory.actors import Actor
from memory.models import TRANSITIONS
from memory.outbox.write import EVENT_OF_TRANSITION, events_committed_soon
from memory.services.history import _count_moved, _database, _lifecycle, history_values


def memory_expire_due(
    *, actor: Actor, now: datetime | None = None, batch_size: int = 2000, max_batches: int | None = None, walk: str | None = None
) -> int:
    """Expire every active or quarantined record past `expires_at`, one locked batch per
    transaction. Rows another transaction holds are skipped (a run never waits for a reviewer's
    transaction, so it cannot deadlock with one), so concurrent runs never double a transition,
    and a run killed mid-way loses only its uncommitted batch, which the next run picks up; as do
    records a concurrent update moves behind the walk meanwhile.

    One walk on every database: the engine says where it starts and runs each batch's
    statements, handing back where the next one starts. SQLite walks the expiry index in
    (expires_at, id) order; PostgreSQL along the index or, when many records are due, through the
    table in physical order (`walk`, chosen by the engine unless given, for tests: "index" or
    "blocks"; memory.engine.postgres.lifecycle says why)."""
    now = now or timezone.now()
    statuses, target = TRANSITIONS["expire"]
    using = _database()
    lifecycle = _lifecycle(using)
    history = history_values(history_date=now, actor=actor, reason=f"{actor.channel}.expire")
    position = lifecycle.expiry_start(statuses=statuses, now=now, batch_size=batch_size, walk=walk, using=using)
    total = batches = 0
    while position is not None and (max_batches is None or batches < max_batches):
        with transaction.atomic(using=using):
            moved, position = lifecycle.expire_batch(
                position,
                statuses=statuses,
                target=target,
                now=now,
                batch_size=batch_size,
                history=history,
                event=EVENT_OF_TRANSITION["expire"],
                using=using,
            )
            _count_moved("expire", moved)
            if moved:
                events_committed_soon()
        total += moved
        batches += 1
    return total
