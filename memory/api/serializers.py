"""Shapes of the agent API's responses: records, recall items, problems. Request bodies are
defined (validator and schema in one) in `memory.validation`."""

from typing import Any, cast

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from memory.models import Authority, SourceType, Status, Trust


class StoredProvenanceSerializer(serializers.Serializer):
    """Provenance as stored. A forgotten record's provenance strings are personal data too: they
    read as null (forget propagation also scrubs them from storage)."""

    source_type = serializers.ChoiceField(choices=SourceType.choices)
    uri = serializers.CharField(allow_null=True)
    session_id = serializers.CharField(allow_null=True)
    turn_id = serializers.CharField(allow_null=True)
    tool = serializers.CharField(allow_null=True)
    source_version = serializers.CharField(allow_null=True)
    observed_at = serializers.DateTimeField(allow_null=True)
    contaminated = serializers.BooleanField()
    # Not Field.source at run time: DRF's metaclass takes declared fields off the class.
    source = serializers.CharField(allow_null=True, help_text="The registered source whose signature it carried (signed writes).")  # type: ignore[assignment]
    verified = serializers.BooleanField(
        help_text="Its signature verified against a key of the registered source, and that key has not been revoked since."
    )

    def to_representation(self, instance):
        data = super().to_representation(instance)
        if self.context.get("forgotten"):
            data.update(uri=None, session_id=None, turn_id=None, tool=None, source_version=None, source=None)
        return data


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
    provenance = serializers.SerializerMethodField()
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

    @extend_schema_field(StoredProvenanceSerializer)
    def get_provenance(self, record) -> dict:
        # One nested serializer per listing (with many=True), not one per record: building a
        # serializer's fields is most of its cost.
        nested = self.__dict__.get("_provenance")
        if nested is None:
            nested = self.__dict__["_provenance"] = StoredProvenanceSerializer(context={"forgotten": False})
        cast(dict[str, Any], nested.context)["forgotten"] = record.is_forgotten  # the dict it was given
        return nested.to_representation(record.provenance)

    def get_quarantine_reason(self, record) -> str | None:
        return record.quarantine_reason or None


class RecallItemSerializer(serializers.Serializer):
    """One `memory.recall.RecallItem`: the record's data with its score and context line."""

    id = serializers.UUIDField(source="record.id")
    kind = serializers.CharField(source="record.kind.name")
    subject = serializers.CharField(source="record.subject")
    content = serializers.CharField(source="record.content")
    authority = serializers.CharField(source="record.authority")
    trust = serializers.CharField(source="record.trust")
    confidence = serializers.FloatField(source="record.confidence")
    provenance = StoredProvenanceSerializer(source="record.provenance")
    created_at = serializers.DateTimeField(source="record.created_at")
    confirmed_at = serializers.DateTimeField(source="record.confirmed_at")
    expires_at = serializers.DateTimeField(source="record.expires_at")
    score = serializers.FloatField()
    score_parts = serializers.DictField(
        child=serializers.FloatField(),
        help_text="Every part of the score by name (lexical, semantic, fusion, authority, confidence, recency, "
        "neighbour, time); score is their sum.",
    )
    relevance = serializers.FloatField(
        allow_null=True,
        help_text="How likely the memory answers the query, in [0, 1]: calibrated, comparable across the queries of one "
        "index. Items under the request's min_relevance are left out. Null where recall did not judge it (as_of).",
    )
    tokens = serializers.IntegerField()
    # DRF's metaclass takes declared fields off the class, so this name does not hide Field.context
    # at run time; the stubs cannot know that.
    context = serializers.CharField()  # type: ignore[assignment]

    def to_representation(self, item) -> dict:
        # The fields above define the shape (and the schema); this writes it out directly: recall
        # answers with ten items or more, and DRF's walk over the fields (and the nested
        # provenance's) cost 2.4 ms for ten against 0.6 ms. A test holds the two equal.
        record = item.record
        return {
            "id": str(record.id),
            "kind": record.kind.name,
            "subject": record.subject,
            "content": record.content,
            "authority": record.authority,
            "trust": record.trust,
            "confidence": record.confidence,
            "provenance": {**record.provenance, "observed_at": _timestamp(record.observed_at)},
            "created_at": _timestamp(record.created_at),
            "confirmed_at": _timestamp(record.confirmed_at),
            "expires_at": _timestamp(record.expires_at),
            "score": item.score,
            "score_parts": item.score_parts,
            "relevance": item.relevance,
            "tokens": item.tokens,
            "context": item.context,
        }


_DATETIME = serializers.DateTimeField()


def _timestamp(value) -> str | None:
    """A datetime as every DateTimeField of the API writes it."""
    return None if value is None else _DATETIME.to_representation(value)


class RecallResponseSerializer(serializers.Serializer):
    items = RecallItemSerializer(many=True)
    tokens_used = serializers.IntegerField()
    omitted_for_budget = serializers.IntegerField()
    below_floor = serializers.IntegerField(
        help_text="Ranked candidates left out because their relevance was under the floor. No items and a "
        "count here: nothing relevant was found, which is an answer."
    )
    min_relevance = serializers.FloatField(help_text="The relevance floor applied: the request's, else the index recipe's.")


class ProblemSerializer(serializers.Serializer):
    """Schema only: the RFC 9457 problem every error answers with (`application/problem+json`)."""

    type = serializers.CharField()
    title = serializers.CharField()
    status = serializers.IntegerField()
    detail = serializers.CharField()
    instance = serializers.CharField()
    # Not Serializer.errors at run time: DRF's metaclass takes declared fields off the class.
    errors = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="Field -> messages, on validation failures.",
    )


class BatchItemResultSerializer(serializers.Serializer):
    """One item's outcome: the record (201), or the problem that item met (400, 403, 409)."""

    index = serializers.IntegerField()
    status = serializers.IntegerField()
    record = MemoryRecordSerializer(required=False)
    problem = ProblemSerializer(required=False)


class BatchResultSerializer(serializers.Serializer):
    results = BatchItemResultSerializer(many=True)
