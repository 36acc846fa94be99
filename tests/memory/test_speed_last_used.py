"""`last_used_at` off the request path (memory.usage): recall through the API does not write it
in the request; the process's buffer writes it after a response, batched, idempotently and never
backwards. And recall's query count: constant, with no write among its statements."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory import usage
from memory.models import MemoryRecord
from memory.selectors import unused_cutoff
from memory.services import memory_mark_used, write_last_used
from tests.api.conftest import MEMORIES, RECALL, bearer_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent_client(credential):
    return bearer_client(credential.raw_token)


@pytest.fixture(autouse=True)
def empty_buffer():
    usage.flush()
    yield
    usage.flush()


def _recall(client, **body) -> tuple[list[str], list[str]]:
    with CaptureQueriesContext(connection) as captured:
        response = client.post(RECALL, {"purpose": "support", "query": "invoices email", **body})
    assert response.status_code == 200
    return [item["id"] for item in response.json()["items"]], [query["sql"] for query in captured]


def test_recall_through_the_api_writes_last_used_after_the_buffer_flushes(write, agent_client):
    record = write(content="Acme wants invoices by email.")
    ids, statements = _recall(agent_client)
    assert ids == [str(record.pk)]
    assert not any(sql.startswith("UPDATE") for sql in statements)  # nothing written in the request
    assert MemoryRecord.objects.get(pk=record.pk).last_used_at is None and usage.pending() == 1
    assert usage.flush() == 1
    used = MemoryRecord.objects.get(pk=record.pk).last_used_at
    assert used is not None and usage.pending() == 0
    assert usage.flush() == 0 and MemoryRecord.objects.get(pk=record.pk).last_used_at == used


def test_a_due_buffer_is_written_after_the_response_of_the_recall_that_finds_it(write, agent_client, settings):
    settings.MEMORY_LAST_USED_FLUSH_SECONDS = 0  # always due
    record = write(content="Acme wants invoices by email.")
    agent_client.post(RECALL, {"purpose": "support", "query": "invoices"})
    assert MemoryRecord.objects.get(pk=record.pk).last_used_at is not None and usage.pending() == 0


def test_a_request_that_recalls_nothing_never_flushes(write, agent_client, settings):
    record = write(content="Acme wants invoices by email.")
    _recall(agent_client)
    settings.MEMORY_LAST_USED_FLUSH_SECONDS = 0
    with CaptureQueriesContext(connection) as captured:
        agent_client.get(MEMORIES)
    assert not any(query["sql"].startswith("UPDATE") for query in captured)
    assert usage.pending() == 1 and MemoryRecord.objects.get(pk=record.pk).last_used_at is None


def test_many_recalls_are_written_in_one_statement(write, agent_client):
    records = [write(subject=f"customer/c{i}", content=f"Customer {i} wants invoices by email.") for i in range(5)]
    for i in range(5):
        _recall(agent_client, subject=f"customer/c{i}")
    assert usage.pending() == 5
    with CaptureQueriesContext(connection) as captured:
        assert usage.flush() == 5
    statements = [query["sql"].split()[0] for query in captured]
    assert [verb for verb in statements if verb not in ("SAVEPOINT", "RELEASE")] == ["UPDATE"]
    assert MemoryRecord.objects.filter(pk__in=[r.pk for r in records], last_used_at__isnull=False).count() == 5


def test_a_mark_never_moves_back_and_a_recent_one_is_not_rewritten(write):
    record = write()
    now = timezone.now()
    assert write_last_used(record_ids=[record.pk], at=now) == 1
    assert write_last_used(record_ids=[record.pk], at=now - timedelta(days=1)) == 0  # older: ignored
    assert write_last_used(record_ids=[record.pk], at=now + timedelta(seconds=30)) == 0  # within the minute
    assert MemoryRecord.objects.get(pk=record.pk).last_used_at == now


def test_outside_a_request_a_mark_is_written_at_once(write):
    record = write()
    assert memory_mark_used(record_ids=[record.pk]) == 1 and usage.pending() == 0


def test_a_recalled_record_is_no_deletion_candidate_once_written(write, agent_client):
    record = write(content="Acme wants invoices by email.")
    MemoryRecord.objects.filter(pk=record.pk).update(created_at=timezone.now() - timedelta(days=400))
    _recall(agent_client)
    usage.flush()
    cutoff = unused_cutoff(180)
    assert MemoryRecord.objects.get(pk=record.pk).last_used_at >= cutoff


@pytest.mark.parametrize("subject", [None, "customer/acme"], ids=["purpose-wide", "subject-scoped"])
def test_recall_costs_the_same_queries_for_1_or_40_records_and_writes_nothing(write, agent_client, subject):
    scope = {"subject": subject} if subject else {}
    write(content="invoices by email 0")
    agent_client.get(MEMORIES)  # caches the credential
    _, small = _recall(agent_client, limit=50, **scope)
    for i in range(1, 40):
        write(content=f"invoices by email {i}")
    usage.flush()
    ids, large = _recall(agent_client, limit=50, **scope)
    assert len(ids) == 40
    assert len(small) == len(large)
    assert not any(sql.split()[0] in ("UPDATE", "INSERT", "DELETE") for sql in large if "TEMP" not in sql.upper())


@pytest.mark.django_db(transaction=True)  # the lock is held by another connection
@pytest.mark.postgresql(reason="SQLite has one writer at a time: no row locks to skip")
def test_a_flush_skips_a_record_another_transaction_holds_instead_of_waiting(write):
    import time

    import psycopg
    from django.conf import settings

    held, free = write(content="Held by the expire job."), write(content="Free.")
    db = settings.DATABASES["default"]
    with psycopg.connect(
        host=db["HOST"],
        port=db["PORT"] or 5432,
        user=db["USER"],
        dbname=connection.settings_dict["NAME"],
        password=db["PASSWORD"] or None,
        autocommit=False,
    ) as other:
        other.execute("SELECT 1 FROM memory_memoryrecord WHERE id = %s FOR UPDATE", [held.pk])
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '3s'")  # waiting would fail here rather than hang
        started = time.monotonic()
        assert write_last_used(record_ids=[held.pk, free.pk], at=timezone.now()) == 1
        assert time.monotonic() - started < 2
        other.rollback()
    with connection.cursor() as cursor:
        cursor.execute("RESET lock_timeout")
    assert MemoryRecord.objects.get(pk=held.pk).last_used_at is None
    assert MemoryRecord.objects.get(pk=free.pk).last_used_at is not None
