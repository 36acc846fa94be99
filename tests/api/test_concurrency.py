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


def test_promoting_a_correction_while_its_subject_is_forgotten_never_deadlocks(credential, reviewer, client_for):
    """Promote locks the correction and the record it corrects; forget locks every record of the
    subject. Both take their locks in primary-key order, so racing them gives a 200 or a 409 for
    the promotion and a 202 for the forget, never a 500 (a deadlock), whichever wins."""
    from memory import services

    outcomes: list[tuple[int, int]] = []
    for round_ in range(8):
        subject = f"customer/race-{round_}"
        original = services.memory_write(credential=credential, data=_body(subject)).record
        correction = services.memory_write(credential=credential, data=_body(
            subject, supersedes=str(original.pk), supersedes_version=1, authority="agent",
            provenance={"source_type": "agent_inference"},
        )).record
        assert correction.status == "quarantined"
        barrier = threading.Barrier(2)
        statuses: dict[str, int] = {}

        def promote() -> None:
            try:
                barrier.wait()
                statuses["promote"] = client_for(reviewer).post(
                    f"{MEMORIES}{correction.pk}/promote/", {"expected_version": 1}, format="json").status_code
            finally:
                connection.close()

        def forget() -> None:
            try:
                barrier.wait()
                statuses["forget"] = client_for(reviewer).post(
                    "/api/v1/forget/", {"subject": subject, "tenant": "acme"}, format="json").status_code
            finally:
                connection.close()

        threads = [threading.Thread(target=promote), threading.Thread(target=forget)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        outcomes.append((statuses["promote"], statuses["forget"]))
        assert statuses["promote"] in (200, 409) and statuses["forget"] == 202, statuses
        assert set(MemoryRecord.objects.filter(subject=subject).values_list("status", flat=True)) <= {"forgotten"}
    assert len(outcomes) == 8


def _body(subject: str, **overrides) -> dict:
    from tests.conftest import memory_body

    return memory_body(subject=subject, **overrides)
