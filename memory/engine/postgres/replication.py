"""Where a PostgreSQL server stands in the write-ahead log, for the replica fences
(`memory.replicas`): positions are LSNs as integers (bytes since 0/0), so they compare and store
as bigints."""

from __future__ import annotations

from typing import Any

import psycopg
from django.db import connections

# A primary's position in its log: where its next record goes, past every committed transaction's.
_POSITION = "pg_current_wal_insert_lsn()"


def wal_position(using: str) -> int:
    """The primary's current insert position: every transaction committed before this call lies
    at or before it. Not the write position (`pg_current_wal_lsn`): with `synchronous_commit`
    off (a server's, a role's or a transaction's setting) a commit returns once its record is
    inserted, before it is written, and a fence at the write position would let a standby that
    has not replayed the commit serve what it removed."""
    with connections[using].cursor() as cursor:
        cursor.execute(f"SELECT ({_POSITION} - '0/0'::pg_lsn)::bigint")
        return int(cursor.fetchone()[0])


def replayed_position(using: str) -> int | None:
    """How far the standby `using` names has replayed the primary's log (what its reads can see);
    a server that is not in recovery answers its own insert position (it sees every commit). None:
    it has replayed nothing yet."""
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE {_POSITION} END - '0/0'::pg_lsn)::bigint"
        )
        value = cursor.fetchone()[0]
    return None if value is None else int(value)


def standby_status(using: str, *, primary_position: int, timeout: float) -> dict[str, Any]:
    """What the readiness probe reports of the standby `using` names, on a connection of its own
    that gives up after `timeout` seconds (so an unreachable host cannot hold the probe): whether it
    is in recovery, how many bytes of the primary's log (its position `primary_position`) it has
    yet to replay, and for how long: the age of the newest transaction it replayed while it is
    behind, 0 once it has caught up. Raises the driver's error when it cannot be reached."""
    wrapper = connections[using]
    params = {**wrapper.get_connection_params(), "connect_timeout": max(2, round(timeout)), "autocommit": True}
    with psycopg.connect(**params) as conn:
        row = conn.execute(
            "SELECT pg_is_in_recovery(), (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()"
            f" ELSE {_POSITION} END - '0/0'::pg_lsn)::bigint,"
            " extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8"
        ).fetchone()
    recovering, replayed, age = row if row is not None else (False, None, None)
    behind = None if replayed is None else max(0, primary_position - int(replayed))
    return {
        "in_recovery": bool(recovering),
        "lag_bytes": behind,
        "lag_seconds": 0.0 if behind == 0 or not recovering else (None if age is None else round(max(0.0, age), 1)),
    }
