"""Alerts as a reviewer sees them: the open episodes of their tenants, and their thresholds."""

from django.db.models import QuerySet

from governance.alerts.models import Alert, AlertPolicy
from memory.actors import Actor
from memory.selectors import tenants_in_scope


def open_alerts(actor: Actor) -> QuerySet[Alert]:
    return actor.in_tenants(Alert.objects.filter(resolved_at__isnull=True).select_related("tenant")).order_by("opened_at")


def alert_policies(actor: Actor) -> list[AlertPolicy]:
    """The thresholds of each of the actor's tenants (defaults where none were set)."""
    tenants = {tenant.pk: tenant for tenant in tenants_in_scope(actor)}
    policies = AlertPolicy.for_tenants(list(tenants))
    for tenant_id, policy in policies.items():
        policy.tenant = tenants[tenant_id]
    return [policies[tenant_id] for tenant_id in tenants]
