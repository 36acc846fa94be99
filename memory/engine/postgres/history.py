"""The records' history table by month (migration memory 0025 partitioned it by `history_date`):
the partitions made ahead of time, and history older than retention's horizon dropped a partition
at a time.

A partition holds one calendar month (UTC) and is named `memory_historicalmemoryrecord_pYYYY_MM`;
the default partition (`..._default`) takes any row no month partition covers: a record's state
row kept from a dropped month (below), or a row written for a month not made yet (the job was not
run for months). Dropping a month keeps, for each record that still exists, its newest row of the
month when no later row before the horizon exists: the record's state at the horizon, which as-of
reads and the history page start from. Those rows move to the default partition, in the
transaction that detaches and drops the month; the rest of the month goes with the table, with no
row deleted one by one. History writes (every transition) wait while a month is detached, copied
from and dropped: for as long as copying its kept rows takes, since choosing them is done before.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.db import connection, transaction

from memory.history import HistoryPartition, month_start

TABLE = "memory_historicalmemoryrecord"
DEFAULT = f"{TABLE}_default"
RECORDS = "memory_memoryrecord"
KEEP = f"{TABLE}_keep"  # the keys of a month's rows to keep, while it is dropped


def _next_month(moment: datetime) -> datetime:
    return datetime(moment.year + moment.month // 12, moment.month % 12 + 1, 1, tzinfo=UTC)


def _partition_name(lower: datetime) -> str:
    return f"{TABLE}_p{lower:%Y_%m}"


def history_partitions() -> list[HistoryPartition]:
    """The history table's partitions, oldest month first, the default one last."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid), c.reltuples::bigint FROM pg_inherits i "
            "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = %s::regclass",
            [TABLE],
        )
        rows = cursor.fetchall()
    found = []
    for name, bound, estimate in rows:
        if bound == "DEFAULT":
            found.append(HistoryPartition(name, None, None, estimate))
            continue
        # FOR VALUES FROM ('2026-12-01 00:00:00+00') TO ('2027-01-01 00:00:00+00')
        lower, upper = (datetime.fromisoformat(part.split("'")[1]) for part in bound.split(" TO "))
        found.append(HistoryPartition(name, lower, upper, estimate))
    return sorted(found, key=lambda partition: (partition.lower is None, partition.lower or datetime.min.replace(tzinfo=UTC)))


def ensure_history_partitions(*, now: datetime, months_ahead: int) -> list[str]:
    """Make the month partitions from `now`'s month to `months_ahead` months after it that do not
    exist yet; returns their names. Rows the default partition took for such a month move into it."""
    made = []
    existing = {partition.lower for partition in history_partitions() if partition.lower is not None}
    lower = month_start(now)
    for _ in range(months_ahead + 1):
        upper = _next_month(lower)
        if lower not in existing:
            _make_partition(lower, upper)
            made.append(_partition_name(lower))
        lower = upper
    return made


def _make_partition(lower: datetime, upper: datetime) -> None:
    name = _partition_name(lower)
    bounds = [lower, upper]
    with transaction.atomic(), connection.cursor() as cursor:
        # A month the default partition holds rows of cannot be attached beside it: the rows move in first.
        cursor.execute(f"CREATE TABLE {name} (LIKE {TABLE} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)")
        cursor.execute(
            f"WITH moved AS (DELETE FROM {DEFAULT} WHERE history_date >= %s AND history_date < %s RETURNING *) "
            f"INSERT INTO {name} SELECT * FROM moved",
            bounds,
        )
        cursor.execute(f"ALTER TABLE {TABLE} ATTACH PARTITION {name} FOR VALUES FROM (%s) TO (%s)", bounds)


def drop_history_before(*, horizon: datetime, batch_size: int) -> dict[str, int]:
    """Drop every month partition wholly before `horizon` (a month's start), oldest first. For each,
    first (no lock beyond reading) the rows to keep are chosen and their keys put aside in
    KEEP; then, in one short transaction, the month is detached (history writes wait from here to
    the commit), the rows of those keys copied from it into the default partition (as they are
    then: a forget's scrub committed meanwhile is in them) and the table dropped. Then the default
    partition's rows before the horizon that are no longer a record's state there go, in chunks of
    `batch_size` (few: at most one a record per dropped month). Returns counts."""
    counts = {"history_partitions_dropped": 0, "history_rows_dropped": 0, "history_rows_kept": 0, "history_rows_deleted": 0}
    for partition in history_partitions():
        if partition.upper is None or partition.upper > horizon:
            continue
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {partition.name}")
            counts["history_rows_dropped"] += cursor.fetchone()[0]
            cursor.execute(f"DROP TABLE IF EXISTS {KEEP}")
            # Which rows stay depends on nothing a concurrent transaction changes: the month's rows
            # (written in their month, never re-dated), later rows before the horizon, and whether
            # the record exists (one pruned meanwhile leaves a row _delete_superseded removes).
            cursor.execute(
                f"CREATE UNLOGGED TABLE {KEEP} AS SELECT DISTINCT ON (h.id) h.history_id, h.history_date "
                f"FROM {partition.name} h WHERE EXISTS (SELECT 1 FROM {RECORDS} r WHERE r.id = h.id) "
                f"AND NOT EXISTS (SELECT 1 FROM {TABLE} n WHERE n.id = h.id AND n.history_date >= %s AND n.history_date < %s) "
                "ORDER BY h.id, h.history_date DESC, h.history_id DESC",
                [partition.upper, horizon],
            )
        with transaction.atomic(), connection.cursor() as cursor:
            # A table with deferred foreign-key checks queued (history_user_id's, from an earlier
            # statement of the transaction) cannot be dropped: they run now.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute(f"ALTER TABLE {TABLE} DETACH PARTITION {partition.name}")
            cursor.execute(
                f"INSERT INTO {TABLE} SELECT h.* FROM {partition.name} h JOIN {KEEP} k "
                "ON k.history_id = h.history_id AND k.history_date = h.history_date"
            )
            counts["history_rows_kept"] += cursor.rowcount
            cursor.execute(f"DROP TABLE {partition.name}")
            cursor.execute(f"DROP TABLE {KEEP}")
        counts["history_partitions_dropped"] += 1
    counts["history_rows_dropped"] -= counts["history_rows_kept"]
    counts["history_rows_deleted"] = _delete_superseded(horizon=horizon, batch_size=batch_size)
    return counts


def _delete_superseded(*, horizon: datetime, batch_size: int) -> int:
    """Rows of the default partition before the horizon that are not their record's newest row
    before it, or whose record is gone."""
    deleted = 0
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {DEFAULT} WHERE history_id IN (SELECT d.history_id FROM {DEFAULT} d WHERE d.history_date < %s "
                f"AND (NOT EXISTS (SELECT 1 FROM {RECORDS} r WHERE r.id = d.id) OR EXISTS (SELECT 1 FROM {TABLE} n "
                "WHERE n.id = d.id AND n.history_date < %s AND (n.history_date, n.history_id) > (d.history_date, d.history_id))) "
                "LIMIT %s)",
                [horizon, horizon, batch_size],
            )
            deleted += cursor.rowcount
            if cursor.rowcount < batch_size:
                return deleted
