"""Forget requests as each caller may read them."""

from django.db.models import QuerySet

from governance.forget.models import ForgetRequest
from memory.actors import Actor


def forget_requests_in_scope(actor: Actor) -> QuerySet[ForgetRequest]:
    """Forget requests the actor may read: a reviewer those of their tenants; an agent token only
    the ones it filed, matched by the credential's key (never by a display label)."""
    requests = actor.in_tenants(ForgetRequest.objects.select_related("tenant"))
    if actor.credential is not None:  # an agent token (only agent actors carry one)
        return requests.filter(requested_by_credential_id=actor.credential.pk)
    return requests
