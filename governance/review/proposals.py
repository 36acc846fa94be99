"""Dedup proposals in the reviewer UI: the list (`/review/proposals/`, filter by status and
category, oldest first, with the regret rate) and one proposal side by side
(`/review/proposals/<id>/`: the kept record against each dropped one, differences highlighted,
provenance of each) with its decisions: accept (optionally keeping another member), reject, and
rollback of an accepted proposal.

Reads come from `governance.dedup.selectors`, scoped to the reviewer's tenants; decisions go
through `governance.dedup.services`, which change records only through the lifecycle services.
A proposal whose records moved on is refused by the service and stays open; the page then says
so and shows each member as it is now. GET never changes anything; another tenant's proposal is
a 404, like a missing one.
"""

import uuid
from typing import TYPE_CHECKING, cast

from django import forms
from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from governance.dedup.models import DedupProposal
from governance.dedup.selectors import ProposalMember, content_diff, proposal_in_scope, proposal_members, proposal_queue
from governance.dedup.services import (
    DECISION_NOTE_MAX_CHARS,
    RegretCounts,
    proposal_accept,
    proposal_reject,
    proposal_rollback,
    regret_counts,
)
from governance.review.common import (
    ReviewerRequest,
    form_problem,
    memories,
    page_of,
    render_page,
    reviewer_required,
    safe_next,
    short_id,
)
from memory.actors import Actor
from memory.errors import Conflict, RecordNotFound, ValidationFailed
from memory.models import SIGNED_BY, MemoryRecord
from memory.selectors import records_in_scope

if TYPE_CHECKING:
    from governance.review.common import RecordWithLastChange

ALL = "all"
# How `not_restored` reasons read in a message.
NOT_RESTORED_WHY = {
    "forgotten": "it was forgotten since",
    "expired": "it has expired since",
    "changed": "it changed after the acceptance",
}


# The filter bar's options, as the form checks them and the page lists them.
STATUS_CHOICES = [*DedupProposal.Status.choices, (ALL, "All")]
CATEGORY_CHOICES = [("", "All"), *DedupProposal.Category.choices]


class ProposalFilterForm(forms.Form):
    """The list's filter bar. No status means open proposals (what waits for a decision)."""

    status = forms.ChoiceField(choices=STATUS_CHOICES, required=False)
    category = forms.ChoiceField(choices=CATEGORY_CHOICES, required=False)

    def queue_arguments(self) -> dict:
        status = self.cleaned_data.get("status") or DedupProposal.Status.OPEN
        return {"status": None if status == ALL else status, "category": self.cleaned_data.get("category") or None}


class ProposalDecisionForm(forms.Form):
    """One decision on a proposal: an optional note and, for accept, which member to keep."""

    note = forms.CharField(max_length=DECISION_NOTE_MAX_CHARS, required=False, strip=True)
    keep = forms.UUIDField(required=False)


def _regret(counts: RegretCounts) -> dict:
    """The regret rate as the pages show it: a percentage and the counts behind it."""
    rate = "—" if counts.rate is None else f"{counts.rate:.1%}"
    return {"rate": rate, "accepted": counts.accepted, "rolled_back": counts.rolled_back}


# ------------------------------------------------------------------------------------------------
# list


@reviewer_required
def proposal_list(request: ReviewerRequest) -> HttpResponse:
    actor = request.actor
    form = ProposalFilterForm(request.GET)
    # A filter that does not validate shows its message and no rows, not an unfiltered list.
    queue = proposal_queue(actor, **form.queue_arguments()) if form.is_valid() else DedupProposal.objects.none()
    page = page_of(request, queue)
    for proposal in page.object_list:
        proposal.members = proposal_members(proposal)
        proposal.stale = proposal.status == DedupProposal.Status.OPEN and any(m.moved_on for m in proposal.members)
    return render_page(
        request,
        "review/proposal_list.html",
        {
            "nav": "proposals",
            "page": page,
            "form": form,
            "status_choices": STATUS_CHOICES,
            "category_choices": CATEGORY_CHOICES,
            "selected_status": request.GET.get("status") or DedupProposal.Status.OPEN,
            "regret": _regret(regret_counts(actor=actor)),
        },
    )


# ------------------------------------------------------------------------------------------------
# detail


def _fresh_members(actor: Actor, proposal: DedupProposal) -> list[ProposalMember]:
    """The members with everything the provenance block shows loaded in two queries (rather than
    a few per member), and each moved-on member's last history row (one more query) so the page
    can say what changed it."""
    members = proposal_members(proposal)
    records = (
        records_in_scope(actor)
        .select_related("tenant", "agent", "kind", SIGNED_BY)
        .prefetch_related("derived_from")
        .in_bulk([member.record.pk for member in members])
    )
    fresh = [
        ProposalMember(record=records.get(m.record.pk, m.record), role=m.role, proposed_version=m.proposed_version)
        for m in members
    ]
    moved_on = [member.record.pk for member in fresh if member.moved_on]
    last_change: dict[uuid.UUID, object] = {}
    if moved_on:
        for row in MemoryRecord.history.filter(id__in=moved_on).order_by("-history_date", "-history_id"):
            last_change.setdefault(row.id, row)
    for member in fresh:
        record = cast("RecordWithLastChange", member.record)
        record.last_change = last_change.get(record.pk)
    return fresh


def _pairs(members: list[ProposalMember]) -> list[dict]:
    """The kept record against each dropped one, with the word-level diff of their contents
    (none when either is forgotten: its content is never shown)."""
    keep, drops = members[0], members[1:]
    pairs = []
    for drop in drops:
        kept_content, dropped_content = keep.record.visible_content, drop.record.visible_content
        if kept_content is None or dropped_content is None:
            left = right = None
        else:
            left, right = content_diff(kept_content, dropped_content)
        pairs.append({"keep": keep, "drop": drop, "keep_segments": left, "drop_segments": right})
    return pairs


@reviewer_required
def proposal_detail(request: ReviewerRequest, pk: uuid.UUID) -> HttpResponse:
    actor = request.actor
    proposal = proposal_in_scope(actor, pk)
    if proposal is None:
        raise Http404("No such proposal.")
    members = _fresh_members(actor, proposal)
    is_open = proposal.status == DedupProposal.Status.OPEN
    return render_page(
        request,
        "review/proposal_detail.html",
        {
            "nav": "proposals",
            "proposal": proposal,
            "members": members,
            "pairs": _pairs(members),
            "is_open": is_open,
            "can_roll_back": proposal.status == DedupProposal.Status.ACCEPTED,
            "moved_on": [member for member in members if member.moved_on] if is_open else [],
            "regret": _regret(regret_counts(actor=actor)),
        },
    )


# ------------------------------------------------------------------------------------------------
# decisions


@reviewer_required
@require_POST
def proposal_decide(request: ReviewerRequest, pk: uuid.UUID, action: str) -> HttpResponse:
    """Accept, reject or roll back one proposal, then back to the page it was decided on."""
    if action not in ("accept", "reject", "rollback"):
        raise Http404("No such action.")
    actor = request.actor
    back = safe_next(request, default=reverse("review:proposal_detail", args=[pk]))
    form = ProposalDecisionForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Nothing was applied to proposal {short_id(pk)}. {form_problem(form)}")
        return redirect(back)
    note = form.cleaned_data["note"]
    try:
        if action == "accept":
            proposal = proposal_accept(proposal_id=pk, actor=actor, note=note, keep_id=form.cleaned_data["keep"])
            dropped = proposal.drops.count()
            messages.success(
                request,
                f"Proposal {short_id(pk)} accepted: {memories(dropped)} superseded by memory "
                f"{short_id(proposal.keep_id)} ({proposal.subject}).",
            )
        elif action == "reject":
            proposal_reject(proposal_id=pk, actor=actor, note=note)
            messages.success(request, f"Proposal {short_id(pk)} rejected: no memory was changed.")
        else:
            outcome = proposal_rollback(proposal_id=pk, actor=actor, note=note)
            messages.success(request, f"Proposal {short_id(pk)} rolled back: {memories(len(outcome.restored))} active again.")
            for record_id, why in outcome.not_restored.items():
                messages.warning(request, f"Memory {short_id(record_id)} was not restored: {NOT_RESTORED_WHY.get(why, why)}.")
    except RecordNotFound as exc:
        raise Http404("No such proposal.") from exc
    except Conflict as exc:  # records moved on (the proposal stays open), or already decided
        messages.warning(request, f"Not applied: {exc.detail} The records as they are now are shown below.")
    except ValidationFailed as exc:
        details = " ".join(message for messages_ in exc.errors.values() for message in messages_)
        messages.error(request, f"Nothing was applied to proposal {short_id(pk)}: {exc.detail} {details}".strip())
    return redirect(back)
