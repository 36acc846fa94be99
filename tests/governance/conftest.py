"""Fixtures for the scheduled jobs: bulk-made records in any status and age (through
simple-history's bulk helper, so each has its creation history row like a real write), and real
Celery worker and beat processes pointed at the test database."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from simple_history.utils import bulk_create_with_history

from memory.models import Authority, MemoryKind, MemoryRecord, SourceType, Status, Trust, content_digest
from tests.processes import CeleryStack


@pytest.fixture
def make_records(tenant, credential):
    """make_records(count, status=..., age=..., kind=..., subject=..., expired=True) -> list of ids.

    `age` is how long ago the record was written and entered its status; `expired` puts
    `expires_at` an hour in the past (else a month ahead)."""

    def make(
        count: int,
        *,
        status: str = Status.ACTIVE,
        age: timedelta = timedelta(hours=2),
        kind: str = "preference",
        subject: str = "customer/bulk",
        expired: bool = True,
        content: str = "Bulk note {i}.",
    ) -> list[uuid.UUID]:
        now = timezone.now()
        written = now - age
        kind_row = MemoryKind.objects.get(name=kind)
        records = [
            MemoryRecord(
                tenant=tenant,
                agent=credential.agent,
                subject=subject,
                purpose="support",
                kind=kind_row,
                content=content.format(i=i),
                content_hash=content_digest(content.format(i=i)),
                source_type=SourceType.USER_TURN,
                authority=Authority.USER,
                trust=Trust.TRUSTED,
                confidence=0.8,
                created_at=written,
                confirmed_at=written,
                status_changed_at=written,
                expires_at=(now - timedelta(hours=1)) if expired else (now + timedelta(days=30)),
                status=status,
                version=1,
            )
            for i in range(count)
        ]
        if expired and records and records[0].expires_at <= written:
            raise ValueError("age must be more than an hour so that expires_at comes after created_at")
        bulk_create_with_history(
            records,
            MemoryRecord,
            batch_size=2000,
            default_change_reason=f"write.{status}",
            custom_historical_attrs={"history_actor": "test:bulk"},
        )
        return [record.pk for record in records]

    return make


@pytest.fixture
def history():
    return MemoryRecord.history.model


@pytest.fixture
def celery_stack(tmp_path, transactional_db):
    """CeleryStack(tmp_path): start workers and beat against the test database; all of them are
    stopped (and the test queue dropped) before the database is flushed."""
    stack = CeleryStack(tmp_path)
    try:
        yield stack
    finally:
        stack.stop_all()
