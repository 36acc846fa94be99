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


def test_promoting_a_correction_while_its_subject_is_forgotten_never_deadlocks(credential, reviewer, client_for, monkeypatch):
    """Promote locks the correction and the record it corrects; forget locks every record of the
    subject. Both must take their locks in primary-key order. The promotion is slowed down once it
    holds its locks, and the forget starts meanwhile: a promotion that locked the correction first
    and the corrected record second would deadlock against the forget (PostgreSQL aborts one with
    a 500) whenever the corrected record has the smaller key, which this test arranges."""
    import time

    from memory import services
    from memory.services import transitions

    check_applies = transitions._check_applies

    def slow_promotion(record, name, expected_version):
        check_applies(record, name, expected_version)
        if name == "promote":
            time.sleep(0.3)

    monkeypatch.setattr(transitions, "_check_applies", slow_promotion)
    for attempt in range(20):
        subject = f"customer/race-{attempt}"
        original = services.memory_write(credential=credential, data=_body(subject)).record
        correction = services.memory_write(
            credential=credential,
            data=_body(
                subject,
                supersedes=str(original.pk),
                supersedes_version=1,
                authority="agent",
                provenance={"source_type": "agent_inference"},
            ),
        ).record
        if str(original.pk) < str(correction.pk):
            break
    else:
        pytest.fail("no pair with the corrected record's key first")
    assert correction.status == "quarantined"
    statuses: dict[str, int] = {}

    def promote() -> None:
        try:
            statuses["promote"] = (
                client_for(reviewer)
                .post(f"{MEMORIES}{correction.pk}/promote/", {"expected_version": 1}, format="json")
                .status_code
            )
        finally:
            connection.close()

    def forget() -> None:
        try:
            time.sleep(0.1)  # the promotion holds its first lock by now
            statuses["forget"] = (
                client_for(reviewer).post("/api/v1/forget/", {"subject": subject, "tenant": "acme"}, format="json").status_code
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=promote), threading.Thread(target=forget)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses == {"promote": 200, "forget": 202}
    assert set(MemoryRecord.objects.filter(pk__in=[original.pk, correction.pk]).values_list("status", flat=True)) == {"forgotten"}


def _body(subject: str, **overrides) -> dict:
    from tests.conftest import memory_body

    return memory_body(subject=subject, **overrides)
