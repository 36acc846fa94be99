"""The Python client's side of events: reading the feed page by page against a live server (sync and
async), and verifying a delivery and signing an acknowledgement with `governed_memory.webhooks`."""

import asyncio
import json

import pytest
from django.utils import timezone
from standardwebhooks import Webhook

from governance.events.delivery import signed_headers
from governance.events.models import WebhookSubscription
from governed_memory import AsyncClient, Client, Provenance
from governed_memory.webhooks import InvalidSignature, acknowledgement, verify


@pytest.mark.django_db(transaction=True)
def test_the_client_reads_the_feed_to_the_end_and_resumes_from_its_cursor(api_server, token):
    with Client(api_server.base, token) as client:
        written = [
            client.remember(
                f"Prefers channel {i}.",
                subject="customer/acme",
                purpose="support",
                kind="preference",
                confidence=0.9,
                provenance=Provenance.user_turn("s-1", i),
            ).id
            for i in range(5)
        ]
        pages = list(client.events(limit=2))
        assert [len(p.events) for p in pages] == [2, 2, 1]
        assert [e["data"]["record"]["id"] for p in pages for e in p.events] == written
        assert list(client.events(after=pages[-1].next)) == []
        newest = client.remember(
            "Prefers letters.",
            subject="customer/acme",
            purpose="support",
            kind="preference",
            confidence=0.9,
            provenance=Provenance.user_turn("s-1", 9),
        ).id
        (page,) = client.events(after=pages[-1].next)
        assert [e["data"]["record"]["id"] for e in page.events] == [newest]


@pytest.mark.django_db(transaction=True)
def test_the_async_client_reads_the_feed_page_by_page_and_resumes(api_server, token):
    async def scenario() -> tuple[list[list[str]], list[str], list[str]]:
        async with AsyncClient(api_server.base, token) as client:
            written = [
                (
                    await client.remember(
                        f"Prefers channel {i}.",
                        subject="customer/acme",
                        purpose="support",
                        kind="preference",
                        confidence=0.9,
                        provenance=Provenance.user_turn("s-1", i),
                    )
                ).id
                for i in range(3)
            ]
            pages = [page async for page in client.events(limit=2)]
            after = [page async for page in client.events(after=pages[-1].next)]
            return [[e["data"]["record"]["id"] for e in p.events] for p in pages], written, after

    pages, written, after = asyncio.run(scenario())
    assert pages == [written[:2], written[2:]]
    assert after == []


def test_verify_accepts_the_servers_signature_and_refuses_another():
    subscription = WebhookSubscription(url="https://hooks.example.com/")
    body = json.dumps({"id": "e-1", "type": "memory.written", "data": {}})
    headers = signed_headers(subscription, msg_id="e-1", body=body, now=timezone.now())
    assert verify(body.encode(), headers, subscription.secret)["id"] == "e-1"
    with pytest.raises(InvalidSignature):
        verify(body.replace("written", "promoted"), headers, subscription.secret)
    with pytest.raises(InvalidSignature):
        verify(body, headers, WebhookSubscription().secret)


def test_an_acknowledgement_is_signed_like_a_delivery():
    secret = WebhookSubscription().secret
    body, headers = acknowledgement("7a1c8d4e-0000-4000-8000-000000000001", secret)
    assert json.loads(body) == {"webhook": "7a1c8d4e-0000-4000-8000-000000000001"}
    Webhook(secret).verify(body, headers)
