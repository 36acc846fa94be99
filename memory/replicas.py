"""Read replicas that honour forget (DATABASE_REPLICA_URLS; docs/operations.md, "Read replicas").

Recall and the reviewers' read pages may read a streaming replica; everything else reads and
writes the primary. A replica read is allowed only when the replica has replayed the primary's
write-ahead log past everything the reader must see:

- **fences**: a forget or a revocation writes a `ReplicaFence` row for its tenant in its own
  transaction (so the fence is visible exactly when the change is), and right after the commit
  stores the primary's log position in it. A read for that tenant goes to a replica only if the
  replica's replay position is at or past the tenant's newest fence; a fence still without a
  position sends the read to the primary. `close_fences` fills and deletes fences once every
  replica has replayed past them. Checking costs one indexed primary statement per replica read,
  plus one replica statement while a fence is open.
- **read-your-writes**: a request that wrote remembers, in the shared cache for
  REPLICA_READ_YOUR_WRITES_SECONDS, the primary's log position under its writer (the agent, or
  the reviewer); that writer's reads need a replica at or past it.

With no replica configured every function here returns at once: no statement, no cache access.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from typing import TypeVar

from django.conf import settings
from django.core.cache import cache
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction
from django.db.models import Count, Max, Min, Q

from memory import engine
from memory.engine.routing import reading_from
from memory.models import ReplicaFence

logger = logging.getLogger(__name__)
T = TypeVar("T")
PREFIX = "replica_"
_turns = itertools.count()


def aliases() -> list[str]:
    """The configured replicas' database aliases (`replica_0`, `replica_1`, ...)."""
    return [alias for alias in settings.DATABASES if alias.startswith(PREFIX)]


def fence(tenant_id: int) -> None:
    """Called inside a forget's or a revocation's transaction: replicas must replay it before they
    serve `tenant_id` again."""
    if not aliases():
        return
    row = ReplicaFence.objects.using(DEFAULT_DB_ALIAS).create(tenant_id=tenant_id)
    # After the commit, the primary's position is at or past the change's commit record. Should this
    # fail, the fence stays without a position (the tenant reads the primary) until close_fences.
    transaction.on_commit(lambda: _place(row.pk), using=DEFAULT_DB_ALIAS)


def _place(pk: int) -> None:
    lsn = engine.current().replication.wal_position(DEFAULT_DB_ALIAS)
    ReplicaFence.objects.using(DEFAULT_DB_ALIAS).filter(pk=pk, lsn__isnull=True).update(lsn=lsn)


def close_fences() -> int:
    """Give every visible fence without a position the primary's current one (its transaction has
    committed, or it would not be visible), then delete the fences every replica has replayed past.
    Returns how many were deleted. A replica that cannot be reached keeps every fence open."""
    names = aliases()
    if not names:
        return 0
    replication = engine.current().replication
    fences = ReplicaFence.objects.using(DEFAULT_DB_ALIAS)
    if fences.filter(lsn__isnull=True).exists():
        fences.filter(lsn__isnull=True).update(lsn=replication.wal_position(DEFAULT_DB_ALIAS))
    try:
        replayed = [replication.replayed_position(alias) for alias in names]
    except DatabaseError as error:
        logger.warning("replica unreachable; fences stay open", extra={"error": type(error).__name__})
        return 0
    if any(position is None for position in replayed):
        return 0
    deleted, _ = fences.filter(lsn__lte=min(p for p in replayed if p is not None)).delete()
    return deleted


def open_fences() -> dict[str, int | None]:
    """For /health/ and tests: how many fences are open and the oldest position among them."""
    found = ReplicaFence.objects.using(DEFAULT_DB_ALIAS).aggregate(open=Count("pk"), oldest=Min("lsn"))
    return {"open": found["open"], "oldest_lsn": found["oldest"]}


def writer_key(*, agent_id: int | None = None, user_id: int | None = None) -> str | None:
    if agent_id is not None:
        return f"replica-ryw:agent:{agent_id}"
    if user_id is not None:
        return f"replica-ryw:user:{user_id}"
    return None


def note_write(key: str | None) -> None:
    """A request of this writer wrote: its reads during the window need a replica that has
    replayed the primary's position now."""
    if key is None or not aliases():
        return
    position = engine.current().replication.wal_position(DEFAULT_DB_ALIAS)
    cache.set(key, position, timeout=settings.REPLICA_READ_YOUR_WRITES_SECONDS)


def choose(*, tenant_ids: Collection[int] | None, writer: str | None) -> str:
    """The alias a replica-allowed read of `tenant_ids` (None: every tenant) by `writer` goes to: a
    replica when one has replayed past those tenants' newest fence and the writer's last write, else
    the primary."""
    names = aliases()
    if not names or connections[DEFAULT_DB_ALIAS].in_atomic_block:
        return DEFAULT_DB_ALIAS
    alias = names[next(_turns) % len(names)]
    fences = ReplicaFence.objects.using(DEFAULT_DB_ALIAS).all()
    if tenant_ids is not None:
        fences = fences.filter(tenant_id__in=list(tenant_ids))
    found = fences.aggregate(newest=Max("lsn"), unplaced=Count("pk", filter=Q(lsn__isnull=True)))
    if found["unplaced"]:
        return DEFAULT_DB_ALIAS
    needed = [position for position in (found["newest"], cache.get(writer) if writer else None) if position is not None]
    if not needed:
        return alias
    try:
        replayed = engine.current().replication.replayed_position(alias)
    except DatabaseError:
        return DEFAULT_DB_ALIAS
    return alias if replayed is not None and replayed >= max(needed) else DEFAULT_DB_ALIAS


@contextmanager
def replica_reads(*, tenant_ids: Collection[int] | None, writer: str | None) -> Iterator[str]:
    """Reads inside the block may go to a replica (`choose`); yields the alias chosen."""
    alias = choose(tenant_ids=tenant_ids, writer=writer)
    with reading_from(alias):
        yield alias


def read_on_replica(read: Callable[[], T], *, tenant_ids: Collection[int] | None, writer: str | None) -> T:
    """`read()` on a replica when allowed; again on the primary if the replica fails mid-way
    (unreachable, or a query cancelled by its replay)."""
    with replica_reads(tenant_ids=tenant_ids, writer=writer) as alias:
        if alias == DEFAULT_DB_ALIAS:
            return read()
        try:
            return read()
        except DatabaseError as error:
            logger.warning("replica read failed; reading the primary", extra={"alias": alias, "error": type(error).__name__})
            connections[alias].close()
    return read()


def status(timeout: float) -> dict[str, dict]:
    """For the readiness probe: each configured replica's reachability and replay lag (bytes of the
    primary's log still to replay, and the age of its newest replayed transaction while behind),
    each asked on a connection of its own that gives up after `timeout` seconds. Errors are named
    by class only. {} without replicas."""
    names = aliases()
    if not names:
        return {}
    replication = engine.current().replication
    try:
        primary = replication.wal_position(DEFAULT_DB_ALIAS)
    except DatabaseError as error:
        return {alias: {"ok": False, "error": f"primary: {type(error).__name__}"} for alias in names}
    report: dict[str, dict] = {}
    for alias in names:
        try:
            found = replication.standby_status(alias, primary_position=primary, timeout=timeout)
        except Exception as error:  # the driver's own errors (OperationalError, timeouts) are not Django's
            report[alias] = {"ok": False, "error": type(error).__name__}
            continue
        report[alias] = {"ok": True, **found}
    return report
