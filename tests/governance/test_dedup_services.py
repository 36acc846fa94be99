"""Decisions on dedup proposals at the service level: accept supersedes the dropped records
(one history row each, reason review.dedup_accept), a proposal over records that moved on is
refused and stays open, reject changes nothing, rollback restores (unless forgotten or expired
since), the regret rate, and who may decide. Also memory_supersede_by on its own."""

from datetime import timedelta

import pytest
from django.db.models import F
from django.utils import timezone

from governance.dedup.jobs import propose_duplicates
from governance.dedup.selectors import proposal_members, proposal_queue
from governance.dedup.services import (
    proposal_accept,
    proposal_reject,
    proposal_rollback,
    regret_counts,
)
from governance.forget.services import forget_request_create
from governance.models import DedupProposal
from memory.actors import Actor
from memory.errors import Conflict, InvalidTransition, RecordNotFound, ScopeDenied, StaleVersion, ValidationFailed
from memory.models import MemoryRecord, Status
from memory.services import memory_confirm, memory_supersede_by

pytestmark = pytest.mark.django_db

EMAIL = "The customer prefers to be contacted by email."
EMAIL_AGAIN = "Customer prefers being contacted via email."
EMAIL_LOWER = "the customer prefers to be contacted by email"


def history_of(record):
    return list(record.history.order_by("history_date", "history_id"))


def propose(write, *contents, subject="customer/acme", **overrides) -> tuple[DedupProposal, list[MemoryRecord]]:
    records = [write(content=content, subject=subject, **overrides) for content in contents]
    propose_duplicates(now=timezone.now(), batch_size=500)
    proposal = DedupProposal.objects.get(subject=subject, status="open")
    return proposal, records


def test_accept_supersedes_every_drop_by_the_kept_record_with_one_history_row_each(write, reviewer, reviewer_actor):
    proposal, records = propose(write, EMAIL, EMAIL_AGAIN, EMAIL_LOWER)
    keep = MemoryRecord.objects.get(pk=proposal.keep_id)
    drops = [r for r in records if r.pk != keep.pk]
    rows_before = {r.pk: len(history_of(r)) for r in records}

    accepted = proposal_accept(proposal_id=proposal.pk, actor=reviewer_actor, note="same preference, three times")

    assert accepted.status == "accepted"
    assert accepted.decided_by == reviewer and accepted.decided_at is not None
    assert accepted.decision_note == "same preference, three times"
    keep.refresh_from_db()
    assert (keep.status, keep.version) == (Status.ACTIVE, proposal.keep_version)  # untouched
    assert len(history_of(keep)) == rows_before[keep.pk]
    for drop in drops:
        drop.refresh_from_db()
        assert (drop.status, drop.version) == (Status.SUPERSEDED, 2)
        rows = history_of(drop)
        assert len(rows) == rows_before[drop.pk] + 1
        last = rows[-1]
        assert last.history_change_reason == "review.dedup_accept"
        assert last.history_user_id == reviewer.pk and last.history_actor == "user:rita"
        assert str(keep.pk) in last.history_note and str(proposal.pk) in last.history_note


def test_accepting_a_conflict_supersedes_the_losing_side(write, reviewer_actor):
    proposal, (email, phone) = propose(write, EMAIL, "The customer prefers to be contacted by phone.")
    assert proposal.category == "conflict"
    proposal_accept(proposal_id=proposal.pk, actor=reviewer_actor)
    statuses = dict(MemoryRecord.objects.filter(pk__in=[email.pk, phone.pk]).values_list("pk", "status"))
    assert sorted(statuses.values()) == [Status.ACTIVE, Status.SUPERSEDED]
    assert statuses[proposal.keep_id] == Status.ACTIVE


def test_the_reviewer_may_keep_the_other_side_and_a_rollback_undoes_that(write, reviewer_actor):
    proposal, (email, phone) = propose(write, EMAIL, "The customer prefers to be contacted by phone.")
    suggested_keep = proposal.keep_id
    other = proposal.drops.get().record_id
    with pytest.raises(ValidationFailed):
        proposal_accept(proposal_id=proposal.pk, actor=reviewer_actor, keep_id=write(content="Unrelated.").pk)

    accepted = proposal_accept(proposal_id=proposal.pk, actor=reviewer_actor, keep_id=other, note="phone is current")

    assert (accepted.keep_id, accepted.drops.get().record_id) == (other, suggested_keep)
    assert MemoryRecord.objects.get(pk=other).status == Status.ACTIVE
    assert MemoryRecord.objects.get(pk=suggested_keep).status == Status.SUPERSEDED
    outcome = proposal_rollback(proposal_id=proposal.pk, actor=reviewer_actor)
    assert outcome.restored == [suggested_keep]
    assert set(MemoryRecord.objects.filter(pk__in=[email.pk, phone.pk]).values_list("status", flat=True)) == {Status.ACTIVE}


@pytest.mark.parametrize("change", ["confirm_drop", "confirm_keep", "forget"])
def test_a_proposal_over_records_that_moved_on_is_refused_and_stays_open(write, reviewer_actor, credential, change):
    proposal, _records = propose(write, EMAIL, EMAIL_AGAIN)
    drop_id = proposal.drops.get().record_id
    if change == "confirm_drop":
        memory_confirm(record_id=drop_id, expected_version=1, actor=reviewer_actor)
    elif change == "confirm_keep":
        memory_confirm(record_id=proposal.keep_id, expected_version=1, actor=reviewer_actor)
    else:
        forget_request_create(actor=Actor.for_credential(credential), tenant=credential.agent.tenant, subject="customer/acme")
    snapshot = {r.pk: (r.status, r.version, len(history_of(r))) for r in MemoryRecord.objects.all()}

    with pytest.raises(Conflict) as refused:
        proposal_accept(proposal_id=proposal.pk, actor=reviewer_actor)

    assert refused.value.code == "proposal_stale"
    assert "stays open" in refused.value.detail
    assert refused.value.errors["records"]
    proposal.refresh_from_db()
    assert proposal.status == "open" and proposal.decided_at is None
    assert {r.pk: (r.status, r.version, len(history_of(r))) for r in MemoryRecord.objects.all()} == snapshot
    # the reviewer UI can show which members moved on
    (listed,) = proposal_queue(reviewer_actor)
    assert any(member.moved_on for member in proposal_members(listed))


def test_a_decided_proposal_cannot_be_decided_again(write, reviewer_actor):
    proposal, _ = propose(write, EMAIL, EMAIL_AGAIN)
    proposal_accept(proposal_id=proposal.pk, actor=reviewer_actor)
    with pytest.raises(InvalidTransition):
        proposal_accept(proposal_id=proposal.pk, actor=reviewer_actor)
    with pytest.raises(InvalidTransition):
        proposal_reject(proposal_id=proposal.pk, actor=reviewer_actor)


def test_reject_records_the_decision_and_changes_no_record(write, reviewer, reviewer_actor):
    proposal, records = propose(write, EMAIL, EMAIL_AGAIN)
    rejected = proposal_reject(proposal_id=proposal.pk, actor=reviewer_actor, note="two different contacts")
    assert (rejected.status, rejected.decided_by, rejected.decision_note) == ("rejected", reviewer, "two different contacts")
    for record in records:
        record.refresh_from_db()
        assert (record.status, record.version, len(history_of(record))) == (Status.ACTIVE, 1, 1)
    with pytest.raises(InvalidTransition):
        proposal_rollback(proposal_id=proposal.pk, actor=reviewer_actor)


def test_rollback_restores_the_dropped_records_and_the_regret_rate_counts_it(write, reviewer_actor):
    assert regret_counts(actor=reviewer_actor).rate is None
    first, _ = propose(write, EMAIL, EMAIL_AGAIN, subject="customer/one")
    second, _ = propose(write, EMAIL, EMAIL_LOWER, subject="customer/two")
    proposal_accept(proposal_id=first.pk, actor=reviewer_actor)
    proposal_accept(proposal_id=second.pk, actor=reviewer_actor)
    assert regret_counts(actor=reviewer_actor).rate == 0.0

    outcome = proposal_rollback(proposal_id=first.pk, actor=reviewer_actor, note="they differ after all")

    drop = MemoryRecord.objects.get(pk=first.drops.get().record_id)
    assert outcome.restored == [drop.pk] and outcome.not_restored == {}
    assert (drop.status, drop.version) == (Status.ACTIVE, 3)
    last = history_of(drop)[-1]
    assert last.history_change_reason == "review.restore"
    assert str(first.pk) in last.history_note and "they differ after all" in last.history_note
    first.refresh_from_db()
    assert first.status == "rolled_back" and first.rolled_back_at is not None
    assert regret_counts(actor=reviewer_actor) == regret_counts(actor=None)
    counts = regret_counts(actor=reviewer_actor)
    assert (counts.accepted, counts.rolled_back, counts.rate) == (2, 1, 0.5)
    with pytest.raises(InvalidTransition):
        proposal_rollback(proposal_id=first.pk, actor=reviewer_actor)


def test_rollback_leaves_forgotten_and_expired_records_as_they_are(write, credential, reviewer_actor):
    forgotten_case, _ = propose(write, EMAIL, EMAIL_AGAIN, subject="customer/erased")
    expired_case, _ = propose(write, EMAIL, EMAIL_LOWER, subject="customer/brief")
    proposal_accept(proposal_id=forgotten_case.pk, actor=reviewer_actor)
    proposal_accept(proposal_id=expired_case.pk, actor=reviewer_actor)
    forget_request_create(actor=Actor.for_credential(credential), tenant=credential.agent.tenant, subject="customer/erased")
    # Time passes: the second group's records reach their expiry (a clock, not a transition).
    MemoryRecord.objects.filter(subject="customer/brief").update(expires_at=F("created_at") + timedelta(microseconds=1))

    forgotten_outcome = proposal_rollback(proposal_id=forgotten_case.pk, actor=reviewer_actor)
    expired_outcome = proposal_rollback(proposal_id=expired_case.pk, actor=reviewer_actor)

    forgotten_drop = forgotten_case.drops.get().record_id
    expired_drop = expired_case.drops.get().record_id
    assert forgotten_outcome.restored == [] and forgotten_outcome.not_restored == {forgotten_drop: "forgotten"}
    assert expired_outcome.restored == [] and expired_outcome.not_restored == {expired_drop: "expired"}
    assert MemoryRecord.objects.get(pk=forgotten_drop).status == Status.FORGOTTEN
    assert MemoryRecord.objects.get(pk=expired_drop).status == Status.SUPERSEDED
    # the decision is undone all the same, and counts as regret
    assert regret_counts(actor=reviewer_actor).rolled_back == 2


def test_only_reviewers_of_the_tenant_may_decide(write, credential, other_tenant, make_reviewer):
    proposal, _ = propose(write, EMAIL, EMAIL_AGAIN)
    outsider = Actor.for_user(make_reviewer(other_tenant, username="olga"))
    for decide in (proposal_accept, proposal_reject, proposal_rollback):
        with pytest.raises(RecordNotFound):
            decide(proposal_id=proposal.pk, actor=outsider)
    with pytest.raises(RecordNotFound):
        proposal_accept(proposal_id="not-a-uuid", actor=outsider)
    for machine in (Actor.for_credential(credential), Actor.job("propose_duplicates")):
        with pytest.raises(ScopeDenied):
            proposal_accept(proposal_id=proposal.pk, actor=machine)
    assert list(proposal_queue(outsider)) == []
    assert regret_counts(actor=outsider).accepted == 0
    proposal.refresh_from_db()
    assert proposal.status == "open"


def test_a_note_that_is_too_long_is_refused_before_anything_changes(write, reviewer_actor):
    proposal, _ = propose(write, EMAIL, EMAIL_AGAIN)
    with pytest.raises(ValidationFailed):
        proposal_accept(proposal_id=proposal.pk, actor=reviewer_actor, note="x" * 501)
    proposal.refresh_from_db()
    assert proposal.status == "open"


def test_notes_at_the_limit_are_kept_whole_through_accept_and_rollback(write, reviewer_actor):
    """Each note fits the record's history note (after its prefix) and the proposal's decision note
    (after the acceptance's own): nothing is ever cut short."""
    from governance.dedup.services import DECISION_NOTE_MAX_CHARS

    proposal, _ = propose(write, EMAIL, EMAIL_AGAIN)
    accepted_note, rollback_note = "a" * DECISION_NOTE_MAX_CHARS, "r" * DECISION_NOTE_MAX_CHARS
    proposal_accept(proposal_id=proposal.pk, actor=reviewer_actor, note=accepted_note)
    proposal_rollback(proposal_id=proposal.pk, actor=reviewer_actor, note=rollback_note)
    proposal.refresh_from_db()
    assert accepted_note in proposal.decision_note and rollback_note in proposal.decision_note
    notes = MemoryRecord.history.filter(id__in=[d.record_id for d in proposal.drops.all()]).values_list("history_note", flat=True)
    assert any(note.endswith(accepted_note) for note in notes) and any(note.endswith(rollback_note) for note in notes)


# --- memory_supersede_by ------------------------------------------------------------------------


def test_supersede_by_is_compare_and_swap_with_one_history_row(write, reviewer_actor):
    old, new = write(content=EMAIL), write(content=EMAIL_AGAIN)
    with pytest.raises(StaleVersion):
        memory_supersede_by(record_id=old.pk, expected_version=2, by_record_id=new.pk, actor=reviewer_actor)
    result = memory_supersede_by(
        record_id=old.pk, expected_version=1, by_record_id=new.pk, actor=reviewer_actor, note="same claim", action="dedup_accept"
    )
    assert (result.status, result.version) == (Status.SUPERSEDED, 2)
    rows = history_of(result)
    assert [row.history_change_reason for row in rows] == ["write.active", "review.dedup_accept"]
    assert rows[-1].history_note == f"Superseded by {new.pk}. same claim"
    new.refresh_from_db()
    assert (new.status, new.version, new.supersedes_id) == (Status.ACTIVE, 1, None)


def test_supersede_by_refuses_inactive_foreign_or_self_replacements(write, tenant, make_credential, reviewer_actor, credential):
    record, replacement = write(content=EMAIL), write(content=EMAIL_AGAIN)
    quarantined = write(content=EMAIL_LOWER, authority="agent", provenance={"source_type": "agent_inference"})
    other_purpose = write(make_credential(tenant, purposes=("billing",)), content=EMAIL, purpose="billing")
    cases = [
        (quarantined.pk, InvalidTransition),  # the replacement must be active
        (other_purpose.pk, InvalidTransition),  # and of the same agent and purpose
        (record.pk, InvalidTransition),  # and not the record itself
    ]
    for by_record_id, error in cases:
        with pytest.raises(error):
            memory_supersede_by(record_id=record.pk, expected_version=1, by_record_id=by_record_id, actor=reviewer_actor)
    with pytest.raises(ScopeDenied):
        memory_supersede_by(
            record_id=record.pk, expected_version=1, by_record_id=replacement.pk, actor=Actor.for_credential(credential)
        )
    record.refresh_from_db()
    assert (record.status, record.version) == (Status.ACTIVE, 1)
