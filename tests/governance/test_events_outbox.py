"""The transactional outbox: every lifecycle change leaves its event in the same transaction (none
without the change, none left by a change rolled back), bulk moves write theirs set-based, and no
event carries content or provenance, least of all a forgotten record's."""

import json

import pytest
from django.db import transaction
from django.utils import timezone

from governance.forget.services import forget_request_create
from memory.actors import Actor
from memory.models import Event, MemoryRecord, Status
from memory.outbox.payload import event_payload
from memory.outbox.write import sequence_events
from memory.services import (
    RevokedSource,
    memory_expire_due,
    memory_promote,
    memory_revoke_source,
    memory_write_batch,
)
from tests.conftest import memory_body

UNTRUSTED = {"authority": "agent", "provenance": {"source_type": "agent_inference"}}
CANARY = "canary-7f3a Prefers the secret handshake"


def events_of(record_id) -> list[Event]:
    return list(Event.objects.filter(record_id=record_id).select_related("tenant", "kind").order_by("seq"))


@pytest.mark.django_db
def test_a_write_leaves_one_event_with_ids_and_metadata_only(write):
    record = write(content=CANARY, provenance={"uri": "chat://secret-session"})
    (event,) = events_of(record.pk)
    payload = event_payload(event)
    assert payload["type"] == "memory.written"
    assert payload["tenant"] == "acme"
    assert payload["data"]["record"] == {
        "id": str(record.pk),
        "version": 1,
        "status": "active",
        "authority": "user",
        "kind": "preference",
    }
    text = json.dumps(payload)
    assert "canary" not in text and "secret-session" not in text and "customer/acme" not in text


@pytest.mark.django_db
def test_a_quarantined_write_and_its_promotion_are_two_events(write, reviewer_actor):
    record = write(**UNTRUSTED)
    memory_promote(record_id=record.pk, expected_version=1, actor=reviewer_actor)
    assert [(e.type, e.version, e.status) for e in events_of(record.pk)] == [
        ("memory.quarantined", 1, "quarantined"),
        ("memory.promoted", 2, "active"),
    ]


@pytest.mark.django_db
def test_a_transition_rolled_back_leaves_no_event(write, reviewer_actor):
    record = write(**UNTRUSTED)
    with pytest.raises(RuntimeError), transaction.atomic():
        memory_promote(record_id=record.pk, expected_version=1, actor=reviewer_actor)
        assert len(events_of(record.pk)) == 2  # written inside the transaction...
        raise RuntimeError("the caller's transaction fails after the promotion")
    assert [e.type for e in events_of(record.pk)] == ["memory.quarantined"]  # ...and gone with it
    assert MemoryRecord.objects.get(pk=record.pk).status == Status.QUARANTINED


@pytest.mark.django_db
def test_a_batch_writes_its_events_in_one_statement(credential, django_assert_max_num_queries):
    with django_assert_max_num_queries(40) as captured:
        results = memory_write_batch(credential=credential, items=[memory_body() for _ in range(30)])
    inserts = [q["sql"] for q in captured.captured_queries if q["sql"].startswith("INSERT") and "memory_event" in q["sql"]]
    assert len(inserts) == 1
    assert Event.objects.filter(record_id__in=[r.record.pk for r in results], type="memory.written").count() == 30


@pytest.mark.django_db
def test_bulk_expiry_and_revocation_write_one_event_per_record(make_records, credential, reviewer_actor):
    expired = make_records(25, expired=True)
    assert memory_expire_due(actor=Actor.job("expire"), now=timezone.now(), batch_size=10) == 25
    assert Event.objects.filter(type="memory.expired", record_id__in=expired, version=2, status="expired").count() == 25

    active = make_records(12, expired=False, subject="customer/other")
    memory_revoke_source(
        source=RevokedSource(tenant_id=credential.agent.tenant_id, agent_id=credential.agent_id), actor=reviewer_actor
    )
    revoked = Event.objects.filter(type="memory.revoked", record_id__in=active)
    assert revoked.count() == 12 and set(revoked.values_list("status", flat=True)) == {"quarantined"}


@pytest.mark.django_db
def test_forget_writes_one_forgotten_event_naming_the_request_and_no_content(write, tenant, reviewer_actor):
    records = [write(content=f"{CANARY} {i}", subject="customer/canary") for i in range(3)]
    before = Event.objects.count()
    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/canary", reason="erasure #1")
    (event,) = Event.objects.filter(seq__gt=Event.objects.order_by("seq").values_list("seq", flat=True)[before - 1])
    assert event.type == "memory.forgotten" and event.record_id is None
    assert event.data == {"forget_request": str(request.pk), "records": sorted(str(r.pk) for r in records)}
    for stored in Event.objects.select_related("tenant", "kind"):
        text = json.dumps(event_payload(stored))
        assert "canary" not in text and "erasure" not in text


@pytest.mark.django_db
def test_events_get_increasing_positions_once_committed(write):
    records = [write() for _ in range(5)]
    last = sequence_events()
    positions = list(
        Event.objects.filter(record_id__in=[r.pk for r in records]).order_by("seq").values_list("position", flat=True)
    )
    assert positions == sorted(positions) and len(set(positions)) == 5 and positions[-1] <= last
    later = write()
    assert sequence_events() > last
    assert Event.objects.get(record_id=later.pk).position > positions[-1]
