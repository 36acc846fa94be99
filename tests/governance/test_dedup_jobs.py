"""The propose_duplicates job against the database: scope boundaries, only active unexpired
records, what a proposal records, idempotence (signatures), deferral behind an open proposal,
no re-proposal after a rollback, chunking, and a bounded number of queries."""

from datetime import timedelta

import pytest
from django.utils import timezone

from governance.dedup import jobs
from governance.dedup.detect import proposal_signature
from governance.dedup.jobs import propose_duplicates
from governance.dedup.services import proposal_accept, proposal_reject, proposal_rollback
from governance.models import DedupProposal
from memory.models import MemoryRecord
from memory.services import memory_confirm, memory_write
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db

EMAIL = "The customer prefers to be contacted by email."
EMAIL_AGAIN = "Customer prefers being contacted via email."
PHONE = "The customer prefers to be contacted by phone."


def members(proposal: DedupProposal) -> set:
    return {proposal.keep_id, *proposal.drops.values_list("record_id", flat=True)}


def test_a_duplicate_pair_becomes_one_proposal_that_names_records_versions_method_and_scope(write, credential):
    first = write(content=EMAIL)
    second = write(content=EMAIL_AGAIN)

    counts = propose_duplicates(now=timezone.now(), batch_size=100)

    assert counts["records"] == 2 and counts["scopes"] == 1 and counts["duplicate_proposals"] == 1
    proposal = DedupProposal.objects.get()
    assert (proposal.category, proposal.method, proposal.status) == ("duplicate", "token_similarity", "open")
    assert 0.6 <= proposal.similarity <= 1
    assert members(proposal) == {first.pk, second.pk}
    assert (proposal.tenant_id, proposal.agent_id, proposal.purpose, proposal.subject, proposal.kind.name) == (
        credential.agent.tenant_id,
        credential.agent_id,
        "support",
        "customer/acme",
        "preference",
    )
    drop = proposal.drops.get()
    assert proposal.keep_version == 1 and drop.version == 1
    assert proposal.signature == proposal_signature([(first.pk, 1), (second.pk, 1)])
    # the job changed no record
    assert set(MemoryRecord.objects.values_list("status", "version")) == {("active", 1)}


def test_records_in_different_scopes_are_never_grouped(write, tenant, other_tenant, make_credential):
    write(content=EMAIL)
    write(content=EMAIL, subject="customer/globex")  # another subject
    write(content=EMAIL, kind="semantic")  # another kind
    write(make_credential(tenant, agent_slug="sales-bot"), content=EMAIL)  # another agent
    write(make_credential(tenant, agent_slug="billing-bot", purposes=("billing",)), content=EMAIL, purpose="billing")
    write(make_credential(other_tenant), content=EMAIL)  # another tenant

    counts = propose_duplicates(now=timezone.now(), batch_size=2)

    assert counts["scopes"] == 6 and counts["records"] == 6
    assert not DedupProposal.objects.exists()


def test_only_active_unexpired_records_are_considered(write):
    active = write(content=EMAIL, ttl_seconds=3600)
    write(content=EMAIL, authority="agent", provenance={"source_type": "agent_inference"})  # quarantined
    assert propose_duplicates(now=timezone.now(), batch_size=100)["records"] == 1

    write(content=EMAIL, ttl_seconds=7200)
    later = timezone.now() + timedelta(hours=1, minutes=1)  # the first record is past its expiry by then
    assert propose_duplicates(now=later, batch_size=100)["records"] == 1
    assert not DedupProposal.objects.exists()
    assert active.pk in set(MemoryRecord.objects.filter(status="active").values_list("pk", flat=True))


def test_a_contradiction_becomes_a_conflict_proposal_not_a_duplicate(write):
    email = write(content=EMAIL)
    phone = write(content=PHONE)
    counts = propose_duplicates(now=timezone.now(), batch_size=100)
    assert (counts["duplicate_proposals"], counts["conflict_proposals"]) == (0, 1)
    proposal = DedupProposal.objects.get()
    assert (proposal.category, proposal.method) == ("conflict", "contradiction_exclusive")
    assert members(proposal) == {email.pk, phone.pk}


def test_swapped_alternatives_become_a_conflict_proposal_never_a_duplicate(write):
    email_over_phone = write(content="Prefers email over phone.")
    phone_over_email = write(content="Prefers phone over email.")
    counts = propose_duplicates(now=timezone.now(), batch_size=100)
    assert (counts["duplicate_proposals"], counts["conflict_proposals"]) == (0, 1)
    proposal = DedupProposal.objects.get()
    assert (proposal.category, proposal.method) == ("conflict", "contradiction_order")
    assert members(proposal) == {email_over_phone.pk, phone_over_email.pk}


def test_the_keep_choice_prefers_operator_authority(tenant, make_credential, write):
    operator = make_credential(tenant, agent_slug="support-bot", can_assert_operator=True)
    user_copy = write(content=EMAIL)
    operator_copy = memory_write(
        credential=operator,
        data=memory_body(content=EMAIL_AGAIN, authority="operator", provenance={"source_type": "operator_config"}),
    ).record
    propose_duplicates(now=timezone.now(), batch_size=100)
    proposal = DedupProposal.objects.get()
    assert proposal.keep_id == operator_copy.pk
    assert proposal.drops.get().record_id == user_copy.pk


def test_rerunning_proposes_nothing_new_and_a_rejected_group_stays_rejected(write, reviewer_actor):
    write(content=EMAIL)
    write(content=EMAIL_AGAIN)
    propose_duplicates(now=timezone.now(), batch_size=100)
    again = propose_duplicates(now=timezone.now(), batch_size=100)
    assert (again["duplicate_proposals"], again["already_proposed"]) == (0, 1)

    proposal_reject(proposal_id=DedupProposal.objects.get().pk, actor=reviewer_actor, note="different contexts")
    after_reject = propose_duplicates(now=timezone.now(), batch_size=100)
    assert (after_reject["duplicate_proposals"], after_reject["already_proposed"]) == (0, 1)
    assert DedupProposal.objects.count() == 1


def test_a_changed_record_makes_its_group_a_new_proposal(write, reviewer_actor):
    first = write(content=EMAIL)
    write(content=EMAIL_AGAIN)
    propose_duplicates(now=timezone.now(), batch_size=100)
    old = DedupProposal.objects.get()
    proposal_reject(proposal_id=old.pk, actor=reviewer_actor)

    memory_confirm(record_id=first.pk, expected_version=1, actor=reviewer_actor)  # version 2 now
    counts = propose_duplicates(now=timezone.now(), batch_size=100)

    assert counts["duplicate_proposals"] == 1
    new = DedupProposal.objects.exclude(pk=old.pk).get()
    assert members(new) == members(old) and new.signature != old.signature
    assert new.keep_id == first.pk and new.keep_version == 2  # now verified, so kept


@pytest.mark.parametrize("in_list_size", [1000, 1])  # 1: every id lookup split into slices
def test_a_new_copy_waits_while_an_open_proposal_holds_its_group(write, reviewer_actor, monkeypatch, in_list_size):
    monkeypatch.setattr(jobs, "IN_LIST_SIZE", in_list_size)
    first = write(content=EMAIL)
    second = write(content=EMAIL_AGAIN)
    propose_duplicates(now=timezone.now(), batch_size=100)
    open_proposal = DedupProposal.objects.get()
    third = write(content="the customer prefers to be contacted by email")

    counts = propose_duplicates(now=timezone.now(), batch_size=100)
    assert (counts["duplicate_proposals"], counts["deferred"]) == (0, 1)

    proposal_accept(proposal_id=open_proposal.pk, actor=reviewer_actor)
    counts = propose_duplicates(now=timezone.now(), batch_size=100)
    assert counts["duplicate_proposals"] == 1
    follow_up = DedupProposal.objects.exclude(pk=open_proposal.pk).get()
    survivor = open_proposal.keep_id
    assert members(follow_up) == {survivor, third.pk}
    assert survivor in {first.pk, second.pk}


def test_a_rolled_back_group_is_not_proposed_again(write, reviewer_actor):
    write(content=EMAIL)
    write(content=EMAIL_AGAIN)
    propose_duplicates(now=timezone.now(), batch_size=100)
    proposal = DedupProposal.objects.get()
    proposal_accept(proposal_id=proposal.pk, actor=reviewer_actor)
    proposal_rollback(proposal_id=proposal.pk, actor=reviewer_actor, note="they were different contracts")

    counts = propose_duplicates(now=timezone.now(), batch_size=100)
    assert (counts["duplicate_proposals"], counts["already_proposed"]) == (0, 1)
    assert DedupProposal.objects.count() == 1


def _many_scopes(write) -> None:
    for n in range(12):
        subject = f"customer/c{n}"
        write(content=EMAIL, subject=subject)
        write(content=EMAIL_AGAIN, subject=subject)
        write(content=f"Customer {n} renews in March.", subject=subject)
        if n % 3 == 0:
            write(content=PHONE, subject=subject)


def test_small_chunks_find_the_same_proposals_as_one_big_chunk(write):
    _many_scopes(write)
    small = propose_duplicates(now=timezone.now(), batch_size=5)  # scopes straddle chunk boundaries
    small_signatures = set(DedupProposal.objects.values_list("signature", flat=True))
    DedupProposal.objects.all().delete()
    big = propose_duplicates(now=timezone.now(), batch_size=10_000)

    assert set(DedupProposal.objects.values_list("signature", flat=True)) == small_signatures
    assert small["records"] == big["records"] == 40
    assert small["scopes"] == big["scopes"] == 12
    assert (big["duplicate_proposals"], big["conflict_proposals"]) == (12, 4)


def test_the_job_runs_in_a_bounded_number_of_queries(write, django_assert_max_num_queries):
    _many_scopes(write)
    # one chunk: the fetch, known signatures, open/rolled-back proposals (+ their drops), then one
    # transaction inserting proposals and drops. Not one query per scope or per record.
    with django_assert_max_num_queries(10):
        counts = propose_duplicates(now=timezone.now(), batch_size=10_000)
    assert counts["duplicate_proposals"] == 12


def test_keyset_pages_of_one_row_walk_every_active_record_once_in_scope_order(write, tenant, other_tenant, make_credential):
    # rows that tie on each leading order field in turn, so every branch of the keyset filter
    # (tenant, agent, purpose, subject, kind, content hash, id) decides some page boundary
    sales = make_credential(tenant, agent_slug="sales-bot", purposes=("support", "billing"))
    for content in (EMAIL, EMAIL, PHONE):
        write(content=content)
        write(content=content, subject="customer/globex")
        write(content=content, kind="semantic")
        write(sales, content=content)
        write(sales, content=content, purpose="billing")
        write(make_credential(other_tenant), content=content)

    now = timezone.now()
    paged = [row for rows, _ in jobs._active_row_chunks(now=now, batch_size=1) for row in rows]
    ((everything, last),) = jobs._active_row_chunks(now=now, batch_size=10_000)

    assert last and len(everything) == 18
    assert paged == everything  # same rows, same order, none twice, none skipped
    assert len({row[jobs._ORDER_WIDTH - 1] for row in paged}) == 18
