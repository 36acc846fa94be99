"""Forgetting a subject means the same on every database: the same records forgotten, the same
history rows (one each, with the same reason, note, actor and moment, the subject's written before
the lineage's and each group's in primary-key order) and the same receipt, whether the engine
moves the records in one statement (PostgreSQL) or two (SQLite). These run on whichever database
the suite runs on."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory import services
from memory.models import MemoryRecord, Status
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db

UNTRUSTED = {"authority": "agent", "provenance": {"source_type": "agent_inference"}}


def _derived(credential, *sources, subject: str) -> MemoryRecord:
    body = memory_body(subject=subject, derived_from=[str(source.pk) for source in sources], **UNTRUSTED)
    return services.memory_write(credential=credential, data=body).record


def test_a_forget_leaves_the_same_records_history_and_receipt_on_every_database(credential, write, reviewer_actor):
    subject = [write(subject="customer/ann") for _ in range(4)]
    subject.append(write(subject="customer/ann", **UNTRUSTED))  # quarantined
    services.memory_retire(record_id=subject[0].pk, expected_version=1, actor=reviewer_actor)  # expired
    summary = _derived(credential, subject[1], subject[2], subject="customer/summary")
    summary_of_summary = _derived(credential, summary, subject="customer/digest")  # lineage at depth two
    kept = write(subject="customer/bob")
    versions = dict(MemoryRecord.objects.values_list("pk", "version"))

    outcome = services.memory_forget_subject(
        tenant_id=credential.agent.tenant_id, subject="customer/ann", actor=reviewer_actor, reason="Erasure request 12."
    )

    subject_ids = sorted(record.pk for record in subject)
    lineage_ids = sorted([summary.pk, summary_of_summary.pk])
    assert outcome.record_ids == subject_ids + lineage_ids
    assert (outcome.subject_count, outcome.lineage_count) == (5, 2)
    statuses = dict(MemoryRecord.objects.values_list("pk", "status"))
    assert {pk: statuses[pk] for pk in subject_ids + lineage_ids} == dict.fromkeys(subject_ids + lineage_ids, Status.FORGOTTEN)
    assert statuses[kept.pk] == Status.ACTIVE
    assert all(version == versions[pk] + 1 for pk, version in MemoryRecord.objects.values_list("pk", "version") if pk != kept.pk)

    history = MemoryRecord.history.model.objects.filter(history_change_reason__in=["review.forget", "review.forget_lineage"])
    rows = list(
        history.order_by("history_id").values_list(
            "id", "history_change_reason", "history_note", "history_actor", "history_type", "status", "history_date"
        )
    )
    assert [row[0] for row in rows] == subject_ids + lineage_ids  # one each, in this order
    assert [row[1] for row in rows] == ["review.forget"] * 5 + ["review.forget_lineage"] * 2
    assert {row[2:6] for row in rows} == {("Erasure request 12.", reviewer_actor.label, "~", Status.FORGOTTEN)}
    assert len({row[6] for row in rows}) == 1  # one moment


def test_a_forget_runs_as_many_statements_for_many_records_as_for_few(credential, write, reviewer_actor):
    """Set-based on every database: no statement per record, nor per chunk of records."""
    statements = {}
    for count in (2, 25):
        for _ in range(count):
            write(subject=f"customer/many-{count}")
        with CaptureQueriesContext(connection) as captured:
            outcome = services.memory_forget_subject(
                tenant_id=credential.agent.tenant_id, subject=f"customer/many-{count}", actor=reviewer_actor
            )
        assert outcome.subject_count == count
        statements[count] = len(captured.captured_queries)
    assert statements[2] == statements[25]
