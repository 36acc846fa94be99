"""Receiving the server's webhooks (the `webhooks` extra): verify a delivery's Standard Webhooks
signature before trusting its body, and acknowledge a forget request the subscriber has carried
out on its copies, signed the same way.

    from governed_memory.webhooks import verify, acknowledgement

    event = verify(body, headers, secret)            # raises InvalidSignature
    if event["type"] == "memory.forgotten":
        drop_copies(event["data"]["records"])
        # answer the delivery 2xx with {"acknowledged": true}, or later:
        body, headers = acknowledgement(webhook_id, secret)
        httpx.post(f"{api}/forget/{event['data']['forget_request']}/acknowledgements/", content=body, headers=headers)
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from governed_memory.errors import GovernedMemoryError


class InvalidSignature(GovernedMemoryError):
    """The body is not signed with this secret, or its timestamp is too old or too new."""


def verify(body: bytes | str, headers: Mapping[str, str], secret: str) -> dict[str, Any]:
    """The event a delivery carries, once its signature verifies with `secret` (the subscription's
    `whsec_...`; during a rotation the server signs with both, so either verifies)."""
    try:
        event = Webhook(secret).verify(body if isinstance(body, str) else body.decode("utf-8"), dict(headers))
    except (WebhookVerificationError, ValueError) as exc:
        raise InvalidSignature(str(exc)) from exc
    if not isinstance(event, dict):
        raise InvalidSignature("The body is not an event.")
    return event


def acknowledgement(webhook_id: str, secret: str, *, now: datetime | None = None) -> tuple[str, dict[str, str]]:
    """The body and headers of `POST /api/v1/forget/{id}/acknowledgements/` for the subscription
    `webhook_id`, signed with its secret like a delivery."""
    body = json.dumps({"webhook": str(webhook_id)})
    at = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    msg_id = f"ack_{uuid.uuid4().hex}"
    return body, {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": Webhook(secret).sign(msg_id, at, body),
        "Content-Type": "application/json",
    }
