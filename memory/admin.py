"""Admin: tenants, agents and their tokens, kinds with their retention policy, and records.
Records are read-only here; admins change them only through lifecycle actions (services)."""

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from simple_history.admin import SimpleHistoryAdmin

from memory import services
from memory.actors import Actor
from memory.admin_forms import MemoryKindForm, days_text
from memory.api.typing import UserRequest
from memory.credentials import revoke_tokens
from memory.errors import DomainError
from memory.models import (
    Agent,
    AgentCredential,
    IdempotencyKey,
    MemoryKind,
    MemoryRecord,
    ReviewerToken,
    SourceHold,
    Status,
    Tenant,
)

# The admin is named as the product (in its header, page titles and index), not "Django administration".
admin.site.site_header = "Governed memory administration"
admin.site.site_title = "Governed memory admin"
admin.site.index_title = "Tenants, retention, jobs and audit trails"


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    filter_horizontal = ["reviewers"]


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["slug", "tenant", "name", "created_at"]
    list_filter = ["tenant"]
    search_fields = ["slug", "name", "tenant__slug"]
    list_select_related = ["tenant"]


class _IssuedTokenAdmin(admin.ModelAdmin):
    """Creates the hashed token on save and shows the raw token once, in a message."""

    readonly_fields = ["token_hint", "created_at"]
    actions = ["revoke"]

    def save_model(self, request: HttpRequest, obj, form, change: bool) -> None:
        raw = None if change else obj.assign_new_token()
        super().save_model(request, obj, form, change)
        if raw:
            messages.warning(request, f"Token for {obj} (shown once, store it now): {raw}")

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet) -> None:
        count = revoke_tokens(queryset, at=timezone.now())  # cached entries dropped: refused at once everywhere
        messages.success(request, f"Revoked {count} token(s).")


@admin.register(AgentCredential)
class AgentCredentialAdmin(_IssuedTokenAdmin):
    list_display = [
        "__str__",
        "agent",
        "purposes",
        "can_assert_operator",
        "can_forget",
        "can_confirm",
        "created_at",
        "revoked_at",
    ]
    list_filter = ["can_assert_operator", "can_forget", "can_confirm", "agent__tenant"]
    search_fields = ["agent__slug", "agent__tenant__slug", "label", "token_hint"]
    list_select_related = ["agent__tenant"]


@admin.register(ReviewerToken)
class ReviewerTokenAdmin(_IssuedTokenAdmin):
    list_display = ["__str__", "user", "created_at", "revoked_at"]
    search_fields = ["user__username", "token_hint"]


def _days(value) -> str:
    return "—" if value is None else f"{days_text(value)} d"


def record_title(record: MemoryRecord) -> str:
    """A record as an admin reads it: "semantic · customer/acme · v1 (active)". The caller
    selects the kind with the record."""
    return f"{record.kind.name} · {record.subject} · v{record.version} ({record.status})"


def record_link(record: MemoryRecord | None) -> str:
    if record is None:
        return "—"
    return format_html('<a href="{}">{}</a>', reverse("admin:memory_memoryrecord_change", args=[record.pk]), record_title(record))


@admin.register(MemoryKind)
class MemoryKindAdmin(SimpleHistoryAdmin):
    form = MemoryKindForm
    list_display = ["name", "default_ttl_days", "max_ttl_days", "review_interval_days", "admitted", "purge_after_days"]
    search_fields = ["name"]

    @admin.display(description="default TTL", ordering="default_ttl")
    def default_ttl_days(self, kind: MemoryKind) -> str:
        return _days(kind.default_ttl)

    @admin.display(description="maximum TTL", ordering="max_ttl")
    def max_ttl_days(self, kind: MemoryKind) -> str:
        return _days(kind.max_ttl)

    @admin.display(description="review every", ordering="review_interval")
    def review_interval_days(self, kind: MemoryKind) -> str:
        return "never" if kind.review_interval is None else _days(kind.review_interval)

    @admin.display(description="purge after", ordering="purge_after")
    def purge_after_days(self, kind: MemoryKind) -> str:
        return _days(kind.purge_after)

    @admin.display(description="auto-admitted authorities")
    def admitted(self, kind: MemoryKind) -> str:
        return ", ".join(kind.auto_admit_authorities) or "none (all quarantined)"


@admin.register(MemoryRecord)
class MemoryRecordAdmin(SimpleHistoryAdmin):
    list_display = [
        "id",
        "tenant",
        "agent",
        "kind",
        "subject",
        "purpose",
        "status",
        "authority",
        "trust",
        "version",
        "created_at",
        "expires_at",
    ]
    list_filter = ["status", "kind", "authority", "trust", "source_type", "contaminated", "tenant"]
    search_fields = ["=id", "subject", "purpose", "agent__slug", "tenant__slug"]
    date_hierarchy = "created_at"
    list_select_related = ["tenant", "agent__tenant", "kind"]
    actions = ["promote", "reject", "retire"]
    fieldsets = [
        ("Scope", {"fields": ["tenant", "agent", "subject", "purpose", "kind"]}),
        (
            "Claim",
            {
                "fields": [
                    "shown_content",
                    "content_hash",
                    "authority",
                    "trust",
                    "confidence",
                    "quarantine_reason",
                    "reviewed_by",
                    "reviewed_at",
                ]
            },
        ),
        (
            "Provenance",
            {
                "fields": [
                    "source_type",
                    "source_uri",
                    "session_id",
                    "turn_id",
                    "tool",
                    "source_version",
                    "observed_at",
                    "contaminated",
                ]
            },
        ),
        ("Time", {"fields": ["created_at", "valid_from", "valid_to", "confirmed_at", "expires_at", "last_used_at"]}),
        ("Lifecycle", {"fields": ["status", "status_changed_at", "version", "corrects"]}),
    ]

    def get_readonly_fields(self, request, obj=None):
        return [f for fs in self.fieldsets for f in fs[1]["fields"]]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False  # statuses change only through the lifecycle actions below (the services)

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False  # records leave through forget and prune, which keep the audit trail honest

    def history_form_view(self, request: HttpRequest, object_id, version_id, extra_context=None):
        # simple-history saves a POSTed historical form even with revert disabled, needing only
        # view permission; here a historical version is for reading.
        if request.method != "GET":
            raise PermissionDenied("History is read-only; use the lifecycle actions.")
        # A historical version shows the content as it was: never for a forgotten record.
        if MemoryRecord.objects.filter(pk=object_id, status=Status.FORGOTTEN).exists():
            raise PermissionDenied("The content of a forgotten memory is not shown.")
        return super().history_form_view(request, object_id, version_id, extra_context)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).select_related("supersedes__kind")

    def render_change_form(self, request: HttpRequest, context: dict, *args, obj=None, **kwargs):
        if obj is not None:
            context["subtitle"] = record_title(obj)
        return super().render_change_form(request, context, *args, obj=obj, **kwargs)

    @admin.display(description="content")
    def shown_content(self, obj: MemoryRecord) -> str:
        return obj.visible_content if obj.visible_content is not None else "(forgotten)"

    @admin.display(description="supersedes")
    def corrects(self, obj: MemoryRecord) -> str:
        return record_link(obj.supersedes)

    def _apply(self, request: UserRequest, queryset: QuerySet, service, verb: str) -> None:
        actor = Actor.for_user(request.user, channel="admin")
        done = 0
        for pk, version in queryset.order_by().values_list("pk", "version"):
            try:
                service(record_id=pk, expected_version=version, actor=actor, note="admin action")
                done += 1
            except DomainError as exc:
                messages.error(request, f"{pk}: {exc.detail}")
        if done:
            messages.success(request, f"{verb} {done} record(s).")

    @admin.action(description="Promote selected quarantined records")
    def promote(self, request, queryset):
        self._apply(request, queryset, services.memory_promote, "Promoted")

    @admin.action(description="Reject selected quarantined records")
    def reject(self, request, queryset):
        self._apply(request, queryset, services.memory_reject, "Rejected")

    @admin.action(description="Retire selected active records (expire now)")
    def retire(self, request, queryset):
        self._apply(request, queryset, services.memory_retire, "Retired")


@admin.register(IdempotencyKey)
class IdempotencyKeyAdmin(admin.ModelAdmin):
    """Written by the write path, trimmed by the prune job: for reading only."""

    list_display = ["key", "credential", "response_status", "first_result", "created_at"]
    fields = readonly_fields = ("credential", "key", "fingerprint", "response_status", "first_result", "created_at")
    list_select_related = ["credential__agent__tenant", "record__kind"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False  # view only: the admin index links "View", not "Change"

    @admin.display(description="record")
    def first_result(self, key: IdempotencyKey) -> str:
        return record_link(key.record)


@admin.register(SourceHold)
class SourceHoldAdmin(SimpleHistoryAdmin):
    """Raised by contaminated writes and revocations, cleared by reviewers on /review/holds/ (with a
    reason): for reading here, with each hold's history."""

    list_display = ["tenant", "scope", "cause", "created_at", "cleared_at", "cleared_by"]
    list_filter = ["cause", "scope", ("cleared_at", admin.EmptyFieldListFilter)]
    fields = ["tenant", "scope", "cause", "key", "prefix_length", "raised_by", "created_at", "cleared_at", "cleared_by"]
    readonly_fields = fields
    list_select_related = ["tenant"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
