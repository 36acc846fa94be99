"""`GET /api/v1/indexes/` (reviewers): every search index with its recipe, status, inputs,
coverage and the golden-recall gate's verdict from its last promotion attempt, whether this
server can use it (`available`, `unavailable_reason`: a semantic index needs the `semantic` extra
where recall runs; without it recall is lexical), and what answers recall in the process that
served the list: `serving` (the index takes part in live recall now) and, for a semantic index,
`model_loaded` (this process holds the model). /health/ says the same for the whole process,
including why no semantic index serves when there is none.

Indexes span tenants, and so do their figures: a reviewer sees only the tenants they review (a
superuser sees all). A gate report lists tenants by slug and shows only their entries;
`inputs.records`, which counts every tenant's records when the index was built, becomes the count
of the reviewer's tenants' records among its inputs: written up to `inputs.up_to` and active."""

from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.api.authentication import permitted_actor
from memory.api.permissions import IsReviewer
from memory.api.views import PROBLEMS
from memory.models import Status, Tenant
from memory.search import semantic
from memory.search.models import IndexKind, IndexStatus, SearchIndex
from memory.selectors import records_in_scope


def _visible(report: dict, slugs: set[str] | None) -> dict:
    """A gate report with per-tenant entries limited to `slugs` (None: all)."""
    if slugs is None or not isinstance(report, dict):
        return report
    shown = dict(report)
    if isinstance(report.get("tenants"), dict):
        shown["tenants"] = {slug: entry for slug, entry in report["tenants"].items() if slug in slugs}
    if isinstance(report.get("failed_tenants"), list):
        shown["failed_tenants"] = [slug for slug in report["failed_tenants"] if slug in slugs]
    return shown


class SearchIndexSerializer(serializers.ModelSerializer):
    inputs = serializers.JSONField(
        help_text='{"records": N, "up_to": "<time>"}: what the index was built from (N: the '
        "caller's tenants' records only, unless the caller sees every tenant)."
    )
    promotion = serializers.SerializerMethodField(help_text="The last promotion decision, without the gate reports.")
    golden = serializers.SerializerMethodField(help_text="The golden-recall gate's report at the last promotion attempt.")
    available = serializers.SerializerMethodField(
        help_text="Whether this server can rank with the index (a semantic index needs the `semantic` extra installed)."
    )
    unavailable_reason = serializers.SerializerMethodField(help_text="Why not, when it cannot; recall is lexical then.")
    serving = serializers.SerializerMethodField(
        help_text="Whether the index takes part in live recall in this process now: the active lexical index, and "
        "the active semantic index when it is available here (recall is then hybrid)."
    )
    model_loaded = serializers.SerializerMethodField(
        help_text="A semantic index: whether this process holds the model (loaded at start, so no request waits "
        "for it). Null for a lexical index."
    )

    class Meta:
        model = SearchIndex
        fields = [
            "name",
            "kind",
            "recipe",
            "status",
            "built_at",
            "inputs",
            "coverage",
            "created_at",
            "status_changed_at",
            "promotion",
            "golden",
            "available",
            "unavailable_reason",
            "serving",
            "model_loaded",
        ]

    def get_promotion(self, index: SearchIndex) -> dict | None:
        promotion = index.report.get("promotion")
        return {k: v for k, v in promotion.items() if k != "gates"} if promotion else None

    def get_available(self, index: SearchIndex) -> bool:
        return self.get_unavailable_reason(index) is None

    def get_unavailable_reason(self, index: SearchIndex) -> str | None:
        return semantic.unavailable_reason(index) if index.kind == IndexKind.SEMANTIC else None

    def get_serving(self, index: SearchIndex) -> bool:
        return index.status == IndexStatus.ACTIVE and self.get_available(index)

    def get_model_loaded(self, index: SearchIndex) -> bool | None:
        return semantic.model_loaded() if index.kind == IndexKind.SEMANTIC else None

    def to_representation(self, index: SearchIndex) -> dict:
        data = super().to_representation(index)
        actor = self.context["actor"]
        up_to = parse_datetime(str((index.inputs or {}).get("up_to") or ""))
        if actor.tenant_ids is not None and isinstance(data["inputs"], dict) and "records" in data["inputs"] and up_to:
            in_tenants = records_in_scope(actor).filter(status=Status.ACTIVE, created_at__lte=up_to)
            data["inputs"] = {**data["inputs"], "records": in_tenants.count()}
        return data

    def get_golden(self, index: SearchIndex) -> dict | None:
        gates = (index.report.get("promotion") or {}).get("gates") or {}
        golden = [report for name, report in gates.items() if "golden" in name]
        return _visible(golden[0], self.context.get("tenant_slugs")) if golden else None


class SearchIndexListView(APIView):
    permission_classes = [IsReviewer]

    @extend_schema(
        summary="Search indexes: recipes, status, inputs and golden-recall verdicts (reviewers)",
        responses={200: SearchIndexSerializer(many=True), **{code: PROBLEMS[code] for code in (401, 403, 429)}},
    )
    def get(self, request: Request) -> Response:
        actor = permitted_actor(request)
        slugs = (
            None
            if actor.tenant_ids is None
            else set(Tenant.objects.filter(pk__in=actor.tenant_ids).values_list("slug", flat=True))
        )
        indexes = SearchIndex.objects.order_by("kind", "-created_at", "-pk")
        return Response(SearchIndexSerializer(indexes, many=True, context={"tenant_slugs": slugs, "actor": actor}).data)
