"""History retention at scale: `rows` history rows of one old month removed by dropping the month's
partition (the prune job's way on PostgreSQL, `memory.engine.postgres.history.drop_history_before`)
beside the row-by-row way (SQLite's, and PostgreSQL's before the table was partitioned: chunked
DELETEs of `batch` rows, each its own transaction), on the same rows, in alternating rounds.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/gm_history_bench .venv/bin/python -m bench.history_drop --rows 200000

The database named by DATABASE_URL is dropped, created and migrated first. Each round seeds the
month afresh (not measured): `rows` history rows over rows / `per-record` records that still exist
(`--per-record 0`: records gone, nothing to keep), then runs one method. Both keep the same rows:
each record's newest row of the month, its state at the horizon; the script checks it. Prints one
JSON line per run and a summary (median seconds per method, and the longest a history insert made
every 10 ms meanwhile, as a transition would, waited).
"""

import argparse
import json
import os
import statistics
import threading
import time
from datetime import UTC, datetime
from urllib.parse import urlparse

import psycopg

TABLE = "memory_historicalmemoryrecord"
MONTH = datetime(2024, 3, 1, tzinfo=UTC)  # the old month seeded
HORIZON = datetime(2024, 4, 1, tzinfo=UTC)
COLUMNS = (
    "id, subject, purpose, content, content_hash, source_type, source_uri, session_id, turn_id, tool, source_version, "
    "contaminated, authority, trust, quarantine_reason, confidence, created_at, confirmed_at, expires_at, status, "
    "status_changed_at, version, agent_id, kind_id, tenant_id"
)
# The row-by-row way: what memory.engine.sqlite.history deletes, as PostgreSQL runs it.
ROW_BY_ROW = (
    f"DELETE FROM {TABLE} WHERE history_id IN (SELECT d.history_id FROM {TABLE} d WHERE d.history_date < %(h)s "
    f"AND (NOT EXISTS (SELECT 1 FROM memory_memoryrecord r WHERE r.id = d.id) OR EXISTS (SELECT 1 FROM {TABLE} n "
    "WHERE n.id = d.id AND n.history_date < %(h)s AND (n.history_date, n.history_id) > (d.history_date, d.history_id))) "
    "LIMIT %(batch)s)"
)


def recreate_and_migrate(dsn: str) -> None:
    name = urlparse(dsn).path.lstrip("/")
    with psycopg.connect(dsn.replace(f"/{name}", "/postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def seed(dsn: str, *, rows: int, per_record: int) -> int:
    """The month's partition and `rows` rows in it; returns how many records exist for them."""
    from memory.engine.postgres import history

    records = rows // per_record if per_record else rows
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute("DELETE FROM memory_memoryrecord")
        conn.execute(f"DELETE FROM {TABLE}")
    history.ensure_history_partitions(now=MONTH, months_ahead=0)
    with psycopg.connect(dsn, autocommit=False) as conn:
        conn.execute("SET session_replication_role = replica")  # no triggers, no FK checks: set-up only
        conn.execute(
            f"INSERT INTO {TABLE} ({COLUMNS}, history_actor, history_note, history_date, history_type, history_change_reason) "
            "SELECT md5('r' || (g %% %(records)s))::uuid, 'customer/' || (g %% %(records)s), 'support', "
            "'Prefers email over phone, note ' || g, 'sha256:x', 'user_turn', '', '', '', '', '', false, 'user', 'trusted', "
            "'', 0.9, %(month)s, %(month)s, %(month)s + interval '400 days', 'active', %(month)s, 1 + g / %(records)s, 1, 1, 1, "
            "'bench', '', %(month)s + (g * interval '1 second'), '~', 'review.confirm' FROM generate_series(0, %(rows)s - 1) g",
            {"records": records, "rows": rows, "month": MONTH},
        )
        if per_record:
            conn.execute(
                f"INSERT INTO memory_memoryrecord ({COLUMNS}) SELECT DISTINCT ON (id) {COLUMNS} FROM {TABLE} ORDER BY id"
            )
        conn.commit()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"VACUUM ANALYZE {TABLE}")
        conn.execute("VACUUM ANALYZE memory_memoryrecord")
        conn.execute("CHECKPOINT")
    return records if per_record else 0


def by_partition(batch: int) -> dict:
    from memory.engine.postgres import history

    return history.drop_history_before(horizon=HORIZON, batch_size=batch)


def by_row(dsn: str, batch: int) -> dict:
    deleted = 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            count = conn.execute(ROW_BY_ROW, {"h": HORIZON, "batch": batch}).rowcount
            deleted += count
            if count < batch:
                return {"history_rows_deleted": deleted}


class Writer(threading.Thread):
    """A transition's history insert (today's month) every 10 ms while a method runs: the longest
    one is how long history writes waited for it."""

    def __init__(self, dsn: str) -> None:
        super().__init__(daemon=True)
        self.dsn, self.stop, self.longest, self.count = dsn, threading.Event(), 0.0, 0

    def run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("SET session_replication_role = replica")
            while not self.stop.is_set():
                started = time.perf_counter()
                conn.execute(
                    f"INSERT INTO {TABLE} ({COLUMNS}, history_actor, history_note, history_date, history_type) VALUES "
                    "(gen_random_uuid(), 'customer/live', 'support', 'A transition now', 'sha256:x', 'user_turn', '', '', "
                    "'', '', '', false, 'user', 'trusted', '', 0.9, now(), now(), now() + interval '1 day', 'active', now(), "
                    "2, 1, 1, 1, 'bench', '', now(), '~')"
                )
                self.longest = max(self.longest, time.perf_counter() - started)
                self.count += 1
                time.sleep(0.01)


def left(dsn: str) -> tuple[int, int]:
    with psycopg.connect(dsn) as conn:
        kept = conn.execute(f"SELECT count(*) FROM {TABLE} WHERE history_date < %s", [HORIZON]).fetchone()[0]
        partitions = conn.execute("SELECT count(*) FROM pg_class WHERE relname = %s", [f"{TABLE}_p2024_03"]).fetchone()[0]
    return kept, partitions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--per-record", type=int, default=5, help="rows per record (0: the records are gone)")
    parser.add_argument("--batch", type=int, default=2000, help="rows per DELETE (JOB_BATCH_SIZE)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.db import connection

    dsn = os.environ["DATABASE_URL"]
    recreate_and_migrate(dsn)
    times: dict[str, list[float]] = {"partition_drop": [], "row_by_row": []}
    waits: dict[str, list[float]] = {"partition_drop": [], "row_by_row": []}
    for round_ in range(args.rounds):
        for method in ("partition_drop", "row_by_row") if round_ % 2 == 0 else ("row_by_row", "partition_drop"):
            expected = seed(dsn, rows=args.rows, per_record=args.per_record)
            connection.close()
            load = os.getloadavg()[0]
            writer = Writer(dsn)
            writer.start()
            time.sleep(0.2)
            started = time.perf_counter()
            counts = by_partition(args.batch) if method == "partition_drop" else by_row(dsn, args.batch)
            seconds = time.perf_counter() - started
            writer.stop.set()
            writer.join()
            kept, partition_left = left(dsn)
            if method == "partition_drop":
                assert partition_left == 0, "the month's partition is still there"
            assert kept == expected, f"{method} kept {kept} rows, expected {expected}"
            times[method].append(seconds)
            waits[method].append(writer.longest)
            line = {
                "round": round_,
                "method": method,
                "rows": args.rows,
                "seconds": round(seconds, 3),
                "kept": kept,
                "longest_history_write_s": round(writer.longest, 3),
            }
            print(json.dumps({**line, "load1": round(load, 2), "counts": counts}), flush=True)
    summary = {method: round(statistics.median(values), 3) for method, values in times.items()}
    summary["ratio"] = round(summary["row_by_row"] / summary["partition_drop"], 1)
    longest = {method: round(max(values), 3) for method, values in waits.items()}
    print(
        json.dumps(
            {"rows": args.rows, "per_record": args.per_record, "median_seconds": summary, "longest_history_write_s": longest}
        )
    )


if __name__ == "__main__":
    main()
