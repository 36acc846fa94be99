"""Governance services: filing a forget request (the logical forget happens here, synchronously,
through the memory lifecycle service; propagation into derived artifacts is a job)."""

import logging

from django.db import connections, router, transaction
from django.db.models import QuerySet
from django.utils import timezone

from governance.models import ForgetRequest, ForgetTombstone
from governance.portability.ledger import record_forget_request_on_commit
from memory.actors import Actor
from memory.errors import ValidationFailed
from memory.fingerprints import records_about, subject_fingerprint
from memory.models import NOTE_MAX_CHARS, SUBJECT_MAX_CHARS, MemoryRecord, Status, Tenant
from memory.selectors import records_in_scope
from memory.services import memory_forget_subject, record_id_set

logger = logging.getLogger("governance.forgetting")


def _propagate_soon() -> None:
    """Ask a worker to propagate now rather than at beat's next tick. Best effort: if the broker
    is unreachable the request stands and beat's next run completes it."""
    from governance.tasks import run_propagate_forgets

    try:
        run_propagate_forgets.apply_async(kwargs={"trigger": "forget_request"}, retry=False)
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
    elif reason and len(reason) > NOTE_MAX_CHARS:  # it becomes each record's history note
        errors["reason"] = [f"At most {NOTE_MAX_CHARS} characters."]
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
            requested_by_agent=actor.credential.agent if actor.is_agent else None,
            requested_by_credential=actor.credential if actor.is_agent else None,
            affected=len(outcome.record_ids),
            lineage_affected=outcome.lineage_count,
        )
        _link_records(request, linked)
        ForgetTombstone.objects.get_or_create(
            tenant=tenant,
            subject_fingerprint=subject_fingerprint(tenant.pk, subject),
            defaults={"forgotten_at": timezone.now()},
        )
        transaction.on_commit(_propagate_soon)
        # The forget ledger (outside the database) lists it from now on, so a restore re-applies it.
        transaction.on_commit(lambda: record_forget_request_on_commit(request))
    return request


def _link_records(request: ForgetRequest, records: QuerySet) -> None:
    """Link the request to `records` (a query of record keys) in one INSERT ... SELECT, so the
    keys never travel to Python and back: 10,000 link instances for `bulk_create` cost more than
    the insert itself."""
    through = ForgetRequest.records.through
    connection = connections[router.db_for_write(through)]
    quote = connection.ops.quote_name
    select_sql, select_params = records.query.sql_with_params()
    columns = ", ".join(quote(through._meta.get_field(name).column) for name in ("forgetrequest", "memoryrecord"))
    sql = f"INSERT INTO {quote(through._meta.db_table)} ({columns}) SELECT %s, linked.pk FROM ({select_sql}) linked"
    with connection.cursor() as cursor:
        cursor.execute(sql, (ForgetRequest._meta.pk.get_db_prep_value(request.pk, connection), *select_params))
