"""Forget propagation: purging one forget request's records from every registered artifact
(governance.forget.artifacts), with one receipt per artifact.

A forget request (governance.forget.services.forget_request_create) makes its records `forgotten`
at once and lists them, lineage included, in `ForgetRequest.records`. Propagation then asks each
registered artifact to purge those records, chunk by chunk, each chunk in one transaction with its
receipt updates, so a run killed mid-way resumes where it stopped and counts nothing twice (an
artifact purges only what still holds content, so a repeat removes 0). When every chunk is done
the request is `completed`.
"""

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from governance.forget.artifacts import ForgetArtifact, registered_artifacts
from governance.forget.models import ForgetRequest, PropagationReceipt

logger = logging.getLogger("governance.forgetting")

_HOLDS: list[Callable[[ForgetRequest], bool]] = []


def holds_completion(callback: Callable[[ForgetRequest], bool]) -> None:
    """`callback(request)` returns True while something outside the artifacts keeps the request
    open (a copy-keeping webhook subscriber that has not acknowledged it: governance.events)."""
    if callback not in _HOLDS:
        _HOLDS.append(callback)


@dataclass(frozen=True)
class PropagationResult:
    forget_request_id: uuid.UUID
    records: int
    removed: dict[str, int]  # artifact name -> items removed by this call
    completed: bool


def propagate_forget_request(
    request: ForgetRequest, *, batch_size: int = 1000, artifacts: Sequence[ForgetArtifact] | None = None
) -> PropagationResult:
    """Purge one forget request's records from every artifact, chunk by chunk, and complete it.
    Safe to repeat: a completed request is left as it is; a half-done one resumes."""
    artifacts = tuple(artifacts if artifacts is not None else registered_artifacts())
    per_chunk = [artifact for artifact in artifacts if not getattr(artifact, "at_completion", False)]
    at_completion = [artifact for artifact in artifacts if getattr(artifact, "at_completion", False)]
    removed = {artifact.name: 0 for artifact in artifacts}
    if request.status != ForgetRequest.Status.PROPAGATING:
        return PropagationResult(request.pk, 0, removed, completed=False)
    started = time.monotonic()
    links = ForgetRequest.records.through.objects.filter(forgetrequest_id=request.pk)
    records = 0
    last_id = None
    while True:
        chunk = links.order_by("memoryrecord_id")
        if last_id is not None:
            chunk = chunk.filter(memoryrecord_id__gt=last_id)
        record_ids = list(chunk.values_list("memoryrecord_id", flat=True)[:batch_size])
        if record_ids or records == 0:  # a request with no records still gets its receipts
            for name, count in _purge_chunk(request, record_ids, per_chunk).items():
                removed[name] += count
        records += len(record_ids)
        if len(record_ids) < batch_size:
            break
        last_id = record_ids[-1]
    with transaction.atomic():
        # The request row is locked so that two runs cannot both complete it (and count twice).
        completed = (
            ForgetRequest.objects.select_for_update()
            .filter(
                pk=request.pk,
                status=ForgetRequest.Status.PROPAGATING,
            )
            .exists()
        )
        if completed and any(hold(request) for hold in _HOLDS):
            completed = False
        if completed:
            for name, count in _purge_chunk(request, [], at_completion).items():
                removed[name] += count
            ForgetRequest.objects.filter(pk=request.pk).update(
                status=ForgetRequest.Status.COMPLETED,
                completed_at=timezone.now(),
            )
    logger.info(
        "forget request propagated",
        extra={
            "forget_request_id": str(request.pk),
            "records": records,
            "removed": removed,
            "duration_ms": round((time.monotonic() - started) * 1000, 1),
        },
    )
    return PropagationResult(request.pk, records, removed, completed)


def _purge_chunk(request: ForgetRequest, record_ids: list[uuid.UUID], artifacts: Sequence[ForgetArtifact]) -> dict[str, int]:
    removed: dict[str, int] = {}
    with transaction.atomic():
        # Locked, so the counts read here are current: every receipt is written back in one
        # statement (and the missing ones created in one) rather than one per artifact.
        receipts = {r.artifact: r for r in PropagationReceipt.objects.select_for_update().filter(forget_request=request)}
        new: list[PropagationReceipt] = []
        for artifact in artifacts:
            count, note = artifact.purge(request, record_ids)
            removed[artifact.name] = count
            receipt = receipts.get(artifact.name)
            if receipt is None:
                receipt = PropagationReceipt(forget_request=request, artifact=artifact.name, removed=0)
                new.append(receipt)
            receipt.removed += count
            # an artifact whose own job finishes the work (the disk rewrite) leaves its receipt open
            receipt.completed_at = None if getattr(artifact, "completes_later", False) else timezone.now()
            receipt.note = note[:500]
        PropagationReceipt.objects.bulk_create(new)
        PropagationReceipt.objects.bulk_update(
            [r for r in receipts.values() if r.artifact in removed], ["removed", "completed_at", "note"]
        )
    return removed


def propagate_open_forget_requests(
    *, batch_size: int, now: datetime | None = None
) -> Iterable[tuple[ForgetRequest, PropagationResult | Exception]]:
    """Yield each open request (oldest first) with its result, or the exception that stopped it,
    so one failing request does not hold up the others."""
    open_requests = ForgetRequest.objects.filter(status=ForgetRequest.Status.PROPAGATING)
    if now is not None:
        open_requests = open_requests.filter(requested_at__lte=now)
    for request in open_requests.order_by("requested_at"):
        try:
            yield request, propagate_forget_request(request, batch_size=batch_size)
        except Exception as exc:  # reported by the job; the next run retries the request
            yield request, exc
