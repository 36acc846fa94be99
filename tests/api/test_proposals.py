"""Dedup proposals over HTTP (reviewers only): list and read in the reviewer's tenants, accept,
reject and roll back with history rows on the records and the regret rate updated, a proposal over
records that moved on (409, stays open), scope (agent tokens 403, other tenants 404), bad input
(400, nothing changes) and a list whose query count does not grow with its length."""

import uuid

import pytest
import yaml
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from governance.dedup.jobs import propose_duplicates
from governance.dedup.services import proposal_accept
from governance.forget.services import forget_request_create
from governance.models import DedupProposal
from memory.actors import Actor
from memory.models import MemoryRecord, Status
from memory.services import memory_confirm
from tests.api.conftest import assert_problem

pytestmark = pytest.mark.django_db

PROPOSALS = "/api/v1/proposals/"
STATS = f"{PROPOSALS}stats/"
EMAIL = "The customer prefers to be contacted by email."
EMAIL_AGAIN = "Customer prefers being contacted via email."
EMAIL_LOWER = "the customer prefers to be contacted by email"
PHONE = "The customer prefers to be contacted by phone."


def propose(write, *contents, subject="customer/acme", credential=None) -> DedupProposal:
    """Write the records through the service and run the proposal job: the one open proposal."""
    for content in contents:
        write(credential, content=content, subject=subject)
    propose_duplicates(now=timezone.now(), batch_size=500)
    return DedupProposal.objects.get(subject=subject, status="open")


def url(proposal, action: str | None = None) -> str:
    return f"{PROPOSALS}{proposal.pk}/" + (f"{action}/" if action else "")


def drop_id(proposal) -> uuid.UUID:
    return proposal.drops.get().record_id


def last_history(record_id):
    return MemoryRecord.history.filter(id=record_id).order_by("-history_date", "-history_id").first()


def snapshot() -> dict:
    records = {r.pk: (r.status, r.version, r.history.count()) for r in MemoryRecord.objects.all()}
    proposals = {p.pk: (p.status, p.keep_id, p.decided_at) for p in DedupProposal.objects.all()}
    return {"records": records, "proposals": proposals}


# --- reading ---------------------------------------------------------------------------------------


def test_list_shows_open_proposals_in_the_contract_shape(write, reviewer_client):
    proposal = propose(write, EMAIL, EMAIL_AGAIN, EMAIL_LOWER)
    response = reviewer_client.get(PROPOSALS, {"status": "open"})
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 1
    (item,) = body["results"]
    contract = {"id", "status", "keep", "drop", "similarity", "method", "created_at", "decided_at", "decided_by"}
    assert contract <= set(item)
    drops = sorted(str(d.record_id) for d in proposal.drops.all())
    assert (item["id"], item["status"], item["keep"], sorted(item["drop"])) == (
        str(proposal.pk),
        "open",
        str(proposal.keep_id),
        drops,
    )
    assert (item["decided_at"], item["decided_by"], item["stale"]) == (None, None, False)
    assert (item["category"], item["subject"], item["kind"], item["tenant"], item["agent"]) == (
        "duplicate",
        "customer/acme",
        "preference",
        "acme",
        "support-bot",
    )
    assert item["method"] == proposal.method and item["similarity"] == pytest.approx(proposal.similarity)
    members = {m["id"]: m for m in item["members"]}
    assert members[str(proposal.keep_id)]["role"] == "keep"
    assert all(
        (m["proposed_version"], m["version"], m["status"], m["moved_on"]) == (1, 1, "active", False) for m in members.values()
    )
    assert "content" not in str(item)  # records are named by id, their content read at /memories/{id}/
    assert reviewer_client.get(url(proposal)).json() == item


def test_list_filters_by_status_category_and_tenant_oldest_first(
    write, reviewer_client, reviewer_actor, tenant, other_tenant, make_credential, make_reviewer, client_for
):
    first = propose(write, EMAIL, EMAIL_AGAIN, subject="customer/one")
    conflict = propose(write, EMAIL, PHONE, subject="customer/two")
    accepted = propose(write, EMAIL, EMAIL_LOWER, subject="customer/three")
    proposal_accept(proposal_id=accepted.pk, actor=reviewer_actor)
    theirs = propose(write, EMAIL, EMAIL_AGAIN, subject="customer/four", credential=make_credential(other_tenant))

    def ids(client=reviewer_client, **params):
        response = client.get(PROPOSALS, params)
        assert response.status_code == 200, response.json()
        return [item["id"] for item in response.json()["results"]]

    assert ids(status="open") == [str(first.pk), str(conflict.pk)]
    assert ids(status="open", category="conflict") == [str(conflict.pk)]
    assert ids(status="accepted") == [str(accepted.pk)]
    assert ids() == [str(first.pk), str(conflict.pk), str(accepted.pk)]  # no status: all, oldest first
    both = client_for(make_reviewer(tenant, other_tenant, username="both"))
    assert set(ids(both)) == {str(p.pk) for p in (first, conflict, accepted, theirs)}
    assert ids(both, tenant="globex") == [str(theirs.pk)]
    assert_problem(reviewer_client.get(PROPOSALS, {"tenant": "globex"}), 404)


@pytest.mark.parametrize("params, field", [({"status": "merged"}, "status"), ({"category": "similar"}, "category")])
def test_a_bad_filter_is_400(write, reviewer_client, params, field):
    propose(write, EMAIL, EMAIL_AGAIN)
    assert_problem(reviewer_client.get(PROPOSALS, params), 400, errors={field})


def test_the_list_is_paginated(write, reviewer_client):
    for n in range(5):
        write(content=EMAIL, subject=f"customer/{n}")
        write(content=EMAIL_AGAIN, subject=f"customer/{n}")
    propose_duplicates(now=timezone.now(), batch_size=500)
    first = reviewer_client.get(PROPOSALS, {"page_size": 3}).json()
    second = reviewer_client.get(first["next"]).json()
    assert (first["count"], len(first["results"]), len(second["results"]), second["next"]) == (5, 3, 2, None)


# --- who may --------------------------------------------------------------------------------------


def test_agent_tokens_get_403_on_every_proposal_endpoint(write, agent_client):
    proposal = propose(write, EMAIL, EMAIL_AGAIN)
    before = snapshot()
    assert_problem(agent_client.get(PROPOSALS), 403)
    assert_problem(agent_client.get(url(proposal)), 403)
    assert_problem(agent_client.get(STATS), 403)
    for action in ("accept", "reject", "rollback"):
        assert_problem(agent_client.post(url(proposal, action), {"note": "x"}, format="json"), 403)
    assert snapshot() == before


def test_another_tenants_proposal_is_404(write, reviewer_client, other_tenant, make_credential, make_reviewer, client_for):
    theirs = propose(write, EMAIL, EMAIL_AGAIN, credential=make_credential(other_tenant))
    before = snapshot()
    assert_problem(reviewer_client.get(url(theirs)), 404)
    for action in ("accept", "reject", "rollback"):
        assert_problem(reviewer_client.post(url(theirs, action), {}, format="json"), 404)
    assert reviewer_client.get(PROPOSALS).json()["count"] == 0
    assert snapshot() == before
    assert client_for(make_reviewer(other_tenant, username="globex")).get(url(theirs)).status_code == 200


def test_an_unknown_proposal_is_404(reviewer_client, db):
    assert_problem(reviewer_client.get(f"{PROPOSALS}{uuid.uuid4()}/"), 404)
    assert_problem(reviewer_client.post(f"{PROPOSALS}{uuid.uuid4()}/accept/", {}, format="json"), 404)
    assert_problem(reviewer_client.get(f"{PROPOSALS}not-a-uuid/"), 404)


def test_a_reviewer_session_needs_csrf_to_decide(write, reviewer):
    proposal = propose(write, EMAIL, EMAIL_AGAIN)
    client = APIClient(enforce_csrf_checks=True)
    assert client.login(username=reviewer.username, password=reviewer.raw_password)
    assert client.get(url(proposal)).status_code == 200
    assert_problem(client.post(url(proposal, "accept"), {}, format="json"), 403)
    assert DedupProposal.objects.get(pk=proposal.pk).status == "open"


# --- decisions ------------------------------------------------------------------------------------


def test_accept_then_rollback_with_history_rows_and_the_regret_rate(write, reviewer_client, reviewer):
    proposal = propose(write, EMAIL, EMAIL_AGAIN)
    dropped = drop_id(proposal)
    assert reviewer_client.get(STATS).json() == {"open": 1, "accepted": 0, "rolled_back": 0, "regret_rate": None}

    response = reviewer_client.post(url(proposal, "accept"), {"note": "same preference"}, format="json")

    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["status"], body["decided_by"], body["decision_note"], body["stale"]) == (
        "accepted",
        "rita",
        "same preference",
        None,
    )
    assert body["decided_at"] is not None
    record = MemoryRecord.objects.get(pk=dropped)
    assert (record.status, record.version) == (Status.SUPERSEDED, 2)
    row = last_history(dropped)
    assert (row.history_change_reason, row.history_user, row.history_actor) == ("review.dedup_accept", reviewer, "user:rita")
    assert str(proposal.keep_id) in row.history_note and "same preference" in row.history_note
    assert MemoryRecord.objects.get(pk=proposal.keep_id).version == 1  # the kept record is untouched
    assert reviewer_client.get(STATS).json() == {"open": 0, "accepted": 1, "rolled_back": 0, "regret_rate": 0.0}

    response = reviewer_client.post(url(proposal, "rollback"), {"note": "they differ"}, format="json")

    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["proposal"]["status"], body["restored"], body["not_restored"]) == ("rolled_back", [str(dropped)], {})
    assert body["proposal"]["rolled_back_at"] is not None
    record.refresh_from_db()
    assert (record.status, record.version) == (Status.ACTIVE, 3)
    row = last_history(dropped)
    assert (row.history_change_reason, row.history_user) == ("review.restore", reviewer)
    assert "they differ" in row.history_note
    assert reviewer_client.get(STATS).json() == {"open": 0, "accepted": 1, "rolled_back": 1, "regret_rate": 1.0}


def test_the_regret_rate_counts_only_the_reviewers_tenants(
    write, reviewer_client, other_tenant, make_credential, make_reviewer, client_for, reviewer_actor
):
    mine = propose(write, EMAIL, EMAIL_AGAIN, subject="customer/one")
    other = propose(write, EMAIL, EMAIL_LOWER, subject="customer/two")
    for proposal in (mine, other):
        assert reviewer_client.post(url(proposal, "accept"), {}, format="json").status_code == 200
    assert reviewer_client.post(url(mine, "rollback"), {}, format="json").status_code == 200
    theirs = propose(write, EMAIL, EMAIL_AGAIN, credential=make_credential(other_tenant), subject="customer/x")
    globex = make_reviewer(other_tenant, username="globex")
    proposal_accept(proposal_id=theirs.pk, actor=Actor.for_user(globex))
    assert reviewer_client.get(STATS).json() == {"open": 0, "accepted": 2, "rolled_back": 1, "regret_rate": 0.5}
    assert client_for(globex).get(STATS).json()["regret_rate"] == 0.0
    assert_problem(reviewer_client.get(STATS, {"tenant": "globex"}), 404)
    assert reviewer_client.get(STATS, {"tenant": "acme"}).json()["accepted"] == 2


def test_accept_may_keep_another_member(write, reviewer_client):
    proposal = propose(write, EMAIL, PHONE)
    assert proposal.category == "conflict"
    suggested, other = proposal.keep_id, drop_id(proposal)
    response = reviewer_client.post(url(proposal, "accept"), {"keep": str(other), "note": "phone is current"}, format="json")
    assert response.status_code == 200, response.json()
    assert (response.json()["keep"], response.json()["drop"]) == (str(other), [str(suggested)])
    assert MemoryRecord.objects.get(pk=suggested).status == Status.SUPERSEDED
    assert MemoryRecord.objects.get(pk=other).status == Status.ACTIVE


def test_reject_records_the_decision_and_changes_no_record(write, reviewer_client):
    proposal = propose(write, EMAIL, EMAIL_AGAIN)
    records = snapshot()["records"]
    response = reviewer_client.post(url(proposal, "reject"), {"note": "two different contacts"}, format="json")
    assert response.status_code == 200
    assert (response.json()["status"], response.json()["decision_note"]) == ("rejected", "two different contacts")
    assert snapshot()["records"] == records
    assert_problem(reviewer_client.post(url(proposal, "rollback"), {}, format="json"), 409)  # nothing to roll back
    assert reviewer_client.get(STATS).json()["accepted"] == 0


@pytest.mark.parametrize("change", ["confirmed", "forgotten"])
def test_a_proposal_over_records_that_moved_on_is_409_and_stays_open(write, reviewer_client, credential, tenant, change):
    proposal = propose(write, EMAIL, EMAIL_AGAIN)
    dropped = drop_id(proposal)
    if change == "confirmed":
        memory_confirm(record_id=dropped, expected_version=1, actor=Actor.for_credential(credential))
    else:
        forget_request_create(actor=Actor.for_credential(credential), tenant=tenant, subject="customer/acme")
    before = snapshot()

    response = reviewer_client.post(url(proposal, "accept"), {"note": "dup"}, format="json")

    body = assert_problem(response, 409, errors={"records"})
    assert body["type"].endswith("proposal_stale") and "stays open" in body["detail"]
    assert str(dropped) in body["errors"]["records"]
    assert snapshot() == before
    shown = reviewer_client.get(url(proposal)).json()
    assert (shown["status"], shown["stale"]) == ("open", True)
    assert {m["id"]: m["moved_on"] for m in shown["members"]}[str(dropped)] is True
    assert reviewer_client.get(PROPOSALS, {"status": "open"}).json()["count"] == 1


def test_a_decided_proposal_is_409_when_decided_again(write, reviewer_client):
    proposal = propose(write, EMAIL, EMAIL_AGAIN)
    assert reviewer_client.post(url(proposal, "accept"), {}, format="json").status_code == 200
    before = snapshot()
    for action in ("accept", "reject"):
        body = assert_problem(reviewer_client.post(url(proposal, action), {}, format="json"), 409)
        assert body["type"].endswith("proposal_not_open")
    assert snapshot() == before


def test_rollback_reports_a_record_forgotten_since(write, reviewer_client, credential, tenant):
    proposal = propose(write, EMAIL, EMAIL_AGAIN)
    assert reviewer_client.post(url(proposal, "accept"), {}, format="json").status_code == 200
    forget_request_create(actor=Actor.for_credential(credential), tenant=tenant, subject="customer/acme")
    body = reviewer_client.post(url(proposal, "rollback"), {}, format="json").json()
    assert (body["restored"], body["not_restored"]) == ([], {str(drop_id(proposal)): "forgotten"})
    assert body["proposal"]["status"] == "rolled_back"


@pytest.mark.parametrize(
    "payload, field",
    [
        ({"note": "x" * 501}, "note"),
        ({"note": 42}, "note"),
        ({"keep": "not-a-uuid"}, "keep"),
        ({"keep": str(uuid.UUID(int=7))}, "keep"),  # not a member of the proposal
        ({"kept": "typo"}, "kept"),
    ],
)
def test_bad_input_is_400_and_changes_nothing(write, reviewer_client, payload, field):
    proposal = propose(write, EMAIL, EMAIL_AGAIN)
    before = snapshot()
    assert_problem(reviewer_client.post(url(proposal, "accept"), payload, format="json"), 400, errors={field})
    assert snapshot() == before


def test_a_body_that_is_not_json_is_refused(write, reviewer_client):
    proposal = propose(write, EMAIL, EMAIL_AGAIN)
    assert_problem(reviewer_client.post(url(proposal, "accept"), "note=x", content_type="application/x-www-form-urlencoded"), 415)
    assert_problem(reviewer_client.post(url(proposal, "reject"), "{not json", content_type="application/json"), 400)
    assert DedupProposal.objects.get(pk=proposal.pk).status == "open"


# --- query counts ----------------------------------------------------------------------------------


def test_listing_costs_the_same_number_of_queries_for_3_or_40_proposals(write, reviewer_client, reviewer_actor):
    def fill(start, count):
        for n in range(start, start + count):
            for content in (EMAIL, EMAIL_AGAIN, EMAIL_LOWER):  # three records per proposal
                write(content=content, subject=f"customer/{n:03}")
        propose_duplicates(now=timezone.now(), batch_size=500)
        proposal_accept(proposal_id=DedupProposal.objects.filter(status="open").first().pk, actor=reviewer_actor)

    def count_queries(params) -> tuple[int, int]:
        with CaptureQueriesContext(connection) as queries:
            response = reviewer_client.get(PROPOSALS, {"page_size": 100, **params})
        assert response.status_code == 200
        return len(queries), response.json()["count"]

    fill(0, 3)
    small = [count_queries({}), count_queries({"status": "open"})]
    fill(3, 37)
    large = [count_queries({}), count_queries({"status": "open"})]
    assert [n for _, n in small] == [3, 2] and [n for _, n in large] == [40, 38]
    assert [q for q, _ in small] == [q for q, _ in large]


def test_the_schema_describes_the_proposal_endpoints(db):
    schema = yaml.safe_load(APIClient().get("/api/schema/").content)
    expected = {
        PROPOSALS: {"get"},
        f"{PROPOSALS}{{id}}/": {"get"},
        STATS: {"get"},
        **{f"{PROPOSALS}{{id}}/{action}/": {"post"} for action in ("accept", "reject", "rollback")},
    }
    for path, methods in expected.items():
        assert methods <= set(schema["paths"][path]), path
    assert {"200", "400", "403", "404", "409"} <= set(schema["paths"][f"{PROPOSALS}{{id}}/accept/"]["post"]["responses"])
