"""`as_of` for reviewers: a record as it was at a past moment, and what recall would have returned
then, reconstructed from history, through the API (agent tokens refused, reviewers limited to
their tenants). Forgotten content never comes back; pruned records are reported as gone."""

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from governance.forget.jobs import propagate_forgets
from governance.retention.prune import prune
from governed_memory.signing import generate_private_key
from memory.models import MemoryKind, MemoryRecord
from memory.services import memory_forget_subject, memory_promote, memory_retire, memory_supersede, memory_write
from tests.api.conftest import MEMORIES, RECALL, UNTRUSTED, assert_problem
from tests.signed_support import crm_claim, register_crm

pytestmark = pytest.mark.django_db


def iso(moment) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def tick():
    """A moment strictly between the changes before and after it (history times are microseconds)."""
    moment = timezone.now()
    while timezone.now() == moment:
        pass
    return moment


def as_of(client, record_id, moment):
    return client.get(f"{MEMORIES}{record_id}/", {"as_of": iso(moment)})


def test_a_record_promoted_superseded_and_forgotten_shows_each_state_and_never_its_content(
    write, reviewer_client, reviewer_actor, tenant
):
    secret = "Customer Dana's home door code is 4711."
    record = write(content=secret, subject="customer/dana", **UNTRUSTED)
    at_quarantined = tick()
    memory_promote(record_id=record.pk, expected_version=1, actor=reviewer_actor, note="checked")
    at_active = tick()
    correction = memory_supersede(
        record_id=record.pk, expected_version=2, actor=reviewer_actor, content="Customer Dana's door code changed."
    )
    at_superseded = tick()

    states = {}
    for name, moment in (("quarantined", at_quarantined), ("active", at_active), ("superseded", at_superseded)):
        response = as_of(reviewer_client, record.pk, moment)
        assert response.status_code == 200, response.json()
        states[name] = response.json()
    assert [states[n]["status"] for n in states] == ["quarantined", "active", "superseded"]
    assert [states[n]["version"] for n in states] == [1, 2, 3]
    assert [states[n]["trust"] for n in states] == ["untrusted", "verified", "verified"]
    assert states["active"]["as_of"]["transition"] == "review.promote"
    assert states["superseded"]["superseded_by"] == str(correction.pk)
    assert states["active"]["superseded_by"] is None
    assert states["active"]["content"] == secret  # not forgotten yet: the content as it was

    memory_forget_subject(tenant_id=tenant.pk, subject="customer/dana", actor=reviewer_actor, reason="erasure")
    at_forgotten = tick()
    for moment in (at_quarantined, at_active, at_superseded, at_forgotten):
        for propagated in (False, True):
            if propagated:
                propagate_forgets(now=timezone.now(), batch_size=100)
            response = as_of(reviewer_client, record.pk, moment)
            assert response.status_code == 200
            body = response.json()
            assert "4711" not in response.content.decode() and "Dana" not in json.dumps(body["content"])
            assert body["content"] is None and body["content_hash"] is None
            assert body["provenance"]["uri"] is None and body["provenance"]["session_id"] is None
            assert body["as_of"]["content_withheld"] == "forgotten" and body["as_of"]["status_now"] == "forgotten"
    assert as_of(reviewer_client, record.pk, at_active).json()["status"] == "active"
    assert as_of(reviewer_client, record.pk, at_forgotten).json()["status"] == "forgotten"


def test_before_a_record_existed_is_a_404_and_the_future_a_400(write, reviewer_client):
    before = tick()
    record = write()
    body = assert_problem(as_of(reviewer_client, record.pk, before), 404)
    assert "did not exist yet" in body["detail"]
    assert_problem(as_of(reviewer_client, record.pk, timezone.now() + timedelta(hours=1)), 400, errors={"as_of"})
    for bad in ("yesterday", "2026-11-29T10:00:00", "2026-11-29T10:00:00 00:00"):
        assert_problem(reviewer_client.get(f"{MEMORIES}{record.pk}/", {"as_of": bad}), 400, errors={"as_of"})


def test_a_pruned_record_is_reported_gone(write, reviewer_client, reviewer_actor):
    record = write()
    at_active = tick()
    correction = memory_supersede(record_id=record.pk, expected_version=1, actor=reviewer_actor, content="Prefers post.")
    later = timezone.now() + MemoryKind.objects.get(name="preference").purge_after + timedelta(days=1)
    counts = prune(now=later, batch_size=100)
    assert counts["pruned_superseded"] == 1 and not MemoryRecord.objects.filter(pk=record.pk).exists()
    assert not MemoryRecord.history.model.objects.filter(id=record.pk).exists()  # prune deletes its history
    body = assert_problem(as_of(reviewer_client, record.pk, at_active), 410)
    assert "pruned" in body["detail"] and body["type"].endswith(":pruned")
    assert as_of(reviewer_client, correction.pk, timezone.now()).status_code == 200


def test_agents_may_not_use_as_of_and_reviewers_only_see_their_tenants(
    write, agent_client, client_for, other_tenant, make_reviewer, credential
):
    record = write()
    moment = tick()
    body = assert_problem(as_of(agent_client, record.pk, moment), 403)
    assert "reviewers" in body["detail"].lower()
    assert agent_client.get(f"{MEMORIES}{record.pk}/").status_code == 200  # the live read is unchanged
    assert_problem(agent_client.post(RECALL, {"purpose": "support", "as_of": iso(moment)}, format="json"), 403, errors={"as_of"})
    outsider = client_for(make_reviewer(other_tenant, username="olga"))
    assert_problem(as_of(outsider, record.pk, moment), 404)
    assert_problem(
        outsider.post(
            RECALL, {"purpose": "support", "as_of": iso(moment), "tenant": "acme", "agent": "support-bot"}, format="json"
        ),
        404,
    )


def test_reviewer_recall_needs_as_of_tenant_and_agent(reviewer_client):
    # Without as_of a reviewer's recall stays what it was: a 403 (recall in the present is an agent's).
    assert_problem(
        reviewer_client.post(RECALL, {"purpose": "support", "tenant": "acme", "agent": "support-bot"}, format="json"),
        403,
        errors={"as_of"},
    )
    body = assert_problem(reviewer_client.post(RECALL, {"purpose": "support", "as_of": iso(timezone.now())}, format="json"), 400)
    assert {"tenant", "agent"} <= set(body["errors"])
    assert_problem(
        reviewer_client.post(
            RECALL, {"purpose": "support", "as_of": "soon", "tenant": "acme", "agent": "support-bot"}, format="json"
        ),
        400,
        errors={"as_of"},
    )
    assert_problem(
        reviewer_client.post(
            RECALL,
            {"purpose": "support", "as_of": iso(timezone.now()), "tenant": "acme", "agent": "support-bot", "extra": 1},
            format="json",
        ),
        400,
        errors={"extra"},
    )


def _recall(client, **body):
    response = client.post(RECALL, {"purpose": "support", **body}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


QUERY = {"query": "how does acme want to be contacted about invoices", "subject": "customer/acme"}


def test_as_of_recall_returns_what_recall_returned_then(write, agent_client, reviewer_client, reviewer_actor, tenant, credential):
    """Must show: recall, change records (promote, supersede, retire, forget), then ask as of the
    first moment: the same ids in the same order, with the same scores and context lines."""
    contents = [
        "Acme wants invoices by email.",
        "Acme prefers to be contacted by phone about outages.",
        "Acme's invoices go to the finance team.",
        "Contact acme through the portal.",
        "Acme likes short answers.",
        "Acme wants to be contacted in German.",
    ]
    records = [write(content=text) for text in contents]
    waiting = write(content="Acme wants invoices contacted via fax.", **UNTRUSTED)  # quarantined then
    other = write(content="Globex wants invoices by email too.", subject="customer/globex")
    small = {**QUERY, "limit": 3, "token_budget": 40}
    then = _recall(agent_client, **QUERY)
    then_small = _recall(agent_client, **small)
    moment = tick()
    assert len(then["items"]) >= 5 and then_small["omitted_for_budget"] > 0

    memory_promote(record_id=waiting.pk, expected_version=1, actor=reviewer_actor)
    memory_supersede(record_id=records[0].pk, expected_version=1, actor=reviewer_actor, content="Acme wants invoices by post.")
    memory_retire(record_id=records[1].pk, expected_version=1, actor=reviewer_actor)
    memory_forget_subject(tenant_id=tenant.pk, subject="customer/globex", actor=reviewer_actor)
    propagate_forgets(now=timezone.now(), batch_size=100)
    write(content="Acme wants to be contacted about invoices on Mondays.")
    now_ids = [item["id"] for item in _recall(agent_client, **QUERY)["items"]]
    assert now_ids != [item["id"] for item in then["items"]]  # the changes changed what recall returns

    reconstructed = _recall(reviewer_client, **QUERY, as_of=iso(moment), tenant="acme", agent="support-bot")
    assert [i["id"] for i in reconstructed["items"]] == [i["id"] for i in then["items"]]
    for old, new in zip(then["items"], reconstructed["items"], strict=True):
        assert new["score_parts"] == pytest.approx(old["score_parts"], abs=1e-3)
        assert new["context"] == old["context"] and new["content"] == old["content"]
        assert new["trust"] == old["trust"]
    assert reconstructed["tokens_used"] == then["tokens_used"]
    assert reconstructed["as_of"]["withheld"] == [] and reconstructed["as_of"]["may_miss_pruned"] is False
    assert str(other.pk) not in {i["id"] for i in reconstructed["items"]}

    # With a budget and a limit the fill is the same too: the same items, the same skipped count.
    small_then = _recall(reviewer_client, **small, as_of=iso(moment), tenant="acme", agent="support-bot")
    assert [i["id"] for i in small_then["items"]] == [i["id"] for i in then_small["items"]]
    assert small_then["omitted_for_budget"] == then_small["omitted_for_budget"]


def test_as_of_recall_without_a_subject_withholds_records_forgotten_since(
    write, agent_client, reviewer_client, reviewer_actor, tenant
):
    kept = write(content="Acme wants invoices by email.")
    gone = write(content="Dana wants invoices by carrier pigeon.", subject="customer/dana")
    then = _recall(agent_client, query="invoices")
    moment = tick()
    assert {i["id"] for i in then["items"]} == {str(kept.pk), str(gone.pk)}
    memory_forget_subject(tenant_id=tenant.pk, subject="customer/dana", actor=reviewer_actor)
    for propagated in (False, True):
        if propagated:
            propagate_forgets(now=timezone.now(), batch_size=100)
        response = reviewer_client.post(
            RECALL,
            {"purpose": "support", "query": "invoices", "as_of": iso(moment), "tenant": "acme", "agent": "support-bot"},
            format="json",
        )
        body = response.json()
        assert [i["id"] for i in body["items"]] == [str(kept.pk)]
        assert body["as_of"]["withheld"] == [str(gone.pk)]
        assert "pigeon" not in response.content.decode() and "dana" not in response.content.decode().lower()


def test_as_of_endpoints_use_a_constant_number_of_queries(write, reviewer_client, reviewer_actor):
    def counted(n_records):
        for i in range(n_records):
            record = write(content=f"Acme invoice note {i} about contact.")
            memory_retire(record_id=record.pk, expected_version=1, actor=reviewer_actor)
            write(content=f"Acme invoice rule {i} by email.")
        moment = tick()
        target = write(content="Acme target.")
        with CaptureQueriesContext(connection) as record_queries:
            assert as_of(reviewer_client, target.pk, timezone.now()).status_code == 200
        with CaptureQueriesContext(connection) as recall_queries:
            response = reviewer_client.post(
                RECALL,
                {
                    "purpose": "support",
                    "query": "acme invoice contact email",
                    "as_of": iso(moment),
                    "tenant": "acme",
                    "agent": "support-bot",
                },
                format="json",
            )
            assert response.status_code == 200
        return len(record_queries), len(recall_queries)

    few = counted(2)
    many = counted(20)
    assert few == many
    assert many[0] <= 10 and many[1] <= 25, many


def test_as_of_reads_of_signed_records_cost_the_same_for_2_or_8(credential, tenant, reviewer_client):
    key = generate_private_key()
    register_crm(tenant, key)

    def counted(n_records, start):
        records = [
            memory_write(
                credential=credential,
                data=crm_claim(key, content=f"Acme invoice contact {i} is Dana.", version=f"contact/{i}@v1"),
            ).record
            for i in range(start, start + n_records)
        ]
        assert all(r.provenance_verified for r in records)
        moment = tick()
        with CaptureQueriesContext(connection) as record_queries:
            response = as_of(reviewer_client, records[0].pk, moment)
            assert response.status_code == 200 and response.json()["provenance"]["verified"] is True
        with CaptureQueriesContext(connection) as recall_queries:
            body = {
                "purpose": "support",
                "query": "acme invoice contact",
                "as_of": iso(moment),
                "tenant": "acme",
                "agent": "support-bot",
            }
            response = reviewer_client.post(RECALL, body, format="json")
            items = response.json()["items"]
            assert response.status_code == 200 and len(items) >= n_records
            assert all(item["provenance"]["verified"] for item in items)
        return len(record_queries), len(recall_queries)

    assert counted(2, 0) == counted(6, 2)


def test_as_of_recall_says_when_records_pruned_since_could_be_missing(write, reviewer_client):
    write(content="Acme wants invoices by email.")
    recent = tick()
    oldest_purge = min(MemoryKind.objects.values_list("purge_after", flat=True))
    long_ago = timezone.now() - oldest_purge - timedelta(days=1)
    ask = {"purpose": "support", "query": "invoices", "tenant": "acme", "agent": "support-bot"}
    recent_body = _recall(reviewer_client, **ask, as_of=iso(recent))
    assert recent_body["as_of"]["may_miss_pruned"] is False and len(recent_body["items"]) == 1
    old_body = _recall(reviewer_client, **ask, as_of=iso(long_ago))
    assert old_body["items"] == [] and old_body["as_of"]["may_miss_pruned"] is True
    assert any("pruned" in note for note in old_body["as_of"]["notes"])
