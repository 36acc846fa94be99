"""Celery tasks of the memory app: thin wrappers around one service call each, and the calls that
queue them (`embed_after_commit`, `request_semantic_index`), so that the modules doing the work
(`memory.search.semantic`, `memory.search.build`) never import the tasks that run it."""

import logging
import uuid
from collections.abc import Sequence

from celery import shared_task
from django.db import transaction

from memory.search import semantic
from memory.search.build import build_and_promote, ensure_semantic_index, index_summary

logger = logging.getLogger("memory.search")


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
    return semantic.embed_pending(record_ids)


def embed_after_commit(record_ids: Sequence[uuid.UUID]) -> None:
    """Called by the write path (`memory.policy.on_activation`) with the records it made active:
    once the transaction commits, the worker embeds them (`embed_records`). Nothing is queued when
    no semantic index is stored."""
    ids = semantic.to_embed(record_ids)
    if ids:
        embed_records.delay_on_commit(ids)  # type: ignore[attr-defined]  # Celery 5.4; celery-types lacks it


def request_semantic_index(*, actor: str = "worker:start") -> int | None:
    """Queue the build of the semantic index this install should have and has never had
    (`memory.search.build.ensure_semantic_index`); the worker calls it when it is ready. The build
    goes the usual way, build -> gates -> promote (`build_search_index`). Returns the index's id, or
    None when nothing was queued. Never raises: a worker must start even if this cannot be decided
    (a database not migrated yet)."""
    try:
        with transaction.atomic():
            index = ensure_semantic_index(actor=actor)
            if index is None:
                return None
            build_search_index.delay_on_commit(index.pk)  # type: ignore[attr-defined]  # Celery 5.4; celery-types lacks it
    except Exception:
        logger.exception("could not decide whether to build a semantic index")
        return None
    logger.info("semantic index build queued", extra={"index": index.name})
    return index.pk
