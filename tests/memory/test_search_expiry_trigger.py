"""PostgreSQL's sync trigger on the records takes a shortcut for a statement whose every row is an
active or quarantined record expired in time (the expire job's): the entries stay for the sweep.
Any other statement, or one mixing such rows with others, goes the general way."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from memory.models import MemoryRecord
from memory.search import active_index, storage

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.postgresql(reason="the statement-level trigger's shortcuts (SQLite's row-level ones: test_search_storage)"),
]


def _entries() -> set:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT record_id, expires_at FROM {active_index().storage_name}")
        return {row[0]: row[1] for row in cursor.fetchall()}


def _past(*records) -> None:
    MemoryRecord.objects.filter(pk__in=[r.pk for r in records]).update(
        created_at=timezone.now() - timedelta(hours=2), expires_at=timezone.now() - timedelta(hours=1)
    )


def _raw_update(sql: str, ids) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {storage.RECORDS} SET {sql} WHERE id = ANY(%s)", [[r.pk for r in ids]])


def test_records_expired_in_time_keep_their_entries_until_the_sweep(write):
    first, second = write(content="A roadtrip."), write(content="A train trip.")
    _past(first, second)
    _raw_update("status = 'expired', version = version + 1", [first, second])
    assert set(_entries()) == {first.pk, second.pk}
    assert storage.sweep_expired(active_index().storage_name, now=timezone.now(), batch_size=10) == 2
    assert _entries() == {}


def test_expired_before_its_time_the_entry_goes_at_once(write):
    due, early = write(content="A roadtrip."), write(content="A train trip.")
    _past(due)
    _raw_update("status = 'expired', version = version + 1", [due, early])  # early: expires_at ahead
    assert set(_entries()) == {due.pk}


def test_a_statement_mixing_expiry_in_time_with_other_changes_goes_the_general_way(write):
    due, edited, expired = write(content="A roadtrip."), write(content="A train trip."), write(content="A boat trip.")
    _past(due, expired)
    _raw_update("status = 'expired'", [expired])  # an entry that waits for the sweep
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {storage.RECORDS} SET status = CASE WHEN id = %s THEN 'expired' ELSE status END, "
            f"content = CASE WHEN id = %s THEN 'A bicycle trip.' ELSE content END WHERE id = ANY(%s)",
            [due.pk, edited.pk, [due.pk, edited.pk]],
        )
    assert set(_entries()) == {due.pk, edited.pk, expired.pk}
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT vector::text FROM {active_index().storage_name} WHERE record_id = %s", [edited.pk])
        assert "bicycl" in cursor.fetchone()[0]
    # An expired record's later change (here: forgotten) removes its entry at once.
    _raw_update("status = 'forgotten'", [expired])
    assert set(_entries()) == {due.pk, edited.pk}
