"""Admin for the traces of pruned records. Read-only: the prune job writes them."""

from django.contrib import admin

from governance.readonly_admin import ReadOnlyAdminMixin
from governance.retention.models import PrunedRecord


@admin.register(PrunedRecord)
class PrunedRecordAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """What retention deleted, without content: the trace as-of reads report pruned records from."""

    list_display = ["id", "tenant", "agent", "kind", "purpose", "status", "active_from", "active_until", "pruned_at"]
    list_filter = ["tenant", "kind", "status"]
    search_fields = ["=id"]
    date_hierarchy = "pruned_at"
    list_select_related = ["tenant", "agent", "agent__tenant", "kind"]
