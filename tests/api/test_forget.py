"""Forget over HTTP: logical at once, propagation reported through receipts."""

import pytest
from django.utils import timezone

from governance.jobs import run_job
from governance.models import ForgetRequest, PropagationReceipt
from memory.fingerprints import subject_fingerprint
from memory.models import MemoryRecord
from tests.api.conftest import FORGET, UNTRUSTED, assert_problem, recall_ids

pytestmark = pytest.mark.django_db


def test_forget_by_an_agent_is_202_propagating_and_readable_with_its_receipts(write, agent_client):
    records = [write(subject="customer/zed"), write(subject="customer/zed", **UNTRUSTED)]
    response = agent_client.post(FORGET, {"subject": "customer/zed", "reason": "erasure request #123"})
    assert response.status_code == 202
    created = response.json()
    assert set(created) >= {"id", "subject", "status", "affected", "requested_at", "completed_at", "receipts"}
    assert (created["status"], created["affected"], created["completed_at"], created["tenant"]) == (
        "propagating",
        2,
        None,
        "acme",
    )
    assert response["Location"] == f"{FORGET}{created['id']}/"
    assert set(MemoryRecord.objects.filter(pk__in=[r.pk for r in records]).values_list("status", flat=True)) == {"forgotten"}
    history = MemoryRecord.history.filter(id=records[0].pk).latest("history_date")
    assert (history.history_change_reason, history.history_note) == ("agent.forget", "erasure request #123")

    # What the propagation job leaves behind, once it has run.
    request = ForgetRequest.objects.get(pk=created["id"])
    done = timezone.now()
    PropagationReceipt.objects.create(
        forget_request=request, artifact="search_index", removed=2, completed_at=done, note="tsvector cleared"
    )
    request.status, request.completed_at = ForgetRequest.Status.COMPLETED, done
    request.save(update_fields=["status", "completed_at"])

    shown = agent_client.get(f"{FORGET}{created['id']}/").json()
    assert (shown["status"], shown["affected"]) == ("completed", 2)
    assert shown["receipts"] == [
        {"artifact": "search_index", "removed": 2, "completed_at": shown["completed_at"], "note": "tsvector cleared"}
    ]


def test_forgetting_again_is_harmless(write, agent_client):
    write(subject="customer/zed")
    assert agent_client.post(FORGET, {"subject": "customer/zed"}).json()["affected"] == 1
    again = agent_client.post(FORGET, {"subject": "customer/zed"})
    assert (again.status_code, again.json()["affected"]) == (202, 0)
    assert agent_client.post(FORGET, {"subject": "customer/nobody"}).json()["affected"] == 0


def test_a_reviewer_forgets_in_a_tenant_of_theirs(write, tenant, other_tenant, make_reviewer, client_for, make_credential):
    theirs = make_credential(other_tenant)
    write(subject="customer/zed")
    other = write(credential_=theirs, subject="customer/zed")
    both = client_for(make_reviewer(tenant, other_tenant, username="both"))
    assert_problem(both.post(FORGET, {"subject": "customer/zed"}), 400, errors={"tenant"})  # which tenant?
    response = both.post(FORGET, {"subject": "customer/zed", "tenant": "acme"})
    assert (response.status_code, response.json()["affected"], response.json()["tenant"]) == (202, 1, "acme")
    assert MemoryRecord.objects.get(pk=other.pk).status == "active"

    only_acme = client_for(make_reviewer(tenant, username="only-acme"))
    assert_problem(only_acme.post(FORGET, {"subject": "customer/zed", "tenant": "globex"}), 404)
    assert_problem(only_acme.post(FORGET, {"subject": "customer/zed", "tenant": "nonexistent"}), 404)
    assert only_acme.post(FORGET, {"subject": "customer/zed"}).json()["tenant"] == "acme"  # their only tenant
    assert MemoryRecord.objects.get(pk=other.pk).status == "active"


def test_forget_requests_are_read_only_within_scope(
    write, agent_client, tenant, other_tenant, make_credential, client_for, make_reviewer
):
    write(subject="customer/zed")
    created = agent_client.post(FORGET, {"subject": "customer/zed"}).json()
    url = f"{FORGET}{created['id']}/"
    assert client_for(make_reviewer(tenant)).get(url).status_code == 200
    outsiders = [
        client_for(make_credential(other_tenant, can_forget=True)),
        client_for(make_credential(tenant, agent_slug="sales-bot", can_forget=True)),
        client_for(make_reviewer(other_tenant, username="globex-reviewer")),
    ]
    for outsider in outsiders:
        assert_problem(outsider.get(url), 404)


def test_recall_stops_returning_the_subject_in_the_same_request(write, agent_client):
    write(subject="customer/zed", content="Zed's phone is 555-0100.")
    assert recall_ids(agent_client, query="phone") != []
    agent_client.post(FORGET, {"subject": "customer/zed"})
    assert recall_ids(agent_client, query="phone") == []


def test_an_agent_reads_back_only_the_forget_requests_its_own_token_filed(
    write, agent_client, credential, tenant, make_credential, client_for
):
    write(subject="customer/zed")
    created = agent_client.post(FORGET, {"subject": "customer/zed"}).json()
    request = ForgetRequest.objects.get(pk=created["id"])
    assert (request.requested_by_credential, request.requested_by_agent) == (credential, credential.agent)
    assert agent_client.get(f"{FORGET}{created['id']}/").status_code == 200

    same_agent_other_token = client_for(make_credential(tenant, purposes=("billing",), can_forget=True))
    assert_problem(same_agent_other_token.get(f"{FORGET}{created['id']}/"), 404)
    # The display label grants nothing: a request that merely carries the agent's label is not its own.
    labelled = ForgetRequest.objects.create(tenant=tenant, subject="customer/zed", requested_by=request.requested_by)
    assert_problem(agent_client.get(f"{FORGET}{labelled.pk}/"), 404)


def test_an_agent_forget_stays_within_its_tokens_purposes(write, agent_client, tenant, make_credential):
    billing = make_credential(tenant, purposes=("billing",))
    other_purpose = write(credential_=billing, subject="customer/zed", purpose="billing")
    mine = write(subject="customer/zed")
    response = agent_client.post(FORGET, {"subject": "customer/zed"})
    assert response.json()["affected"] == 1
    assert dict(MemoryRecord.objects.filter(pk__in=[mine.pk, other_purpose.pk]).values_list("pk", "status")) == {
        mine.pk: "forgotten",
        other_purpose.pk: "active",
    }


def test_after_propagation_the_request_shows_a_fingerprint_and_forgetting_again_still_matches(write, agent_client, tenant):
    record = write(subject="customer/zed", provenance={"uri": "https://crm.example.com/zed", "tool": None})
    created = agent_client.post(FORGET, {"subject": "customer/zed"}).json()
    assert created["subject"] == "customer/zed"  # as filed
    run_job("propagate_forgets")

    shown = agent_client.get(f"{FORGET}{created['id']}/").json()
    assert shown["status"] == "completed" and shown["subject"] == subject_fingerprint(tenant.pk, "customer/zed")
    assert "customer/zed" not in str(shown) and "crm.example.com" not in str(shown)
    record.refresh_from_db()
    assert (record.subject, record.source_uri) == (shown["subject"], "")

    again = agent_client.post(FORGET, {"subject": "customer/zed"})
    assert (again.status_code, again.json()["affected"], again.json()["subject"]) == (202, 0, "customer/zed")
    assert list(ForgetRequest.objects.get(pk=again.json()["id"]).records.values_list("pk", flat=True)) == [record.pk]
