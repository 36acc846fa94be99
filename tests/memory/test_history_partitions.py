"""Migration memory 0025 converts an existing history table into one partitioned by month on
PostgreSQL: every row moves into its month's partition with its id, the indexes exist on every
partition, and new history rows continue the ids."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from memory.models import MemoryRecord
from memory.services import memory_confirm

History = MemoryRecord.history.model
BEFORE = ("memory", "0024_replica_fence")
TABLE = "memory_historicalmemoryrecord"


def relkind() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = %s::regclass", [TABLE])
        return cursor.fetchone()[0]


def placed() -> dict[int, str]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT history_id, tableoid::regclass::text FROM {TABLE}")
        return dict(cursor.fetchall())


@pytest.mark.postgresql(reason="only PostgreSQL partitions the history table")
@pytest.mark.django_db(transaction=True)
def test_the_migration_moves_existing_history_into_monthly_partitions(write, reviewer_actor):
    record = write(subject="customer/ivy", content="Ivy prefers letters.")
    memory_confirm(record_id=record.pk, expected_version=1, actor=reviewer_actor, note="checked")
    created, confirmed = History.objects.filter(id=record.pk).order_by("history_id")
    old = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)
    executor = MigrationExecutor(connection)
    executor.migrate([BEFORE])
    try:
        assert relkind() == "r"
        with connection.cursor() as cursor:  # an install's row from long ago, in the plain table
            cursor.execute(f"UPDATE {TABLE} SET history_date = %s WHERE history_id = %s", [old, created.history_id])
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())

    assert relkind() == "p"
    now = datetime.now(UTC)
    assert placed() == {
        created.history_id: f"{TABLE}_p2025_03",
        confirmed.history_id: f"{TABLE}_p{now:%Y_%m}",
    }
    rows = History.objects.filter(id=record.pk).order_by("history_date")
    assert [(row.history_id, row.history_change_reason, row.history_note) for row in rows] == [
        (created.history_id, created.history_change_reason, created.history_note),
        (confirmed.history_id, confirmed.history_change_reason, "checked"),
    ]
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = 'memory_history_id_date_idx'::regclass")
        partitions = cursor.fetchone()[0]
        cursor.execute(f"SELECT count(*) FROM pg_inherits WHERE inhparent = '{TABLE}'::regclass")
        assert partitions == cursor.fetchone()[0] >= 2 + 12  # 2025-03 to two months ahead, and the default
    later = memory_confirm(record_id=record.pk, expected_version=2, actor=reviewer_actor, note="again")
    newest = History.objects.filter(id=later.pk).order_by("-history_id").first()
    assert newest.history_id > confirmed.history_id and newest.history_date > now - timedelta(minutes=1)
