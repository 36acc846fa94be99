"""The records' history table on SQLite: one plain table (PostgreSQL partitions it by month), so
history older than retention's horizon is deleted in chunks, keeping what the PostgreSQL engine
keeps when it drops a month: for each record that still exists, its newest row before the horizon
(its state there, which as-of reads and the history page start from).
"""

from __future__ import annotations

from datetime import datetime

from django.db import connection, transaction

from memory.history import HistoryPartition

TABLE = "memory_historicalmemoryrecord"
RECORDS = "memory_memoryrecord"


def history_partitions() -> list[HistoryPartition]:
    """None: the table is not partitioned."""
    return []


def ensure_history_partitions(*, now: datetime, months_ahead: int) -> list[str]:
    """Nothing to make: the table is not partitioned."""
    return []


def drop_history_before(*, horizon: datetime, batch_size: int) -> dict[str, int]:
    """Delete the rows before `horizon` that are not an existing record's newest row before it,
    `batch_size` rows per statement and transaction. Returns counts (the same keys as PostgreSQL's)."""
    counts = {"history_partitions_dropped": 0, "history_rows_dropped": 0, "history_rows_kept": 0, "history_rows_deleted": 0}
    cutoff = connection.ops.adapt_datetimefield_value(horizon)
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {TABLE} WHERE history_id IN (SELECT d.history_id FROM {TABLE} d WHERE d.history_date < %s "
                f"AND (NOT EXISTS (SELECT 1 FROM {RECORDS} r WHERE r.id = d.id) OR EXISTS (SELECT 1 FROM {TABLE} n "
                "WHERE n.id = d.id AND n.history_date < %s AND (n.history_date > d.history_date "
                "OR (n.history_date = d.history_date AND n.history_id > d.history_id)))) LIMIT %s)",
                [cutoff, cutoff, batch_size],
            )
            counts["history_rows_deleted"] += cursor.rowcount
            if cursor.rowcount < batch_size:
                return counts
