"""Webhook subscriptions and deliveries against a real HTTP receiver: Standard Webhooks signatures
verified with the standardwebhooks library, order per record, retries with the same id, dead
letters and replay, disabling a failing endpoint (with its alert), secret rotation, filters."""

from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.utils import timezone

from governance.alerts.services import measure
from governance.events.delivery import BACKOFF, MAX_ATTEMPTS, deliver_webhooks, replay
from governance.events.models import Delivery, WebhookSubscription
from governance.events.services import subscription_create, subscription_rotate_secret
from memory.actors import Actor
from memory.models import Event, ReviewerToken
from memory.services import memory_confirm, memory_promote
from tests.api.conftest import UNTRUSTED, assert_problem, bearer_client
from tests.governance.webhook_receiver import Receiver

WEBHOOKS = "/api/v1/webhooks/"


@pytest.fixture
def receiver(settings):
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = True  # the receiver listens on loopback
    receiver = Receiver().start()
    yield receiver
    receiver.stop()


@pytest.fixture
def subscribe(tenant, reviewer_actor, receiver):
    def make(events=("*",), url=None, **options) -> WebhookSubscription:
        return subscription_create(actor=reviewer_actor, tenant=tenant, url=url or receiver.url, events=list(events), **options)

    return make


def run() -> dict:
    return deliver_webhooks(now=timezone.now(), batch_size=100)


def make_due() -> None:
    """As if the backoff had passed."""
    Delivery.objects.filter(status=Delivery.Status.PENDING).update(next_attempt_at=timezone.now())


def client_for(principal):
    """An API client with an agent's token, or a reviewer's personal token."""
    raw = getattr(principal, "raw_token", None) or ReviewerToken.issue(user=principal)[1]
    return bearer_client(raw)


@pytest.fixture
def webhook_reviewer(reviewer):
    reviewer.user_permissions.add(Permission.objects.get(codename="add_webhooksubscription"))
    return reviewer


@pytest.mark.django_db
def test_a_reviewer_subscribes_and_sees_the_secret_only_once(webhook_reviewer, receiver):
    client = client_for(webhook_reviewer)
    response = client.post(WEBHOOKS, {"url": receiver.url, "events": ["*"], "keeps_copies": True}, format="json")
    assert response.status_code == 201, response.json()
    created = response.json()
    assert created["secret"].startswith("whsec_") and created["tenant"] == "acme" and created["keeps_copies"] is True
    listed = client.get(WEBHOOKS).json()["results"]
    assert [w["id"] for w in listed] == [created["id"]] and "secret" not in listed[0]
    assert "secret" not in client.get(f"{WEBHOOKS}{created['id']}/").json()
    assert client.delete(f"{WEBHOOKS}{created['id']}/").status_code == 204
    assert not WebhookSubscription.objects.exists()


@pytest.mark.django_db
def test_subscribing_needs_the_permission_and_valid_input(credential, webhook_reviewer, settings):
    body = {"url": "https://hooks.example.com/in", "events": ["*"]}
    assert client_for(credential).post(WEBHOOKS, body, format="json").status_code == 403
    client = client_for(webhook_reviewer)
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = False
    for url in (
        "http://127.0.0.1:9/",
        "http://10.0.0.1/",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/",
        "http://localhost/",
    ):
        assert_problem(client.post(WEBHOOKS, {**body, "url": url}, format="json"), 400, errors={"url"})
    assert_problem(client.post(WEBHOOKS, {**body, "url": "http://127.0.0.1/", "events": ["memory.eaten"]}, format="json"), 400)
    assert_problem(client.post(WEBHOOKS, {**body, "events": []}, format="json"), 400, errors={"events"})
    assert not WebhookSubscription.objects.exists()


@pytest.mark.django_db
def test_a_reviewer_without_the_permission_is_refused(reviewer):
    response = client_for(reviewer).post(WEBHOOKS, {"url": "https://hooks.example.com/", "events": ["*"]}, format="json")
    assert response.status_code == 403


@pytest.mark.django_db
def test_create_reviewer_grants_the_webhook_permission_when_asked(tenant, receiver):
    def token(*flags: str) -> str:
        out = StringIO()
        call_command("create_reviewer", "hana", "--tenant", "acme", *flags, stdout=out)
        return out.getvalue().strip().splitlines()[-1]

    body = {"url": receiver.url, "events": ["*"]}
    assert bearer_client(token()).post(WEBHOOKS, body, format="json").status_code == 403
    assert bearer_client(token("--can-manage-webhooks")).post(WEBHOOKS, body, format="json").status_code == 201


@pytest.mark.django_db
def test_deliveries_are_signed_and_carry_the_event_id(subscribe, receiver, write):
    subscription = subscribe()
    records = [write() for _ in range(3)]
    counts = run()
    assert counts["delivered"] == 3
    bodies = receiver.verified(subscription.secret)  # raises if a signature does not verify
    assert [b["data"]["record"]["id"] for b in bodies] == [str(r.pk) for r in records]
    assert [r.headers["webhook-id"] for r in receiver.received] == [b["id"] for b in bodies]
    assert set(Event.objects.filter(record_id__in=[r.pk for r in records]).values_list("type", flat=True)) == {"memory.written"}
    assert run()["delivered"] == 0  # nothing twice


@pytest.mark.django_db
def test_a_failed_delivery_is_retried_with_the_same_id_and_keeps_the_record_order(subscribe, receiver, write, reviewer_actor):
    subscription = subscribe()
    failing = {"on": True}
    receiver.answer = lambda r: (503, b"", {}) if failing["on"] else (200, b"{}", {})
    record = write(**UNTRUSTED)
    memory_promote(record_id=record.pk, expected_version=1, actor=reviewer_actor)
    memory_confirm(record_id=record.pk, expected_version=2, actor=reviewer_actor)
    counts = run()
    assert counts == counts | {"delivered": 0, "failed": 1}  # the first failure ends the pass
    failed = Delivery.objects.get(attempts=1)
    assert failed.status == "pending" and failed.next_attempt_at > timezone.now() and failed.last_error == "HTTP 503"
    assert run()["failed"] == 0  # not due yet, and the record's later events wait behind it
    failing["on"] = False
    make_due()
    assert run()["delivered"] == 3
    bodies = receiver.verified(subscription.secret)
    # the failed attempt and its retry: the same id; then the record's events in version order
    assert bodies[0]["id"] == bodies[1]["id"]
    assert [(b["type"], b["data"]["record"]["version"]) for b in bodies[1:]] == [
        ("memory.quarantined", 1),
        ("memory.promoted", 2),
        ("memory.confirmed", 3),
    ]


@pytest.mark.django_db
def test_a_subscriber_down_for_ten_minutes_receives_everything_once_it_is_back(subscribe, receiver, write, reviewer_actor):
    subscription = subscribe()
    down = {"on": True}
    receiver.answer = lambda r: (503, b"", {}) if down["on"] else (200, b"{}", {})
    records = [write(**UNTRUSTED) for _ in range(3)]
    run()  # at 0 s
    for _ in range(2):  # at 5 s and 5 min 5 s: the schedule's attempts within ten minutes, all refused
        records.append(write(**UNTRUSTED))  # while the agents go on writing and a reviewer promotes
        memory_promote(record_id=records[-2].pk, expected_version=1, actor=reviewer_actor)
        make_due()
        run()
    tried = list(Delivery.objects.filter(attempts__gt=0).values_list("attempts", flat=True))
    assert tried == [3]  # one delivery tried per run: a failing endpoint waits for the next run
    assert sum(BACKOFF[:2], timedelta()) < timedelta(minutes=10) < sum(BACKOFF[:3], timedelta())
    assert not Delivery.objects.filter(status="dead").exists()

    down["on"] = False  # back: the next attempt of the schedule delivers everything, in order
    receiver.received.clear()
    make_due()
    counts = run()
    expected = Event.objects.filter(tenant=subscription.tenant).count()
    assert counts["delivered"] == expected and set(Delivery.objects.values_list("status", flat=True)) == {"delivered"}
    bodies = receiver.verified(subscription.secret)
    assert sorted(b["id"] for b in bodies) == sorted(str(u) for u in Event.objects.values_list("uid", flat=True))
    versions: dict[str, list[int]] = {}
    for body in bodies:
        versions.setdefault(body["data"]["record"]["id"], []).append(body["data"]["record"]["version"])
    assert all(seen == sorted(seen) for seen in versions.values()) and any(len(seen) == 2 for seen in versions.values())


@pytest.mark.django_db
def test_the_last_failure_dead_letters_and_replay_delivers(subscribe, receiver, write):
    subscribe()
    receiver.answer = lambda r: (500, b"", {})
    write()
    run()
    Delivery.objects.update(attempts=MAX_ATTEMPTS - 1)
    make_due()
    run()
    dead = Delivery.objects.get()
    assert dead.status == "dead"
    receiver.answer = lambda r: (200, b"{}", {})
    assert replay(Delivery.objects.all()) == 1
    assert run()["delivered"] == 1
    assert Delivery.objects.get().status == "delivered"
    assert len({r.headers["webhook-id"] for r in receiver.received}) == 1


@pytest.mark.django_db
def test_an_endpoint_failing_for_days_is_disabled_and_raises_an_alert(subscribe, receiver, write, settings):
    subscription = subscribe()
    receiver.answer = lambda r: (500, b"", {})
    write()
    run()
    WebhookSubscription.objects.update(failing_since=timezone.now() - timedelta(hours=settings.WEBHOOKS_DISABLE_AFTER_HOURS + 1))
    assert run()["disabled"] == 1
    subscription.refresh_from_db()
    assert subscription.is_active is False and subscription.disabled_at is not None
    findings = measure(now=timezone.now())
    assert (subscription.tenant_id, "webhook_disabled", "") in findings


@pytest.mark.django_db
def test_redirects_are_not_followed(subscribe, receiver, write):
    subscribe()
    receiver.answer = lambda r: (302, b"", {"Location": "http://169.254.169.254/latest/meta-data"})
    write()
    assert run()["failed"] == 1
    assert len(receiver.received) == 1 and Delivery.objects.get().last_error == "HTTP 302"


@pytest.mark.django_db
def test_during_a_rotation_both_secrets_sign(subscribe, receiver, write):
    subscription = subscribe()
    old = subscription.secret
    subscription_rotate_secret(subscription)
    write()
    run()
    (got,) = receiver.received
    assert len(got.headers["webhook-signature"].split(" ")) == 2
    assert receiver.verified(old) == receiver.verified(subscription.secret)
    WebhookSubscription.objects.update(previous_secret_until=timezone.now() - timedelta(seconds=1))
    write()
    run()
    assert len(receiver.received[-1].headers["webhook-signature"].split(" ")) == 1


@pytest.mark.django_db
def test_subscriptions_receive_only_the_types_subjects_and_kinds_they_name(subscribe, receiver, write, reviewer_actor):
    promoted_only = subscribe(events=["memory.promoted"])
    acme_only = subscribe(subject="customer/acme")
    record = write(**UNTRUSTED)
    write(subject="customer/globex")
    memory_promote(record_id=record.pk, expected_version=1, actor=reviewer_actor)
    run()
    sent = Delivery.objects.order_by("position")
    assert [d.event.type for d in sent.filter(subscription=promoted_only)] == ["memory.promoted"]
    assert {d.record_id for d in sent.filter(subscription=acme_only)} == {record.pk}
    assert Delivery.objects.filter(subscription=acme_only).count() == 2


@pytest.mark.django_db
def test_fan_out_and_delivery_take_statements_per_event_not_per_query_of_each(subscribe, write, django_assert_max_num_queries):
    subscribe()
    for _ in range(10):
        write()
    # Per event: one POST's bookkeeping (one UPDATE); around them a fixed number of statements.
    with django_assert_max_num_queries(10 + 25):
        assert run()["delivered"] == 10


def test_the_job_actor_name_is_stable():
    assert Actor.job("deliver_webhooks").label == "job:deliver_webhooks"


@pytest.mark.django_db
def test_the_admin_refuses_a_private_url_and_shows_the_secret_once(admin_client, tenant, settings):
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = False
    form = {
        "tenant": tenant.pk,
        "url": "http://169.254.169.254/latest/",
        "events": '["*"]',
        "subject": "",
        "kind": "",
        "is_active": "on",
    }
    response = admin_client.post("/admin/governance/webhooksubscription/add/", form)
    assert response.status_code == 200 and not WebhookSubscription.objects.exists()
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = True
    response = admin_client.post(
        "/admin/governance/webhooksubscription/add/", {**form, "url": "http://127.0.0.1:9/hook"}, follow=True
    )
    subscription = WebhookSubscription.objects.get()
    assert subscription.secret in response.content.decode()
