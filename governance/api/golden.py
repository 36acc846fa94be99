"""Golden recall sets in the API (reviewers only, scoped to their tenants):

- `GET /api/v1/golden/` (`?tenant=`), `POST /api/v1/golden/`, `GET|DELETE /api/v1/golden/{id}/`:
  golden questions, each with its result in the tenant's latest run on the active index.
- `POST /api/v1/golden/runs/` `{"tenant"?, "index"?}`: scores the tenant's golden set against an
  index (by name; default the active one) now, and answers 201 with the run;
  `GET /api/v1/golden/runs/` (`?tenant=`) and `GET /api/v1/golden/runs/{id}/`.

The input serializers are the validators and the schema; the scope rules that need the database
(expected records in the question's scope, active, visible to the caller) are the service's, and
a failure of either writes nothing. Runs carry ids and scores, never question text or content.
"""

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from governance.api.common import ScopedViewSet, tenant_for
from governance.golden.models import GoldenQuestion, GoldenRun
from governance.golden.runner import run_golden_sets
from governance.golden.selectors import latest_results, questions_in_scope, runs_in_scope
from governance.golden.services import MAX_EXPECTED, golden_question_create, golden_question_delete, k_errors
from memory.actors import Actor
from memory.api.authentication import permitted_actor
from memory.api.views import PROBLEMS
from memory.errors import ValidationFailed
from memory.models import Agent
from memory.validation import (
    PURPOSE_MAX_CHARS,
    RECALL_QUERY_MAX_CHARS,
    SUBJECT_MAX_CHARS,
    StrictCharField,
    StrictIntegerField,
    StrictSerializer,
)

TENANT_HELP = "One of your tenants, by slug; may be left out if you review only one."


class GoldenQuestionInputSerializer(StrictSerializer):
    """The body of `POST /api/v1/golden/`."""

    tenant = StrictCharField(required=False, max_length=64, help_text=TENANT_HELP)
    agent = StrictCharField(max_length=64, help_text="The agent that would ask, by slug (recall runs in its scope).")
    purpose = StrictCharField(max_length=PURPOSE_MAX_CHARS, help_text="The purpose it would recall for.")
    subject = StrictCharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=SUBJECT_MAX_CHARS,
        default="",
        help_text="Only memories about this subject; empty or null for every subject.",
    )
    question = StrictCharField(max_length=RECALL_QUERY_MAX_CHARS, help_text="The recall query, as the agent would send it.")
    expected = serializers.ListField(
        child=serializers.UUIDField(),
        allow_empty=False,
        max_length=MAX_EXPECTED,
        help_text="Ids of active records of that agent and purpose (and subject) that recall must find in its top k.",
    )
    k = StrictIntegerField(required=False, min_value=1, default=10, help_text="Depth of the results that counts as found.")

    def validate_subject(self, subject):
        return subject or ""

    def validate_k(self, k):
        if errors := k_errors(k):
            raise serializers.ValidationError(errors)
        return k


class GoldenRunInputSerializer(StrictSerializer):
    """The body of `POST /api/v1/golden/runs/`."""

    tenant = StrictCharField(required=False, max_length=64, help_text=TENANT_HELP)
    index = StrictCharField(
        required=False,
        allow_null=True,
        max_length=200,
        help_text="The index to score, by name (e.g. a candidate); default the active one.",
    )


class GoldenListQuerySerializer(serializers.Serializer):
    tenant = serializers.CharField(required=False, max_length=64, help_text="One of your tenants, by slug.")


class GoldenResultSerializer(serializers.Serializer):
    """One question's result in a run: ids and ranks only."""

    question = serializers.UUIDField()
    k = serializers.IntegerField()
    expected = serializers.ListField(child=serializers.UUIDField())
    found = serializers.ListField(child=serializers.UUIDField(), help_text="The top k record ids recall returned.")
    rank = serializers.IntegerField(allow_null=True, help_text="Rank of the first expected record within k, else null.")
    reciprocal_rank = serializers.FloatField()
    hit = serializers.BooleanField()
    stale = serializers.BooleanField(help_text="None of the expected records can be recalled any more: not scored.")
    run = serializers.IntegerField(required=False, help_text="In a question's `last_result`: the run it comes from.")


class GoldenRunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    tenant = serializers.CharField(source="tenant.slug")
    index = serializers.CharField()
    index_active = serializers.BooleanField(help_text="The index was the active one when the run started.")
    trigger = serializers.ChoiceField(choices=GoldenRun.Trigger.choices)
    requested_by = serializers.CharField()
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    questions = serializers.IntegerField(help_text="Questions scored (stale ones excluded).")
    stale = serializers.IntegerField()
    hits = serializers.IntegerField()
    hit_at_k = serializers.FloatField(allow_null=True)
    mrr = serializers.FloatField(allow_null=True)
    results = GoldenResultSerializer(many=True)


class GoldenQuestionSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    tenant = serializers.CharField(source="tenant.slug")
    agent = serializers.CharField(source="agent.slug")
    purpose = serializers.CharField()
    subject = serializers.CharField()
    question = serializers.CharField()
    expected = serializers.SerializerMethodField()
    k = serializers.IntegerField()
    created_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    last_result = serializers.SerializerMethodField(
        help_text="This question's result in its tenant's latest run on the active index; null before one."
    )

    def get_expected(self, question) -> list[str]:
        return [str(record.pk) for record in question.expected.all()]

    @extend_schema_field(GoldenResultSerializer(allow_null=True))
    def get_last_result(self, question) -> dict | None:
        result = self.context.get("last_results", {}).get(str(question.pk))
        return None if result is None else GoldenResultSerializer(result).data


class GoldenQuestionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, ScopedViewSet):
    serializer_class = GoldenQuestionSerializer
    list_query_serializer = GoldenListQuerySerializer
    queryset = GoldenQuestion.objects.none()

    def scoped(self, actor: Actor, params: dict) -> QuerySet[GoldenQuestion]:
        return questions_in_scope(actor)

    def get_serializer_context(self) -> dict[str, Any]:
        context = dict(super().get_serializer_context())  # a fresh dict each call: the copy changes nothing
        if not getattr(self, "swagger_fake_view", False) and self.request is not None:
            context["last_results"] = latest_results(permitted_actor(self.request))
        return context

    @extend_schema(
        summary="Golden questions of your tenants, with their latest results (reviewers only)",
        parameters=[GoldenListQuerySerializer],
        responses={200: GoldenQuestionSerializer(many=True), **{c: PROBLEMS[c] for c in (400, 401, 403, 404, 429)}},
    )
    def list(self, request: Request, *args, **kwargs) -> Response:
        return super().list(request, *args, **kwargs)

    @extend_schema(summary="One golden question", responses={200: GoldenQuestionSerializer, 404: PROBLEMS[404]})
    def retrieve(self, request: Request, *args, **kwargs) -> Response:
        return super().retrieve(request, *args, **kwargs)

    @extend_schema(
        summary="Add a golden question: a query and the records recall must find in its top k",
        request=GoldenQuestionInputSerializer,
        responses={201: GoldenQuestionSerializer, **{c: PROBLEMS[c] for c in (400, 401, 403, 404, 429)}},
    )
    def create(self, request: Request) -> Response:
        actor = permitted_actor(request)
        body = GoldenQuestionInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        tenant = tenant_for(actor, data)
        agent = Agent.objects.filter(tenant=tenant, slug=data["agent"]).first()
        if agent is None:
            raise ValidationFailed("The golden question is invalid.", errors={"agent": ["No such agent in this tenant."]})
        question = golden_question_create(
            actor=actor,
            tenant=tenant,
            agent=agent,
            purpose=data["purpose"],
            subject=data["subject"],
            question=data["question"],
            expected=data["expected"],
            k=data["k"],
        )
        return Response(
            self.get_serializer(self.get_queryset().get(pk=question.pk)).data,
            status=status.HTTP_201_CREATED,
            headers={"Location": f"{request.path}{question.pk}/"},
        )

    @extend_schema(
        summary="Remove a golden question from its set (past runs keep their scores)",
        responses={204: None, **{c: PROBLEMS[c] for c in (401, 403, 404)}},
    )
    def destroy(self, request: Request, *args, **kwargs) -> Response:
        golden_question_delete(actor=permitted_actor(request), question_id=kwargs["pk"])
        return Response(status=status.HTTP_204_NO_CONTENT)


class GoldenRunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ScopedViewSet):
    serializer_class = GoldenRunSerializer
    list_query_serializer = GoldenListQuerySerializer
    lookup_value_regex = "[^/.]+"  # a run's id is a number: the router's default
    queryset = GoldenRun.objects.none()

    def scoped(self, actor: Actor, params: dict) -> QuerySet[GoldenRun]:
        return runs_in_scope(actor).order_by("-started_at", "-pk")

    @extend_schema(
        summary="Golden runs of your tenants, newest first",
        parameters=[GoldenListQuerySerializer],
        responses={200: GoldenRunSerializer(many=True), **{c: PROBLEMS[c] for c in (400, 401, 403, 404, 429)}},
    )
    def list(self, request: Request, *args, **kwargs) -> Response:
        return super().list(request, *args, **kwargs)

    @extend_schema(
        summary="One golden run: hit@k and MRR overall and per question", responses={200: GoldenRunSerializer, 404: PROBLEMS[404]}
    )
    def retrieve(self, request: Request, *args, **kwargs) -> Response:
        return super().retrieve(request, *args, **kwargs)

    @extend_schema(
        summary="Run a tenant's golden set now against an index (default the active one; 409 if the "
        "named index is building or retired)",
        request=GoldenRunInputSerializer,
        responses={201: GoldenRunSerializer, **{c: PROBLEMS[c] for c in (400, 401, 403, 404, 409, 429)}},
    )
    def create(self, request: Request) -> Response:
        actor = permitted_actor(request)
        body = GoldenRunInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        tenant = tenant_for(actor, body.validated_data)
        runs = run_golden_sets(
            tenants=[tenant], index=body.validated_data.get("index"), trigger=GoldenRun.Trigger.MANUAL, requested_by=actor.label
        )
        if not runs:
            raise ValidationFailed("Nothing to run.", errors={"tenant": ["This tenant has no golden questions yet."]})
        run = self.get_queryset().get(pk=runs[0].pk)
        return Response(
            self.get_serializer(run).data, status=status.HTTP_201_CREATED, headers={"Location": f"{request.path}{run.pk}/"}
        )
