"""Filing a forget request: the logical forget happens here, synchronously, through the memory
lifecycle service; propagation into derived artifacts is a job (governance.forget.propagation).

What else must know of a request once it commits registers with `after_filing` (the forget ledger,
from GovernanceConfig.ready()), so this feature does not import the ones built on it."""

import logging
from collections.abc import Callable
from functools import partial

from django.db import connections, router, transaction
from django.db.models import QuerySet
from django.utils import timezone

from governance.forget.models import ForgetRequest, ForgetTombstone
from governance.tasks import JOB_TASKS
from memory.actors import Actor
from memory.engine import current
from memory.errors import ValidationFailed
from memory.fingerprints import records_about, subject_fingerprint
from memory.models import SUBJECT_MAX_CHARS, MemoryRecord, Status, Tenant
from memory.outbox.models import EventType
from memory.outbox.write import write_events
from memory.policy import CHUNK, checked_note
from memory.selectors import records_in_scope
from memory.services import memory_forget_subject, record_id_set

logger = logging.getLogger("governance.forgetting")

_AFTER_FILING: list[Callable[[ForgetRequest], None]] = []
_DURING_FILING: list[Callable[[ForgetRequest], None]] = []


def during_filing(callback: Callable[[ForgetRequest], None]) -> None:
    """Call `callback(request)` inside each new forget request's transaction, once its records and
    events are written (the webhook receipts, from GovernanceConfig.ready())."""
    if callback not in _DURING_FILING:
        _DURING_FILING.append(callback)


def after_filing(callback: Callable[[ForgetRequest], None]) -> None:
    """Call `callback(request)` once each new forget request has committed, after propagation was
    sent for. It must not raise: the request stands whatever it does."""
    if callback not in _AFTER_FILING:
        _AFTER_FILING.append(callback)


def _propagate_soon() -> None:
    """Ask a worker to propagate now rather than at beat's next tick. Best effort: if the broker
    is unreachable the request stands and beat's next run completes it."""
    try:
        JOB_TASKS["propagate_forgets"].apply_async(kwargs={"trigger": "forget_request"}, retry=False)
    except Exception as exc:  # the forget itself has committed; never fail the request here
        logger.warning("could not enqueue forget propagation; beat will run it", extra={"error": type(exc).__name__})


def forget_request_create(*, actor: Actor, tenant: Tenant, subject: str, reason: str = "") -> ForgetRequest:
    """Forget every record of `subject` in `tenant` now and open a request that propagation
    completes. Idempotent in effect: a repeat finds nothing left and reports affected=0, and is
    linked to the subject's records forgotten before (found by the subject's fingerprint once an
    earlier request propagated), so its propagation re-checks that nothing of them is left."""
    subject = (subject or "").strip() if isinstance(subject, str) else ""
    errors = {}
    if not subject:
        errors["subject"] = ["This field is required."]
    elif len(subject) > SUBJECT_MAX_CHARS:
        errors["subject"] = [f"At most {SUBJECT_MAX_CHARS} characters."]
    if reason is not None and not isinstance(reason, str):
        errors["reason"] = ["Must be a string."]
    elif reason:  # it becomes each record's history note
        try:
            checked_note(reason, field="reason")
        except ValidationFailed as too_long:
            errors.update(too_long.errors)
    if errors:
        raise ValidationFailed("The forget request is invalid.", errors=errors)
    with transaction.atomic():
        outcome = memory_forget_subject(tenant_id=tenant.pk, subject=subject, actor=actor, reason=reason or "")
        # The subject's records forgotten now or before, and the lineage forgotten now.
        lineage_ids = outcome.record_ids[outcome.subject_count :]
        linked = (
            records_about(records_in_scope(actor), tenant_id=tenant.pk, subject=subject)
            .filter(status=Status.FORGOTTEN)
            .order_by()
            .values("pk")
            .union(MemoryRecord.objects.filter(pk__in=record_id_set(lineage_ids)).order_by().values("pk"))
        )
        request = ForgetRequest.objects.create(
            tenant=tenant,
            subject=subject,
            reason=reason or "",
            requested_by=actor.label,
            requested_by_user=actor.user if actor.is_human else None,
            requested_by_agent=actor.credential.agent if actor.credential is not None else None,
            requested_by_credential=actor.credential if actor.is_agent else None,
            affected=len(outcome.record_ids),
            lineage_affected=outcome.lineage_count,
        )
        _link_records(request, linked)
        _write_forgotten_events(request, outcome.record_ids)
        for during in _DURING_FILING:
            during(request)
        ForgetTombstone.objects.get_or_create(
            tenant=tenant,
            subject_fingerprint=subject_fingerprint(tenant.pk, subject),
            defaults={"forgotten_at": timezone.now()},
        )
        transaction.on_commit(_propagate_soon)
        for callback in _AFTER_FILING:
            transaction.on_commit(partial(callback, request))
    return request


def _write_forgotten_events(request: ForgetRequest, record_ids: list) -> None:
    """`memory.forgotten`, in the request's transaction: per agent whose records it forgot, one
    event per chunk of ids naming the request and those records (ids only: nothing of a forgotten
    record but that it is gone)."""
    by_agent: dict[int, list[str]] = {}
    rows = MemoryRecord.objects.filter(pk__in=record_id_set(record_ids)).order_by("pk").values_list("agent_id", "pk")
    for agent_id, pk in rows if record_ids else ():
        by_agent.setdefault(agent_id, []).append(str(pk))
    write_events(
        (
            {
                "type": EventType.FORGOTTEN,
                "tenant_id": request.tenant_id,
                "agent_id": agent_id,
                "data": {"forget_request": str(request.pk), "records": ids[start : start + CHUNK]},
            }
            for agent_id, ids in sorted(by_agent.items())
            for start in range(0, len(ids), CHUNK)
        ),
        now=request.requested_at,
    )


def _link_records(request: ForgetRequest, records: QuerySet) -> None:
    """Link the request to `records` (a query of record keys) in one statement: the keys never
    travel to Python and back."""
    through = ForgetRequest.records.through
    using = router.db_for_write(through)
    current(using).ops.link_rows(
        connections[using], through, owner="forgetrequest", owner_pk=request.pk, target="memoryrecord", targets=records
    )
