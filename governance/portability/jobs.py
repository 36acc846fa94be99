"""The `disk_rewrite` job: forgetting that reaches the disk (governance.portability.disk). Once per
run, for every forget completed before it: PostgreSQL tables rewritten online by pg_repack (or
VACUUM where it is missing) and each checked to live in new files, SQLite's write-ahead log
checkpointed and checked empty; then the `disk` receipt of each of those forget requests says what
was verified, or stays pending and names what was not (the next run retries). Also run by a
restore, right after it. Nothing pending, nothing done: a run costs one query."""

from collections import defaultdict
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from governance.forget.models import PropagationReceipt
from governance.jobs.models import JobRun
from governance.portability.disk import JOB, pending_receipts, rewrite_tables


def disk_rewrite(*, now: datetime, batch_size: int) -> dict[str, int]:
    pending = list(pending_receipts(completed_before=timezone.now()).values_list("pk", "forget_request__requested_at"))
    if not pending:
        return {"requests": 0, "requests_completed": 0, "tables_verified": 0, "tables_pending": 0}
    last = (
        JobRun.objects.filter(job=JOB, status=JobRun.Status.SUCCEEDED, counts__tables_verified__gt=0)
        .order_by("-started_at")
        .values_list("started_at", flat=True)
        .first()
    )
    rewrite = rewrite_tables(since=last)
    by_note = defaultdict(list)  # receipts differ only by their request's backup age-out date
    for pk, requested_at in pending:
        by_note[rewrite.note(requested_at)].append(pk)
    with transaction.atomic():
        for note, pks in by_note.items():
            changes: dict[str, object] = {"note": note}
            if rewrite.complete:
                changes.update(removed=len(rewrite.verified), completed_at=rewrite.finished_at)
            for start in range(0, len(pks), batch_size):
                PropagationReceipt.objects.filter(pk__in=pks[start : start + batch_size]).update(**changes)
    return {
        "requests": len(pending),
        "requests_completed": len(pending) if rewrite.complete else 0,
        "tables_verified": len(rewrite.verified),
        "tables_pending": len(rewrite.pending),
        "checkpoint": int(rewrite.checkpoint),
    }
