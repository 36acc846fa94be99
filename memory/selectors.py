"""Scoped reads. Every read path starts from `records_in_scope`, which applies the caller's tenant
(and, for agents, agent and purposes) boundary once, here."""

from datetime import timedelta

from django.db.models import DateTimeField, ExpressionWrapper, F, QuerySet, Value
from django.utils import timezone

from memory.actors import Actor
from memory.models import MemoryRecord, Status, Tenant


def records_in_scope(actor: Actor) -> QuerySet[MemoryRecord]:
    """Every record the actor may see or act on. An agent token: its tenant, its agent and the
    purposes it allows (reads, transitions and forget alike). A reviewer: their tenants."""
    qs = MemoryRecord.objects.all()
    credential = actor.credential
    if credential is not None:  # an agent token (only agent actors carry one)
        return qs.filter(tenant_id=credential.agent.tenant_id, agent_id=credential.agent_id, purpose__in=credential.purposes)
    return actor.in_tenants(qs)


def tenants_in_scope(actor: Actor) -> QuerySet[Tenant]:
    return actor.in_tenants(Tenant.objects.all(), field="pk")


def quarantine_queue(actor: Actor) -> QuerySet[MemoryRecord]:
    """Quarantined records, oldest first."""
    return records_in_scope(actor).filter(status=Status.QUARANTINED).order_by("created_at", "pk")


def drift_queue(actor: Actor, *, now=None) -> QuerySet[MemoryRecord]:
    """Active records of reviewed kinds whose confirmation is older than the kind's interval,
    oldest confirmation first."""
    now = now or timezone.now()
    return (
        records_in_scope(actor)
        .filter(status=Status.ACTIVE, kind__review_interval__isnull=False, expires_at__gt=now)
        .filter(confirmed_at__lt=ExpressionWrapper(Value(now) - F("kind__review_interval"), output_field=DateTimeField()))
        .order_by("confirmed_at", "pk")
    )


def unused_cutoff(days: int, *, now=None):
    return (now or timezone.now()) - timedelta(days=days)
