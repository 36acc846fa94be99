"""Admin for dedup proposals and the records each would supersede. Read-only: the job files them
and a reviewer decides in the review pages."""

from django.contrib import admin
from django.http import HttpRequest

from governance.dedup.models import DedupProposal, DedupProposalDrop
from governance.readonly_admin import ReadOnlyAdminMixin
from memory.admin import record_link


class DedupProposalDropInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = DedupProposalDrop
    fields = readonly_fields = ("dropped", "version")
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
