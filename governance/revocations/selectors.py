"""Revocations as each reviewer may see them: those of their tenants."""

import uuid

from django.db.models import QuerySet

from governance.revocations.models import Revocation, RevocationRecord
from memory.actors import Actor


def revocations_in_scope(actor: Actor) -> QuerySet[Revocation]:
    return actor.in_tenants(Revocation.objects.select_related("tenant", "credential__agent", "agent", "revoked_by_user"))


def revocation_from_query(actor: Actor, raw_id: str | None) -> Revocation | None:
    """The revocation a page's `?revocation=<id>` names, within the reviewer's tenants; None when
    not given. Raises Revocation.DoesNotExist for an id that is malformed or out of scope."""
    if not raw_id:
        return None
    try:
        return revocations_in_scope(actor).get(pk=uuid.UUID(raw_id))
    except ValueError:
        raise Revocation.DoesNotExist from None


def records_of(revocation: Revocation) -> QuerySet:
    """Ids of the records a revocation sent back to quarantine, as a subquery."""
    return RevocationRecord.objects.filter(revocation=revocation).values("record_id")
