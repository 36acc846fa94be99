"""The async client against a live server: the same calls as the sync client, awaited, with the
same idempotency keys on retry, conflicts carrying the current version, typed errors, forget and
its status, and `list` as an async iterator over every page."""

import asyncio

import pytest

from governed_memory import AsyncClient, Conflict, MemoryDraft, Provenance, RetryPolicy, ScopeDenied, ValidationError
from memory.models import MemoryRecord
from tests.clients.conftest import AsyncRecordingTransport, posts_to, user_fact

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_async_client_writes_recalls_pages_confirms_and_forgets(api_server, token):
    transport = AsyncRecordingTransport(lose=posts_to("/memories/"))

    async def scenario() -> dict:
        async with AsyncClient(api_server.base, token, transport=transport, retry=RetryPolicy(backoff=0.01)) as client:
            memory = await client.remember(**user_fact(content="Acme prefers email over phone."))
            quarantined = await client.remember(
                **user_fact(
                    content="Acme's site says phone support ended.", provenance=Provenance.web_page("https://acme.example")
                )
            )
            batch = await client.remember_many(
                [
                    MemoryDraft(
                        content=f"Acme office {n}.",
                        subject="customer/acme",
                        purpose="support",
                        kind="semantic",
                        confidence=0.7,
                        provenance=Provenance.user_turn("s-3", n),
                    )
                    for n in range(4)
                ]
            )
            recalled = await client.recall("acme email phone", purpose="support", subject="customer/acme")
            listed = [m.id async for m in client.list(ordering="created_at", page_size=2)]
            confirmed = await client.confirm(memory)
            with pytest.raises(Conflict) as stale:
                await client.confirm(memory)
            with pytest.raises(ValidationError) as invalid:
                await client.remember(
                    **user_fact(provenance=Provenance.tool_output("crm.lookup", session="s-3"), authority="user")
                )
            with pytest.raises(ScopeDenied):
                await client.recall("acme", purpose="sales")
            forget = await client.forget("customer/acme", reason="erasure")
            status = await client.forget_status(forget)
            return locals()

    seen = asyncio.run(scenario())
    memory, quarantined = seen["memory"], seen["quarantined"]
    assert memory.status == "active" and memory.replayed  # its first answer was lost; the retry replayed it
    first, retry = transport.to("/memories/")[:2]
    assert first.status is None and first.idempotency_key == retry.idempotency_key
    assert quarantined.awaiting_review and quarantined.authority == "third_party"
    assert [r.status for r in seen["batch"]] == [201] * 4
    assert seen["recalled"].items[0].id == memory.id
    assert quarantined.id not in {item.id for item in seen["recalled"]}
    assert "(trusted) [preference | user |" in seen["recalled"].to_prompt()
    assert seen["listed"] == [memory.id, quarantined.id, *(m.id for m in seen["batch"].memories)]
    assert seen["confirmed"].version == 2 and seen["stale"].value.current_version == 2
    assert set(seen["invalid"].value.errors) == {"authority"}
    assert (seen["forget"].affected, seen["status"].id) == (6, seen["forget"].id)
    assert MemoryRecord.objects.filter(status="forgotten").count() == 6
