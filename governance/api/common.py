"""What the governance API's viewsets share: the tenant a request names, and one base for the
viewsets that read a scoped collection (who may call, paging, ids, the `?tenant=` filter)."""

from typing import Any

from django.db.models import QuerySet
from rest_framework import serializers, viewsets

from memory.actors import Actor
from memory.api.authentication import permitted_actor
from memory.api.permissions import IsReviewer
from memory.api.views import UUID_PATTERN, RecordPagination
from memory.errors import RecordNotFound, ValidationFailed
from memory.models import Tenant
from memory.selectors import tenants_in_scope


def tenant_for(actor: Actor, data: dict) -> Tenant:
    """An agent acts in its token's tenant; a reviewer names one of theirs (or has only one)."""
    if actor.credential is not None:  # an agent token (only agent actors carry one)
        return actor.credential.agent.tenant
    tenants = tenants_in_scope(actor)
    slug = data.get("tenant")
    if slug:
        tenant = tenants.filter(slug=slug).first()
        if tenant is None:
            raise RecordNotFound("No such tenant in your scope.")
        return tenant
    candidates = list(tenants[:2])
    if len(candidates) != 1:
        raise ValidationFailed("Name the tenant to forget in.", errors={"tenant": ["Required: you review several tenants."]})
    return candidates[0]


def scoped_tenant_id(actor: Actor, slug: str | None) -> int | None:
    """A `?tenant=` slug, resolved within the reviewer's tenants (another tenant is a 404)."""
    if not slug:
        return None
    tenant_id = tenants_in_scope(actor).filter(slug=slug).values_list("pk", flat=True).first()
    if tenant_id is None:
        raise RecordNotFound("No such tenant in your scope.")
    return tenant_id


class ScopedViewSet(viewsets.GenericViewSet):
    """A collection read in the caller's scope: reviewers only (unless a subclass says otherwise),
    the API's paging, UUID ids, and `get_queryset` built from `scoped(actor, params)`. On a list,
    `list_query_serializer` (when set) validates the query string first (400) and its `tenant`, one
    of the caller's tenants by slug (404 otherwise), narrows the list. A subclass sets `queryset` to
    its model's `.none()` for the schema; every request is scoped."""

    permission_classes = [IsReviewer]
    pagination_class = RecordPagination
    lookup_value_regex = UUID_PATTERN
    list_query_serializer: type[serializers.Serializer] | None = None

    def scoped(self, actor: Actor, params: dict[str, Any]) -> QuerySet:
        """What the caller may read; `params` is the validated list query (empty off a list)."""
        raise NotImplementedError

    def get_queryset(self) -> QuerySet:
        if getattr(self, "swagger_fake_view", False):
            return super().get_queryset()  # the class's `.none()`
        actor = permitted_actor(self.request)
        params: dict[str, Any] = {}
        if self.action == "list" and self.list_query_serializer is not None:
            query = self.list_query_serializer(data=self.request.query_params)
            query.is_valid(raise_exception=True)
            params = dict(query.validated_data)
        queryset = self.scoped(actor, params)
        tenant_id = scoped_tenant_id(actor, params.get("tenant"))
        return queryset if tenant_id is None else queryset.filter(tenant_id=tenant_id)
