"""Admin for the governance records: forget requests with their
receipts, tombstones and dedup proposals. All read-only: these rows are written by services and
jobs (a forget through the API or the reviewer UI, a decision on a proposal in the review pages),
and an edit here would falsify the record."""

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from governance.golden.models import GoldenQuestion, GoldenRun
from governance.golden.services import expected_record_errors, k_errors
from governance.models import (
    DedupProposal,
    DedupProposalDrop,
    ForgetRequest,
    ForgetTombstone,
    PropagationReceipt,
    PrunedRecord,
)
from governance.readonly_admin import ReadOnlyAdminMixin
from memory.actors import Actor
from memory.admin import record_link


class PropagationReceiptInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = PropagationReceipt
    fields = ["artifact", "removed", "completed_at", "note"]
    readonly_fields = fields
    extra = 0


@admin.register(ForgetRequest)
class ForgetRequestAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "id",
        "tenant",
        "subject",
        "status",
        "affected",
        "lineage_affected",
        "requested_by",
        "requested_at",
        "completed_at",
    ]
    list_filter = ["status", "tenant"]
    search_fields = ["=id", "subject", "requested_by"]
    list_select_related = ["tenant"]
    date_hierarchy = "requested_at"
    # `records` (possibly thousands of ids) is left out; `affected` counts them.
    fields = [
        "id",
        "tenant",
        "subject",
        "reason",
        "requested_by",
        "requested_by_user",
        "requested_by_agent",
        "requested_by_credential",
        "status",
        "affected",
        "lineage_affected",
        "requested_at",
        "completed_at",
    ]
    readonly_fields = fields
    inlines = [PropagationReceiptInline]


@admin.register(ForgetTombstone)
class ForgetTombstoneAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["tenant", "subject_fingerprint", "forgotten_at"]
    list_filter = ["tenant"]
    search_fields = ["=subject_fingerprint"]
    list_select_related = ["tenant"]


@admin.register(PrunedRecord)
class PrunedRecordAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """What retention deleted, without content: the trace as-of reads report pruned records from."""

    list_display = ["id", "tenant", "agent", "kind", "purpose", "status", "active_from", "active_until", "pruned_at"]
    list_filter = ["tenant", "kind", "status"]
    search_fields = ["=id"]
    date_hierarchy = "pruned_at"
    list_select_related = ["tenant", "agent", "agent__tenant", "kind"]


class DedupProposalDropInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = DedupProposalDrop
    fields = ["dropped", "version"]
    readonly_fields = fields
    extra = 0

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).select_related("record__kind")

    @admin.display(description="record")
    def dropped(self, drop: DedupProposalDrop) -> str:
        return record_link(drop.record)


@admin.register(DedupProposal)
class DedupProposalAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "id",
        "tenant",
        "agent",
        "purpose",
        "subject",
        "kind",
        "category",
        "method",
        "similarity",
        "status",
        "created_at",
        "decided_at",
        "decided_by",
    ]
    list_filter = ["status", "category", "method", "tenant", "kind"]
    search_fields = ["=id", "subject", "purpose"]
    list_select_related = ["tenant", "agent__tenant", "kind", "decided_by"]
    date_hierarchy = "created_at"
    inlines = [DedupProposalDropInline]

    def get_readonly_fields(self, request: HttpRequest, obj=None) -> list[str]:
        return [field.name for field in self.model._meta.fields]


# --------------------------------------------------------------------------------------------
# golden recall sets: questions are curated here or through the API; runs are read-only results


class GoldenQuestionAdminForm(forms.ModelForm):
    """The question's rules are the service's (`governance.golden.services`), checked here too."""

    actor: Actor  # set by GoldenQuestionAdmin.get_form

    class Meta:
        model = GoldenQuestion
        fields = ["tenant", "agent", "purpose", "subject", "question", "expected", "k"]

    def clean(self):
        data = super().clean()
        tenant, agent = data.get("tenant"), data.get("agent")
        if "k" in data and (errors := k_errors(data["k"])):
            self.add_error("k", errors)
        if tenant is None or agent is None:
            return data
        if agent.tenant_id != tenant.pk:
            self.add_error("agent", "No such agent in this tenant.")
        elif "expected" in data and (
            errors := expected_record_errors(
                actor=self.actor,
                tenant=tenant,
                agent=agent,
                purpose=data.get("purpose", ""),
                subject=data.get("subject", ""),
                record_ids=[record.pk for record in data["expected"]],
            )
        ):
            self.add_error("expected", errors)
        return data


@admin.register(GoldenQuestion)
class GoldenQuestionAdmin(admin.ModelAdmin):
    form = GoldenQuestionAdminForm
    list_display = ["question", "tenant", "agent", "purpose", "subject", "k", "created_by", "created_at"]
    list_filter = ["tenant"]
    search_fields = ["=id", "question", "subject", "purpose"]
    list_select_related = ["tenant", "agent__tenant"]
    raw_id_fields = ["expected"]
    readonly_fields = ["created_by", "created_at"]

    def get_form(self, request: HttpRequest, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        form.actor = Actor.for_user(request.user, channel="admin")
        return form

    def save_model(self, request: HttpRequest, obj: GoldenQuestion, form, change: bool) -> None:
        if not change:
            obj.created_by, obj.created_by_user = Actor.for_user(request.user, channel="admin").label, request.user
        super().save_model(request, obj, form, change)


@admin.register(GoldenRun)
class GoldenRunAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "id",
        "tenant",
        "index",
        "index_active",
        "trigger",
        "hit_at_k",
        "mrr",
        "questions",
        "stale",
        "started_at",
        "requested_by",
    ]
    list_filter = ["trigger", "index_active", "tenant"]
    search_fields = ["=id", "index"]
    list_select_related = ["tenant"]
    date_hierarchy = "started_at"


from governance.alerts import admin as _alerts_admin  # noqa: E402,F401  (alert thresholds, episodes, digests)
from governance.jobs import admin as _jobs_admin  # noqa: E402,F401  (job schedule and runs; run now)
from governance.revocations import admin as _revocations_admin  # noqa: E402,F401  (revocations; revoke actions)
