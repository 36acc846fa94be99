"""The `refresh_semantic_ann` job: every stored semantic index's approximate nearest-neighbour
partitions (`memory.search.ann`) rebuilt where the rows embedded since their snapshot, or the
positions a forget overwrote, have grown past a share of them; partitions built for tenants that
reached the threshold, removed for those that fell below it. Recall is exact on the hard filters
whatever the partitions' age (the fresh rows are scored exactly); this keeps the exact part small."""

from datetime import datetime

from memory.search import ann, storage
from memory.search.models import STORED_STATUSES, IndexKind, SearchIndex


def refresh_semantic_ann(*, now: datetime, batch_size: int) -> dict[str, int]:
    rebuilt = removed = 0
    for index in SearchIndex.objects.filter(kind=IndexKind.SEMANTIC, status__in=STORED_STATUSES).order_by("pk"):
        if storage.storage_exists(index.storage_name):
            done = ann.refresh(index.storage_name, index.recipe)
            rebuilt += len(done["rebuilt"])
            removed += len(done["removed"])
    return {"rebuilt": rebuilt, "removed": removed}
