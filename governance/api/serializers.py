"""Shapes of the governance API: forget requests and their propagation receipts, and dedup
proposals. Receipts describe what was removed where, and proposals name records by id: neither
carries content."""

import uuid

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from governance.dedup.models import DedupProposal
from governance.dedup.selectors import proposal_is_current, proposal_members
from governance.dedup.services import DECISION_NOTE_MAX_CHARS
from memory.models import NOTE_MAX_CHARS, SUBJECT_MAX_CHARS
from memory.validation import RejectUnknownFieldsMixin, StrictCharField


class ForgetRequestInputSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    """The API's validator and schema; `governance.forget.services.forget_request_create` checks the same
    limits (one constant each) for the reviewer UI."""

    subject = StrictCharField(
        max_length=SUBJECT_MAX_CHARS, help_text="Every record about this subject in the tenant is forgotten."
    )
    reason = StrictCharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=NOTE_MAX_CHARS,
        help_text="Why, e.g. 'erasure request #123'. Kept on the request (put no personal data in it).",
    )
    tenant = StrictCharField(required=False, help_text="Reviewers: which of your tenants. Agents: the token's (or omit).")


class PropagationReceiptSerializer(serializers.Serializer):
    artifact = serializers.CharField()
    removed = serializers.IntegerField()
    completed_at = serializers.DateTimeField(allow_null=True, help_text="Null while the artifact's own job is pending.")
    note = serializers.CharField()


class ForgetRequestSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    tenant = serializers.CharField(source="tenant.slug")
    subject = serializers.CharField(
        help_text="The subject as filed; once propagation completes, its keyed fingerprint (`forgotten:<hex>`): the "
        "subject is personal data and is not kept. Forgetting the same subject again still matches it."
    )
    status = serializers.CharField()
    affected = serializers.IntegerField(help_text="Records forgotten by this request, derived records included.")
    lineage_affected = serializers.IntegerField(help_text="Of which derived records (summaries, merges).")
    requested_at = serializers.DateTimeField()
    completed_at = serializers.DateTimeField(allow_null=True)
    receipts = PropagationReceiptSerializer(many=True)


# --------------------------------------------------------------------------------------------
# dedup proposals (reviewers)


class ProposalListQuerySerializer(serializers.Serializer):
    """The list's query parameters. No `status` lists every status; a value outside the choices
    is a 400, not an empty list that looks like "nothing to review"."""

    status = serializers.ChoiceField(choices=DedupProposal.Status.choices, required=False)
    category = serializers.ChoiceField(choices=DedupProposal.Category.choices, required=False)
    tenant = serializers.CharField(required=False, max_length=64, help_text="One of your tenants, by slug.")


class ProposalStatsQuerySerializer(serializers.Serializer):
    tenant = serializers.CharField(required=False, max_length=64, help_text="One of your tenants, by slug.")


class ProposalDecisionInputSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    """Reject and rollback: an optional note for the audit trail (shape only; the service checks it too)."""

    note = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=DECISION_NOTE_MAX_CHARS,
        default="",
        help_text="Why, for the audit trail; written into each record's history note.",
    )


class ProposalAcceptInputSerializer(ProposalDecisionInputSerializer):
    keep = serializers.UUIDField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Keep this member instead of the suggested one (it must be one of the proposal's records).",
    )


class ProposalMemberSerializer(serializers.Serializer):
    """One record of a proposal (a `governance.dedup.selectors.ProposalMember`): the version the
    job saw against where the record is now."""

    id = serializers.UUIDField(source="record.pk")
    role = serializers.ChoiceField(choices=[("keep", "keep"), ("drop", "drop")])
    proposed_version = serializers.IntegerField(help_text="The version the proposal was made over.")
    version = serializers.IntegerField(source="record.version", help_text="The record's version now.")
    status = serializers.CharField(source="record.status", help_text="The record's status now.")
    moved_on = serializers.BooleanField(help_text="No longer active at the proposed version: accepting is refused.")


class ProposalSerializer(serializers.Serializer):
    """A proposal as `governance.dedup.selectors.proposal_queue` loads it (related rows joined,
    drops prefetched). Records are named by id; read their content at /api/v1/memories/{id}/."""

    id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=DedupProposal.Status.choices)
    category = serializers.ChoiceField(
        choices=DedupProposal.Category.choices, help_text="duplicate, or conflict (records that contradict each other)."
    )
    keep = serializers.UUIDField(source="keep_id", help_text="The record kept; the others become superseded by it.")
    keep_version = serializers.IntegerField()
    drop = serializers.SerializerMethodField(help_text="Ids of the records that accepting supersedes.")
    members = serializers.SerializerMethodField()
    stale = serializers.SerializerMethodField(
        help_text="Open proposals: true when a record moved on since (accepting would be a 409). Null once decided."
    )
    similarity = serializers.FloatField()
    method = serializers.CharField()
    tenant = serializers.CharField(source="tenant.slug")
    agent = serializers.CharField(source="agent.slug")
    purpose = serializers.CharField()
    subject = serializers.CharField()
    kind = serializers.CharField(source="kind.name")
    created_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)
    decided_by = serializers.CharField(source="decided_by.get_username", allow_null=True, default=None)
    decision_note = serializers.CharField()
    rolled_back_at = serializers.DateTimeField(allow_null=True)

    def get_drop(self, proposal) -> list[uuid.UUID]:
        return [drop.record_id for drop in proposal.drops.all()]

    @extend_schema_field(ProposalMemberSerializer(many=True))
    def get_members(self, proposal) -> list[dict]:
        # many=True builds a ListSerializer, whose data is a list: the stubs type every Serializer's as a dict.
        return ProposalMemberSerializer(proposal_members(proposal), many=True).data  # type: ignore[return-value]

    def get_stale(self, proposal) -> bool | None:
        if proposal.status != DedupProposal.Status.OPEN:
            return None
        return not proposal_is_current(proposal)


class ProposalRollbackSerializer(serializers.Serializer):
    """What a rollback did (a `governance.dedup.services.RollbackOutcome`): the proposal, now
    rolled back, the records active again, and those left as they were, with why."""

    proposal = ProposalSerializer()
    restored = serializers.ListField(child=serializers.UUIDField(), help_text="Records active again.")
    not_restored = serializers.DictField(
        child=serializers.CharField(),
        help_text="Record id -> why it stayed as it is: forgotten, expired, or changed (moved on after the acceptance).",
    )


class ProposalStatsSerializer(serializers.Serializer):
    open = serializers.IntegerField(help_text="Open proposals waiting for a reviewer.")
    accepted = serializers.IntegerField(help_text="Proposals ever accepted, including those rolled back since.")
    rolled_back = serializers.IntegerField()
    regret_rate = serializers.FloatField(allow_null=True, help_text="rolled_back / accepted; null before any acceptance.")
