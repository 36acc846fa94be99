"""Decisions on dedup proposals: accept, reject, roll back, and the regret rate.

A reviewer decides; records change only through `memory.services` (accept supersedes each dropped
record by the kept one with `memory_supersede_by`, reason `review.dedup_accept`; rollback restores
them with `memory_restore`), so every change leaves its history row. A proposal whose records moved
on since the job filed it (a member no longer active, or at another version) is refused with
`Conflict` and stays open, so the reviewer looks again at what the records say now. The API and
the reviewer UI call these functions and map the domain errors (`memory.errors`) as usual.
"""

import uuid
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone
from prometheus_client import Counter

from governance.dedup.models import DedupProposal
from memory.actors import Actor
from memory.errors import Conflict, InvalidTransition, RecordNotFound, ScopeDenied, ValidationFailed
from memory.metrics import count_conflict, count_on_commit
from memory.models import NOTE_MAX_CHARS, MemoryRecord, Status
from memory.outbox.models import EventType
from memory.outbox.write import write_events
from memory.policy import checked_note
from memory.services import memory_restore, memory_supersede_by

PROPOSALS_DECIDED = Counter(
    "governed_memory_proposals_decided_total",
    "Dedup proposals decided by reviewers (accepted, rejected, rolled back).",
    ["decision"],
)

# A reviewer's note goes into each record's history note after "<Verb> dedup proposal <id>. ", and
# into the proposal's decision note after the acceptance's own: it must fit both whole.
_HISTORY_NOTE_PREFIX = len("Rolled back dedup proposal 00000000-0000-0000-0000-000000000000. ")
DECISION_NOTE_MAX_CHARS = (NOTE_MAX_CHARS - _HISTORY_NOTE_PREFIX) // 2


@dataclass(frozen=True)
class RollbackOutcome:
    proposal: DedupProposal
    restored: list[uuid.UUID] = field(default_factory=list)
    # record id -> why it stayed as it is: "forgotten", "expired" or "changed" (moved on since)
    not_restored: dict[uuid.UUID, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RegretCounts:
    accepted: int  # every proposal ever accepted, including those rolled back since
    rolled_back: int

    @property
    def rate(self) -> float | None:
        return self.rolled_back / self.accepted if self.accepted else None


def _check_note(note: str | None) -> str:
    if note is None:
        return ""
    if not isinstance(note, str):
        raise ValidationFailed("The note must be text.", errors={"note": ["Must be a string."]})
    return checked_note(note, limit=DECISION_NOTE_MAX_CHARS).strip()


def _locked_proposal(actor: Actor, proposal_id) -> DedupProposal:
    """The proposal, row-locked, if it belongs to one of the actor's tenants; else RecordNotFound
    (another tenant's proposal is indistinguishable from a missing one)."""
    if not actor.is_human:
        raise ScopeDenied("Only a human reviewer may decide on a proposal.")
    try:
        proposal_uuid = uuid.UUID(str(proposal_id))
    except ValueError:
        raise RecordNotFound("No such proposal in your scope.") from None
    proposal = actor.in_tenants(DedupProposal.objects.select_for_update().filter(pk=proposal_uuid)).first()
    if proposal is None:
        raise RecordNotFound("No such proposal in your scope.")
    return proposal


def _require_status(proposal: DedupProposal, expected: str, action: str) -> None:
    if proposal.status != expected:
        raise InvalidTransition(
            f"Cannot {action} a proposal that is {proposal.status}; it must be {expected}.", code="proposal_not_" + expected
        )


def _decide(proposal: DedupProposal, *, status: str, actor: Actor, note: str) -> None:
    proposal.status = status
    proposal.decided_at = timezone.now()
    proposal.decided_by = actor.user
    proposal.decision_note = note
    proposal.save(update_fields=["status", "decided_at", "decided_by", "decision_note"])
    write_events([_decided_event(proposal)], now=proposal.decided_at)
    count_on_commit(PROPOSALS_DECIDED, status)


def _decided_event(proposal: DedupProposal) -> dict:
    """`proposal.decided`: which proposal, its outcome and records (ids only; the note stays here)."""
    return {
        "type": EventType.PROPOSAL_DECIDED,
        "tenant_id": proposal.tenant_id,
        "data": {"proposal": {"id": str(proposal.pk), "status": proposal.status, "keep": str(proposal.keep_id)}},
    }


def _history_note(proposal: DedupProposal, verb: str, note: str) -> str:
    return f"{verb} dedup proposal {proposal.pk}." + (f" {note}" if note else "")


def proposal_accept(*, proposal_id, actor: Actor, note: str = "", keep_id=None) -> DedupProposal:
    """Accept an open proposal: every dropped record becomes superseded by the kept one, in one
    transaction. Refused with Conflict (and left open) if any member moved on since.

    `keep_id` lets the reviewer keep another member than the job suggested (the other side of a
    contradiction, say); the proposal's keep and drops are rewritten to what was decided, so a
    rollback undoes exactly that."""
    note = _check_note(note)
    with transaction.atomic():
        proposal = _locked_proposal(actor, proposal_id)
        _require_status(proposal, DedupProposal.Status.OPEN, "accept")
        if keep_id is not None and str(keep_id) != str(proposal.keep_id):
            _keep_another_member(proposal, keep_id)
        drops = list(proposal.drops.order_by("record_id"))
        expected = {proposal.keep_id: proposal.keep_version, **{drop.record_id: drop.version for drop in drops}}
        current = {
            record.pk: record for record in MemoryRecord.objects.select_for_update().filter(pk__in=list(expected)).order_by("pk")
        }
        moved_on = sorted(
            str(record_id)
            for record_id, version in expected.items()
            if record_id not in current or current[record_id].status != Status.ACTIVE or current[record_id].version != version
        )
        if not drops:
            raise Conflict(
                "The records this proposal would merge no longer exist. Nothing was merged; reject the proposal.",
                code="proposal_stale",
            )
        if moved_on:
            count_conflict("proposal_stale")
            raise Conflict(
                f"{len(moved_on)} of the {len(expected)} records of this proposal changed since it was made "
                "(no longer active, or at a new version). Nothing was merged; the proposal stays open: reload it and decide again.",
                code="proposal_stale",
                errors={"records": moved_on},
            )
        for drop in drops:
            memory_supersede_by(
                record_id=drop.record_id,
                expected_version=drop.version,
                by_record_id=proposal.keep_id,
                actor=actor,
                note=_history_note(proposal, "Accepted", note),
                action="dedup_accept",
            )
        _decide(proposal, status=DedupProposal.Status.ACCEPTED, actor=actor, note=note)
    return proposal


def _keep_another_member(proposal: DedupProposal, keep_id) -> None:
    """Swap the suggested keep with the dropped member `keep_id` (same members, same signature)."""
    chosen = next((drop for drop in proposal.drops.all() if str(drop.record_id) == str(keep_id)), None)
    if chosen is None:
        raise ValidationFailed(
            "The record to keep must be one of the proposal's records.", errors={"keep": ["Not a member of this proposal."]}
        )
    previous_keep, previous_version = proposal.keep_id, proposal.keep_version
    proposal.keep_id, proposal.keep_version = chosen.record_id, chosen.version
    proposal.save(update_fields=["keep", "keep_version"])
    chosen.record_id, chosen.version = previous_keep, previous_version
    chosen.save(update_fields=["record", "version"])


def proposal_reject(*, proposal_id, actor: Actor, note: str = "") -> DedupProposal:
    """Reject an open proposal: no record changes; the group is not proposed again while its
    records stay as they are."""
    note = _check_note(note)
    with transaction.atomic():
        proposal = _locked_proposal(actor, proposal_id)
        _require_status(proposal, DedupProposal.Status.OPEN, "reject")
        _decide(proposal, status=DedupProposal.Status.REJECTED, actor=actor, note=note)
    return proposal


def proposal_rollback(*, proposal_id, actor: Actor, note: str = "") -> RollbackOutcome:
    """Undo an accepted proposal: each dropped record that is still exactly as the acceptance left
    it is restored to active through `memory_restore`. A record forgotten since, expired since, or
    changed by anything else stays as it is and is reported in `not_restored`."""
    note = _check_note(note)
    now = timezone.now()
    restored: list[uuid.UUID] = []
    not_restored: dict[uuid.UUID, str] = {}
    with transaction.atomic():
        proposal = _locked_proposal(actor, proposal_id)
        _require_status(proposal, DedupProposal.Status.ACCEPTED, "roll back")
        drops = {drop.record_id: drop for drop in proposal.drops.all()}
        records = MemoryRecord.objects.select_for_update().filter(pk__in=list(drops)).order_by("pk")
        for record in records:
            drop = drops[record.pk]
            if record.status == Status.FORGOTTEN:
                not_restored[record.pk] = "forgotten"
            elif record.status != Status.SUPERSEDED or record.version != drop.version + 1:
                not_restored[record.pk] = "changed"  # moved on after the acceptance
            elif record.expires_at <= now:
                not_restored[record.pk] = "expired"
            else:
                memory_restore(
                    record_id=record.pk,
                    expected_version=record.version,
                    actor=actor,
                    note=_history_note(proposal, "Rolled back", note),
                )
                restored.append(record.pk)
        proposal.status = DedupProposal.Status.ROLLED_BACK
        write_events([_decided_event(proposal)], now=timezone.now())
        proposal.rolled_back_at = now
        if note:
            proposal.decision_note = f"{proposal.decision_note} | rollback: {note}".strip(" |")  # both fit: see _check_note
        proposal.save(update_fields=["status", "rolled_back_at", "decision_note"])
        count_on_commit(PROPOSALS_DECIDED, DedupProposal.Status.ROLLED_BACK)
    return RollbackOutcome(proposal=proposal, restored=restored, not_restored=not_restored)


def regret_counts(*, actor: Actor | None = None, tenant_id: int | None = None) -> RegretCounts:
    """Accepted and rolled-back proposals, in the actor's tenants (or one tenant, or all)."""
    queryset = DedupProposal.objects.filter(status__in=[DedupProposal.Status.ACCEPTED, DedupProposal.Status.ROLLED_BACK])
    if actor is not None:
        queryset = actor.in_tenants(queryset)
    if tenant_id is not None:
        queryset = queryset.filter(tenant_id=tenant_id)
    totals = queryset.aggregate(accepted=Count("pk"), rolled_back=Count("pk", filter=Q(status=DedupProposal.Status.ROLLED_BACK)))
    return RegretCounts(accepted=totals["accepted"], rolled_back=totals["rolled_back"])
