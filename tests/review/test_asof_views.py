"""The reviewer UI's time travel: the "state at..." control on a memory's page and the page "What
would recall have returned", with a Django test client against the real database."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from governance.forget.jobs import propagate_forgets
from memory.recall import RecallQuery, recall
from memory.services import memory_forget_subject, memory_promote, memory_retire

pytestmark = pytest.mark.django_db

URL = "/review/recall-as-of/"


def moment_after_writes():
    moment = timezone.now()
    while timezone.now() == moment:
        pass
    return moment


def stamp(moment) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")


def test_the_memory_page_shows_the_state_at_a_moment(reviewer_client, write, reviewer_actor):
    record = write(content="Acme pays by card.", authority="agent", provenance={"source_type": "agent_inference"})
    quarantined_then = moment_after_writes()
    memory_promote(record_id=record.pk, expected_version=1, actor=reviewer_actor)
    page = reviewer_client.get(f"/review/memories/{record.pk}/")
    # A text box for the time as the pages print it (not the browser's own date-and-time control).
    assert page.status_code == 200 and 'type="datetime-local"' not in page.content.decode()
    assert 'placeholder="YYYY-MM-DD HH:MM:SS"' in page.content.decode()
    page = reviewer_client.get(f"/review/memories/{record.pk}/", {"as_of": stamp(quarantined_then)})
    state = page.context["state_at"]["state"]
    assert state.record.status == "quarantined" and state.record.version == 1
    assert 'data-testid="as-of-state"' in page.content.decode()


def test_bad_or_early_moments_are_messages_in_the_form(reviewer_client, write):
    before = moment_after_writes()
    record = write()
    for value, expected in (
        ("not a time", "Enter a date and time"),
        (stamp(timezone.now() + timedelta(days=2)), "future"),
        (stamp(before), "did not exist yet"),
        ("0001-01-01T00:00:00", "Must lie between"),
    ):
        page = reviewer_client.get(f"/review/memories/{record.pk}/", {"as_of": value})
        assert page.status_code == 200
        assert expected in page.content.decode(), value


def test_forgotten_content_never_shows_on_the_memory_page_for_any_moment(reviewer_client, write, reviewer_actor, tenant):
    record = write(content="Dana's door code is 4711.", subject="customer/dana")
    active_then = moment_after_writes()
    memory_forget_subject(tenant_id=tenant.pk, subject="customer/dana", actor=reviewer_actor)
    for propagate in (False, True):
        if propagate:
            propagate_forgets(now=timezone.now(), batch_size=100)
        page = reviewer_client.get(f"/review/memories/{record.pk}/", {"as_of": stamp(active_then)})
        html = page.content.decode()
        assert "4711" not in html and "forgotten since" in html
        assert page.context["state_at"]["state"].record.status == "active"


def test_recall_as_of_page_shows_what_recall_returned_then(reviewer_client, write, credential, reviewer_actor):
    records = [
        write(content=text)
        for text in ("Acme wants invoices by email.", "Acme invoices go to finance.", "Acme likes short answers.")
    ]
    then = [
        item.record.pk
        for item in recall(credential=credential, q=RecallQuery(query="acme invoices", purpose="support", limit=20)).items
    ]
    moment = moment_after_writes()
    memory_retire(record_id=records[0].pk, expected_version=1, actor=reviewer_actor)
    write(content="Acme invoices are due in 30 days.")
    agent = credential.agent
    page = reviewer_client.get(
        URL, {"query": "acme invoices", "agent": agent.pk, "purpose": "support", "as_of": stamp(moment), "subject": ""}
    )
    assert page.status_code == 200
    reconstructed = page.context["reconstructed"]
    assert [item.record.pk for item in reconstructed.result.items] == then
    html = page.content.decode()
    assert "Acme wants invoices by email." in html and "due in 30 days" not in html


def test_recall_as_of_page_reports_bad_input_in_the_form(reviewer_client, credential, other_tenant, make_credential):
    foreign = make_credential(other_tenant, agent_slug="globex-bot").agent
    page = reviewer_client.get(URL)
    assert page.status_code == 200 and page.context["reconstructed"] is None
    cases = [
        ({"agent": foreign.pk, "purpose": "support", "as_of": "2026-01-01T00:00:00"}, "agent"),
        ({"agent": credential.agent.pk, "purpose": "", "as_of": "2026-01-01T00:00:00"}, "purpose"),
        ({"agent": credential.agent.pk, "purpose": "support", "as_of": "yesterday"}, "as_of"),
        ({"agent": "x", "purpose": "support", "as_of": stamp(timezone.now() + timedelta(days=1))}, "as_of"),
        ({"agent": credential.agent.pk, "purpose": "support", "as_of": "2026-01-01T00:00:00", "query": "x" * 5000}, "query"),
    ]
    for params, field in cases:
        page = reviewer_client.get(URL, params)
        assert page.status_code == 200
        assert field in page.context["form"].errors, (params, page.context["form"].errors)
        assert 'role="alert"' in page.content.decode()


def test_recall_as_of_page_is_in_the_nav_and_its_queries_do_not_grow_with_the_records(reviewer_client, write, credential):
    assert 'href="/review/recall-as-of/"' in reviewer_client.get("/review/").content.decode()

    def count(n):
        for i in range(n):
            write(content=f"Acme invoice note {i}.")
        moment = moment_after_writes()
        with CaptureQueriesContext(connection) as ctx:
            page = reviewer_client.get(
                URL, {"query": "acme invoice", "agent": credential.agent.pk, "purpose": "support", "as_of": stamp(moment)}
            )
            assert page.status_code == 200 and page.context["reconstructed"].result.items
        return len(ctx)

    assert count(3) == count(30)
