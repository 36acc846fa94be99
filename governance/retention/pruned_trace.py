"""The trace of pruned records: what the prune job leaves of a record it deletes, and how as-of
reads and forget propagation see it.

The prune job deletes a record with all its history rows. Before it does, in the same
transaction and one set of statements per chunk, `trace_pruned` writes a `PrunedRecord`: the id,
tenant, agent, kind, purpose, the status it had and since when, when it was created, the span in
which it was active (so that as-of recall can tell whether recall could have returned it at a
moment), and when it was pruned. No content, no provenance, no reviewer notes; the subject only as
its keyed fingerprint (memory.fingerprints), the same one a forget puts on the records, their
history rows and the tombstone. The prune job deletes the trace itself after
PRUNED_RECORD_TRACE_RETENTION_DAYS.

`PrunedTraceReader` answers `memory.asof`'s questions (registered from GovernanceConfig.ready(),
since `memory` does not import `governance`); `PrunedTraceArtifact` is its forget artifact, which
has nothing to remove and says why in its receipt.
"""

import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connections, router
from django.db.migrations.recorder import MigrationRecorder
from django.db.models import QuerySet

from governance.retention.models import PrunedRecord
from memory.asof import PrunedEntry
from memory.fingerprints import subject_fingerprint
from memory.models import Agent, MemoryRecord, Status

# The migration that created the trace: prunes before it was applied left none.
TRACE_MIGRATION = ("governance", "0007_pruned_record_trace")

# What the prune job reads of each record it deletes (in the statement that locks them).
RECORD_FIELDS = ("id", "tenant_id", "agent_id", "kind_id", "purpose", "subject", "status", "created_at", "status_changed_at")


def trace_pruned(records: Sequence[dict], *, now: datetime) -> int:
    """Write the trace of `records` (dicts of RECORD_FIELDS) before they and their history are
    deleted: one query for their history, one insert. A record pruned again (restored from a
    backup, say) overwrites its earlier trace. Returns how many were traced."""
    if not records:
        return 0
    spans = _active_spans([record["id"] for record in records])
    fingerprints: dict[tuple[int, str], str] = {}
    traces = []
    for record in records:
        key = (record["tenant_id"], record["subject"])
        if key not in fingerprints:
            fingerprints[key] = subject_fingerprint(*key)
        active_from, active_until = spans.get(record["id"], (None, None))
        traces.append(
            PrunedRecord(
                id=record["id"],
                tenant_id=record["tenant_id"],
                agent_id=record["agent_id"],
                kind_id=record["kind_id"],
                purpose=record["purpose"],
                subject_fingerprint=fingerprints[key],
                status=record["status"],
                created_at=record["created_at"],
                status_changed_at=record["status_changed_at"],
                active_from=active_from,
                active_until=active_until,
                pruned_at=now,
            )
        )
    updated = [field.name for field in PrunedRecord._meta.concrete_fields if not field.primary_key]
    PrunedRecord.objects.bulk_create(traces, update_conflicts=True, unique_fields=["id"], update_fields=updated)
    return len(traces)


def _active_spans(ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, tuple[datetime, datetime]]:
    """Each record's active span from its history: from its first `active` row to the row that
    took it out of active the last time, or its `expires_at` then if that came first (recall stops
    returning a record at its expiry). A record revoked and promoted again gets one span covering
    both periods. Records never active have none."""
    rows = (
        MemoryRecord.history.model.objects.filter(id__in=ids)
        .order_by("id", "history_date", "history_id")
        .values_list("id", "history_date", "status", "expires_at")
    )
    by_record = defaultdict(list)
    for record_id, *row in rows:
        by_record[record_id].append(row)
    spans: dict[uuid.UUID, tuple[datetime, datetime]] = {}
    for record_id, history in by_record.items():
        start: datetime | None = None
        until: datetime | None = None  # while active its expiry; once out of active, the earlier of that and the leaving
        active = False
        for when, status, expires_at in history:
            if status == Status.ACTIVE:
                start, until, active = start or when, expires_at, True
            elif active:
                until, active = min(when, until), False
        if start is not None and until is not None:
            spans[record_id] = (start, until)
    return spans


def trace_expired(*, now: datetime) -> QuerySet:
    """Traces past PRUNED_RECORD_TRACE_RETENTION_DAYS, which the prune job deletes."""
    return PrunedRecord.objects.filter(pruned_at__lt=now - timedelta(days=settings.PRUNED_RECORD_TRACE_RETENTION_DAYS))


class PrunedTraceReader:
    """memory.asof.PrunedTrace over `PrunedRecord`: one indexed query per question."""

    def find(self, *, actor, record_id) -> PrunedEntry | None:
        found = actor.in_tenants(PrunedRecord.objects.filter(pk=record_id)).values_list("id", "created_at", "pruned_at").first()
        return PrunedEntry(*found) if found else None

    def active_at(
        self, *, agent: Agent, purpose: str, subject: str | None, kind_ids: list[int] | None, at: datetime
    ) -> list[PrunedEntry]:
        traces = PrunedRecord.objects.filter(
            tenant_id=agent.tenant_id,
            agent_id=agent.pk,
            purpose=purpose,
            active_from__lte=at,
            active_until__gt=at,
            pruned_at__gt=at,
        )
        if subject:
            traces = traces.filter(subject_fingerprint=subject_fingerprint(agent.tenant_id, subject))
        if kind_ids is not None:
            traces = traces.filter(kind_id__in=kind_ids)
        return [PrunedEntry(*row) for row in traces.order_by("pruned_at", "id").values_list("id", "created_at", "pruned_at")]

    def kept_since(self, *, now: datetime) -> datetime | None:
        """The earliest moment from which every prune still has its trace: when the trace began
        (its migration was applied), or the start of the retention window if later. None when the
        migration's record is missing (the trace's start is unknown)."""
        connection = connections[router.db_for_read(PrunedRecord)]
        app, name = TRACE_MIGRATION
        began = MigrationRecorder(connection).migration_qs.filter(app=app, name=name).values_list("applied", flat=True).first()
        if began is None:
            return None
        return max(began, now - timedelta(days=settings.PRUNED_RECORD_TRACE_RETENTION_DAYS))


class PrunedTraceArtifact:
    """Forget propagation's view of the trace: nothing to remove. A trace keeps no content and no
    provenance, and the subject only as the keyed fingerprint that the forgotten records, their
    history and the tombstone keep too (so it is already what a forget would make it). A subject's
    records still waiting for propagation are never pruned (the prune job waits for it)."""

    name = "pruned_trace"
    covers = ("governance.PrunedRecord",)

    def purge(self, request, record_ids):
        days = settings.PRUNED_RECORD_TRACE_RETENTION_DAYS
        return 0, (
            "Nothing to remove: traces of pruned records keep ids, scope, status and times, and the subject "
            f"only as its keyed fingerprint; never content or provenance. They are deleted {days} days after "
            "pruning (PRUNED_RECORD_TRACE_RETENTION_DAYS)."
        )
