"""Writing, reading, listing and transitioning records over HTTP."""

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.models import IdempotencyKey, MemoryRecord
from tests.api.conftest import FORGET, MEMORIES, RECALL, UNTRUSTED, assert_problem
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db

RECORD_FIELDS = {
    "id",
    "tenant",
    "agent",
    "kind",
    "subject",
    "purpose",
    "content",
    "content_hash",
    "authority",
    "trust",
    "confidence",
    "provenance",
    "status",
    "version",
    "created_at",
    "confirmed_at",
    "expires_at",
    "valid_from",
    "valid_to",
    "last_used_at",
    "supersedes",
    "superseded_by",
}


def test_write_returns_201_with_the_record_as_the_contract_shows(agent_client):
    body = memory_body(ttl_seconds=604800)
    response = agent_client.post(MEMORIES, body, format="json")
    assert response.status_code == 201
    record = response.json()
    assert RECORD_FIELDS <= set(record)
    assert response["Location"] == f"{MEMORIES}{record['id']}/"
    assert (record["tenant"], record["agent"], record["kind"]) == ("acme", "support-bot", "preference")
    assert (record["status"], record["trust"], record["version"]) == ("active", "trusted", 1)
    assert record["content"] == body["content"] and record["content_hash"].startswith("sha256:")
    unsigned = {"source": None, "verified": False}  # signed provenance: not signed
    assert record["provenance"] == {**body["provenance"], "observed_at": "2026-11-29T10:00:00Z", **unsigned}
    assert record["supersedes"] is None and record["superseded_by"] is None and record["last_used_at"] is None
    created = timezone.datetime.fromisoformat(record["created_at"])
    assert timezone.datetime.fromisoformat(record["expires_at"]) - created == timedelta(seconds=604800)
    assert record["created_at"].endswith("Z")


def test_an_idempotent_retry_returns_the_first_record_and_writes_nothing_new(agent_client):
    body = memory_body()
    first = agent_client.post(MEMORIES, body, format="json", headers={"Idempotency-Key": "turn-12"})
    again = agent_client.post(MEMORIES, body, format="json", headers={"Idempotency-Key": "turn-12"})
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first
    assert MemoryRecord.objects.count() == 1 and MemoryRecord.history.count() == 1

    other_body = agent_client.post(
        MEMORIES, {**body, "content": "Changed."}, format="json", headers={"Idempotency-Key": "turn-12"}
    )
    assert_problem(other_body, 409)
    other_key = agent_client.post(MEMORIES, body, format="json", headers={"Idempotency-Key": "turn-13"})
    assert other_key.status_code == 201 and other_key.json()["id"] != first.json()["id"]
    assert MemoryRecord.objects.count() == 2 and IdempotencyKey.objects.count() == 2


def test_idempotency_keys_belong_to_one_credential(agent_client, client_for, tenant, make_credential):
    body = memory_body()
    mine = agent_client.post(MEMORIES, body, format="json", headers={"Idempotency-Key": "k"}).json()
    other = client_for(make_credential(tenant, agent_slug="sales-bot"))
    theirs = other.post(MEMORIES, body, format="json", headers={"Idempotency-Key": "k"})
    assert theirs.status_code == 201 and theirs.json()["id"] != mine["id"] and theirs.json()["agent"] == "sales-bot"


@pytest.mark.parametrize(("field", "value"), [("tenant", "globex"), ("agent", "sales-bot")])
def test_a_body_naming_another_tenant_or_agent_is_403_everywhere(agent_client, field, value):
    assert_problem(agent_client.post(MEMORIES, memory_body(**{field: value}), format="json"), 403, errors={field})
    assert_problem(agent_client.post(RECALL, {"purpose": "support", field: value}), 403, errors={field})
    assert_problem(agent_client.post(FORGET, {"subject": "customer/acme", field: value}), 403, errors={field})
    assert MemoryRecord.objects.count() == 0


def test_a_body_naming_the_tokens_own_tenant_and_agent_is_fine(agent_client, api_write):
    record = api_write(tenant="acme", agent="support-bot")
    response = agent_client.post(RECALL, {"purpose": "support", "tenant": "acme", "agent": "support-bot", "query": "email"})
    assert [item["id"] for item in response.json()["items"]] == [record["id"]]


def test_a_purpose_or_authority_the_token_lacks_is_403(agent_client):
    assert_problem(agent_client.post(MEMORIES, memory_body(purpose="billing"), format="json"), 403, errors={"purpose"})
    operator = memory_body(authority="operator", provenance={"source_type": "operator_config"})
    assert_problem(agent_client.post(MEMORIES, operator, format="json"), 403, errors={"authority"})
    assert_problem(agent_client.post(RECALL, {"purpose": "billing"}), 403)
    assert MemoryRecord.objects.count() == 0


def test_supersedes_must_name_an_active_record_of_the_same_scope(api_write, agent_client, reviewer_client):
    unknown = memory_body(supersedes="00000000-0000-0000-0000-000000000000", supersedes_version=1)
    assert_problem(agent_client.post(MEMORIES, unknown, format="json"), 409)
    old = api_write()
    reviewer_client.post(f"{MEMORIES}{old['id']}/retire/", {"expected_version": 1})
    retired = memory_body(supersedes=old["id"], supersedes_version=2)
    assert_problem(agent_client.post(MEMORIES, retired, format="json"), 409)
    assert MemoryRecord.objects.count() == 1


def test_a_forgotten_record_shows_its_status_and_no_content(api_write, agent_client):
    record = api_write(subject="customer/zed")
    agent_client.post(FORGET, {"subject": "customer/zed"})
    for shown in (
        agent_client.get(f"{MEMORIES}{record['id']}/").json(),
        agent_client.get(MEMORIES, {"status": "forgotten"}).json()["results"][0],
    ):
        assert shown["id"] == record["id"]
        assert (shown["status"], shown["content"], shown["content_hash"]) == ("forgotten", None, None)


def test_list_filters_and_orders_within_scope(api_write, agent_client, client_for, tenant, make_credential):
    wide = client_for(make_credential(tenant, purposes=("support", "billing")))
    pref = api_write(subject="customer/acme", content="Likes email.")
    fact = api_write(kind="semantic", subject="customer/acme", content="Has 40 seats.", confidence=0.5)
    untrusted = api_write(subject="customer/zed", content="Zed seems upset.", **UNTRUSTED)
    billing = api_write(client=wide, purpose="billing", content="Pays yearly.")
    MemoryRecord.objects.filter(pk=pref["id"]).update(created_at=timezone.now() - timedelta(days=3))

    def ids(client=agent_client, **params):
        response = client.get(MEMORIES, params)
        assert response.status_code == 200, response.json()
        return [r["id"] for r in response.json()["results"]]

    assert set(ids()) == {pref["id"], fact["id"], untrusted["id"]}  # billing is not this token's purpose
    assert set(ids(wide)) == {pref["id"], fact["id"], untrusted["id"], billing["id"]}
    assert ids(status="quarantined") == [untrusted["id"]]
    assert ids(trust="untrusted") == [untrusted["id"]]
    assert ids(authority="agent") == [untrusted["id"]]
    assert ids(kind="semantic") == [fact["id"]]
    assert set(ids(subject="customer/acme")) == {pref["id"], fact["id"]}
    assert ids(wide, purpose="billing") == [billing["id"]]
    cutoff = (timezone.now() - timedelta(days=1)).isoformat()
    assert ids(created_before=cutoff) == [pref["id"]]
    assert pref["id"] not in ids(created_after=cutoff)
    assert ids(ordering="confidence")[0] == fact["id"]
    assert ids(ordering="-created_at")[-1] == pref["id"]
    assert_problem(agent_client.get(MEMORIES, {"status": "sleeping"}), 400, errors={"status"})
    assert_problem(agent_client.get(MEMORIES, {"ordering": "content"}), 400, errors={"ordering"})


def test_list_is_paginated(api_write, agent_client):
    created = [api_write(content=f"Note {i}.")["id"] for i in range(5)]
    first = agent_client.get(MEMORIES, {"page_size": 2}).json()
    assert first["count"] == 5 and len(first["results"]) == 2 and first["previous"] is None
    second = agent_client.get(first["next"]).json()
    last = agent_client.get(MEMORIES, {"page_size": 2, "page": 3}).json()
    seen = [r["id"] for page in (first, second, last) for r in page["results"]]
    assert sorted(seen) == sorted(created) and last["next"] is None
    assert_problem(agent_client.get(MEMORIES, {"page": 9}), 404)


@pytest.mark.parametrize("principal", ["agent", "reviewer"])
def test_listing_costs_the_same_number_of_queries_for_3_or_30_records(
    write,
    agent_client,
    reviewer_client,
    django_assert_num_queries,
    principal,
):
    client = agent_client if principal == "agent" else reviewer_client
    fix_target = write()
    write(supersedes=str(fix_target.pk), supersedes_version=1)

    def count_queries() -> int:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as queries:
            response = client.get(MEMORIES, {"page_size": 100})
        assert response.status_code == 200
        return len(queries), response.json()["count"]

    client.get(MEMORIES)  # the first request caches the agent's credential (memory.credentials)
    small, n_small = count_queries()
    for _ in range(28):
        write()
    large, n_large = count_queries()
    assert (n_small, n_large) == (2, 30)
    assert small == large
    with django_assert_num_queries(large):
        client.get(MEMORIES, {"page_size": 100})


def test_reviewers_read_their_tenants_records_and_transition_them_with_history(write, reviewer_client, reviewer):
    record = write(**UNTRUSTED)
    assert reviewer_client.get(f"{MEMORIES}{record.pk}/").json()["status"] == "quarantined"
    assert [r["id"] for r in reviewer_client.get(MEMORIES, {"status": "quarantined"}).json()["results"]] == [str(record.pk)]
    rejected = reviewer_client.post(f"{MEMORIES}{record.pk}/reject/", {"expected_version": 1, "note": "unsourced"})
    assert (rejected.status_code, rejected.json()["status"], rejected.json()["version"]) == (200, "rejected", 2)
    last = MemoryRecord.history.filter(id=record.pk).latest("history_date")
    assert (last.history_change_reason, last.history_user_id, last.history_note) == ("review.reject", reviewer.pk, "unsourced")

    active = write()
    retired = reviewer_client.post(f"{MEMORIES}{active.pk}/retire/", {"expected_version": 1})
    assert (retired.json()["status"], retired.json()["version"]) == ("expired", 2)
    assert MemoryRecord.history.filter(id=active.pk).latest("history_date").history_change_reason == "review.retire"


def test_a_transition_that_does_not_apply_is_409_and_changes_nothing(write, reviewer_client):
    record = write()  # active
    for action in ("promote", "reject"):
        body = assert_problem(reviewer_client.post(f"{MEMORIES}{record.pk}/{action}/", {"expected_version": 1}), 409)
        assert body["type"].endswith("invalid_transition")
    record.refresh_from_db()
    assert (record.status, record.version, record.history.count()) == ("active", 1, 1)


def test_agents_confirm_only_with_the_capability(write, agent_client, client_for, tenant, make_credential):
    record = write()
    without = client_for(make_credential(tenant))
    assert_problem(without.post(f"{MEMORIES}{record.pk}/confirm/", {"expected_version": 1}), 403)
    confirmed = agent_client.post(f"{MEMORIES}{record.pk}/confirm/", {"expected_version": 1, "note": "re-read the ticket"})
    assert confirmed.status_code == 200
    body = confirmed.json()
    assert (body["version"], body["trust"]) == (2, "trusted")  # an agent's confirmation is not a verification
    assert body["confirmed_at"] > record.confirmed_at.isoformat().replace("+00:00", "Z")
    last = MemoryRecord.history.filter(id=record.pk).latest("history_date")
    assert (last.history_change_reason, last.history_actor) == ("agent.confirm", "agent:acme/support-bot")


# Statements one recall runs, by database (neither depends on the items returned): the index choice,
# the ranking and the one load of the records on both; PostgreSQL also analyses the query
# (to_tsvector) and reads the scope's statistics with each term's df in one lookup of its tables;
# SQLite analyses the query in process (FTS5's own tokenizer, `engine.sqlite._fts5.fts5_tokens`: no statement)
# but counts with FTS5 itself: the terms' df in one statement, the scope's statistics in two. The
# second stage (memory.search.rerank) reads its candidates' sessions, then their neighbours (two statements); on
# SQLite, which reads the matches and the records holding none of the words in two, it re-ranks more
# rows than ten, so with few matches the second is read too (PostgreSQL scores this small scope whole).
# last_used_at is written off the request path (memory.usage).
RECALL_STATEMENTS = {"postgresql": 7, "sqlite": 9}


def test_recall_costs_the_same_statements_for_2_or_10_items_and_each_item_shows_every_field(write, agent_client):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for n in range(12):
        write(
            content=f"Invoice note {n}: the customer wants invoices by email.",
            subject="customer/acme",
            provenance={
                "source_type": "user_turn",
                "uri": "https://crm.example/1",
                "session_id": "s1",
                "turn_id": str(n),
                "tool": "crm",
                "source_version": "v2",
                "observed_at": "2026-11-01T10:00:00Z",
            },
        )
    agent_client.post(RECALL, {"purpose": "support", "query": "invoice"}, format="json")  # credential, default index

    def recall(limit: int) -> tuple[list[str], list[dict]]:
        with CaptureQueriesContext(connection) as queries:
            response = agent_client.post(RECALL, {"purpose": "support", "query": "invoice email", "limit": limit}, format="json")
        assert response.status_code == 200
        return [query["sql"] for query in queries], response.json()["items"]

    (few, two), (many, ten) = recall(2), recall(10)
    assert (len(two), len(ten)) == (2, 10)
    assert len(few) == len(many) == RECALL_STATEMENTS[connection.vendor]
    assert all(sql.lstrip().startswith(("SELECT", "WITH")) for sql in few + many)  # reads only: no scratch table
    assert sum('FROM "memory_memoryrecord"' in sql for sql in many) == 3  # the sessions, the neighbours, the load
    item = ten[0]
    assert item["provenance"] == {
        "source_type": "user_turn",
        "uri": "https://crm.example/1",
        "session_id": "s1",
        "turn_id": item["provenance"]["turn_id"],
        "tool": "crm",
        "source_version": "v2",
        "observed_at": "2026-11-01T10:00:00Z",
        "contaminated": False,
        "source": None,
        "verified": False,
    }
    assert {key for key, value in item.items() if value in (None, "", [])} == set()
    assert item["kind"] and item["context"].startswith(f"[{item['kind']} | {item['authority']} | confirmed ")
