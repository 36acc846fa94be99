"""GET /api/v1/events/?after=CURSOR: an agent reads its own records' events, a reviewer their
tenants', page by page with `next`; a cursor older than the retention is a 410."""

from datetime import timedelta

import pytest
from django.utils import timezone

from governance.retention.prune import prune
from memory.models import Event, EventLog
from tests.api.conftest import UNTRUSTED, assert_problem

EVENTS = "/api/v1/events/"


def read_all(client, after=None, limit=2) -> tuple[list[dict], int]:
    events, cursor = [], after
    while True:
        query = {"limit": limit} | ({"after": cursor} if cursor is not None else {})
        response = client.get(EVENTS, query)
        assert response.status_code == 200, response.json()
        body = response.json()
        events += body["events"]
        if not body["events"]:
            return events, body["next"]
        cursor = body["next"]


@pytest.mark.django_db
def test_an_agent_reads_its_own_events_in_order_page_by_page(
    api_write, agent_client, tenant, other_tenant, make_credential, client_for
):
    mine = [api_write()["id"], api_write(**UNTRUSTED)["id"], api_write()["id"]]
    colleague = make_credential(tenant, agent_slug="sales-bot")
    api_write(client=client_for(colleague))
    api_write(client=client_for(make_credential(other_tenant)))
    events, cursor = read_all(agent_client)
    assert [(e["type"], e["data"]["record"]["id"]) for e in events] == [
        ("memory.written", mine[0]),
        ("memory.quarantined", mine[1]),
        ("memory.written", mine[2]),
    ]
    assert {e["tenant"] for e in events} == {"acme"}
    assert all("content" not in e["data"]["record"] for e in events)
    # Nothing new after the cursor; a new write appears after it, once.
    assert agent_client.get(EVENTS, {"after": cursor}).json()["events"] == []
    newest = api_write()["id"]
    (event,) = agent_client.get(EVENTS, {"after": cursor}).json()["events"]
    assert event["data"]["record"]["id"] == newest


@pytest.mark.django_db
def test_a_reviewer_reads_every_agent_of_their_tenants_only(
    api_write, reviewer_client, make_credential, other_tenant, client_for
):
    api_write()
    api_write(client=client_for(make_credential(other_tenant)))
    events, _ = read_all(reviewer_client, limit=50)
    assert len(events) == 1 and events[0]["tenant"] == "acme"


@pytest.mark.django_db
def test_a_cursor_older_than_the_retention_is_gone(api_write, agent_client, settings):
    api_write()
    first = agent_client.get(EVENTS).json()
    api_write()
    Event.objects.update(occurred_at=timezone.now() - timedelta(days=settings.EVENTS_RETENTION_DAYS + 1))
    counts = prune(now=timezone.now(), batch_size=100)
    assert counts["events_deleted"] == 2 and not Event.objects.exists()
    response = agent_client.get(EVENTS, {"after": 0})
    assert_problem(response, 410)
    # the horizon is where a fresh reader starts; events after it are served
    assert EventLog.objects.get(pk=1).pruned_through >= first["next"]
    fresh = agent_client.get(EVENTS).json()
    assert fresh["events"] == []
    api_write()
    assert len(agent_client.get(EVENTS, {"after": fresh["next"]}).json()["events"]) == 1


@pytest.mark.django_db
def test_a_malformed_cursor_is_a_400(agent_client):
    assert_problem(agent_client.get(EVENTS, {"after": "yesterday"}), 400, errors={"after"})
    assert_problem(agent_client.get(EVENTS, {"limit": 0}), 400, errors={"limit"})


@pytest.mark.django_db
def test_reading_the_feed_takes_a_fixed_number_of_statements(api_write, agent_client, django_assert_max_num_queries):
    for _ in range(20):
        api_write()
    agent_client.get(EVENTS)  # sequences the writes
    # token, sequencer's check, the log row, the page (tenant and kind joined): never one per event
    with django_assert_max_num_queries(6):
        body = agent_client.get(EVENTS, {"limit": 50}).json()
    assert len(body["events"]) == 20
