"""POST /api/v1/memories/batch/: up to 100 writes, each stored exactly as a single write would be,
with per-item results, per-item idempotency keys and one history row per record."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.models import IdempotencyKey, MemoryRecord
from tests.api.conftest import MEMORIES, UNTRUSTED, assert_problem
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db
BATCH = f"{MEMORIES}batch/"


def _counts() -> tuple[int, int, int]:
    return MemoryRecord.objects.count(), MemoryRecord.history.count(), IdempotencyKey.objects.count()


def test_each_item_is_written_as_a_single_write_would_be_in_item_order(agent_client):
    items = [
        memory_body(content="Prefers email."),
        memory_body(**UNTRUSTED, content="Seems to like calls."),
        memory_body(confidence=7),  # invalid
        memory_body(purpose="sales"),  # not allowed for this token
        memory_body(provenance={"source_type": "document", "uri": "https://docs.example/p"}),  # laundering attempt
    ]
    response = agent_client.post(BATCH, {"items": items}, format="json")
    assert response.status_code == 200, response.content[:300]
    results = response.json()["results"]
    assert [r["index"] for r in results] == [0, 1, 2, 3, 4]
    assert [r["status"] for r in results] == [201, 201, 400, 403, 201]
    assert [results[i]["record"]["status"] for i in (0, 1, 4)] == ["active", "quarantined", "quarantined"]
    assert "confidence" in results[2]["problem"]["errors"]
    assert results[3]["problem"]["status"] == 403 and results[3]["problem"]["instance"].endswith("#/items/3")
    for i in (0, 1, 4):
        record = MemoryRecord.objects.get(pk=results[i]["record"]["id"])
        history = record.history.get()
        assert history.history_change_reason == f"write.{record.status}"
        assert history.history_actor == "agent:acme/support-bot"
    assert MemoryRecord.objects.count() == 3


@pytest.mark.parametrize(
    "body",
    [
        [memory_body()],
        {"items": memory_body()},
        {"items": []},
        {"items": [memory_body(), "not an object"]},
        {"items": [memory_body()] * 101},
        {"items": [memory_body()], "extra": True},
    ],
)
def test_a_body_that_is_not_a_list_of_1_to_100_objects_is_a_400_and_writes_nothing(agent_client, body):
    before = _counts()
    assert_problem(agent_client.post(BATCH, body, format="json"), 400)
    assert _counts() == before


def test_item_keys_replay_their_first_result_and_refuse_a_different_body(agent_client):
    items = [dict(memory_body(content=f"fact {n}"), idempotency_key=f"k-{n}") for n in range(3)]
    first = agent_client.post(BATCH, {"items": items}, format="json").json()["results"]
    before = _counts()
    again = agent_client.post(BATCH, {"items": items}, format="json").json()["results"]
    assert [r["record"]["id"] for r in again] == [r["record"]["id"] for r in first]
    assert _counts() == before
    changed = [dict(items[0], content="another fact"), dict(memory_body(content="new"), idempotency_key="k-9")]
    results = agent_client.post(BATCH, {"items": changed}, format="json").json()["results"]
    assert [r["status"] for r in results] == [409, 201]
    # The same key as a single write's header means the same thing.
    single = agent_client.post(
        MEMORIES, {k: v for k, v in items[1].items() if k != "idempotency_key"}, format="json", headers={"Idempotency-Key": "k-1"}
    )
    assert single.status_code == 201 and single.json()["id"] == first[1]["record"]["id"]


def test_the_same_key_twice_in_one_batch_writes_once(agent_client):
    item = dict(memory_body(content="once"), idempotency_key="twice")
    results = agent_client.post(BATCH, {"items": [item, item]}, format="json").json()["results"]
    assert [r["status"] for r in results] == [201, 201]
    assert results[0]["record"]["id"] == results[1]["record"]["id"]
    assert MemoryRecord.objects.filter(content="once").count() == 1


def test_corrections_and_summaries_in_a_batch_conflict_on_their_own(agent_client, write):
    original = write(content="Lives in Paris.")
    source = write(content="Likes tea.")
    items = [
        memory_body(content="Lives in Lyon.", supersedes=str(original.pk), supersedes_version=1),
        memory_body(content="Lives in Nice.", supersedes=str(original.pk), supersedes_version=1),  # moved on: 409
        memory_body(**UNTRUSTED, content="Summary: tea, Lyon.", derived_from=[str(source.pk)]),
        memory_body(content="Unrelated."),
    ]
    results = agent_client.post(BATCH, {"items": items}, format="json").json()["results"]
    assert [r["status"] for r in results] == [201, 409, 201, 201]
    original.refresh_from_db()
    assert original.status == "superseded"
    assert results[2]["record"]["status"] == "quarantined"


def test_a_batch_costs_a_few_queries_whatever_its_size(agent_client):
    """Set-based inside: the records, their history rows and their keys are inserted in bulk (SQLite
    splits a bulk insert at its parameter limit, so a bigger batch may take a few more statements),
    never a query per item."""

    def queries(n: int) -> int:
        items = [dict(memory_body(content=f"item {n}-{i}"), idempotency_key=f"q-{n}-{i}") for i in range(n)]
        with CaptureQueriesContext(connection) as captured:
            response = agent_client.post(BATCH, {"items": items}, format="json")
        assert response.status_code == 200 and {r["status"] for r in response.json()["results"]} == {201}
        return len(captured)

    small, large = queries(10), queries(100)
    assert large - small <= (0 if connection.vendor == "postgresql" else 8), (small, large)
    assert large <= 25
