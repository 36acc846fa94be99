"""The `disk_rewrite` job: forgetting that reaches the disk (governance.portability.disk). Once per
run, for every forget completed since the last run: PostgreSQL tables rewritten online by
pg_repack (or VACUUM where it is missing), SQLite's write-ahead log checkpointed; then the `disk`
receipt of each of those forget requests says when, how and what remains. Nothing pending,
nothing done: a run costs one query."""

from collections import defaultdict
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from governance.models import JobRun, PropagationReceipt
from governance.portability.disk import JOB, pending_receipts, rewrite_tables


def disk_rewrite(*, now: datetime, batch_size: int) -> dict[str, int]:
    pending = list(pending_receipts(completed_before=timezone.now()).values_list("pk", "forget_request__requested_at"))
    if not pending:
        return {"requests": 0, "requests_completed": 0, "tables_rewritten": 0, "tables_not_rewritten": 0}
    last = (JobRun.objects.filter(job=JOB, status=JobRun.Status.SUCCEEDED, counts__tables_rewritten__gt=0)
            .order_by("-started_at").values_list("started_at", flat=True).first())
    rewrite = rewrite_tables(since=last)
    by_note = defaultdict(list)  # receipts differ only by their request's backup age-out date
    for pk, requested_at in pending:
        by_note[rewrite.note(requested_at)].append(pk)
    with transaction.atomic():
        for note, pks in by_note.items():
            changes = {"note": note}
            if rewrite.complete:
                changes.update(removed=len(rewrite.rewritten), completed_at=rewrite.finished_at)
            for start in range(0, len(pks), batch_size):
                PropagationReceipt.objects.filter(pk__in=pks[start:start + batch_size]).update(**changes)
    return {"requests": len(pending), "requests_completed": len(pending) if rewrite.complete else 0,
            "tables_rewritten": len(rewrite.rewritten), "tables_not_rewritten": len(rewrite.not_rewritten),
            "checkpoint": int(rewrite.checkpoint)}
