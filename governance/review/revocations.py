"""Reviewer pages for revocations: file one (form, then a confirmation naming how many records it
will send back to quarantine, then the revocation itself), read its receipt, list past ones.
Every change goes through `governance.revocations.services`; GET changes nothing."""

import uuid

from django import forms
from django.contrib import messages
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect

from governance.review.common import ReviewerRequest, memories, page_of, render_page, reviewer_required
from governance.revocations.models import Revocation, RevocationRecord
from governance.revocations.selectors import revocations_in_scope
from governance.revocations.services import (
    SESSION_ID_MAX_CHARS,
    SOURCE_URI_MAX_CHARS,
    resolve_source,
    revocation_create,
    revocation_preview,
)
from memory.errors import DomainError
from memory.models import NOTE_MAX_CHARS, Agent, AgentCredential, Status, Tenant
from memory.selectors import tenants_in_scope

RECORDS_SHOWN = 50  # records listed on a revocation's page; the quarantine link shows them all


class CredentialChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, credential: AgentCredential) -> str:
        revoked = " (token revoked)" if credential.revoked_at else ""
        label = f" · {credential.label}" if credential.label else ""
        return f"{credential.agent.tenant.slug} / {credential.agent.slug} · {credential.token_hint}…{label}{revoked}"


class AgentChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, agent: Agent) -> str:
        return f"{agent.tenant.slug} / {agent.slug}"


class RevocationForm(forms.Form):
    """Which source, in which of the reviewer's tenants, and why. Only the field of the chosen
    kind of source is read; whether it exists in the tenant is the service's question."""

    tenant: "forms.ModelChoiceField[Tenant]" = forms.ModelChoiceField(queryset=None, to_field_name="slug", empty_label=None)
    source = forms.ChoiceField(choices=Revocation.Source.choices, widget=forms.RadioSelect, label="Revoke")
    credential = CredentialChoiceField(queryset=None, required=False, label="Agent token")
    agent = AgentChoiceField(queryset=None, required=False, label="Agent")
    session_id = forms.CharField(required=False, max_length=SESSION_ID_MAX_CHARS, strip=True, label="Session id")
    source_uri_prefix = forms.CharField(
        required=False,
        max_length=SOURCE_URI_MAX_CHARS,
        strip=True,
        label="Source-URI prefix",
        help_text="Every memory whose source address starts with this, e.g. https://forum.example/.",
    )
    reason = forms.CharField(
        max_length=NOTE_MAX_CHARS,
        strip=True,
        widget=forms.TextInput,
        help_text='Why, for the audit trail, e.g. "token leaked in a public repository".',
    )

    def __init__(self, *args, tenants, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tenant"].queryset = tenants
        self.fields["credential"].queryset = (
            AgentCredential.objects.filter(agent__tenant__in=tenants)
            .select_related("agent__tenant")
            .order_by("agent__tenant__slug", "agent__slug", "-created_at")
        )
        self.fields["agent"].queryset = Agent.objects.filter(tenant__in=tenants).select_related("tenant")

    def clean(self):
        data = super().clean()
        kind = data.get("source")
        if kind and not data.get(kind):
            self.add_error(kind, "Choose or enter the source to revoke.")
        return data

    def source_reference(self) -> dict:
        """The one source reference the service resolves, e.g. {"session_id": "s-1"}."""
        kind = self.cleaned_data["source"]
        return {kind: self.cleaned_data[kind]}


def _form_page(request: HttpRequest, form: RevocationForm, *, status: int = 200) -> HttpResponse:
    return render_page(request, "review/revocation_new.html", {"nav": "revocations", "form": form}, status=status)


@reviewer_required
def revocation_new(request: ReviewerRequest) -> HttpResponse:
    """Three steps: the form (GET), a confirmation with the counts (POST), the revocation itself
    (POST with step=confirm). Only the last one changes anything."""
    actor = request.actor
    tenants = tenants_in_scope(actor)
    if request.method != "POST":
        return _form_page(request, RevocationForm(tenants=tenants))
    form = RevocationForm(request.POST, tenants=tenants)
    step = request.POST.get("step", "")
    if not form.is_valid() or step == "edit":
        return _form_page(request, form, status=200 if form.is_valid() else 400)
    try:
        source = resolve_source(actor=actor, tenant=form.cleaned_data["tenant"], **form.source_reference())
        if step != "confirm":
            direct, derived = revocation_preview(actor=actor, source=source)
            return render_page(
                request,
                "review/revocation_confirm.html",
                {
                    "nav": "revocations",
                    "form": form,
                    "source": source,
                    "direct": direct,
                    "derived": derived,
                    "total": direct + derived,
                    "hidden": _hidden_fields(form),
                    "source_label": Revocation.Source(source.kind).label,
                },
            )
        revocation = revocation_create(actor=actor, source=source, reason=form.cleaned_data["reason"])
    except DomainError as exc:  # e.g. a token of another of the reviewer's tenants than the one chosen
        for field, errors in (exc.errors or {form.cleaned_data["source"]: [exc.detail]}).items():
            for error in errors:
                form.add_error(field if field in form.fields else None, error)
        return _form_page(request, form, status=400)
    token = " Its token is revoked." if revocation.token_revoked else ""
    messages.success(
        request,
        f"Revoked {revocation.get_source_display()} {revocation.value}: {memories(revocation.affected)} back in "
        f"quarantine ({revocation.derived_affected} derived).{token}",
    )
    return redirect("review:revocation_detail", pk=revocation.pk)


def _hidden_fields(form: RevocationForm) -> list[tuple[str, str]]:
    """What the confirmation posts again: the form as the reviewer filled it."""
    kind = form.cleaned_data["source"]
    value = form.data.get(kind, "")
    return [
        ("tenant", form.cleaned_data["tenant"].slug),
        ("source", kind),
        (kind, value),
        ("reason", form.cleaned_data["reason"]),
    ]


@reviewer_required
def revocation_list(request: ReviewerRequest) -> HttpResponse:
    page = page_of(request, revocations_in_scope(request.actor).order_by("-created_at"))
    return render_page(request, "review/revocation_list.html", {"nav": "revocations", "page": page})


@reviewer_required
def revocation_detail(request: ReviewerRequest, pk: uuid.UUID) -> HttpResponse:
    revocation = get_object_or_404(revocations_in_scope(request.actor), pk=pk)
    links = RevocationRecord.objects.filter(revocation=revocation)
    counts = links.aggregate(still_quarantined=Count("pk", filter=Q(record__status=Status.QUARANTINED)))
    shown = list(links.select_related("record__kind").order_by("derived", "record__created_at")[:RECORDS_SHOWN])
    return render_page(
        request,
        "review/revocation_detail.html",
        {
            "nav": "revocations",
            "revocation": revocation,
            "links": shown,
            "still_quarantined": counts["still_quarantined"],
            "more": max(revocation.affected - len(shown), 0),
        },
    )
