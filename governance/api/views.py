"""The governance API: forget requests (`POST /api/v1/forget/`, `GET /api/v1/forget/{id}/`).
Forgetting is logical at once (recall stops returning the subject before the response) and
propagation into derived artifacts is left to the `propagate_forgets` job, so the request answers
202 with status `propagating`."""

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from governance.api.serializers import ForgetRequestInputSerializer, ForgetRequestSerializer
from governance.models import ForgetRequest
from governance.services import forget_request_create
from memory.actors import Actor
from memory.api.authentication import request_actor
from memory.api.permissions import IsAgentOrReviewer, reject_foreign_scope
from memory.api.views import PROBLEMS, UUID_PATTERN
from memory.errors import RecordNotFound, ValidationFailed
from memory.models import Tenant
from memory.selectors import tenants_in_scope


def forget_request_queryset(actor: Actor) -> QuerySet[ForgetRequest]:
    """Forget requests the actor may read: an agent its own agent's, a reviewer those of their tenants."""
    qs = ForgetRequest.objects.select_related("tenant").prefetch_related("receipts")
    if actor.is_agent:
        return qs.filter(tenant_id=actor.credential.agent.tenant_id, requested_by=actor.label)
    if actor.tenant_ids is not None:
        return qs.filter(tenant_id__in=actor.tenant_ids)
    return qs


def _tenant_for(actor: Actor, data: dict) -> Tenant:
    """An agent forgets in its token's tenant; a reviewer names one of theirs (or has only one)."""
    if actor.is_agent:
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


class ForgetRequestViewSet(mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = ForgetRequestSerializer
    permission_classes = [IsAgentOrReviewer]
    lookup_value_regex = UUID_PATTERN
    queryset = ForgetRequest.objects.none()  # for the schema; get_queryset scopes every request

    def get_queryset(self) -> QuerySet[ForgetRequest]:
        if getattr(self, "swagger_fake_view", False):
            return ForgetRequest.objects.none()
        return forget_request_queryset(request_actor(self.request))

    @extend_schema(
        summary="Forget a subject (agents with the forget capability, reviewers)",
        request=ForgetRequestInputSerializer,
        responses={202: ForgetRequestSerializer, **{code: PROBLEMS[code] for code in (400, 401, 403, 404, 429)}},
    )
    def create(self, request: Request) -> Response:
        actor = request_actor(request)
        data = reject_foreign_scope(request.data, actor.credential) if actor.is_agent else request.data
        body = ForgetRequestInputSerializer(data=data)
        body.is_valid(raise_exception=True)
        tenant = _tenant_for(actor, body.validated_data)
        forget_request = forget_request_create(
            actor=actor, tenant=tenant, subject=body.validated_data["subject"], reason=body.validated_data["reason"],
        )
        forget_request = self.get_queryset().get(pk=forget_request.pk)
        return Response(
            ForgetRequestSerializer(forget_request).data, status=status.HTTP_202_ACCEPTED,
            headers={"Location": f"{request.path}{forget_request.pk}/"},
        )

    @extend_schema(summary="A forget request and its propagation receipts",
                   responses={200: ForgetRequestSerializer, 404: PROBLEMS[404]})
    def retrieve(self, request: Request, *args, **kwargs) -> Response:
        return super().retrieve(request, *args, **kwargs)
