"""Webhook subscriptions: creating one (its URL checked, its secret returned once), rotating its
secret with an overlap, deleting one; and waking the delivery job when events commit."""

import logging
import time
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from governance.events.models import WebhookSubscription, new_secret
from governance.events.outbound import RefusedURL, checked_target
from governance.forget.models import PropagationReceipt
from governance.tasks import JOB_TASKS
from memory.actors import Actor
from memory.errors import RecordNotFound, ValidationFailed
from memory.models import SUBJECT_MAX_CHARS, MemoryKind, Tenant
from memory.outbox.models import EventType
from memory.outbox.write import sequence_events

logger = logging.getLogger("governance.events")

EVENT_TYPES = frozenset(EventType.values)


def subscription_create(
    *,
    actor: Actor,
    tenant: Tenant,
    url: str,
    events: list[str],
    keeps_copies: bool = False,
    subject: str = "",
    kind: str = "",
) -> WebhookSubscription:
    """A new subscription, receiving events from now on. ValidationFailed (nothing written) for a
    URL that may not be reached, an unknown event type, an unknown kind or an overlong subject."""
    errors: dict[str, list[str]] = {}
    try:
        checked_target(url)
    except RefusedURL as exc:
        errors["url"] = [str(exc)]
    unknown = sorted(set(events) - EVENT_TYPES - {"*"})
    if not events or unknown:
        errors["events"] = [f"Unknown event types: {', '.join(unknown)}." if unknown else 'Name event types, or ["*"].']
    if len(subject) > SUBJECT_MAX_CHARS:
        errors["subject"] = [f"At most {SUBJECT_MAX_CHARS} characters."]
    if kind and not MemoryKind.objects.filter(name=kind).exists():
        errors["kind"] = ["Unknown kind."]
    if errors:
        raise ValidationFailed("The webhook subscription is invalid.", errors=errors)
    return WebhookSubscription.objects.create(
        tenant=tenant,
        url=url,
        events=sorted(set(events)),
        keeps_copies=keeps_copies,
        subject=subject,
        kind=kind,
        created_by=actor.user,
        cursor=sequence_events(),  # events from now on
    )


def subscription_in_scope(actor: Actor, pk) -> WebhookSubscription:
    subscription = actor.in_tenants(WebhookSubscription.objects.select_related("tenant")).filter(pk=pk).first()
    if subscription is None:
        raise RecordNotFound("No such webhook in your scope.")
    return subscription


def subscription_rotate_secret(subscription: WebhookSubscription) -> WebhookSubscription:
    """A new secret; the old one keeps signing (beside it) for WEBHOOKS_SECRET_OVERLAP_HOURS."""
    subscription.previous_secret = subscription.secret
    subscription.previous_secret_until = timezone.now() + timedelta(hours=settings.WEBHOOKS_SECRET_OVERLAP_HOURS)
    subscription.secret = new_secret()
    subscription.save(update_fields=["secret", "previous_secret", "previous_secret_until"])
    return subscription


def subscription_delete(subscription: WebhookSubscription) -> None:
    """Delete a subscription. Its open forget receipts close, saying so: nobody is left to
    acknowledge them, and a forget request must not wait forever for a subscriber that is gone."""
    with transaction.atomic():
        PropagationReceipt.objects.filter(artifact=f"webhook:{subscription.pk}", completed_at__isnull=True).update(
            completed_at=timezone.now(), note="subscription deleted before it acknowledged"
        )
        subscription.delete()


_woken_until = 0.0


def wake_delivery() -> None:
    """After events commit: run the delivery job in a second (one request per second per process
    at most; it delivers everything committed by then). Best effort: beat's run retries anyway."""
    global _woken_until
    now = time.monotonic()
    if now < _woken_until:
        return
    _woken_until = now + 1
    try:
        if WebhookSubscription.objects.filter(is_active=True).exists():
            JOB_TASKS["deliver_webhooks"].apply_async(kwargs={"trigger": "event"}, countdown=1, retry=False)
    except Exception as exc:  # the events are committed; beat's next run delivers them
        logger.warning("could not wake webhook delivery", extra={"error": type(exc).__name__})
