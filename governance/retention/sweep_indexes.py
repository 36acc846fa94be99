"""The `sweep_indexes` job: a lexical search index keeps the entry of a record that the expire
job expired because its time was up (no recall can return it: recall reads only entries with
`expires_at` after its moment), so that expiring touches no index page; this job deletes those
entries, in batches, from every index that has storage, and with them their share of the index's
statistics (`memory.search.storage.sweep_expired`). Until it runs, the expired records still count
in the collection statistics, as records past their time that the expire job has not reached do;
the same on PostgreSQL and SQLite."""

from datetime import datetime

from memory.search import storage
from memory.search.models import STORED_STATUSES, IndexKind, SearchIndex

# Entries per transaction, in JOB_BATCH_SIZEs: an entry is small, and the statistics and terms are
# updated once per statement, so larger statements cost less per entry (docs/benchmarks.md, the
# sweep after a large expiry).
BATCHES_PER_STATEMENT = 10


def sweep_indexes(*, now: datetime, batch_size: int) -> dict[str, int]:
    swept = 0
    for index in SearchIndex.objects.filter(kind=IndexKind.LEXICAL, status__in=STORED_STATUSES).order_by("pk"):
        if storage.storage_exists(index.storage_name):
            swept += storage.sweep_expired(index.storage_name, now=now, batch_size=batch_size * BATCHES_PER_STATEMENT)
    return {"swept": swept}
