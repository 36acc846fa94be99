"""The governance API: forget requests (`POST /api/v1/forget/`, `GET /api/v1/forget/{id}/`) and
dedup proposals (`/api/v1/proposals/`, reviewers only).

Forgetting is logical at once (recall stops returning the subject before the response) and
propagation into derived artifacts is left to the `propagate_forgets` job, so the request answers
202 with status `propagating`.

Proposals are read through `governance.dedup.selectors` and decided through
`governance.dedup.services` (accept, reject, rollback), which change records only through the
lifecycle services; this module only shapes input and output. A proposal whose records moved on
is the service's `Conflict` (409, the proposal stays open), another tenant's proposal a 404.
"""

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from governance.api.serializers import (
    ForgetRequestInputSerializer,
    ForgetRequestSerializer,
    ProposalAcceptInputSerializer,
    ProposalDecisionInputSerializer,
    ProposalListQuerySerializer,
    ProposalRollbackSerializer,
    ProposalSerializer,
    ProposalStatsQuerySerializer,
    ProposalStatsSerializer,
)
from governance.dedup.selectors import proposal_queue, proposals_in_scope
from governance.dedup.services import proposal_accept, proposal_reject, proposal_rollback, regret_counts
from governance.models import DedupProposal, ForgetRequest
from governance.selectors import forget_requests_in_scope
from governance.services import forget_request_create
from memory.actors import Actor
from memory.api.authentication import request_actor
from memory.api.permissions import IsAgentOrReviewer, IsReviewer
from memory.api.views import PROBLEMS, UUID_PATTERN, RecordPagination
from memory.errors import RecordNotFound, ValidationFailed
from memory.models import Tenant
from memory.selectors import tenants_in_scope
from memory.services import reject_foreign_scope


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
        return forget_requests_in_scope(request_actor(self.request)).prefetch_related("receipts")

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
        filed = forget_request_create(
            actor=actor,
            tenant=tenant,
            subject=body.validated_data["subject"],
            reason=body.validated_data["reason"],
        )
        forget_request = self.get_queryset().get(pk=filed.pk)
        # The answer names the subject as filed, even if a worker already completed the request
        # (and replaced the stored subject by its fingerprint) before this read.
        forget_request.subject = filed.subject
        return Response(
            ForgetRequestSerializer(forget_request).data,
            status=status.HTTP_202_ACCEPTED,
            headers={"Location": f"{request.path}{forget_request.pk}/"},
        )

    @extend_schema(
        summary="A forget request and its propagation receipts", responses={200: ForgetRequestSerializer, 404: PROBLEMS[404]}
    )
    def retrieve(self, request: Request, *args, **kwargs) -> Response:
        return super().retrieve(request, *args, **kwargs)


# --------------------------------------------------------------------------------------------
# dedup proposals


def _scoped_tenant_id(actor: Actor, slug: str | None) -> int | None:
    """A `?tenant=` slug, resolved within the reviewer's tenants (another tenant is a 404)."""
    if not slug:
        return None
    tenant_id = tenants_in_scope(actor).filter(slug=slug).values_list("pk", flat=True).first()
    if tenant_id is None:
        raise RecordNotFound("No such tenant in your scope.")
    return tenant_id


_PROPOSAL_DECISION_RESPONSES = {code: PROBLEMS[code] for code in (400, 401, 403, 404, 409, 429)}


class ProposalViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Dedup proposals of the reviewer's tenants, oldest first. Reviewers only: an agent token is
    a 403 whatever it asks, since a job's suggestion to merge memories is for a human to decide."""

    serializer_class = ProposalSerializer
    permission_classes = [IsReviewer]
    pagination_class = RecordPagination
    lookup_value_regex = UUID_PATTERN
    queryset = DedupProposal.objects.none()  # for the schema; get_queryset scopes every request

    def get_queryset(self) -> QuerySet[DedupProposal]:
        if getattr(self, "swagger_fake_view", False):
            return DedupProposal.objects.none()
        actor = request_actor(self.request)
        if self.action != "list":
            return proposal_queue(actor, status=None)
        params = ProposalListQuerySerializer(data=self.request.query_params)
        params.is_valid(raise_exception=True)
        queryset = proposal_queue(
            actor, status=params.validated_data.get("status"), category=params.validated_data.get("category")
        )
        tenant_id = _scoped_tenant_id(actor, params.validated_data.get("tenant"))
        return queryset if tenant_id is None else queryset.filter(tenant_id=tenant_id)

    @extend_schema(
        summary="List dedup proposals in your tenants (reviewers only)",
        parameters=[ProposalListQuerySerializer],
        responses={200: ProposalSerializer(many=True), **{c: PROBLEMS[c] for c in (400, 401, 403, 404, 429)}},
    )
    def list(self, request: Request, *args, **kwargs) -> Response:
        return super().list(request, *args, **kwargs)

    @extend_schema(
        summary="One dedup proposal, with its members' proposed and current versions",
        responses={200: ProposalSerializer, **{c: PROBLEMS[c] for c in (401, 403, 404)}},
    )
    def retrieve(self, request: Request, *args, **kwargs) -> Response:
        return super().retrieve(request, *args, **kwargs)

    @extend_schema(
        summary="Accept: the dropped records become superseded by the kept one (409 if a record moved on)",
        request=ProposalAcceptInputSerializer,
        responses={200: ProposalSerializer, **_PROPOSAL_DECISION_RESPONSES},
    )
    @action(detail=True, methods=["post"])
    def accept(self, request: Request, pk: str) -> Response:
        body = ProposalAcceptInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        proposal = proposal_accept(
            proposal_id=pk, actor=request_actor(request), note=body.validated_data["note"], keep_id=body.validated_data["keep"]
        )
        return self._read(proposal.pk)

    @extend_schema(
        summary="Reject: records stay as they are; the group is not proposed again unchanged",
        request=ProposalDecisionInputSerializer,
        responses={200: ProposalSerializer, **_PROPOSAL_DECISION_RESPONSES},
    )
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str) -> Response:
        body = ProposalDecisionInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        proposal = proposal_reject(proposal_id=pk, actor=request_actor(request), note=body.validated_data["note"])
        return self._read(proposal.pk)

    @extend_schema(
        summary="Roll back an accepted proposal: the dropped records become active again "
        "(unless forgotten, expired or changed since)",
        request=ProposalDecisionInputSerializer,
        responses={200: ProposalRollbackSerializer, **_PROPOSAL_DECISION_RESPONSES},
    )
    @action(detail=True, methods=["post"])
    def rollback(self, request: Request, pk: str) -> Response:
        body = ProposalDecisionInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        outcome = proposal_rollback(proposal_id=pk, actor=request_actor(request), note=body.validated_data["note"])
        return Response(
            ProposalRollbackSerializer(
                {
                    "proposal": self._fresh(outcome.proposal.pk),
                    "restored": outcome.restored,
                    "not_restored": {str(record_id): why for record_id, why in outcome.not_restored.items()},
                }
            ).data
        )

    @extend_schema(
        summary="Proposal counts and the regret rate (rolled back / accepted) in your tenants",
        parameters=[ProposalStatsQuerySerializer],
        responses={200: ProposalStatsSerializer, **{c: PROBLEMS[c] for c in (400, 401, 403, 404)}},
    )
    @action(detail=False, methods=["get"], pagination_class=None, filter_backends=[])
    def stats(self, request: Request) -> Response:
        actor = request_actor(request)
        params = ProposalStatsQuerySerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        tenant_id = _scoped_tenant_id(actor, params.validated_data.get("tenant"))
        regret = regret_counts(actor=actor, tenant_id=tenant_id)
        open_proposals = proposals_in_scope(actor).filter(status=DedupProposal.Status.OPEN)
        if tenant_id is not None:
            open_proposals = open_proposals.filter(tenant_id=tenant_id)
        return Response(
            ProposalStatsSerializer(
                {
                    "open": open_proposals.count(),
                    "accepted": regret.accepted,
                    "rolled_back": regret.rolled_back,
                    "regret_rate": regret.rate,
                }
            ).data
        )

    def _fresh(self, proposal_id) -> DedupProposal:
        # After a decision, read it back the way the list does (members at their new versions).
        return proposal_queue(request_actor(self.request), status=None).get(pk=proposal_id)

    def _read(self, proposal_id) -> Response:
        return Response(ProposalSerializer(self._fresh(proposal_id)).data)
