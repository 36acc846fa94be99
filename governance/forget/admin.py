"""Admin for forget requests with their receipts, and the tombstones of forgotten subjects.
Read-only: a forget is filed through the API or the reviewer UI and completed by propagation, and
an edit here would falsify the record."""

from django.contrib import admin

from governance.forget.models import ForgetRequest, ForgetTombstone, PropagationReceipt
from governance.readonly_admin import ReadOnlyAdminMixin


class PropagationReceiptInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = PropagationReceipt
    fields = readonly_fields = ("artifact", "removed", "completed_at", "note")
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
    fields = readonly_fields = (
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
    )
    inlines = [PropagationReceiptInline]


@admin.register(ForgetTombstone)
class ForgetTombstoneAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["tenant", "subject_fingerprint", "forgotten_at"]
    list_filter = ["tenant"]
    search_fields = ["=subject_fingerprint"]
    list_select_related = ["tenant"]
