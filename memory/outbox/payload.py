"""An event as subscribers and the feed read it (the contract's "Events and webhooks"): ids and
metadata only, never content or provenance."""

from typing import Any

from memory.outbox.models import Event


def event_payload(event: Event) -> dict[str, Any]:
    """The event's JSON body; the caller selects `tenant` and `kind` with it."""
    data: dict[str, Any] = {}
    if event.record_id is not None:
        data["record"] = {
            "id": str(event.record_id),
            "version": event.version,
            "status": event.status,
            "authority": event.authority,
            "kind": event.kind.name if event.kind_id is not None and event.kind is not None else None,
        }
    data.update(event.data)
    return {
        "id": str(event.uid),
        "type": event.type,
        "occurred_at": event.occurred_at.isoformat().replace("+00:00", "Z"),
        "tenant": event.tenant.slug,
        "data": data,
    }
