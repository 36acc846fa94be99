"""Who may call which endpoint, decided from the request's actor: agent tokens, and reviewers
(members of the `reviewers` group, or superusers) by session or personal token. Which *records*
they reach is a separate question, answered by the scoped querysets and the services."""

from rest_framework.permissions import BasePermission

from memory.actors import REVIEWERS_GROUP
from memory.api.authentication import request_actor


def _is_reviewer(request) -> bool:
    actor = request_actor(request)
    user = actor.user if actor is not None else None
    if actor is None or user is None:  # nobody, an agent token or a job: only a human reviews
        return False
    if user.is_superuser or actor.tenant_ids:
        return True  # Actor.for_user gives tenants only to active members of the reviewers group
    cached = getattr(request, "_memory_is_reviewer", None)
    if cached is None:
        cached = request._memory_is_reviewer = user.is_active and user.groups.filter(name=REVIEWERS_GROUP).exists()
    return cached


class IsAgent(BasePermission):
    message = "Only an agent token may do this."

    def has_permission(self, request, view) -> bool:
        actor = request_actor(request)
        return actor is not None and actor.is_agent


class IsReviewer(BasePermission):
    message = "Only a reviewer may do this."

    def has_permission(self, request, view) -> bool:
        return _is_reviewer(request)


class IsAgentOrReviewer(BasePermission):
    message = "Only an agent token or a reviewer may do this."

    def has_permission(self, request, view) -> bool:
        actor = request_actor(request)
        return actor is not None and (actor.is_agent or _is_reviewer(request))
