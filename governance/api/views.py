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
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from governance.api.common import ScopedViewSet, scoped_tenant_id, tenant_for
from governance.api.events import AcknowledgementInputSerializer, acknowledge_signed
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
from governance.dedup.models import DedupProposal
from governance.dedup.selectors import proposal_queue, proposals_in_scope
from governance.dedup.services import proposal_accept, proposal_reject, proposal_rollback, regret_counts
from governance.forget.models import ForgetRequest
from governance.forget.selectors import forget_requests_in_scope
from governance.forget.services import forget_request_create
from memory.actors import Actor
from memory.api.authentication import permitted_actor
from memory.api.permissions import IsAgentOrReviewer
from memory.api.typing import is_agent_request
from memory.api.views import PROBLEMS
from memory.services import reject_foreign_scope


class ForgetRequestViewSet(mixins.RetrieveModelMixin, ScopedViewSet):
    serializer_class = ForgetRequestSerializer
    permission_classes = [IsAgentOrReviewer]  # an agent reads back the requests it filed
    queryset = ForgetRequest.objects.none()

    def scoped(self, actor: Actor, params: dict) -> QuerySet[ForgetRequest]:
        return forget_requests_in_scope(actor).prefetch_related("receipts")

    @extend_schema(
        summary="Forget a subject (agents with the forget capability, reviewers)",
        request=ForgetRequestInputSerializer,
        responses={202: ForgetRequestSerializer, **{code: PROBLEMS[code] for code in (400, 401, 403, 404, 429)}},
    )
    def create(self, request: Request) -> Response:
        actor = permitted_actor(request)
        data = reject_foreign_scope(request.data, request.auth) if is_agent_request(request) else request.data
        body = ForgetRequestInputSerializer(data=data)
        body.is_valid(raise_exception=True)
        tenant = tenant_for(actor, body.validated_data)
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

    @extend_schema(
        summary="A copy-keeping webhook subscriber acknowledges the forget request (signed like a delivery; no token)",
        request=AcknowledgementInputSerializer,
        responses={200: ForgetRequestSerializer, **{code: PROBLEMS[code] for code in (400, 403, 404, 429)}},
    )
    @action(detail=True, methods=["post"], permission_classes=[AllowAny], authentication_classes=[])
    def acknowledgements(self, request: Request, pk: str) -> Response:
        forget_request = acknowledge_signed(request, pk)
        return Response(
            ForgetRequestSerializer(ForgetRequest.objects.prefetch_related("receipts").get(pk=forget_request.pk)).data
        )


# --------------------------------------------------------------------------------------------
# dedup proposals


_PROPOSAL_DECISION_RESPONSES = {code: PROBLEMS[code] for code in (400, 401, 403, 404, 409, 429)}


class ProposalViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ScopedViewSet):
    """Dedup proposals of the reviewer's tenants, oldest first. Reviewers only: an agent token is
    a 403 whatever it asks, since a job's suggestion to merge memories is for a human to decide."""

    serializer_class = ProposalSerializer
    list_query_serializer = ProposalListQuerySerializer
    queryset = DedupProposal.objects.none()

    def scoped(self, actor: Actor, params: dict) -> QuerySet[DedupProposal]:
        if self.action != "list":
            return proposal_queue(actor, status=None)
        return proposal_queue(actor, status=params.get("status"), category=params.get("category"))

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
            proposal_id=pk, actor=permitted_actor(request), note=body.validated_data["note"], keep_id=body.validated_data["keep"]
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
        proposal = proposal_reject(proposal_id=pk, actor=permitted_actor(request), note=body.validated_data["note"])
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
        outcome = proposal_rollback(proposal_id=pk, actor=permitted_actor(request), note=body.validated_data["note"])
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
        actor = permitted_actor(request)
        params = ProposalStatsQuerySerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        tenant_id = scoped_tenant_id(actor, params.validated_data.get("tenant"))
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
        return proposal_queue(permitted_actor(self.request), status=None).get(pk=proposal_id)

    def _read(self, proposal_id) -> Response:
        return Response(ProposalSerializer(self._fresh(proposal_id)).data)
