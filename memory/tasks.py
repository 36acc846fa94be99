"""Celery tasks of the memory app: thin wrappers around one service call each."""

from celery import shared_task

from memory.search.build import build_and_promote, index_summary


@shared_task(name="memory.tasks.build_search_index")
def build_search_index(index_id: int) -> dict:
    """Build a `building` index and promote it if the gates pass. Safe to deliver twice: only a
    building index is built and only a candidate promoted; a build killed mid-way stays building
    and the next delivery (or `rebuild_index`) builds it again from scratch."""
    return index_summary(build_and_promote(index_id, actor="job:build_search_index"))


@shared_task(name="memory.tasks.embed_records")
def embed_records(record_ids: list[str] | None = None) -> dict:
    """Embed the given records (and up to a few hundred other pending ones) in every stored
    semantic index; enqueued after commit by the write path. Safe to deliver twice: an embedded
    row is not pending any more."""
    from memory.search.semantic import embed_pending

    return embed_pending(record_ids)
