"""Search indexes: rebuildable caches over the memory records, each built by a recipe, with one
active index per kind serving recall.

- `memory.search.models.SearchIndex`: the index row (recipe, inputs, status, coverage, report).
- `memory.search.storage`: its tables and the triggers that keep them in step with the records.
- `memory.search.ranking`: BM25 and the priors, as recall uses them.
- `memory.search.build`: create, build, promote, retire (the only code that changes an index's
  status), and the default index every database starts with.
- `memory.search.gates`: promotion gates (governance registers the golden-recall gate).
"""

import time

from django.db import connection
from django.db.models.signals import post_delete, post_migrate, post_save
from django.dispatch import receiver

from memory.search.gates import register_promotion_gate
from memory.search.models import IndexKind, IndexStatus, SearchIndex

__all__ = ["IndexKind", "IndexStatus", "SearchIndex", "active_index", "active_indexes", "register_promotion_gate"]

ACTIVE_MEMO_SECONDS = 1.0


def active_index(kind: str = IndexKind.LEXICAL) -> SearchIndex | None:
    """The index of this kind that serves recall now, or None if none does."""
    return SearchIndex.objects.filter(kind=kind, status=IndexStatus.ACTIVE).first()


_memo: tuple[float, dict[str, SearchIndex]] | None = None  # (monotonic time read, kind -> active index)


def active_indexes(*, fresh: bool = False) -> dict[str, SearchIndex]:
    """The active index of each kind (kind -> index), in one query. Recall asks on every request,
    so outside a transaction the answer is kept in this process for ACTIVE_MEMO_SECONDS (the query
    costs a noticeable share of a fast recall; docs/benchmarks.md): a change this process makes (build.py's
    promotions and retirements save the rows) clears it at once, one another process makes (the
    worker promoting a rebuilt index) reaches this one within that time, and a recall that finds
    the storage of the index it was given dropped meanwhile asks again with `fresh`. Inside a
    transaction, which may have changed the rows itself, the rows are read every time."""
    global _memo
    held, now = _memo, time.monotonic()
    if not fresh and not connection.in_atomic_block and held is not None and now - held[0] < ACTIVE_MEMO_SECONDS:
        return dict(held[1])
    active = {index.kind: index for index in SearchIndex.objects.filter(status=IndexStatus.ACTIVE)}
    if not connection.in_atomic_block:
        _memo = (now, dict(active))
    return active


@receiver(post_save, sender=SearchIndex, dispatch_uid="memory-search-active-save")
@receiver(post_delete, sender=SearchIndex, dispatch_uid="memory-search-active-delete")
@receiver(post_migrate, dispatch_uid="memory-search-active-migrate")  # also sent by flush
def _forget_active_indexes(**kwargs) -> None:
    global _memo
    _memo = None
