"""Shapes of the agent API: output serializers for records and recall items, input serializers
for transitions. No domain logic lives here: a write body is validated by `memory.validation`
(through `memory.services.memory_write`) and only *described* here for the OpenAPI schema."""

from rest_framework import serializers

from memory.models import Authority, SourceType, Status, Trust


class StrictIntegerField(serializers.IntegerField):
    """An integer in JSON, not a numeric string, float or boolean: a version is never guessed."""

    default_error_messages = {"invalid": "Must be an integer."}

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictCharField(serializers.CharField):
    """A JSON string, not a number coerced to text."""

    default_error_messages = {"invalid": "Must be a string."}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class RejectUnknownFieldsMixin:
    """A body field the endpoint does not know is an error, not silently ignored: a typo like
    `expected_verison` must not pass as "no version given"."""

    def to_internal_value(self, data):
        unknown = sorted(set(data) - set(self.fields)) if isinstance(data, dict) else []
        errors = {name: ["Unknown field."] for name in unknown}
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if not isinstance(exc.detail, dict):
                raise
            raise serializers.ValidationError({**exc.detail, **errors}) from None
        if errors:
            raise serializers.ValidationError(errors)
        return value


class ProvenanceSerializer(serializers.Serializer):
    source_type = serializers.ChoiceField(choices=SourceType.choices)
    uri = serializers.CharField(allow_null=True, required=False)
    session_id = serializers.CharField(allow_null=True, required=False)
    turn_id = serializers.CharField(allow_null=True, required=False)
    tool = serializers.CharField(allow_null=True, required=False)
    source_version = serializers.CharField(allow_null=True, required=False)
    observed_at = serializers.DateTimeField(allow_null=True, required=False)
    contaminated = serializers.BooleanField(required=False, default=False)


class MemoryRecordSerializer(serializers.Serializer):
    """A record as every reader sees it. Expects the queryset of `memory.api.views.record_queryset`
    (related rows joined, `superseded_by_id` annotated); a forgotten record shows no content."""

    id = serializers.UUIDField(read_only=True)
    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    agent = serializers.CharField(source="agent.slug", read_only=True)
    kind = serializers.CharField(source="kind.name", read_only=True)
    subject = serializers.CharField(read_only=True)
    purpose = serializers.CharField(read_only=True)
    content = serializers.CharField(source="visible_content", allow_null=True, read_only=True)
    content_hash = serializers.SerializerMethodField()
    authority = serializers.ChoiceField(choices=Authority.choices, read_only=True)
    trust = serializers.ChoiceField(choices=Trust.choices, read_only=True)
    confidence = serializers.FloatField(read_only=True)
    provenance = ProvenanceSerializer(read_only=True)
    status = serializers.ChoiceField(choices=Status.choices, read_only=True)
    version = serializers.IntegerField(read_only=True)
    quarantine_reason = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField(read_only=True)
    confirmed_at = serializers.DateTimeField(read_only=True)
    expires_at = serializers.DateTimeField(read_only=True)
    valid_from = serializers.DateTimeField(allow_null=True, read_only=True)
    valid_to = serializers.DateTimeField(allow_null=True, read_only=True)
    last_used_at = serializers.DateTimeField(allow_null=True, read_only=True)
    reviewed_at = serializers.DateTimeField(allow_null=True, read_only=True)
    supersedes = serializers.UUIDField(source="supersedes_id", allow_null=True, read_only=True)
    superseded_by = serializers.UUIDField(source="superseded_by_id", allow_null=True, read_only=True)

    def get_content_hash(self, record) -> str | None:
        # The hash of forgotten content would still let a guess be confirmed.
        return None if record.is_forgotten else record.content_hash

    def get_quarantine_reason(self, record) -> str | None:
        return record.quarantine_reason or None


class MemoryWriteRequestSerializer(serializers.Serializer):
    """Schema only: documents the write body. Validation is `memory.validation.parse_write`."""

    kind = serializers.CharField(help_text="A memory kind: working_note, episodic, semantic, procedural, preference.")
    subject = serializers.CharField(max_length=200, help_text="Who or what the memory is about, e.g. customer/acme.")
    purpose = serializers.CharField(max_length=100, help_text="One of the purposes the token allows.")
    content = serializers.CharField(help_text="The claim, at most MEMORY_MAX_CONTENT_CHARS characters.")
    authority = serializers.ChoiceField(choices=Authority.choices, help_text="Must fit the provenance source type.")
    confidence = serializers.FloatField(min_value=0, max_value=1)
    provenance = ProvenanceSerializer()
    ttl_seconds = serializers.IntegerField(required=False, allow_null=True, help_text="Or expires_at; neither = the kind's default TTL.")
    expires_at = serializers.DateTimeField(required=False, allow_null=True)
    valid_from = serializers.DateTimeField(required=False, allow_null=True)
    valid_to = serializers.DateTimeField(required=False, allow_null=True)
    supersedes = serializers.UUIDField(required=False, allow_null=True, help_text="An active record of yours this one corrects.")
    supersedes_version = serializers.IntegerField(required=False, allow_null=True, help_text="Its current version.")
    derived_from = serializers.ListField(child=serializers.UUIDField(), required=False, help_text="Source records of a summary or merge.")


class TransitionRequestSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    expected_version = StrictIntegerField(min_value=1, help_text="The version you decided on; a stale one is a 409.")
    note = StrictCharField(required=False, allow_blank=True, max_length=500, default="")


class RecallRequestSerializer(serializers.Serializer):
    """Schema only: documents the recall body. Validation is `memory.recall.parse_recall`."""

    query = serializers.CharField(required=False, allow_blank=True, max_length=1000)
    purpose = serializers.CharField(help_text="One of the purposes the token allows.")
    subject = serializers.CharField(required=False, max_length=200)
    kinds = serializers.ListField(child=serializers.CharField(), required=False)
    limit = serializers.IntegerField(required=False, min_value=1, default=10)
    token_budget = serializers.IntegerField(required=False, min_value=1, allow_null=True)


class ScorePartsSerializer(serializers.Serializer):
    lexical = serializers.FloatField()
    authority = serializers.FloatField()
    confidence = serializers.FloatField()
    recency = serializers.FloatField()


class RecallItemSerializer(serializers.Serializer):
    """One `memory.recall.RecallItem`: the record's data with its score and context line."""

    id = serializers.UUIDField(source="record.id")
    kind = serializers.CharField(source="record.kind.name")
    subject = serializers.CharField(source="record.subject")
    content = serializers.CharField(source="record.content")
    authority = serializers.CharField(source="record.authority")
    trust = serializers.CharField(source="record.trust")
    confidence = serializers.FloatField(source="record.confidence")
    provenance = ProvenanceSerializer(source="record.provenance")
    created_at = serializers.DateTimeField(source="record.created_at")
    confirmed_at = serializers.DateTimeField(source="record.confirmed_at")
    expires_at = serializers.DateTimeField(source="record.expires_at")
    score = serializers.FloatField()
    score_parts = ScorePartsSerializer()
    tokens = serializers.IntegerField()
    context = serializers.CharField()


class RecallResponseSerializer(serializers.Serializer):
    items = RecallItemSerializer(many=True)
    tokens_used = serializers.IntegerField()
    omitted_for_budget = serializers.IntegerField()


class ProblemSerializer(serializers.Serializer):
    """Schema only: the RFC 9457 problem every error answers with (`application/problem+json`)."""

    type = serializers.CharField()
    title = serializers.CharField()
    status = serializers.IntegerField()
    detail = serializers.CharField()
    instance = serializers.CharField()
    errors = serializers.DictField(child=serializers.ListField(child=serializers.CharField()), required=False,
                                   help_text="Field -> messages, on validation failures.")
