"""Compare-and-swap under real concurrency: many clients, one version, one winner."""

import threading

import pytest
from django.db import connection

from memory.models import MemoryRecord
from tests.api.conftest import MEMORIES, bearer_client

# Real commits, seen from several connections. (No serialized_rollback: its flush leaves the content
# types table empty for the tests after it; the `tenant` fixture re-seeds the memory kinds instead.)
pytestmark = pytest.mark.django_db(transaction=True)


def test_20_concurrent_confirms_with_the_same_version_give_one_200_and_19_409(write, credential):
    record = write()
    barrier = threading.Barrier(20)
    statuses: list[int] = []
    conflict_types: set[str] = set()

    def confirm() -> None:
        client = bearer_client(credential.raw_token)
        try:
            barrier.wait()
            response = client.post(f"{MEMORIES}{record.pk}/confirm/", {"expected_version": 1}, format="json")
            statuses.append(response.status_code)
            if response.status_code == 409:
                conflict_types.add(response["Content-Type"])
        finally:
            connection.close()

    threads = [threading.Thread(target=confirm) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(statuses) == [200] + [409] * 19
    assert conflict_types == {"application/problem+json"}
    record.refresh_from_db()
    assert record.version == 2
    confirmations = MemoryRecord.history.filter(id=record.pk, history_change_reason="agent.confirm")
    assert confirmations.count() == 1
