"""Writing golden questions. The scope rule lives here, once, for the API, the admin and the demo:
a question's expected records are active records of its own tenant, agent and purpose (and
subject, when it names one), which the caller may see. An id the caller cannot see gets the
same answer as an id that does not exist, so a question never reveals another tenant's records."""

import uuid
from collections.abc import Iterable

from django.conf import settings
from django.db import transaction

from governance.golden.models import GoldenQuestion
from memory.actors import Actor
from memory.errors import RecordNotFound, ValidationFailed
from memory.models import Agent, Status, Tenant
from memory.selectors import records_in_scope

MAX_EXPECTED = 20


def expected_record_errors(
    *, actor: Actor, tenant: Tenant, agent: Agent, purpose: str, subject: str, record_ids: Iterable[uuid.UUID]
) -> list[str]:
    """Why these records cannot be a question's expected records (empty list: they can). One query."""
    ids = list(dict.fromkeys(record_ids))
    if not ids:
        return ["Name at least one record the question must find."]
    if len(ids) > MAX_EXPECTED:
        return [f"At most {MAX_EXPECTED} records."]
    found = {
        row["pk"]: row
        for row in records_in_scope(actor)
        .filter(pk__in=ids)
        .values("pk", "tenant_id", "agent_id", "purpose", "subject", "status")
    }
    errors = []
    missing = [str(pk) for pk in ids if pk not in found]
    if missing:
        errors.append(f"No such record in your scope: {', '.join(missing)}.")
    outside = [
        str(pk)
        for pk, row in found.items()
        if (row["tenant_id"], row["agent_id"], row["purpose"]) != (tenant.pk, agent.pk, purpose)
        or (subject and row["subject"] != subject)
    ]
    if outside:
        errors.append(
            "Not in the question's tenant, agent, purpose and subject (recall could never return "
            f"them for it): {', '.join(outside)}."
        )
    inactive = [str(pk) for pk, row in found.items() if row["status"] != Status.ACTIVE]
    if inactive:
        errors.append(f"Not active (recall returns only active records): {', '.join(inactive)}.")
    return errors


def k_errors(k: int) -> list[str]:
    limit = settings.MEMORY_RECALL_MAX_LIMIT
    return [] if 1 <= k <= limit else [f"Must be from 1 to {limit} (recall's largest limit)."]


def golden_question_create(
    *,
    actor: Actor,
    tenant: Tenant,
    agent: Agent,
    purpose: str,
    question: str,
    expected: Iterable[uuid.UUID],
    subject: str = "",
    k: int = 10,
) -> GoldenQuestion:
    """Add one golden question to `tenant`'s set. The caller has checked the shape of the input
    (the API's serializer); this checks the rules that need the database, and writes nothing when
    one fails."""
    expected = list(dict.fromkeys(expected))
    errors: dict[str, list[str]] = {}
    if not actor.may_access_tenant(tenant.pk):
        errors["tenant"] = ["No such tenant in your scope."]
    if agent.tenant_id != tenant.pk:
        errors["agent"] = ["No such agent in this tenant."]
    if not question.strip():
        errors["question"] = ["This field may not be blank."]
    if k_error := k_errors(k):
        errors["k"] = k_error
    if not errors and (
        expected_error := expected_record_errors(
            actor=actor, tenant=tenant, agent=agent, purpose=purpose, subject=subject, record_ids=expected
        )
    ):
        errors["expected"] = expected_error
    if errors:
        raise ValidationFailed("The golden question is invalid.", errors=errors)
    with transaction.atomic():
        golden = GoldenQuestion.objects.create(
            tenant=tenant,
            agent=agent,
            purpose=purpose,
            subject=subject,
            question=question.strip(),
            k=k,
            created_by=actor.label,
            created_by_user=actor.user if actor.is_human else None,
        )
        # set() takes primary keys, which the stubs assume are integers (a record's is a UUID).
        golden.expected.set(expected)  # type: ignore[arg-type]
    return golden


def golden_question_delete(*, actor: Actor, question_id: uuid.UUID) -> None:
    """Remove a question from its set (its past runs keep their scores and ids)."""
    deleted, _ = actor.in_tenants(GoldenQuestion.objects.filter(pk=question_id)).delete()
    if not deleted:
        raise RecordNotFound("No such golden question in your scope.")
