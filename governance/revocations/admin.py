"""Admin: revocations (read-only receipts), and a "revoke as a source" action on agent tokens,
agents and registered sources' keys. The action is added here, by subclassing memory's admin classes, so that `memory` never
imports `governance`; it asks for a reason and shows how many records each revocation would move
before anything happens, like Django's delete confirmation."""

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import Model, QuerySet
from django.template.response import TemplateResponse

from governance.readonly_admin import ReadOnlyAdminMixin
from governance.revocations.models import Revocation
from governance.revocations.services import resolve_source, revocation_create, revocation_preview
from memory.actors import Actor
from memory.admin import AgentAdmin, AgentCredentialAdmin
from memory.api.typing import UserRequest
from memory.errors import DomainError
from memory.models import NOTE_MAX_CHARS, Agent, AgentCredential, SourceKey
from memory.provenance.admin import SourceKeyAdmin


class RevokeSourceForm(forms.Form):
    reason = forms.CharField(
        max_length=NOTE_MAX_CHARS,
        strip=True,
        widget=forms.TextInput(attrs={"size": 80}),
        help_text="Why, for the audit trail: it becomes each record's history note.",
    )


def _revoke_sources(
    modeladmin: admin.ModelAdmin, request: UserRequest, queryset: QuerySet, *, field: str
) -> TemplateResponse | None:
    actor = Actor.for_user(request.user, channel="admin")
    objects = list(queryset)
    form = RevokeSourceForm(request.POST if "apply" in request.POST else None)
    if form.is_valid():
        for obj in objects:
            try:
                source = resolve_source(actor=actor, tenant=obj.tenant, **{field: obj})
                revocation = revocation_create(actor=actor, source=source, reason=form.cleaned_data["reason"])
            except DomainError as exc:
                messages.error(request, f"{obj}: {exc.detail}")
                continue
            token = " Its token is revoked." if revocation.token_revoked else ""
            messages.success(
                request,
                f"Revoked {obj}: {revocation.affected} record(s) back in quarantine, "
                f"{revocation.derived_affected} of them derived.{token}",
            )
        return None  # back to the list
    previews: list[tuple[Model, int | str, int | None]] = []  # (source, records moved or why not, derived ones)
    for obj in objects:
        try:
            previews.append(
                (obj, *revocation_preview(actor=actor, source=resolve_source(actor=actor, tenant=obj.tenant, **{field: obj})))
            )
        except DomainError as exc:
            previews.append((obj, exc.detail, None))
    return TemplateResponse(
        request,
        "admin/revocations/confirm.html",
        {
            **modeladmin.admin_site.each_context(request),
            "title": "Revoke as a source",
            "opts": modeladmin.model._meta,
            "previews": previews,
            "objects": objects,
            "form": form,
            "action": request.POST.get("action"),
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "field": field,
        },
    )


class RevocableCredentialAdmin(AgentCredentialAdmin):
    actions = [*AgentCredentialAdmin.actions, "revoke_as_source"]

    @admin.action(description="Revoke as a source: quarantine everything these tokens wrote (and revoke them)")
    def revoke_as_source(self, request, queryset):
        return _revoke_sources(self, request, queryset.select_related("agent__tenant"), field="credential")


class RevocableAgentAdmin(AgentAdmin):
    # `actions` is typed with Self, which a read through the class cannot bind.
    actions = [*(AgentAdmin.actions or []), "revoke_as_source"]  # type: ignore[misc]

    @admin.action(description="Revoke as a source: quarantine everything these agents wrote")
    def revoke_as_source(self, request, queryset):
        return _revoke_sources(self, request, queryset.select_related("tenant"), field="agent")


class RevocableSourceKeyAdmin(SourceKeyAdmin):
    actions = [*(SourceKeyAdmin.actions or []), "revoke_as_source"]  # type: ignore[misc]

    @admin.action(description="Revoke as a source: these keys verify nothing more; what they verified goes back to quarantine")
    def revoke_as_source(self, request, queryset):
        return _revoke_sources(self, request, queryset.select_related("source__tenant"), field="source_key")


for model, model_admin in (
    (AgentCredential, RevocableCredentialAdmin),
    (Agent, RevocableAgentAdmin),
    (SourceKey, RevocableSourceKeyAdmin),
):
    admin.site.unregister(model)
    admin.site.register(model, model_admin)


@admin.register(Revocation)
class RevocationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["created_at", "tenant", "source", "value", "affected", "derived_affected", "token_revoked", "revoked_by"]
    list_filter = ["source", "tenant"]
    list_select_related = ["tenant"]
    date_hierarchy = "created_at"
    # `records` (possibly thousands) is left out; `affected` counts them and the review page lists them.
    fields = readonly_fields = (
        "id",
        "tenant",
        "source",
        "credential",
        "agent",
        "value",
        "reason",
        "revoked_by",
        "revoked_by_user",
        "affected",
        "derived_affected",
        "token_revoked",
        "created_at",
    )
