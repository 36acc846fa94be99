"""Forget reaches the copies subscribers keep: each copy-keeping subscription is a receipt
`webhook:<id>` on the forget request, open until the subscriber acknowledges (answering the
`memory.forgotten` delivery with {"acknowledged": true}, or a signed POST later); until then the
request stays `propagating`, as the API, the reviewer page and the dashboard show."""

import json
import re
from datetime import UTC, datetime

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from standardwebhooks import Webhook

from governance.events.delivery import deliver_webhooks
from governance.events.models import Delivery
from governance.events.services import subscription_create, subscription_delete
from governance.forget.models import ForgetRequest
from governance.forget.propagation import propagate_forget_request
from governance.forget.services import forget_request_create
from memory.models import Event, ReviewerToken
from tests.api.conftest import assert_problem, bearer_client
from tests.governance.webhook_receiver import Receiver

FORGET = "/api/v1/forget/"
ACKNOWLEDGED = (200, b'{"acknowledged": true}', {"Content-Type": "application/json"})


@pytest.fixture
def receivers(settings):
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = True
    pair = [Receiver().start(), Receiver().start()]
    yield pair
    for receiver in pair:
        receiver.stop()


@pytest.fixture
def reviewer_client(reviewer):
    return bearer_client(ReviewerToken.issue(user=reviewer)[1])


def signed(subscription, body: dict) -> tuple[str, dict]:
    raw = json.dumps(body)
    now = datetime.now(UTC)
    msg_id = f"ack_{subscription.pk.hex[:12]}"
    headers = {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(subscription.secret).sign(msg_id, now, raw),
    }
    return raw, headers


def receipts(client, request_id) -> dict:
    body = client.get(f"{FORGET}{request_id}/").json()
    return {
        "status": body["status"],
        **{r["artifact"]: r["completed_at"] for r in body["receipts"] if r["artifact"].startswith("webhook:")},
    }


@pytest.mark.django_db
def test_a_forget_stays_open_until_both_copy_keepers_acknowledge(
    tenant, reviewer, reviewer_actor, receivers, write, reviewer_client, client
):
    first, second = receivers
    keeps_a = subscription_create(actor=reviewer_actor, tenant=tenant, url=first.url, events=["*"], keeps_copies=True)
    keeps_b = subscription_create(
        actor=reviewer_actor, tenant=tenant, url=second.url, events=["memory.promoted"], keeps_copies=True
    )
    first.answer = lambda r: ACKNOWLEDGED if r.event["type"] == "memory.forgotten" else (200, b"{}", {})
    records = [write(subject="customer/leaving") for _ in range(2)]

    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/leaving", reason="erasure #9")
    propagate_forget_request(request)  # every artifact purged: only the subscribers keep it open
    request.refresh_from_db()
    assert request.status == "propagating"
    assert receipts(reviewer_client, request.pk) == {
        "status": "propagating",
        f"webhook:{keeps_a.pk}": None,
        f"webhook:{keeps_b.pk}": None,
    }

    pages = Client()
    pages.force_login(reviewer)
    detail = pages.get(reverse("review:forget_detail", args=[request.pk])).content.decode()
    for keeper in (keeps_a, keeps_b):  # each copy keeper's receipt, pending
        row = re.search(rf"<tr><th scope=\"row\">webhook:{keeper.pk}</th>(.*?)</tr>", detail, re.S)
        assert row and "pending" in row.group(1), detail
    cache.clear()
    dashboard = pages.get(reverse("review:dashboard")).content.decode()
    assert re.search(r'<th scope="row">Forget requests</th><td>1</td>', dashboard), dashboard  # waiting in the queue

    deliver_webhooks(now=timezone.now(), batch_size=100)
    (forgotten,) = [r.event for r in second.received]  # b wants only promotions, but keeps copies
    assert forgotten["type"] == "memory.forgotten"
    assert forgotten["data"] == {"forget_request": str(request.pk), "records": sorted(str(r.pk) for r in records)}
    state = receipts(reviewer_client, request.pk)
    assert (
        state["status"] == "propagating" and state[f"webhook:{keeps_a.pk}"] is not None and state[f"webhook:{keeps_b.pk}"] is None
    )

    # The second acknowledges later, signed like a delivery (no token).
    raw, headers = signed(keeps_b, {"webhook": str(keeps_b.pk)})
    response = client.post(f"{FORGET}{request.pk}/acknowledgements/", raw, content_type="application/json", headers=headers)
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "completed"
    assert ForgetRequest.objects.get(pk=request.pk).status == "completed"
    assert None not in receipts(reviewer_client, request.pk).values()
    cache.clear()  # the dashboard is computed once a minute
    dashboard = pages.get(reverse("review:dashboard")).content.decode()
    assert re.search(r'<th scope="row">Forget requests</th><td>0</td>', dashboard), dashboard


@pytest.mark.django_db
def test_an_acknowledgement_must_be_signed_by_the_webhook(tenant, reviewer_actor, receivers, write, client):
    keeps = subscription_create(actor=reviewer_actor, tenant=tenant, url=receivers[0].url, events=["*"], keeps_copies=True)
    write(subject="customer/leaving")
    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/leaving")
    raw, headers = signed(keeps, {"webhook": str(keeps.pk)})
    url = f"{FORGET}{request.pk}/acknowledgements/"
    forged = {**headers, "webhook-signature": "v1," + "A" * 44}
    assert_problem(client.post(url, raw, content_type="application/json", headers=forged), 403)
    other = json.dumps({"webhook": "00000000-0000-0000-0000-000000000000"})
    assert_problem(client.post(url, other, content_type="application/json", headers=headers), 404)
    assert_problem(client.post(url, "[]", content_type="application/json", headers=headers), 400)
    request.refresh_from_db()
    assert request.status == "propagating"
    assert request.receipts.get(artifact=f"webhook:{keeps.pk}").completed_at is None


@pytest.mark.django_db
def test_without_copy_keepers_a_forget_completes_as_before(tenant, reviewer_actor, receivers, write):
    subscription_create(actor=reviewer_actor, tenant=tenant, url=receivers[0].url, events=["*"], keeps_copies=False)
    write(subject="customer/leaving")
    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/leaving")
    propagate_forget_request(request)
    request.refresh_from_db()
    assert request.status == "completed"
    assert not request.receipts.filter(artifact__startswith="webhook:").exists()


@pytest.mark.django_db
def test_no_event_body_or_log_line_carries_a_forgotten_records_content(tenant, reviewer_actor, receivers, write, caplog):
    """A canary: its content, subject and provenance travel nowhere outside the record."""
    canary = "canary-91c2 keeps a spare key under the doormat"
    caplog.set_level("DEBUG")
    receiver = receivers[0]
    receiver.answer = lambda r: (500, b"", {}) if len(receiver.received) == 1 else ACKNOWLEDGED  # one failure: logged
    subscription_create(actor=reviewer_actor, tenant=tenant, url=receiver.url, events=["*"], keeps_copies=True)
    write(content=canary, subject="customer/canary-91c2", provenance={"uri": "chat://canary-91c2"})
    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/canary-91c2", reason="erasure")
    for _ in range(3):
        deliver_webhooks(now=timezone.now(), batch_size=100)
        Delivery.objects.filter(status="pending").update(next_attempt_at=timezone.now())
    propagate_forget_request(request)
    assert {r.event["type"] for r in receiver.received} == {"memory.written", "memory.forgotten"}
    sent = " ".join(r.body + json.dumps(r.headers) for r in receiver.received)
    logged = " ".join(f"{record.getMessage()} {record.__dict__}" for record in caplog.records)
    stored = json.dumps(list(Event.objects.values_list("data", flat=True)))
    for text in (sent, logged, stored):
        assert "canary-91c2" not in text
    assert any("webhook delivery failed" in record.getMessage() for record in caplog.records)


@pytest.mark.django_db
def test_deleting_a_copy_keeper_closes_its_receipts_saying_so(tenant, reviewer_actor, receivers, write):
    keeps = subscription_create(actor=reviewer_actor, tenant=tenant, url=receivers[0].url, events=["*"], keeps_copies=True)
    write(subject="customer/leaving")
    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/leaving")
    name = f"webhook:{keeps.pk}"
    subscription_delete(keeps)
    receipt = request.receipts.get(artifact=name)
    assert receipt.completed_at is not None and "deleted" in receipt.note
    propagate_forget_request(request)
    request.refresh_from_db()
    assert request.status == "completed"
