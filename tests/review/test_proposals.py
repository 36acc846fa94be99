"""Dedup proposals in the reviewer UI through Django's test client: the list (oldest first,
filters, pagination, regret rate), the side-by-side page (differences highlighted, provenance,
nothing applied on GET), accept / reject / rollback through the services with their history rows,
a proposal over records that moved on, scope (404 outside the reviewer's tenants), bad input,
superseded sources of a summary on the memory page and the quarantine row, and query counts."""

import re
import uuid

import pytest
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from governance.dedup.jobs import propose_duplicates
from governance.dedup.services import DECISION_NOTE_MAX_CHARS, proposal_accept
from governance.forget.services import forget_request_create
from governance.models import DedupProposal, DedupProposalDrop
from governed_memory.signing import generate_private_key
from memory.actors import Actor
from memory.models import MemoryRecord, Status
from memory.services import memory_confirm, memory_write
from tests.signed_support import crm_claim, register_crm

pytestmark = pytest.mark.django_db

PROPOSALS = reverse("review:proposals")
EMAIL = "The customer prefers to be contacted by email."
EMAIL_AGAIN = "Customer prefers being contacted via email."
PHONE = "The customer prefers to be contacted by phone."
SUMMARY = {"authority": "agent", "provenance": {"source_type": "agent_inference"}}


def propose(write, *contents, subject="customer/acme", credential=None, **overrides) -> DedupProposal:
    """Write the records through the service and run the proposal job: the one open proposal."""
    for content in contents:
        write(credential, content=content, subject=subject, **overrides)
    propose_duplicates(now=timezone.now(), batch_size=500)
    return DedupProposal.objects.get(subject=subject, status="open")


def detail_url(proposal) -> str:
    return reverse("review:proposal_detail", args=[proposal.pk])


def decide_url(proposal, action: str) -> str:
    return reverse("review:proposal_decide", args=[proposal.pk, action])


def texts(response) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def last_history(record_id):
    return MemoryRecord.history.filter(id=record_id).order_by("-history_date", "-history_id").first()


def snapshot() -> dict:
    """Every record's status, version and history length, and every proposal's status."""
    records = {r.pk: (r.status, r.version, r.history.count()) for r in MemoryRecord.objects.all()}
    return {"records": records, "proposals": dict(DedupProposal.objects.values_list("pk", "status"))}


def drop_id(proposal):
    return proposal.drops.get().record_id


# --- access and scope ----------------------------------------------------------------------------


def test_anonymous_user_is_sent_to_login(client, write):
    proposal = propose(write, EMAIL, EMAIL_AGAIN)
    for url in (PROPOSALS, detail_url(proposal)):
        response = client.get(url)
        assert (response.status_code, response["Location"]) == (302, f"{reverse('login')}?next={url}")
    response = client.post(decide_url(proposal, "accept"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    assert DedupProposal.objects.get(pk=proposal.pk).status == "open"


def test_another_tenants_proposal_is_404_by_url_and_by_post(reviewer_client, other_tenant, make_credential, write):
    theirs = propose(write, EMAIL, EMAIL_AGAIN, credential=make_credential(other_tenant))
    before = snapshot()
    assert reviewer_client.get(detail_url(theirs)).status_code == 404
    for action in ("accept", "reject", "rollback"):
        assert reviewer_client.post(decide_url(theirs, action), {"note": "x"}).status_code == 404
    assert snapshot() == before
    assert str(theirs.pk) not in reviewer_client.get(PROPOSALS, {"status": "all"}).content.decode()


def test_unknown_proposal_and_unknown_action_are_404(reviewer_client, write):
    proposal = propose(write, EMAIL, EMAIL_AGAIN)
    assert reviewer_client.get(reverse("review:proposal_detail", args=[uuid.uuid4()])).status_code == 404
    assert reviewer_client.post(reverse("review:proposal_decide", args=[uuid.uuid4(), "accept"])).status_code == 404
    assert reviewer_client.post(decide_url(proposal, "merge")).status_code == 404
    assert DedupProposal.objects.get(pk=proposal.pk).status == "open"


def test_get_never_decides_and_post_needs_the_csrf_token(reviewer, reviewer_client, write):
    proposal = propose(write, EMAIL, EMAIL_AGAIN)
    before = snapshot()
    assert reviewer_client.get(detail_url(proposal)).status_code == 200
    for action in ("accept", "reject", "rollback"):
        assert reviewer_client.get(decide_url(proposal, action)).status_code == 405
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(reviewer)
    assert strict.post(decide_url(proposal, "accept")).status_code == 403
    assert snapshot() == before


# --- list ----------------------------------------------------------------------------------------


def test_list_shows_open_proposals_oldest_first_with_the_regret_rate(reviewer_client, write, reviewer_actor):
    first = propose(write, EMAIL, EMAIL_AGAIN, subject="customer/one")
    second = propose(write, EMAIL, PHONE, subject="customer/two")
    DedupProposal.objects.filter(pk=second.pk).update(created_at=first.created_at - timezone.timedelta(hours=1))
    decided = propose(write, EMAIL, EMAIL_AGAIN, subject="customer/three")
    proposal_accept(proposal_id=decided.pk, actor=reviewer_actor)

    response = reviewer_client.get(PROPOSALS)
    assert [p.pk for p in response.context["page"].object_list] == [second.pk, first.pk]  # oldest first, open only
    page = response.content.decode()
    assert 'aria-current="page">Proposals</a>' in page
    assert re.search(r'Regret rate:</strong> <span class="regret-value">0\.0%</span>', page)
    assert "0 of 1 accepted proposal rolled back" in page
    assert "conflict" in page and "duplicate" in page


def test_list_filters_by_status_and_category(reviewer_client, write, reviewer_actor):
    duplicate = propose(write, EMAIL, EMAIL_AGAIN, subject="customer/one")
    conflict = propose(write, EMAIL, PHONE, subject="customer/two")
    accepted = propose(write, EMAIL, EMAIL_AGAIN, subject="customer/three")
    proposal_accept(proposal_id=accepted.pk, actor=reviewer_actor)

    def listed(**params):
        return {p.pk for p in reviewer_client.get(PROPOSALS, params).context["page"].object_list}

    assert listed(category="conflict") == {conflict.pk}
    assert listed(category="duplicate") == {duplicate.pk}
    assert listed(status="accepted") == {accepted.pk}
    assert listed(status="all") == {duplicate.pk, conflict.pk, accepted.pk}
    assert listed(status="rejected") == set()


def test_an_invalid_filter_says_so_and_lists_nothing(reviewer_client, write):
    propose(write, EMAIL, EMAIL_AGAIN)
    response = reviewer_client.get(PROPOSALS, {"status": "merged"})
    assert response.status_code == 200
    assert list(response.context["page"].object_list) == []
    assert "This filter is not valid" in response.content.decode()


def test_list_is_paginated(reviewer_client, write):
    for n in range(27):
        write(content=EMAIL, subject=f"customer/{n:02}")
        write(content=EMAIL_AGAIN, subject=f"customer/{n:02}")
    propose_duplicates(now=timezone.now(), batch_size=500)
    first = reviewer_client.get(PROPOSALS).context["page"]
    second = reviewer_client.get(PROPOSALS, {"page": 2}).context["page"]
    assert (first.paginator.count, len(first.object_list), len(second.object_list)) == (27, 25, 2)
    assert not {p.pk for p in first.object_list} & {p.pk for p in second.object_list}


def test_the_home_tile_and_the_nav_link_to_the_proposals(reviewer_client, write):
    propose(write, EMAIL, EMAIL_AGAIN)
    response = reviewer_client.get(reverse("review:home"))
    tiles = {queue["name"]: queue for queue in response.context["queues"]}
    assert (tiles["Dedup proposals"]["url"], tiles["Dedup proposals"]["size"]) == (PROPOSALS, 1)
    assert f'href="{PROPOSALS}"' in response.content.decode()


# --- detail --------------------------------------------------------------------------------------


def test_detail_shows_both_sides_with_the_difference_highlighted_and_their_provenance(
    reviewer_client, write, tenant, make_credential
):
    operator = make_credential(tenant, can_assert_operator=True)  # the same agent, allowed operator claims
    write(
        operator,
        content=EMAIL,
        authority="operator",
        provenance={"source_type": "operator_config", "uri": "config://acme/contact", "session_id": "", "turn_id": ""},
    )
    write(content=PHONE, provenance={"uri": "chat://session/s-9#turn-4", "session_id": "s-9", "turn_id": "4"})
    proposal = propose(write)  # the two records above contradict: a conflict proposal
    response = reviewer_client.get(detail_url(proposal))
    page = response.content.decode()
    assert response.context["proposal"].category == "conflict"
    # the operator's setting outranks the user's claim: kept; the differing word is marked on each side
    assert MemoryRecord.objects.get(pk=proposal.keep_id).content == EMAIL
    marks = re.findall(r'<mark class="diff">([^<]*)</mark>', page)
    assert "email." in marks and "phone." in marks
    assert not any("customer" in mark for mark in marks)
    for fact in (
        "config://acme/contact",
        "operator_config",
        "chat://session/s-9#turn-4",
        "s-9 / 4",
        "user_turn",
        proposal.method,
        f"{proposal.similarity:.2f}",
        "Conflict · preference · customer/acme",
    ):
        assert fact in page, fact
    assert page.count('data-role="drop"') == 1 and page.count('data-role="keep"') == 1
    assert ">Accept</button>" in page and ">Reject</button>" in page and "Keep this one instead" in page
    assert "Roll back</button>" not in page


def test_a_forgotten_members_content_is_never_shown(reviewer_client, write, reviewer_actor, credential, tenant):
    proposal = propose(write, EMAIL, EMAIL_AGAIN)
    proposal_accept(proposal_id=proposal.pk, actor=reviewer_actor)
    forget_request_create(actor=Actor.for_credential(credential), tenant=tenant, subject="customer/acme")
    page = reviewer_client.get(detail_url(proposal)).content.decode()
    assert EMAIL not in page and EMAIL_AGAIN not in page
    assert "This memory is forgotten" in page


# --- decisions -----------------------------------------------------------------------------------


def test_accept_then_rollback_through_the_page_with_history_rows_and_the_regret_rate(reviewer_client, reviewer, write):
    proposal = propose(write, EMAIL, EMAIL_AGAIN)
    dropped = drop_id(proposal)

    response = reviewer_client.post(decide_url(proposal, "accept"), {"note": "same preference"}, follow=True)
    assert response.redirect_chain[-1][0] == detail_url(proposal)
    assert any("accepted: 1 memory superseded" in text for text in texts(response))
    record = MemoryRecord.objects.get(pk=dropped)
    assert (record.status, record.version) == (Status.SUPERSEDED, 2)
    row = last_history(dropped)
    assert (row.history_change_reason, row.history_user, row.history_actor) == ("review.dedup_accept", reviewer, "user:rita")
    assert "same preference" in row.history_note and str(proposal.keep_id) in row.history_note
    page = response.content.decode()
    assert "Roll back</button>" in page and ">Accept</button>" not in page
    assert "0 of 1 accepted proposal rolled back" in page

    response = reviewer_client.post(decide_url(proposal, "rollback"), {"note": "they differ"}, follow=True)
    assert any("rolled back: 1 memory active again" in text for text in texts(response))
    record.refresh_from_db()
    assert (record.status, record.version) == (Status.ACTIVE, 3)
    row = last_history(dropped)
    assert (row.history_change_reason, row.history_user) == ("review.restore", reviewer)
    assert "they differ" in row.history_note
    assert DedupProposal.objects.get(pk=proposal.pk).status == "rolled_back"
    assert '<span class="regret-value">100.0%</span>' in reviewer_client.get(PROPOSALS).content.decode()


def test_keep_this_one_instead_keeps_the_other_member(reviewer_client, write):
    proposal = propose(write, EMAIL, PHONE)
    suggested, other = proposal.keep_id, drop_id(proposal)
    response = reviewer_client.post(decide_url(proposal, "accept"), {"keep": str(other), "note": "phone is current"})
    assert response.status_code == 302
    assert MemoryRecord.objects.get(pk=other).status == Status.ACTIVE
    assert MemoryRecord.objects.get(pk=suggested).status == Status.SUPERSEDED
    assert DedupProposal.objects.get(pk=proposal.pk).keep_id == other


def test_reject_records_the_decision_and_changes_no_record(reviewer_client, reviewer, write):
    proposal = propose(write, EMAIL, EMAIL_AGAIN)
    records_before = snapshot()["records"]
    response = reviewer_client.post(decide_url(proposal, "reject"), {"note": "two different contacts"})
    assert any("rejected: no memory was changed" in text for text in texts(response))
    proposal.refresh_from_db()
    assert (proposal.status, proposal.decided_by, proposal.decision_note) == ("rejected", reviewer, "two different contacts")
    assert snapshot()["records"] == records_before


def test_a_proposal_over_records_that_moved_on_is_refused_and_shows_them_fresh(reviewer_client, write, credential):
    proposal = propose(write, EMAIL, EMAIL_AGAIN)
    dropped = drop_id(proposal)
    assert ">Accept</button>" in reviewer_client.get(detail_url(proposal)).content.decode()
    # after the page loaded, the agent re-checks one of the records against its source
    memory_confirm(record_id=dropped, expected_version=1, actor=Actor.for_credential(credential))
    before = snapshot()

    response = reviewer_client.post(decide_url(proposal, "accept"), {"note": "dup"}, follow=True)

    assert snapshot() == before  # nothing merged, the proposal stays open
    (warning,) = texts(response)
    assert warning.startswith("Not applied:") and "stays open" in warning
    page = response.content.decode()
    assert 'id="stale-notice"' in page
    moved = re.search(rf'<li id="moved-{dropped}">(.*?)</li>', page, re.S).group(1)
    assert "proposed at version 1" in moved and "version 2" in moved and "agent.confirm" in moved
    assert ">Accept</button>" not in page and "Keep this one instead" not in page
    assert ">Reject</button>" in page  # the reviewer can still close it
    assert "records changed" in reviewer_client.get(PROPOSALS).content.decode()


def test_a_proposal_decided_meanwhile_is_not_decided_again(reviewer_client, write, tenant, make_reviewer):
    proposal = propose(write, EMAIL, EMAIL_AGAIN)
    proposal_accept(proposal_id=proposal.pk, actor=Actor.for_user(make_reviewer(tenant, username="otto")))
    before = snapshot()
    response = reviewer_client.post(decide_url(proposal, "reject"))
    assert any("Cannot reject a proposal that is accepted" in text for text in texts(response))
    assert snapshot() == before


def test_rollback_reports_a_dropped_record_forgotten_since(reviewer_client, write, reviewer_actor, credential, tenant):
    proposal = propose(write, EMAIL, EMAIL_AGAIN)
    proposal_accept(proposal_id=proposal.pk, actor=reviewer_actor)
    forget_request_create(actor=Actor.for_credential(credential), tenant=tenant, subject="customer/acme")
    response = reviewer_client.post(decide_url(proposal, "rollback"))
    messages_ = texts(response)
    assert any("0 memories active again" in text for text in messages_)
    assert any(f"Memory {str(drop_id(proposal))[:8]} was not restored: it was forgotten since." == text for text in messages_)
    assert MemoryRecord.objects.get(pk=drop_id(proposal)).status == Status.FORGOTTEN


@pytest.mark.parametrize(
    "data, problem",
    [
        (
            {"note": "x" * (DECISION_NOTE_MAX_CHARS + 1)},
            f"Note: Ensure this value has at most {DECISION_NOTE_MAX_CHARS} characters",
        ),
        ({"keep": "not-a-uuid"}, "Keep: Enter a valid UUID."),
        ({"keep": str(uuid.UUID(int=7))}, "must be one of the proposal's records"),
    ],
)
def test_bad_decision_input_gets_a_message_and_changes_nothing(reviewer_client, write, data, problem):
    proposal = propose(write, EMAIL, EMAIL_AGAIN)
    before = snapshot()
    response = reviewer_client.post(decide_url(proposal, "accept"), data)
    assert response.status_code == 302
    (message,) = texts(response)
    assert problem in message and "Nothing was applied" in message
    assert snapshot() == before


def test_next_cannot_leave_the_site(reviewer_client, write):
    proposal = propose(write, EMAIL, EMAIL_AGAIN)
    response = reviewer_client.post(decide_url(proposal, "reject"), {"next": "https://evil.example/"})
    assert response["Location"] == detail_url(proposal)
    proposal = propose(write, EMAIL, EMAIL_AGAIN, subject="customer/two")
    response = reviewer_client.post(decide_url(proposal, "reject"), {"next": f"{PROPOSALS}?status=open"})
    assert response["Location"] == f"{PROPOSALS}?status=open"


# --- lineage: superseded sources of a summary -----------------------------------------------------


def test_memory_page_and_quarantine_row_warn_about_superseded_sources(reviewer_client, write, reviewer_actor):
    first, second = write(content=EMAIL), write(content=EMAIL_AGAIN)
    summary = write(content="Contact: email.", derived_from=[str(first.pk), str(second.pk)], **SUMMARY)
    untouched = write(content="Acme has two offices.", derived_from=[str(first.pk)], subject="customer/acme", **SUMMARY)
    page = reviewer_client.get(reverse("review:memory_detail", args=[summary.pk])).content.decode()
    assert "Sources superseded" not in page

    propose_duplicates(now=timezone.now(), batch_size=100)
    proposal = DedupProposal.objects.get(category="duplicate")
    proposal_accept(proposal_id=proposal.pk, actor=reviewer_actor)
    dropped = drop_id(proposal)

    page = reviewer_client.get(reverse("review:memory_detail", args=[summary.pk])).content.decode()
    assert "Sources superseded" in page and "1 record that has been superseded" in page
    assert reverse("review:memory_detail", args=[dropped]) in page
    queue = reviewer_client.get(reverse("review:quarantine")).content.decode()
    summary_row = re.search(rf'data-record="{summary.pk}">(.*?)</li>', queue, re.S).group(1)
    assert "sources superseded" in summary_row and str(dropped)[:8] in summary_row
    untouched_row = re.search(rf'data-record="{untouched.pk}">(.*?)</li>', queue, re.S).group(1)
    assert ("sources superseded" in untouched_row) == (dropped == first.pk)


# --- query counts --------------------------------------------------------------------------------


def _queries_for(client, url, params=None) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url, params or {}).status_code == 200
    return len(captured)


def test_proposal_pages_use_a_constant_number_of_queries(reviewer_client, write, reviewer_actor):
    def fill(start, count):
        for n in range(start, start + count):
            subject = f"customer/{n:03}"
            sources = [write(content=content, subject=subject) for content in (EMAIL, EMAIL_AGAIN, EMAIL.lower())]
            write(content=f"Summary {n}.", subject=subject, derived_from=[str(r.pk) for r in sources], **SUMMARY)
        propose_duplicates(now=timezone.now(), batch_size=500)
        # one decided proposal per batch, so some summaries show superseded sources
        latest = DedupProposal.objects.filter(status="open").order_by("-created_at").first()
        proposal_accept(proposal_id=latest.pk, actor=reviewer_actor)

    def counts():
        proposal = DedupProposal.objects.order_by("created_at").first()
        return (
            _queries_for(reviewer_client, PROPOSALS),
            _queries_for(reviewer_client, PROPOSALS, {"status": "all"}),
            _queries_for(reviewer_client, detail_url(proposal)),
            _queries_for(reviewer_client, reverse("review:quarantine")),
        )

    fill(0, 3)
    small = counts()
    fill(3, 22)
    assert DedupProposal.objects.count() == 25
    assert DedupProposalDrop.objects.count() == 50
    large = counts()
    assert large == small


def test_a_proposal_of_signed_records_costs_the_same_for_2_or_5_members(reviewer_client, credential, tenant):
    key = generate_private_key()
    register_crm(tenant, key)

    def detail_queries(members: int, subject: str) -> int:
        for n in range(members):
            body = crm_claim(key, content="Acme's billing contact is Dana Reyes.", subject=subject, version=f"{subject}@v{n}")
            assert memory_write(credential=credential, data=body).record.provenance_verified
        propose_duplicates(now=timezone.now(), batch_size=100)
        proposal = DedupProposal.objects.get(status="open", subject=subject)
        assert proposal.drops.count() == members - 1
        page = reviewer_client.get(detail_url(proposal)).content.decode()
        assert page.count('data-provenance="verified"') == 2 * (members - 1)  # the kept card beside each dropped one
        return _queries_for(reviewer_client, detail_url(proposal))

    assert detail_queries(2, "customer/acme") == detail_queries(5, "customer/zed")
