"""Delivering events to webhook subscriptions: the `deliver_webhooks` job.

Fan-out: committed events get their feed positions (memory.outbox.write.sequence_events), and each
active subscription gets one `Delivery` per event after its cursor that it wants, in one INSERT
per chunk. Delivery: per subscription, pending deliveries in position order; a record whose earlier
delivery is still pending (waiting for a retry) gets none of its later ones first, so each record's
events arrive in order. A POST carries the Standard Webhooks headers (`standardwebhooks` signs; the
event id is the message id, so a repeat after a crash is recognisably the same). A failure is
retried with backoff (about a day in all), then the delivery is dead (the admin replays it); an
endpoint failing for WEBHOOKS_DISABLE_AFTER_HOURS is disabled, which the alerts job reports.

The job lock (governance.jobs.run_job) lets one run deliver at a time, which keeps the order; a run
killed mid-way leaves what it had not marked delivered pending, to be sent again, same id."""

import json
import logging
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from http.client import HTTPException

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from standardwebhooks import Webhook

from governance.events.acknowledgements import acknowledge_delivery, answer_acknowledges
from governance.events.models import Delivery, WebhookSubscription
from governance.events.outbound import RefusedURL, post
from memory.models import MemoryRecord
from memory.outbox.models import Event, EventType
from memory.outbox.payload import event_payload
from memory.outbox.write import sequence_events

logger = logging.getLogger("governance.events")

# Waits after each failed attempt (the Standard Webhooks schedule): the last failure is dead.
BACKOFF = (
    timedelta(seconds=5),
    timedelta(minutes=5),
    timedelta(minutes=30),
    timedelta(hours=2),
    timedelta(hours=5),
    timedelta(hours=10),
    timedelta(hours=10),
)
MAX_ATTEMPTS = len(BACKOFF) + 1
RUN_SECONDS = 50  # one run delivers for about this long; the next one (or a new event) continues
PAGE = 200


def deliver_webhooks(*, now: datetime, batch_size: int) -> dict[str, int]:
    """Fan out and deliver until nothing new is due or the run's time is up (events committed while
    it runs are picked up by its next round, so a wake-up that found the job busy loses nothing)."""
    counts: Counter[str] = Counter({"fanned_out": 0, "delivered": 0, "failed": 0})
    deadline = time.monotonic() + RUN_SECONDS
    failing: set = set()  # subscriptions whose endpoint failed in this run: they wait for the next
    while time.monotonic() < deadline:
        fanned = fan_out(now=timezone.now(), batch_size=batch_size)
        due = Delivery.objects.filter(status=Delivery.Status.PENDING, next_attempt_at__lte=timezone.now())
        round_counts: Counter[str] = Counter()
        subscriptions = WebhookSubscription.objects.filter(is_active=True, pk__in=due.values("subscription_id"))
        for subscription in subscriptions.exclude(pk__in=failing):
            sent = deliver_to(subscription, deadline=deadline)
            if sent["failed"]:
                failing.add(subscription.pk)
            round_counts.update(sent)
            if time.monotonic() > deadline:
                break
        counts.update(round_counts)
        counts["fanned_out"] += fanned
        if not fanned and not round_counts["delivered"]:
            break
    counts["disabled"] = disable_failing(now=timezone.now())
    return dict(counts)


def wanted_events(subscription: WebhookSubscription) -> Q | None:
    """The events `subscription` receives (None: every event of its tenant): its types, its
    subject or kind (for events about one record), and every `memory.forgotten` if it keeps
    copies. (Django drops an empty Q from `|`, so "everything" is None, never Q().)"""
    conditions: list[Q] = []
    if "*" not in subscription.events:
        conditions.append(Q(type__in=subscription.events))
    about = []
    if subscription.kind:
        about.append(Q(kind__name=subscription.kind))
    if subscription.subject:
        records = MemoryRecord.objects.filter(tenant_id=subscription.tenant_id, subject=subscription.subject)
        about.append(Q(record_id__in=records.values("pk")))
    if about:
        conditions.append(Q(record_id__isnull=True) | Q(*about))
    if not conditions:
        return None
    wanted = Q(*conditions)
    return wanted | Q(type=EventType.FORGOTTEN) if subscription.keeps_copies else wanted


def fan_out(*, now: datetime, batch_size: int) -> int:
    """One delivery per wanted event after each active subscription's cursor; returns how many."""
    last = sequence_events()
    made = 0
    for subscription in WebhookSubscription.objects.filter(is_active=True, cursor__lt=last):
        with transaction.atomic():
            events = Event.objects.filter(tenant_id=subscription.tenant_id, position__gt=subscription.cursor, position__lte=last)
            wanted = wanted_events(subscription)
            if wanted is not None:
                events = events.filter(wanted)
            rows = events.order_by("position").values_list("seq", "position", "record_id")  # all sequenced
            deliveries = [
                Delivery(
                    subscription=subscription, event_id=seq, position=position or 0, record_id=record_id, next_attempt_at=now
                )
                for seq, position, record_id in rows.iterator(chunk_size=batch_size)
            ]
            Delivery.objects.bulk_create(deliveries, batch_size=batch_size, ignore_conflicts=True)
            WebhookSubscription.objects.filter(pk=subscription.pk).update(cursor=last)
            made += len(deliveries)
    return made


def signed_headers(subscription: WebhookSubscription, *, msg_id: str, body: str, now: datetime) -> dict[str, str]:
    """The Standard Webhooks headers: a signature by each secret in use (two during a rotation)."""
    at = now.astimezone(UTC)
    signatures = " ".join(Webhook(secret).sign(msg_id, at, body) for secret in subscription.signing_secrets(now))
    return {"webhook-id": msg_id, "webhook-timestamp": str(int(at.timestamp())), "webhook-signature": signatures}


def deliver_to(subscription: WebhookSubscription, *, deadline: float) -> Counter[str]:
    """Send the subscription's due deliveries, oldest position first, keeping each record's order;
    the first failure ends the pass (the endpoint is failing: the rest wait for the next run)."""
    counts: Counter[str] = Counter()
    blocked: set = set()  # records with an earlier delivery still pending
    pending = (
        Delivery.objects.filter(subscription=subscription, status=Delivery.Status.PENDING)
        .select_related("event__tenant", "event__kind")
        .order_by("position")
    )
    after = None
    while time.monotonic() < deadline:
        page = list((pending if after is None else pending.filter(position__gt=after))[:PAGE])
        for delivery in page:
            key = delivery.record_id
            if key is not None and key in blocked:
                continue
            if delivery.next_attempt_at > timezone.now():
                if key is not None:
                    blocked.add(key)
                continue
            if attempt(subscription, delivery):
                counts["delivered"] += 1
            else:
                counts["failed"] += 1
                return counts
        if len(page) < PAGE:
            break
        after = page[-1].position
    return counts


def attempt(subscription: WebhookSubscription, delivery: Delivery) -> bool:
    """One POST of the delivery's event; records the outcome. True if the subscriber took it."""
    now = timezone.now()
    body = json.dumps(event_payload(delivery.event), separators=(",", ":"))
    headers = signed_headers(subscription, msg_id=str(delivery.event.uid), body=body, now=now)
    status_code, error, answer = None, "", b""
    try:
        reply = post(subscription.url, body.encode(), headers)
        status_code, answer = reply.status, reply.body
        if not 200 <= reply.status < 300:
            error = f"HTTP {reply.status}"
    except RefusedURL as exc:
        error = str(exc)[:200]
    except (OSError, HTTPException) as exc:
        error = type(exc).__name__
    done = timezone.now()
    attempts = delivery.attempts + 1
    if not error:
        Delivery.objects.filter(pk=delivery.pk).update(
            status=Delivery.Status.DELIVERED,
            attempts=attempts,
            last_attempt_at=done,
            last_status_code=status_code,
            last_error="",
            delivered_at=done,
        )
        if subscription.failing_since is not None:
            WebhookSubscription.objects.filter(pk=subscription.pk).update(failing_since=None)
            subscription.failing_since = None
        if delivery.event.type == EventType.FORGOTTEN and subscription.keeps_copies and answer_acknowledges(answer):
            acknowledge_delivery(delivery)
        return True
    dead = attempts >= MAX_ATTEMPTS
    Delivery.objects.filter(pk=delivery.pk).update(
        status=Delivery.Status.DEAD if dead else Delivery.Status.PENDING,
        attempts=attempts,
        last_attempt_at=done,
        last_status_code=status_code,
        last_error=error,
        next_attempt_at=done if dead else done + BACKOFF[attempts - 1],
    )
    if subscription.failing_since is None:
        WebhookSubscription.objects.filter(pk=subscription.pk, failing_since__isnull=True).update(failing_since=done)
        subscription.failing_since = done
    logger.warning(
        "webhook delivery failed",
        extra={"subscription": str(subscription.pk), "event_id": str(delivery.event.uid), "attempts": attempts, "dead": dead},
    )
    return False


def disable_failing(*, now: datetime) -> int:
    """Disable every subscription failing for longer than WEBHOOKS_DISABLE_AFTER_HOURS."""
    cutoff = now - timedelta(hours=settings.WEBHOOKS_DISABLE_AFTER_HOURS)
    return WebhookSubscription.objects.filter(is_active=True, failing_since__lt=cutoff).update(is_active=False, disabled_at=now)


def replay(deliveries) -> int:
    """Dead deliveries pending again, due now, with a fresh set of attempts (the admin's action)."""
    return deliveries.filter(status=Delivery.Status.DEAD).update(
        status=Delivery.Status.PENDING, attempts=0, next_attempt_at=timezone.now(), last_error=F("last_error")
    )
