"""The six claims of the reference design, as an agent meets them over HTTP."""

from datetime import timedelta

import pytest
from django.utils import timezone

from memory import usage
from memory.models import MemoryRecord
from tests.api.conftest import FORGET, MEMORIES, UNTRUSTED, assert_problem, recall_ids

pytestmark = pytest.mark.django_db


def test_untrusted_write_is_quarantined_and_recalled_only_after_promotion_with_the_current_version(
    api_write,
    agent_client,
    reviewer_client,
):
    record = api_write(content="Acme's billing contact is Dana.", **UNTRUSTED)
    assert (record["status"], record["trust"], record["version"]) == ("quarantined", "untrusted", 1)
    assert record["id"] not in recall_ids(agent_client, query="billing contact")

    # The agent cannot let its own claim in, whatever it sends.
    assert_problem(agent_client.post(f"{MEMORIES}{record['id']}/promote/", {"expected_version": 1}), 403)
    # A reviewer deciding on an outdated version is refused.
    assert_problem(reviewer_client.post(f"{MEMORIES}{record['id']}/promote/", {"expected_version": 2}), 409)
    assert record["id"] not in recall_ids(agent_client, query="billing contact")

    promoted = reviewer_client.post(f"{MEMORIES}{record['id']}/promote/", {"expected_version": 1, "note": "checked CRM"})
    assert promoted.status_code == 200
    assert (promoted.json()["status"], promoted.json()["trust"], promoted.json()["version"]) == ("active", "verified", 2)
    assert recall_ids(agent_client, query="billing contact") == [record["id"]]


def test_a_stale_expected_version_cannot_overwrite_the_current_record(api_write, agent_client, reviewer_client):
    record = api_write(content="Deploys go through staging.")
    first = reviewer_client.post(f"{MEMORIES}{record['id']}/confirm/", {"expected_version": 1})
    assert first.status_code == 200 and first.json()["version"] == 2
    stale = agent_client.post(f"{MEMORIES}{record['id']}/confirm/", {"expected_version": 1})
    body = assert_problem(stale, 409)
    assert "version 2" in body["detail"]
    retire_stale = reviewer_client.post(f"{MEMORIES}{record['id']}/retire/", {"expected_version": 1})
    assert_problem(retire_stale, 409)
    current = agent_client.get(f"{MEMORIES}{record['id']}/").json()
    assert (current["status"], current["version"], current["trust"]) == ("active", 2, "verified")
    # A correction naming an old version is refused the same way.
    stale_fix = agent_client.post(
        MEMORIES, {**_body_like(record), "supersedes": record["id"], "supersedes_version": 1}, format="json"
    )
    assert_problem(stale_fix, 409)
    assert MemoryRecord.objects.count() == 1


def test_a_correction_supersedes_the_earlier_record_and_recall_returns_only_the_correction(api_write, agent_client):
    old = api_write(content="Acme prefers phone calls.")
    fix = api_write(content="Acme prefers email, not phone calls.", supersedes=old["id"], supersedes_version=1)
    assert fix["supersedes"] == old["id"] and fix["status"] == "active"
    earlier = agent_client.get(f"{MEMORIES}{old['id']}/").json()
    assert (earlier["status"], earlier["version"], earlier["superseded_by"]) == ("superseded", 2, fix["id"])
    assert earlier["content"] == "Acme prefers phone calls."  # history kept, not overwritten
    assert recall_ids(agent_client, query="acme prefers phone") == [fix["id"]]


def test_forgetting_a_subject_reports_the_number_affected_and_recall_returns_none_of_them(
    api_write,
    agent_client,
    tenant,
    make_credential,
    client_for,
    reviewer_client,
):
    other_agent = client_for(make_credential(tenant, agent_slug="sales-bot"))
    mine = [api_write(subject="customer/zed", content=f"Zed likes green tea ({i}).") for i in range(2)]
    theirs = api_write(client=other_agent, subject="customer/zed", content="Zed likes tea.")
    kept = api_write(subject="customer/acme", content="Acme likes tea.")

    response = agent_client.post(FORGET, {"subject": "customer/zed", "reason": "erasure request #123"})
    assert response.status_code == 202
    body = response.json()
    # An agent's token fixes its agent: it forgets its own records, not another agent's.
    assert (body["status"], body["affected"], body["subject"], body["receipts"]) == ("propagating", 2, "customer/zed", [])
    assert recall_ids(agent_client, query="tea") == [kept["id"]]
    assert recall_ids(other_agent, query="tea") == [theirs["id"]]
    for record in mine:
        assert MemoryRecord.objects.get(pk=record["id"]).status == "forgotten"
    shown = agent_client.get(f"{MEMORIES}{mine[0]['id']}/").json()
    assert (shown["status"], shown["content"], shown["content_hash"]) == ("forgotten", None, None)

    again = agent_client.post(FORGET, {"subject": "customer/zed", "reason": "erasure request #123"})
    assert again.status_code == 202 and again.json()["affected"] == 0

    # A reviewer's erasure request covers the whole tenant.
    erasure = reviewer_client.post(FORGET, {"subject": "customer/zed", "reason": "erasure request #123"})
    assert erasure.status_code == 202 and erasure.json()["affected"] == 1
    assert recall_ids(other_agent, query="tea") == []


def test_expired_and_over_budget_items_are_not_returned(api_write, agent_client):
    fresh = api_write(content="Invoices go by email.")
    short = api_write(content="Invoices go by email this week only.", ttl_seconds=60)
    # Time passes for this record: move it into the past (created 2 h ago, expired 1 h ago).
    now = timezone.now()
    MemoryRecord.objects.filter(pk=short["id"]).update(created_at=now - timedelta(hours=2), expires_at=now - timedelta(hours=1))
    long = api_write(content="Invoices go by email; " + "the full invoicing procedure is long. " * 40)

    response = agent_client.post("/api/v1/recall/", {"purpose": "support", "query": "invoices email", "token_budget": 60})
    body = response.json()
    ids = [item["id"] for item in body["items"]]
    assert fresh["id"] in ids and short["id"] not in ids and long["id"] not in ids
    assert body["omitted_for_budget"] == 1
    assert body["tokens_used"] == sum(item["tokens"] for item in body["items"]) <= 60

    roomy = agent_client.post("/api/v1/recall/", {"purpose": "support", "query": "invoices email", "token_budget": 2000}).json()
    assert {item["id"] for item in roomy["items"]} == {fresh["id"], long["id"]}
    assert roomy["omitted_for_budget"] == 0


def test_recall_items_carry_provenance_score_parts_and_a_dated_context_line(api_write, agent_client):
    record = api_write(content="Acme wants invoices by email.", confidence=0.7)
    body = agent_client.post(
        "/api/v1/recall/",
        {"purpose": "support", "query": "invoices", "kinds": ["preference"], "subject": "customer/acme", "limit": 5},
    ).json()
    (item,) = body["items"]
    assert set(item) == {
        "id",
        "kind",
        "subject",
        "content",
        "authority",
        "trust",
        "confidence",
        "provenance",
        "created_at",
        "confirmed_at",
        "expires_at",
        "score",
        "score_parts",
        "relevance",
        "tokens",
        "context",
    }
    assert 0 < item["relevance"] <= 1
    assert item["id"] == record["id"] and item["provenance"] == record["provenance"]
    assert set(item["score_parts"]) == {"lexical", "authority", "confidence", "recency"}
    assert item["score"] == pytest.approx(sum(item["score_parts"].values()), abs=1e-3)
    assert item["context"].startswith(f"[preference | user | confirmed {record['confirmed_at'][:10]} | source user_turn chat://")
    assert body["tokens_used"] == item["tokens"]
    usage.flush()  # recall writes last_used_at after its response, batched (memory.usage)
    assert MemoryRecord.objects.get(pk=record["id"]).last_used_at is not None


def _body_like(record: dict) -> dict:
    return {key: record[key] for key in ("kind", "subject", "purpose", "authority", "confidence", "provenance")} | {
        "content": "A correction."
    }


def test_a_transition_body_naming_another_tenant_is_forbidden(api_write, agent_client, other_tenant):
    record = api_write()
    url = f"{MEMORIES}{record['id']}/confirm/"
    assert_problem(agent_client.post(url, {"expected_version": 1, "tenant": other_tenant.slug}), 403, errors={"tenant"})
    assert MemoryRecord.objects.get(pk=record["id"]).version == 1
    assert agent_client.post(url, {"expected_version": 1, "tenant": "acme"}).status_code == 200  # its own: fine
