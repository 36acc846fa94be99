"""Reviewer page for held sources: the sessions and source addresses whose new writes wait for
review (a contaminated write in the session, or a revocation), and the action that clears one.
Clearing goes through `memory.admission.hold_clear`; GET changes nothing."""

from django import forms
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from governance.review.common import ReviewerRequest, page_of, render_page, reviewer_required
from memory.admission import hold_clear
from memory.errors import DomainError
from memory.models import NOTE_MAX_CHARS, SourceHold
from memory.selectors import tenants_in_scope

CLEARED_SHOWN = 20  # recently cleared holds listed below the open ones


class ClearForm(forms.Form):
    note = forms.CharField(
        max_length=NOTE_MAX_CHARS,
        strip=True,
        label="Why it can be cleared",
        help_text='For the audit trail, e.g. "the tool output was our own CRM".',
    )


def _holds(actor):
    return (
        SourceHold.objects.filter(tenant__in=tenants_in_scope(actor))
        .select_related("tenant", "raised_by")
        .prefetch_related("revocations")
    )


def _label(held: SourceHold) -> str:
    """The session id or address as people read it: from the write that raised the hold or the
    revocation that did, while they still carry it (a forget erases both)."""
    if held.raised_by is not None and held.raised_by.session_id:
        return held.raised_by.session_id
    for revocation in held.revocations.all():
        if revocation.value:
            return revocation.value
    return "(erased by a forget)"


@reviewer_required
def hold_list(request: ReviewerRequest) -> HttpResponse:
    holds = _holds(request.actor)
    page = page_of(request, holds.filter(cleared_at__isnull=True).order_by("-created_at", "-pk"))
    cleared = list(holds.filter(cleared_at__isnull=False).order_by("-cleared_at", "-pk")[:CLEARED_SHOWN])
    for held in [*page.object_list, *cleared]:
        held.label = _label(held)
    return render_page(
        request,
        "review/holds.html",
        {
            "nav": "revocations",
            "page": page,
            "cleared": cleared,
            "form": ClearForm(),
        },
    )


@reviewer_required
@require_POST
def hold_clear_view(request: ReviewerRequest, pk: int) -> HttpResponse:
    form = ClearForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Say briefly why the hold can be cleared; nothing was changed.")
        return redirect("review:holds")
    try:
        held = hold_clear(hold_id=pk, actor=request.actor, note=form.cleaned_data["note"])
    except DomainError as exc:
        messages.error(request, exc.detail)
        return redirect("review:holds")
    messages.success(
        request,
        f"Cleared the hold on {_label(held)}: its new writes are admitted by the usual rules again; "
        "what it already sent to quarantine waits for review.",
    )
    return redirect("review:holds")
