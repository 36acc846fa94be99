"""`last_used_at`: when recall last returned a record. Not a transition (no history row: the
field is excluded from history); during a request the mark waits in `memory.usage`'s buffer."""

import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from memory import usage
from memory.models import MemoryRecord
from memory.services.forget import record_id_set

MARK_GRANULARITY = timedelta(minutes=1)


def memory_mark_used(*, record_ids: Iterable[uuid.UUID], at: datetime | None = None) -> int:
    """Recall returned these records at `at`. Not a transition (no history row: the field is
    excluded from history). While serving a request the mark waits in this process's buffer and is
    written after the response, batched with others (`memory.usage`); elsewhere it is written now.
    Returns how many records were written now."""
    at = at or timezone.now()
    ids = list(record_ids)
    if not ids or usage.defer_mark(ids, at):
        return 0
    return write_last_used(record_ids=ids, at=at)


def write_last_used(*, record_ids: Iterable[uuid.UUID], at: datetime, granularity: timedelta = MARK_GRANULARITY) -> int:
    """Set last_used_at in one UPDATE; rows marked within `granularity` before `at` (or later) are
    skipped, so hot records are not rewritten on every recall and a mark never moves back."""
    ids = list(record_ids)
    if not ids:
        return 0
    due = MemoryRecord.objects.filter(pk__in=record_id_set(ids)).filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lt=at - granularity)
    )
    with transaction.atomic():
        # A record another transaction holds (an expire batch, a forget) is skipped, not waited for:
        # a web process flushes after a response, and waiting would keep it from the next request.
        # The mark is a hint for the deletion-candidate rule, and such a record is changing state.
        return MemoryRecord.objects.filter(pk__in=due.select_for_update(skip_locked=True).values("pk")).update(last_used_at=at)


# The buffer's flushes write through here (memory.usage cannot import this module: it is imported by it).
usage.use_writer(write_last_used)
