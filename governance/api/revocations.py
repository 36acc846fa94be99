"""Revoke a source (reviewers): `POST /api/v1/revocations/` with the tenant, exactly one of
`credential`, `agent`, `session_id`, `source_uri_prefix`, `source_key`, and a reason. Every active record that
source wrote, and every active record derived from one of them, is back in quarantine before the
201 answers; `GET /api/v1/revocations/{id}/` reads the receipt back, `GET /api/v1/revocations/`
lists them. Agent tokens get a 403: deciding that a source is compromised is a person's call."""

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from governance.api.common import ScopedViewSet, tenant_for
from governance.revocations.models import Revocation
from governance.revocations.selectors import revocations_in_scope
from governance.revocations.services import SESSION_ID_MAX_CHARS, SOURCE_URI_MAX_CHARS, resolve_source, revocation_create
from memory.actors import Actor
from memory.api.authentication import permitted_actor
from memory.api.views import PROBLEMS
from memory.models import NOTE_MAX_CHARS
from memory.validation import RejectUnknownFieldsMixin, StrictCharField, StrictIntegerField


@extend_schema_field({"oneOf": [{"type": "integer"}, {"type": "string", "maxLength": 200}]})
class CredentialReferenceField(serializers.Field):
    """A credential by its id (integer, as the admin lists it), by the token itself (`gma_...`,
    matched by its hash and never stored) or by the token's hint (its first characters)."""

    default_error_messages = {"invalid": "The credential's id (integer), the token, or the token's hint."}

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, (int, str)) or (isinstance(data, str) and not 0 < len(data) <= 200):
            self.fail("invalid")
        return data

    def to_representation(self, value):
        return value


class RevocationInputSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    """The body's shape; which source is named, and that it exists in the tenant, is checked by
    `governance.revocations.services.resolve_source` (the reviewer page and the admin use it too)."""

    tenant = StrictCharField(required=False, help_text="One of your tenants (required when you review several).")
    credential = CredentialReferenceField(required=False, help_text=CredentialReferenceField.__doc__)
    agent = StrictCharField(required=False, max_length=64, help_text="An agent of the tenant, by slug.")
    session_id = StrictCharField(
        required=False, max_length=SESSION_ID_MAX_CHARS, help_text="Every record written in this session."
    )
    source_uri_prefix = StrictCharField(
        required=False,
        max_length=SOURCE_URI_MAX_CHARS,
        help_text="Every record whose source URI starts with this, e.g. https://forum.example/.",
    )
    source_key = StrictIntegerField(
        required=False,
        min_value=1,
        max_value=2**63 - 1,  # a BigAutoField id
        help_text="A registered source's signing key, by id: every record its signature verified.",
    )
    reason = StrictCharField(max_length=NOTE_MAX_CHARS, help_text="Why, for the audit trail; becomes each record's history note.")


class RevocationSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    tenant = serializers.CharField(source="tenant.slug")
    # DRF's metaclass takes declared fields off the class, so this name does not hide Field.source
    # at run time; the stubs cannot know that.
    source = serializers.ChoiceField(choices=Revocation.Source.choices, help_text="What kind of source was revoked.")  # type: ignore[assignment]
    value = serializers.CharField(
        help_text="The token's hint, the agent's slug, the session id, the URI prefix, or the source's name and key fingerprint."
    )
    agent = serializers.CharField(source="agent.slug", allow_null=True, default=None)
    reason = serializers.CharField()
    revoked_by = serializers.CharField()
    affected = serializers.IntegerField(help_text="Records sent back to quarantine, derived records included.")
    derived_affected = serializers.IntegerField(help_text="Of which records derived from what the source wrote.")
    token_revoked = serializers.BooleanField(
        help_text="The credential's token (or the source key) was usable and is revoked now."
    )
    created_at = serializers.DateTimeField()


class RevocationViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ScopedViewSet):
    serializer_class = RevocationSerializer
    queryset = Revocation.objects.none()

    def scoped(self, actor: Actor, params: dict) -> QuerySet[Revocation]:
        return revocations_in_scope(actor)

    @extend_schema(
        summary="Revoke a source: what it wrote, and what was derived from that, goes back to quarantine (reviewers)",
        request=RevocationInputSerializer,
        responses={201: RevocationSerializer, **{code: PROBLEMS[code] for code in (400, 401, 403, 404, 429)}},
    )
    def create(self, request: Request) -> Response:
        actor = permitted_actor(request)
        body = RevocationInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        tenant = tenant_for(actor, data)
        source = resolve_source(
            actor=actor,
            tenant=tenant,
            credential=data.get("credential"),
            agent=data.get("agent"),
            session_id=data.get("session_id"),
            source_uri_prefix=data.get("source_uri_prefix"),
            source_key=data.get("source_key"),
        )
        revocation = revocation_create(actor=actor, source=source, reason=data["reason"])
        return Response(
            RevocationSerializer(self.get_queryset().get(pk=revocation.pk)).data,
            status=status.HTTP_201_CREATED,
            headers={"Location": f"{request.path}{revocation.pk}/"},
        )

    @extend_schema(
        summary="One revocation (its receipt)", responses={200: RevocationSerializer, **{c: PROBLEMS[c] for c in (401, 403, 404)}}
    )
    def retrieve(self, request: Request, *args, **kwargs) -> Response:
        return super().retrieve(request, *args, **kwargs)

    @extend_schema(
        summary="Revocations in your tenants, newest first",
        responses={200: RevocationSerializer(many=True), **{c: PROBLEMS[c] for c in (400, 401, 403, 404)}},
    )
    def list(self, request: Request, *args, **kwargs) -> Response:
        return super().list(request, *args, **kwargs)
