"""The `prune` job: physically deletes records that retention no longer keeps, with their history.

A record goes when its status is in `PURGEABLE_STATUSES` (expired, superseded, rejected, forgotten)
and it entered that status longer ago than its kind's `purge_after`. With it go its history rows
and every row that references it: links (derivation, forget request membership) are deleted,
proposals built on it are deleted (they cascade), nullable references are cleared; a reference
that protects the record stops the run with an error. Forgotten records whose forget request is
still propagating wait, because propagation finds the artifacts to clean through those links.

Pruning is not a status change, so it writes no history row; it deletes in set-based statements,
one chunk per transaction. In that transaction, before the history goes, each record leaves a
content-free `PrunedRecord` (governance.retention.pruned_trace), so that as-of reads can report it as pruned;
the job deletes those traces after PRUNED_RECORD_TRACE_RETENTION_DAYS. A forgotten subject keeps
its content-free `ForgetTombstone`, so a restored backup can be recognised and forgotten again. Old
JobRun rows and idempotency keys are trimmed here too, and the history of surviving records past
HISTORY_RETENTION_DAYS goes a month at a time (governance.retention.history).
"""

import uuid
from collections import Counter
from datetime import datetime, timedelta

from django.apps import apps
from django.conf import settings
from django.db import connections, models, router, transaction
from django.db.models import Max, Q

from governance.forget.models import ForgetRequest
from governance.jobs.models import JobRun
from governance.retention.history import trim_history
from governance.retention.pruned_trace import RECORD_FIELDS, trace_expired, trace_pruned
from memory.engine import current
from memory.models import PURGEABLE_STATUSES, Event, EventLog, IdempotencyKey, MemoryKind, MemoryRecord
from memory.outbox.write import sequence_events


class PruneBlocked(RuntimeError):
    pass


def prune(*, now: datetime, batch_size: int) -> dict[str, int]:
    counts = Counter({f"pruned_{status}": 0 for status in PURGEABLE_STATUSES})
    counts.update({"history_rows_deleted": 0, "references_deleted": 0, "references_cleared": 0, "traces_written": 0})
    waiting_for_propagation = ForgetRequest.records.through.objects.filter(
        forgetrequest__status=ForgetRequest.Status.PROPAGATING,
    ).values("memoryrecord_id")
    for kind in MemoryKind.objects.order_by("name"):
        due = MemoryRecord.objects.filter(
            kind=kind, status__in=PURGEABLE_STATUSES, status_changed_at__lt=now - kind.purge_after
        ).exclude(pk__in=waiting_for_propagation)
        while True:
            with transaction.atomic():
                # Rows another transaction holds (a transition in flight) are left for the next run.
                rows = list(due.select_for_update(skip_locked=True).order_by().values(*RECORD_FIELDS)[:batch_size])
                if rows:
                    counts["traces_written"] += trace_pruned(rows, now=now)  # reads the history about to go
                    counts.update(_delete_records([row["id"] for row in rows]))
                    counts.update(f"pruned_{row['status']}" for row in rows)
            if len(rows) < batch_size:
                break
    counts["job_runs_deleted"] = _trim_job_runs(now=now, batch_size=batch_size)
    counts["idempotency_keys_deleted"] = _trim_idempotency_keys(now=now, batch_size=batch_size)
    counts["traces_deleted"] = _delete_in_chunks(trace_expired(now=now), batch_size=batch_size)
    counts["events_deleted"] = _trim_events(now=now, batch_size=batch_size)
    counts.update(trim_history(now=now, batch_size=batch_size))
    return dict(counts)


def _references_to_records() -> list[tuple[type[models.Model], models.ForeignKey]]:
    """Every concrete foreign key to MemoryRecord (through tables included), except the history
    model's, whose rows are deleted by record id."""
    history = MemoryRecord.history.model
    return [
        (model, field)
        for model in apps.get_models(include_auto_created=True)
        if model is not history
        for field in model._meta.concrete_fields
        if isinstance(field, models.ForeignKey) and field.many_to_one and field.related_model is MemoryRecord
    ]


def _delete_records(ids: list[uuid.UUID]) -> Counter:
    counts: Counter = Counter()
    for model, field in _references_to_records():
        referencing = model._base_manager.filter(**{f"{field.attname}__in": ids})
        if model is MemoryRecord:
            referencing = referencing.exclude(pk__in=ids)  # records deleted together need no clearing
        on_delete = field.remote_field.on_delete
        if on_delete is models.CASCADE:
            counts["references_deleted"] += referencing.delete()[0]
        elif on_delete is models.SET_NULL:
            counts["references_cleared"] += referencing.update(**{field.name: None})
        elif on_delete is models.DO_NOTHING:
            continue
        elif referencing.exists():
            raise PruneBlocked(f"{model._meta.label}.{field.name} protects records due for pruning.")
    counts["history_rows_deleted"] += MemoryRecord.history.model.objects.filter(id__in=ids).delete()[0]
    # QuerySet.delete() would send post_delete per record, on which django-simple-history writes
    # a '-' history row copying the content we are removing; every reference is gone by now, so
    # a plain DELETE is all that is left to do.
    using = router.db_for_write(MemoryRecord)
    current(using).ops.delete_rows(connections[using], MemoryRecord, ids)
    return counts


def _trim_job_runs(*, now: datetime, batch_size: int) -> int:
    """JobRun rows older than JOB_RUN_RETENTION_DAYS go, except each job's latest success (the
    /health/ check measures staleness from it)."""
    keep = [
        pk
        for pk in (
            JobRun.objects.filter(job=job, status=JobRun.Status.SUCCEEDED)
            .order_by("-started_at")
            .values_list("pk", flat=True)
            .first()
            for job in JobRun.objects.order_by().values_list("job", flat=True).distinct()
        )
        if pk is not None
    ]
    old = JobRun.objects.filter(started_at__lt=now - timedelta(days=settings.JOB_RUN_RETENTION_DAYS)).exclude(pk__in=keep)
    return _delete_in_chunks(old, batch_size=batch_size)


def _trim_idempotency_keys(*, now: datetime, batch_size: int) -> int:
    """Idempotency keys serve retries, which come within minutes: keys older than
    IDEMPOTENCY_KEY_RETENTION_HOURS go, and so do keys whose record was pruned (their fingerprint
    is a hash of a body that held the content, and no forget could find them any more)."""
    stale = IdempotencyKey.objects.filter(
        Q(created_at__lt=now - timedelta(hours=settings.IDEMPOTENCY_KEY_RETENTION_HOURS)) | Q(record__isnull=True)
    )
    return _delete_in_chunks(stale, batch_size=batch_size)


def _trim_events(*, now: datetime, batch_size: int) -> int:
    """Outbox events older than EVENTS_RETENTION_DAYS go (their deliveries with them). The feed's
    horizon moves first, so a reader whose cursor was before it gets a 410, never a silent gap."""
    sequence_events()
    old = Event.objects.filter(occurred_at__lt=now - timedelta(days=settings.EVENTS_RETENTION_DAYS), position__isnull=False)
    through = old.aggregate(through=Max("position"))["through"]
    if through is None:
        return 0
    EventLog.objects.filter(pk=1, pruned_through__lt=through).update(pruned_through=through)
    return _delete_in_chunks(Event.objects.filter(position__lte=through), batch_size=batch_size)


def _delete_in_chunks(queryset: models.QuerySet, *, batch_size: int) -> int:
    """Delete what `queryset` selects, `batch_size` rows per statement; returns how many."""
    deleted = 0
    while True:
        ids = list(queryset.order_by().values_list("pk", flat=True)[:batch_size])
        if ids:
            deleted += queryset.model.objects.filter(pk__in=ids).delete()[0]
        if len(ids) < batch_size:
            return deleted
