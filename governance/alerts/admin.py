"""Admin: each tenant's alert thresholds (editable: policy is data), alert episodes (read-only:
the job writes them) and reviewers' digest preferences."""

from django.contrib import admin

from governance.alerts.models import Alert, AlertPolicy, DigestPreference
from governance.readonly_admin import ReadOnlyAdminMixin


@admin.register(AlertPolicy)
class AlertPolicyAdmin(admin.ModelAdmin):
    list_display = ["tenant", "quarantine_max_age_hours", "drift_backlog_max", "forget_max_minutes", "alert_on_stale_jobs"]
    list_select_related = ["tenant"]


@admin.register(Alert)
class AlertAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "tenant",
        "kind",
        "job",
        "summary",
        "opened_at",
        "last_seen_at",
        "resolved_at",
        "notified_at",
        "notified_count",
    ]
    list_filter = ["kind", "tenant"]
    list_select_related = ["tenant"]
    date_hierarchy = "opened_at"


@admin.register(DigestPreference)
class DigestPreferenceAdmin(admin.ModelAdmin):
    list_display = ["user", "digest_enabled", "last_digest_at"]
    readonly_fields = ["last_digest_at"]
