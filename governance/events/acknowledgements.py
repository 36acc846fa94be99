"""Forget requests and the subscribers that keep copies: each active copy-keeping subscription of
the tenant is a receipt `webhook:<id>` on the request, open until the subscriber acknowledges (by
answering the `memory.forgotten` delivery 2xx with `{"acknowledged": true}`, or later through
`POST /api/v1/forget/{id}/acknowledgements/`); while one is open the request stays `propagating`."""

import json

from django.db import transaction
from django.utils import timezone

from governance.events.models import Delivery, WebhookSubscription
from governance.forget.models import ForgetRequest, PropagationReceipt
from governance.forget.propagation import propagate_forget_request
from memory.outbox.models import Event, EventType

RECEIPT_PREFIX = "webhook:"
WAITING = "waiting for the subscriber's acknowledgement"


def receipt_name(subscription_id) -> str:
    return f"{RECEIPT_PREFIX}{subscription_id}"


def open_webhook_receipts(request: ForgetRequest) -> None:
    """In the filing transaction: one open receipt per active copy-keeping subscription (none when
    the request forgot nothing: no event goes out, so nothing is to acknowledge)."""
    if not request.affected:
        return
    subscriptions = WebhookSubscription.objects.filter(tenant_id=request.tenant_id, is_active=True, keeps_copies=True)
    PropagationReceipt.objects.bulk_create(
        [
            PropagationReceipt(forget_request=request, artifact=receipt_name(pk), removed=0, completed_at=None, note=WAITING)
            for pk in subscriptions.values_list("pk", flat=True)
        ]
    )


def awaiting_acknowledgement(request: ForgetRequest) -> bool:
    return PropagationReceipt.objects.filter(
        forget_request=request, artifact__startswith=RECEIPT_PREFIX, completed_at__isnull=True
    ).exists()


def answer_acknowledges(body: bytes) -> bool:
    """A delivery's answer acknowledges it: a JSON object with `"acknowledged": true`."""
    try:
        answer = json.loads(body or b"null")
    except ValueError:
        return False
    return isinstance(answer, dict) and answer.get("acknowledged") is True


def acknowledge_delivery(delivery: Delivery) -> None:
    """A copy-keeping subscriber acknowledged one `memory.forgotten` delivery; once every such
    delivery of the request is acknowledged, so is the request."""
    request_id = delivery.event.data.get("forget_request")
    Delivery.objects.filter(pk=delivery.pk).update(acknowledged_at=timezone.now())
    unacknowledged = Delivery.objects.filter(
        subscription_id=delivery.subscription_id,
        event__type=EventType.FORGOTTEN,
        event__data__forget_request=request_id,
        acknowledged_at__isnull=True,
    )
    if request_id and not unacknowledged.exists():
        request = ForgetRequest.objects.filter(pk=request_id).first()
        if request is not None:
            acknowledge(request, delivery.subscription)


def acknowledge(request: ForgetRequest, subscription: WebhookSubscription) -> bool:
    """Close the subscription's receipt on the request (False: it has none), and complete the
    request if nothing else keeps it open."""
    now = timezone.now()
    with transaction.atomic():
        closed = PropagationReceipt.objects.filter(forget_request=request, artifact=receipt_name(subscription.pk))
        if not closed.exists():
            return False
        closed.filter(completed_at__isnull=True).update(
            completed_at=now, removed=request.affected, note="acknowledged by the subscriber"
        )
        Delivery.objects.filter(
            subscription=subscription,
            event__in=Event.objects.filter(type=EventType.FORGOTTEN, data__forget_request=str(request.pk)),
        ).update(acknowledged_at=now)
    request.refresh_from_db()
    if request.status == ForgetRequest.Status.PROPAGATING:
        propagate_forget_request(request)  # completes it once nothing is left open (safe to repeat)
    return True
