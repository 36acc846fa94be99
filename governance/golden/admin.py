"""Admin for golden recall sets: questions are curated here or through the API; runs are read-only
results."""

from typing import Any, ClassVar, cast

from django import forms
from django.contrib import admin
from django.contrib.auth.models import User
from django.http import HttpRequest

from governance.golden.models import GoldenQuestion, GoldenRun
from governance.golden.services import expected_record_errors, k_errors
from governance.readonly_admin import ReadOnlyAdminMixin
from memory.actors import Actor


class GoldenQuestionAdminForm(forms.ModelForm):
    """The question's rules are the service's (`governance.golden.services`), checked here too."""

    actor: ClassVar[Actor]  # set by GoldenQuestionAdmin.get_form on the form class it builds per request

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

    def get_form(
        self, request: HttpRequest, obj: GoldenQuestion | None = None, change: bool = False, **kwargs: Any
    ) -> type[GoldenQuestionAdminForm]:
        # Built from `form` above, so a subclass of it; the admin's pages are for logged-in staff.
        form = cast(type[GoldenQuestionAdminForm], super().get_form(request, obj, change=change, **kwargs))
        form.actor = Actor.for_user(cast(User, request.user), channel="admin")
        return form

    def save_model(self, request: HttpRequest, obj: GoldenQuestion, form: forms.ModelForm, change: bool) -> None:
        if not change:
            user = cast(User, request.user)  # the admin's pages are for logged-in staff
            obj.created_by, obj.created_by_user = Actor.for_user(user, channel="admin").label, user
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
