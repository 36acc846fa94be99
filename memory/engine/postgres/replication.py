"""Where a PostgreSQL server stands in the write-ahead log, for the replica fences
(`memory.replicas`): positions are LSNs as integers (bytes since 0/0), so they compare and store
as bigints."""

from __future__ import annotations

from django.db import connections


def wal_position(using: str) -> int:
    """The primary's current write position: every transaction committed before this call lies
    at or before it."""
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint")
        return int(cursor.fetchone()[0])


def replayed_position(using: str) -> int | None:
    """How far the standby `using` names has replayed the primary's log (what its reads can see);
    a server that is not in recovery answers its own write position. None: it has replayed
    nothing yet."""
    with connections[using].cursor() as cursor:
        cursor.execute(
            "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END"
            " - '0/0'::pg_lsn)::bigint"
        )
        value = cursor.fetchone()[0]
    return None if value is None else int(value)
