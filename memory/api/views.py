"""The agent API over memory records: write, read and list, transitions, recall. Views are thin:
input -> `memory.services` / `memory.recall` -> output serializer. Scope comes from the token
(or the reviewer's tenants), never from the body; records outside it are a 404."""

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from django.db import transaction
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory import replicas, services
from memory.actors import Actor
from memory.api import asof
from memory.api.authentication import permitted_actor
from memory.api.permissions import IsAgent, IsAgentOrReviewer, IsReviewer
from memory.api.problems import domain_problem
from memory.api.serializers import (
    BatchResultSerializer,
    MemoryRecordSerializer,
    ProblemSerializer,
    RecallResponseSerializer,
)
from memory.api.typing import AgentRequest, is_agent_request
from memory.errors import DomainError, RecordNotFound
from memory.filters import MemoryRecordFilter
from memory.models import IDEMPOTENCY_KEY_MAX_CHARS, SIGNED_BY, MemoryRecord, Status
from memory.recall import parse_recall, recall
from memory.selectors import records_in_scope
from memory.validation import (
    BatchWriteSerializer,
    MemoryWriteSerializer,
    RecallQuerySerializer,
    TransitionSerializer,
    validated,
)

if TYPE_CHECKING:
    from memory.models import RecordWithSuccessor

UUID_PATTERN = r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}"

# A successor that never took effect (still quarantined, or rejected) does not supersede anything.
_EFFECTIVE_SUCCESSOR = (
    MemoryRecord.objects.filter(supersedes=OuterRef("pk"))
    .exclude(status__in=[Status.QUARANTINED, Status.REJECTED])
    .order_by("created_at")
    .values("pk")[:1]
)


def _problem_response(description: str) -> OpenApiResponse:
    return OpenApiResponse(response=ProblemSerializer, description=description)


PROBLEMS = {
    400: _problem_response("Invalid input (problem+json with `errors`); nothing was written."),
    401: _problem_response("Missing, unknown or revoked token."),
    403: _problem_response("Outside what the token allows."),
    404: _problem_response("No such record in your scope."),
    409: _problem_response("Stale version, or the transition does not apply."),
    429: _problem_response("Rate limited; see Retry-After."),
}


def record_queryset(actor: Actor) -> "QuerySet[RecordWithSuccessor]":
    """Records the actor may read (`records_in_scope`), with what the output serializer needs
    joined in one query."""
    return (
        records_in_scope(actor)
        .select_related("tenant", "agent", "kind", SIGNED_BY)
        .annotate(superseded_by_id=Subquery(_EFFECTIVE_SUCCESSOR))
    )


def _record_response(actor: Actor, record_id, *, status_code: int = status.HTTP_200_OK, headers=None) -> Response:
    record = record_queryset(actor).filter(pk=record_id).first()
    if record is None:  # e.g. an idempotent replay after the token lost the record's purpose
        raise RecordNotFound("No such memory in your scope.")
    return Response(MemoryRecordSerializer(record).data, status=status_code, headers=headers)


def _on_replica(request: Request, read: Callable[[], Response]) -> Response:
    """A list or read of records, answered by a read replica when it has replayed the caller's
    tenants' forgets and revocations and the caller's own writes (memory.replicas)."""
    if not replicas.aliases():
        return read()
    actor = permitted_actor(request)
    writer = (
        replicas.writer_key(agent_id=actor.credential.agent_id)
        if actor.credential is not None
        else replicas.writer_key(user_id=request.user.pk)
    )
    return replicas.read_on_replica(read, tenant_ids=actor.tenant_ids, writer=writer)


class RecordPagination(PageNumberPagination):
    """Pages of a list. A `page_size` that is not an integer from 1 to 200 is a 400, not silently
    the default; a page past the end is a 404."""

    page_size_query_param = "page_size"
    max_page_size = 200

    def get_page_size(self, request):
        raw = request.query_params.get(self.page_size_query_param)
        if raw in (None, ""):
            return self.page_size
        if not raw.isdigit() or not 1 <= int(raw) <= self.max_page_size:
            raise ValidationError({self.page_size_query_param: [f"Must be an integer from 1 to {self.max_page_size}."]})
        return int(raw)

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"].update(minimum=1, maximum=self.max_page_size)
            if parameter["name"] == self.page_query_param:
                parameter["schema"].update(minimum=1)
        return parameters


_Action = TypeVar("_Action", bound=Callable[..., Any])


def _transition_schema(summary: str) -> Callable[[_Action], _Action]:
    """The schema every transition action shares, under its own summary."""
    return extend_schema(
        summary=summary,
        request=TransitionSerializer,
        responses={200: MemoryRecordSerializer, **{code: PROBLEMS[code] for code in (400, 401, 403, 404, 409)}},
    )


TRANSITION_SERVICES = {
    "confirm": services.memory_confirm,
    "promote": services.memory_promote,
    "reject": services.memory_reject,
    "retire": services.memory_retire,
}


class MemoryRecordViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = MemoryRecordSerializer
    filterset_class = MemoryRecordFilter
    pagination_class = RecordPagination
    lookup_value_regex = UUID_PATTERN
    queryset = MemoryRecord.objects.none()  # for the schema; get_queryset scopes every request

    def get_permissions(self):
        if self.action in ("create", "batch"):
            return [IsAgent()]
        if self.action in ("promote", "reject", "retire"):
            # Reviewers only, checked before anything else: an agent token is a 403 whatever it sends.
            return [IsReviewer()]
        return [IsAgentOrReviewer()]

    def get_queryset(self) -> QuerySet[MemoryRecord]:
        if getattr(self, "swagger_fake_view", False):
            return MemoryRecord.objects.none()
        # Stable order for pagination; ?ordering= replaces it.
        return record_queryset(permitted_actor(self.request)).order_by("-created_at", "-pk")

    @extend_schema(
        summary="Write a memory",
        request=MemoryWriteSerializer,
        examples=[
            OpenApiExample(
                "A user's preference from a chat turn",
                request_only=True,
                value={
                    "kind": "preference",
                    "subject": "customer/acme",
                    "purpose": "support",
                    "content": "Prefers email over phone.",
                    "authority": "user",
                    "confidence": 0.9,
                    "provenance": {
                        "source_type": "user_turn",
                        "uri": "chat://session/s-1#turn-12",
                        "session_id": "s-1",
                        "turn_id": "12",
                        "observed_at": "2026-11-29T10:00:00Z",
                        "contaminated": False,
                    },
                    "ttl_seconds": 604800,
                },
            )
        ],
        parameters=[
            OpenApiParameter(
                "Idempotency-Key",
                {"type": "string", "minLength": 1, "maxLength": IDEMPOTENCY_KEY_MAX_CHARS},
                OpenApiParameter.HEADER,
                description="A retry with the same key and body returns the first result.",
            )
        ],
        responses={201: MemoryRecordSerializer, **{code: PROBLEMS[code] for code in (400, 401, 403, 409, 429)}},
    )
    def create(self, request: AgentRequest) -> HttpResponse:
        # The write commits only once its response has been produced: if serializing it failed,
        # the client would get an error for a record that exists.
        with transaction.atomic():
            result = services.memory_write(
                credential=request.auth,
                data=request.data,
                idempotency_key=request.headers.get("Idempotency-Key"),
            )
            headers = {"Location": f"{request.path}{result.record.pk}/"}
            if result.replayed:
                headers["Idempotent-Replayed"] = "true"
                return _record_response(
                    permitted_actor(request), result.record.pk, status_code=status.HTTP_201_CREATED, headers=headers
                )
            # A record written just now has its tenant, agent and kind attached, and no successor yet:
            # serialize it as it is rather than reading it back.
            record = cast("RecordWithSuccessor", result.record)
            record.superseded_by_id = None
            body = JSONRenderer().render(MemoryRecordSerializer(record).data)
        return HttpResponse(body, status=status.HTTP_201_CREATED, headers=headers, content_type="application/json")

    @extend_schema(
        summary="Write up to 100 memories at once",
        request=BatchWriteSerializer,
        responses={200: BatchResultSerializer, **{code: PROBLEMS[code] for code in (400, 401, 403, 429)}},
    )
    @action(detail=False, methods=["post"])
    def batch(self, request: AgentRequest) -> HttpResponse:
        """Each item is validated, admitted or quarantined and written exactly as a single write;
        a bad item is that item's problem. A body that is not a list of 1 to 100 objects is a 400
        and writes nothing. The write commits only once every result has been produced."""
        items = validated(BatchWriteSerializer, request.data, detail="The batch is invalid: see errors.")["items"]
        with transaction.atomic():
            outcomes = services.memory_write_batch(credential=request.auth, items=items)
            records = {
                record.pk: record
                for record in record_queryset(permitted_actor(request)).filter(
                    pk__in=[outcome.record.pk for outcome in outcomes if outcome.record is not None]
                )
            }
            # One serializer for every record (its fields are built once, not per item).
            written = [records[outcome.record.pk] for outcome in outcomes if outcome.record is not None]
            serialized = iter(MemoryRecordSerializer(written, many=True).data)
            results = []
            for outcome in outcomes:
                result: dict[str, object] = {"index": outcome.index, "status": outcome.status}
                if outcome.record is not None:
                    result["record"] = next(serialized)
                else:  # an item without a record has the error that stopped it
                    error = cast(DomainError, outcome.error)
                    result["problem"] = domain_problem(error, instance=f"{request.path}#/items/{outcome.index}")
                results.append(result)
            body = JSONRenderer().render({"results": results})
        return HttpResponse(body, content_type="application/json")

    @extend_schema(summary="List memories in your scope")
    def list(self, request: Request, *args, **kwargs) -> Response:
        if "as_of" in request.query_params:  # would be ignored, and the answer mistaken for the past
            raise ValidationError({"as_of": ["as_of applies to one memory: GET /api/v1/memories/{id}/?as_of=<time>."]})
        return _on_replica(request, lambda: super(MemoryRecordViewSet, self).list(request, *args, **kwargs))

    @extend_schema(
        summary="One memory; reviewers may add ?as_of= for its state at a past moment",
        parameters=[asof.AS_OF_PARAMETER],
        # The as-of shape (asof.MemoryRecordAsOfSerializer) is the record plus an `as_of` object; it is
        # described here rather than as a second component, which would rename the status enum.
        responses={
            200: OpenApiResponse(response=MemoryRecordSerializer, description=asof.AS_OF_RESPONSE_HELP),
            **{code: PROBLEMS[code] for code in (400, 403, 404)},
            410: _problem_response("as_of: the record has been pruned since (retention deletes it with its history)."),
        },
    )
    def retrieve(self, request: Request, *args, **kwargs) -> Response:
        if "as_of" in request.query_params:
            return Response(asof.record_as_of_data(permitted_actor(request), kwargs["pk"], request.query_params["as_of"]))
        return _on_replica(request, lambda: super(MemoryRecordViewSet, self).retrieve(request, *args, **kwargs))

    def _transition(self, request: Request, pk: str) -> Response:
        actor = permitted_actor(request)
        data = services.reject_foreign_scope(request.data, request.auth) if is_agent_request(request) else request.data
        body = validated(TransitionSerializer, data, detail="The request is invalid: see errors.")
        record = TRANSITION_SERVICES[self.action](record_id=pk, actor=actor, **body)
        return _record_response(actor, record.pk)

    @_transition_schema("Confirm: re-checked against its source (agents with the capability, reviewers)")
    @action(detail=True, methods=["post"])
    def confirm(self, request: Request, pk: str) -> Response:
        return self._transition(request, pk)

    @_transition_schema("Promote: quarantined -> active, verified (reviewers only)")
    @action(detail=True, methods=["post"])
    def promote(self, request: Request, pk: str) -> Response:
        return self._transition(request, pk)

    @_transition_schema("Reject: quarantined -> rejected (reviewers only)")
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str) -> Response:
        return self._transition(request, pk)

    @_transition_schema("Retire: active -> expired now (reviewers only)")
    @action(detail=True, methods=["post"])
    def retire(self, request: Request, pk: str) -> Response:
        return self._transition(request, pk)


class RecallView(APIView):
    permission_classes = [IsAgentOrReviewer]  # reviewers only as of a past moment (memory.api.asof)

    @extend_schema(
        summary="Recall memories for a task",
        description="Agents: what the token's agent recalls now. Reviewers: only with `as_of`, `tenant` and `agent`, "
        "what that agent's recall would have returned at that moment, reconstructed from history (the "
        "response adds an `as_of` object); without `as_of` a reviewer gets 403.",
        request=RecallQuerySerializer,
        examples=[
            OpenApiExample(
                "What the agent needs for a support reply",
                request_only=True,
                value={
                    "query": "how does acme want to be contacted",
                    "purpose": "support",
                    "subject": "customer/acme",
                    "kinds": ["preference"],
                    "limit": 10,
                    "token_budget": 800,
                },
            )
        ],
        responses={200: asof.RecallAsOfResponseSerializer, **{code: PROBLEMS[code] for code in (400, 401, 403, 404, 429)}},
    )
    def post(self, request: Request) -> Response:
        actor = permitted_actor(request)
        if not is_agent_request(request):
            return Response(asof.recall_as_of_data(actor, request.data))
        asof.refuse_agent_as_of(request.data)
        credential = request.auth
        query = parse_recall(services.reject_foreign_scope(request.data, credential))
        # A replica may answer when it has replayed the tenant's forgets and revocations and this
        # agent's own writes (memory.replicas; the primary otherwise, and with no replicas).
        result = replicas.read_on_replica(
            lambda: recall(credential=credential, q=query),
            tenant_ids=[credential.agent.tenant_id],
            writer=replicas.writer_key(agent_id=credential.agent_id),
        )
        return Response(RecallResponseSerializer(result).data)
