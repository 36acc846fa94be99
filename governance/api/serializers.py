"""Shapes of the governance API: forget requests and their propagation receipts. Receipts
describe what was removed where, never the content."""

from rest_framework import serializers

from memory.api.serializers import RejectUnknownFieldsMixin, StrictCharField


class ForgetRequestInputSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    """Shape only; the subject and reason rules live in `governance.services.forget_request_create`."""

    subject = StrictCharField(help_text="Every record about this subject in the tenant is forgotten.")
    reason = StrictCharField(required=False, allow_blank=True, default="", help_text="Why, e.g. 'erasure request #123'.")
    tenant = StrictCharField(required=False, help_text="Reviewers: which of your tenants. Agents: the token's (or omit).")


class PropagationReceiptSerializer(serializers.Serializer):
    artifact = serializers.CharField()
    removed = serializers.IntegerField()
    completed_at = serializers.DateTimeField()
    note = serializers.CharField()


class ForgetRequestSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    tenant = serializers.CharField(source="tenant.slug")
    subject = serializers.CharField()
    status = serializers.CharField()
    affected = serializers.IntegerField(help_text="Records forgotten by this request, derived records included.")
    lineage_affected = serializers.IntegerField(help_text="Of which derived records (summaries, merges).")
    requested_at = serializers.DateTimeField()
    completed_at = serializers.DateTimeField(allow_null=True)
    receipts = PropagationReceiptSerializer(many=True)
