"""Isolation: a token of another tenant, another agent or lacking a purpose never reaches tenant
A's records, by id, list, recall, transitions or forget; and recall is scoped in SQL."""

import uuid
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from memory import usage
from memory.models import Agent, MemoryKind, MemoryRecord, Status, Tenant, Trust, content_digest
from tests.api.conftest import FORGET, MEMORIES, RECALL, UNTRUSTED, assert_problem, recall_ids

pytestmark = pytest.mark.django_db

WORDS = ["email", "phone", "invoice", "staging", "deploy", "acme", "billing", "contact", "tea", "upset"]
SUBJECTS = ["customer/acme", "customer/zed", "customer/shared"]


@dataclass
class Outsider:
    name: str
    client: APIClient
    purposes: tuple[str, ...]
    is_agent: bool
    other_tenant: bool


def test_no_cross_scope_request_reaches_tenant_as_records(
    tenant,
    other_tenant,
    make_credential,
    make_reviewer,
    write,
    client_for,
):
    owner = make_credential(tenant, purposes=("support", "billing"), can_confirm=True, can_forget=True)
    victims = []
    for subject in SUBJECTS:
        for purpose in ("support", "billing"):
            for i, word in enumerate(WORDS[:3]):
                extra = UNTRUSTED if i == 2 else {}
                victims.append(
                    write(
                        credential_=owner,
                        subject=subject,
                        purpose=purpose,
                        content=f"A's secret about {word} for {subject}.",
                        **extra,
                    )
                )
    owner_client = client_for(owner)
    owners_forget_request = owner_client.post(FORGET, {"subject": "customer/nobody"}).json()["id"]
    snapshot = {r.pk: (r.status, r.version, r.confirmed_at) for r in MemoryRecord.objects.filter(tenant=tenant)}
    victim_ids = {str(pk) for pk in snapshot}

    # Outsiders: another tenant (same agent slug and purposes), another agent of the same tenant,
    # the same agent with a token lacking the records' purposes, and another tenant's reviewer.
    b_agent = make_credential(other_tenant, purposes=("support", "billing"), can_confirm=True, can_forget=True)
    other_agent = make_credential(
        tenant, agent_slug="sales-bot", purposes=("support", "billing"), can_confirm=True, can_forget=True
    )
    lacking = make_credential(tenant, purposes=("marketing",), can_confirm=True, can_forget=True)
    for credential in (b_agent, other_agent, lacking):  # each has records of its own, under the same subjects
        purpose = credential.purposes[0]
        for subject in SUBJECTS:
            write(credential_=credential, subject=subject, purpose=purpose, content=f"Own note about email for {subject}.")
    outsiders = [
        Outsider("tenant-b agent", client_for(b_agent), ("support", "billing"), True, True),
        Outsider("tenant-a other agent", client_for(other_agent), ("support", "billing"), True, False),
        Outsider("tenant-a lacking purpose", client_for(lacking), ("marketing",), True, False),
        Outsider("tenant-b reviewer", client_for(make_reviewer(other_tenant, username="globex-reviewer")), (), False, True),
    ]
    victim_list = sorted(victim_ids)
    requests_made = []

    actions = st.sampled_from(["get", "list", "recall", "confirm", "promote", "reject", "retire", "forget"])
    list_params = st.fixed_dictionaries(
        {},
        optional={
            "subject": st.sampled_from(SUBJECTS),
            "purpose": st.sampled_from(["support", "billing", "marketing"]),
            "tenant": st.sampled_from(["acme", "globex"]),
            "agent": st.sampled_from(["support-bot", "sales-bot"]),
            "status": st.sampled_from(["active", "quarantined"]),
        },
    )

    # Every action at least once whatever the generator draws (a run once drew no `confirm` in 260).
    every_action = [
        example(
            who=outsiders[n % len(outsiders)],
            action=action,
            victim=victim_list[0],
            subject=SUBJECTS[0],
            query="",
            params={},
            purpose_pick=0,
            version=1,
        )
        for n, action in enumerate(["get", "list", "recall", "confirm", "promote", "reject", "retire", "forget"])
    ]

    @settings(max_examples=260, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(
        who=st.sampled_from(outsiders),
        action=actions,
        victim=st.sampled_from(victim_list),
        subject=st.sampled_from(SUBJECTS),
        query=st.lists(st.sampled_from(WORDS), max_size=4).map(" ".join),
        params=list_params,
        purpose_pick=st.integers(min_value=0, max_value=5),
        version=st.integers(min_value=1, max_value=3),
    )
    def cross_scope_request(who, action, victim, subject, query, params, purpose_pick, version):
        requests_made.append(action)
        client = who.client
        if action == "get":
            assert_problem(client.get(f"{MEMORIES}{victim}/"), 404)
        elif action == "list":
            response = client.get(MEMORIES, {**params, "page_size": 200})
            assert response.status_code == 200
            assert not {r["id"] for r in response.json()["results"]} & victim_ids
        elif action == "recall":
            purpose = (who.purposes or ("support",))[purpose_pick % max(1, len(who.purposes))]
            response = client.post(RECALL, {"purpose": purpose, "query": query, "subject": subject, "limit": 50})
            if who.is_agent:
                assert response.status_code == 200
                assert not {item["id"] for item in response.json()["items"]} & victim_ids
            else:
                assert_problem(response, 403)
        elif action == "confirm":
            assert_problem(client.post(f"{MEMORIES}{victim}/confirm/", {"expected_version": version}), 404)
        elif action in ("promote", "reject", "retire"):
            # Agent tokens may never; a reviewer of another tenant does not find the record.
            assert_problem(
                client.post(f"{MEMORIES}{victim}/{action}/", {"expected_version": version}), 403 if who.is_agent else 404
            )
        elif action == "forget":
            if who.is_agent and who.other_tenant:
                # It forgets its own tenant's records of that subject, and only those.
                own = MemoryRecord.objects.filter(tenant=other_tenant, subject=subject).exclude(status=Status.FORGOTTEN).count()
                response = client.post(FORGET, {"subject": subject})
                assert (response.status_code, response.json()["affected"]) == (202, own)
            elif who.other_tenant:
                assert_problem(client.post(FORGET, {"subject": subject, "tenant": "acme"}), 404)
            if who.name == "tenant-a lacking purpose":
                # The same agent as the owner (its forget requests are its own); forgetting is
                # tenant-wide by design, so this token's isolation is about records: read one.
                assert_problem(client.get(f"{MEMORIES}{victim}/"), 404)
            else:
                assert_problem(client.get(f"{FORGET}{owners_forget_request}/"), 404)

    for add_example in every_action:
        cross_scope_request = add_example(cross_scope_request)
    cross_scope_request()
    assert len(requests_made) >= 200
    assert set(requests_made) == {"get", "list", "recall", "confirm", "promote", "reject", "retire", "forget"}
    after = {r.pk: (r.status, r.version, r.confirmed_at) for r in MemoryRecord.objects.filter(tenant=tenant, pk__in=snapshot)}
    assert after == snapshot


def test_an_agent_token_cannot_promote_reject_or_retire_whatever_it_claims(write, tenant, make_credential, client_for):
    quarantined = write(**UNTRUSTED)
    active = write()
    mighty = client_for(make_credential(tenant, can_confirm=True, can_forget=True, can_assert_operator=True))
    for record, action in ((quarantined, "promote"), (quarantined, "reject"), (active, "retire")):
        for body in ({"expected_version": 1}, {"expected_version": 1, "reviewer": "rita", "is_human": True}, {}):
            assert_problem(mighty.post(f"{MEMORIES}{record.pk}/{action}/", body), 403)
    assert_problem(mighty.post(f"{MEMORIES}{uuid.uuid4()}/promote/", {"expected_version": 1}), 403)
    assert [
        (r.status, r.version) for r in (MemoryRecord.objects.get(pk=quarantined.pk), MemoryRecord.objects.get(pk=active.pk))
    ] == [("quarantined", 1), ("active", 1)]


def test_a_reviewer_cannot_act_on_another_tenants_records(
    write, tenant, other_tenant, make_credential, make_reviewer, client_for
):
    theirs = write(credential_=make_credential(other_tenant), **UNTRUSTED)
    acme_reviewer = client_for(make_reviewer(tenant))
    for action in ("promote", "reject", "confirm"):
        assert_problem(acme_reviewer.post(f"{MEMORIES}{theirs.pk}/{action}/", {"expected_version": 1}), 404)
    assert_problem(acme_reviewer.get(f"{MEMORIES}{theirs.pk}/"), 404)
    assert acme_reviewer.get(MEMORIES).json()["count"] == 0
    theirs.refresh_from_db()
    assert (theirs.status, theirs.version, theirs.history.count()) == ("quarantined", 1, 1)


def _bulk_records(tenant: Tenant, agent: Agent, count: int, *, content: str) -> None:
    """Plain rows (a factory, not the service: this is volume, not behaviour)."""
    kind = MemoryKind.objects.get(name="preference")
    now = timezone.now()
    MemoryRecord.objects.bulk_create(
        [
            MemoryRecord(
                tenant=tenant,
                agent=agent,
                subject="customer/acme",
                purpose="support",
                kind=kind,
                content=f"{content} #{i}",
                content_hash=content_digest(f"{content} #{i}"),
                source_type="user_turn",
                session_id="s-bulk",
                authority="user",
                trust=Trust.TRUSTED,
                confidence=0.9,
                created_at=now,
                confirmed_at=now,
                expires_at=now + timedelta(days=30),
                status=Status.ACTIVE,
            )
            for i in range(count)
        ],
        batch_size=2000,
    )


def test_recall_over_10000_records_of_other_tenants_returns_none_of_them(write, agent_client, tenant):
    for n in range(3):
        other = Tenant.objects.create(slug=f"other-{n}")
        # Same agent slug, purpose and subject, and content that matches the query better.
        agent = Agent.objects.create(tenant=other, slug="support-bot")
        _bulk_records(other, agent, 3334, content="Acme prefers email, email, email over phone")
    assert MemoryRecord.objects.exclude(tenant=tenant).count() >= 10000
    mine = write(content="Acme prefers email.")
    response = agent_client.post(RECALL, {"purpose": "support", "query": "acme prefers email over phone", "limit": 50})
    assert [item["id"] for item in response.json()["items"]] == [str(mine.pk)]
    listed = agent_client.get(MEMORIES, {"page_size": 200}).json()
    assert [r["id"] for r in listed["results"]] == [str(mine.pk)]


def test_recall_costs_a_constant_number_of_queries(write, agent_client):
    def recall_queries(body) -> int:
        usage.flush()  # last_used_at is written after a response once the buffer is due: not in this count
        with CaptureQueriesContext(connection) as queries:
            response = agent_client.post(RECALL, {"purpose": "support", **body})
        assert response.status_code == 200
        return len(queries), len(response.json()["items"])

    write(content="email note 0")
    agent_client.get(MEMORIES)  # the first request caches the agent's credential (memory.credentials)
    small = recall_queries({"query": "email note", "limit": 50})
    small_kinds = recall_queries({"query": "email note", "limit": 50, "kinds": ["preference"], "subject": "customer/acme"})
    for i in range(1, 40):
        write(content=f"email note {i}")
    large = recall_queries({"query": "email note", "limit": 50})
    large_kinds = recall_queries({"query": "email note", "limit": 50, "kinds": ["preference"], "subject": "customer/acme"})
    assert (small[1], large[1]) == (1, 40)
    assert small[0] == large[0] and small_kinds[0] == large_kinds[0]
    # credential, active index, query analysis (on SQLite through a temporary FTS5 table, a statement
    # per term), scope statistics, document frequencies, the ranked streams, the records,
    # last_used_at: a number that depends on the query's terms, never on how many records there are.
    assert large[0] <= (10 if connection.vendor == "postgresql" else 16)
    assert recall_ids(agent_client, query="email note", limit=5) and recall_ids(agent_client, query="x", limit=5) == []
    assert len(recall_ids(agent_client, query="x", limit=5, min_relevance=0)) == 5  # nothing relevant, unless no floor
