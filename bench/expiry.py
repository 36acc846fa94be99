"""Expiry at scale: `count` due records expired by the `expire` job (through `manage.py run_job`,
as beat runs it), beside the plain-SQL floor (one UPDATE ... RETURNING feeding one history INSERT)
on the same rows in the same run. Both runs leave exactly one `job.expire` history row per record;
the benchmark checks it.

    .venv/bin/python -m bench.expiry --dsn postgresql://postgres@127.0.0.1:5432/gm_bench --count 1000000

Set-up (not measured): the `count` oldest-created active or quarantined records are made due with
the search-index triggers off (only `expires_at` changes; the lexical index's copy of it is set as
its trigger would), and the table is vacuumed so that both runs start from the same state. After
the job, the `sweep_indexes` job deletes the index entries the job left (reported on its own). After each run
the records are put back as they were (their status and version, with triggers on, so the search
index gets its rows back) and the run's history rows are deleted.
"""

import argparse
import json
import time

import psycopg

from bench.run import job_seconds, run_job

DUE_TABLE = "bench_due"

# What the job does, as one statement: the records and their history rows. The same columns as
# the app's history copy (every tracked field; last_used_at is not tracked).
HISTORY_FIELDS = (
    "id, tenant_id, agent_id, subject, purpose, kind_id, content, content_hash, source_type, source_uri, session_id, "
    "turn_id, tool, source_version, observed_at, contaminated, written_by_id, authority, trust, quarantine_reason, "
    "risk_flags, reviewed_by_id, reviewed_at, confidence, created_at, valid_from, valid_to, confirmed_at, expires_at, "
    "status, status_changed_at, version, supersedes_id"
)
FLOOR_SQL = f"""
WITH x AS (
  UPDATE memory_memoryrecord SET status = 'expired', status_changed_at = now(), version = version + 1
  WHERE status IN ('active', 'quarantined') AND expires_at <= now()
  RETURNING {HISTORY_FIELDS})
INSERT INTO memory_historicalmemoryrecord ({HISTORY_FIELDS}, history_date, history_type, history_change_reason,
  history_actor, history_note)
SELECT {HISTORY_FIELDS}, now(), '~', 'job.expire', 'bench:floor', '' FROM x
"""


def _make_due(dsn: str, count: int) -> int:
    with psycopg.connect(dsn, autocommit=False) as conn:
        conn.execute("SET session_replication_role = replica")  # the index's copy of expires_at may lag
        conn.execute(f"DROP TABLE IF EXISTS {DUE_TABLE}")
        conn.execute(
            f"CREATE TABLE {DUE_TABLE} AS SELECT id, status, version, expires_at FROM memory_memoryrecord "
            f"WHERE status IN ('active', 'quarantined') AND expires_at > now() ORDER BY created_at LIMIT %s",
            (count,),
        )
        conn.execute(f"ALTER TABLE {DUE_TABLE} ADD PRIMARY KEY (id)")
        made = conn.execute(
            f"UPDATE memory_memoryrecord r SET expires_at = greatest(r.created_at + interval '1 microsecond', "
            f"now() - interval '1 second') FROM {DUE_TABLE} d WHERE r.id = d.id"
        ).rowcount
        # The lexical index's copy of expires_at, as its trigger would have written it.
        (index,) = conn.execute("SELECT id FROM memory_searchindex WHERE kind = 'lexical' AND status = 'active'").fetchone()
        conn.execute(
            f"UPDATE memory_search_lex_{index} x SET expires_at = r.expires_at FROM memory_memoryrecord r "
            f"JOIN {DUE_TABLE} d ON d.id = r.id WHERE x.record_id = r.id"
        )
        conn.commit()
    _vacuum(dsn)
    return made


def _vacuum(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE memory_memoryrecord")
        conn.execute("VACUUM ANALYZE memory_historicalmemoryrecord")


def _check_and_restore(dsn: str, count: int, reason_actor: str) -> None:
    """Exactly one `job.expire` history row per due record, then everything back as it was."""
    with psycopg.connect(dsn, autocommit=False) as conn:
        expired, rows, distinct = conn.execute(
            f"SELECT (SELECT count(*) FROM memory_memoryrecord r JOIN {DUE_TABLE} d USING (id) WHERE r.status = 'expired'), "
            f"count(*), count(DISTINCT h.id) FROM memory_historicalmemoryrecord h "
            f"WHERE h.history_change_reason = 'job.expire' AND h.history_actor = %s",
            (reason_actor,),
        ).fetchone()
        assert expired == rows == distinct == count, (expired, rows, distinct, count)
        conn.execute(
            "DELETE FROM memory_historicalmemoryrecord WHERE history_change_reason = 'job.expire' AND history_actor = %s",
            (reason_actor,),
        )
        # Triggers on: the active ones go back into the search index.
        conn.execute(
            f"UPDATE memory_memoryrecord r SET status = d.status, version = d.version, expires_at = d.expires_at "
            f"FROM {DUE_TABLE} d WHERE r.id = d.id"
        )
        conn.commit()


def measure_expiry(dsn: str, count: int, floor: bool = True) -> dict:
    """{"count", "app" (seconds, the job run), "floor" (seconds, the plain SQL; left out when
    `floor` is false), WAL written, the sweep after the job}."""
    made = _make_due(dsn, count)
    assert made == count, f"only {made} active or quarantined records to make due (wanted {count})"
    wal = _wal_position(dsn)
    summary = run_job(dsn, "expire")
    app_wal = _wal_position(dsn) - wal
    assert summary["status"] == "succeeded" and summary["counts"]["expired"] == count, summary
    app = job_seconds(summary)
    print(f"expiry: job {app:.1f} s for {count:,}, {app_wal / 2**20:,.0f} MiB of WAL", flush=True)
    # The search-index entries the job left (PostgreSQL), deleted by the sweep job afterwards.
    wal = _wal_position(dsn)
    swept = run_job(dsn, "sweep_indexes")
    sweep_wal = _wal_position(dsn) - wal
    assert swept["status"] == "succeeded", swept
    sweep = job_seconds(swept)
    print(
        f"expiry: index sweep {sweep:.1f} s for {swept['counts']['swept']:,} entries, {sweep_wal / 2**20:,.0f} MiB of WAL",
        flush=True,
    )
    _check_and_restore(dsn, count, "job:expire")
    measured = {
        "count": count,
        "app": app,
        "app_wal_mib": app_wal / 2**20,
        "sweep": sweep,
        "swept": swept["counts"]["swept"],
        "sweep_wal_mib": sweep_wal / 2**20,
    }
    if not floor:
        _drop_due(dsn)
        return measured
    _make_due(dsn, count)
    with psycopg.connect(dsn, autocommit=False) as conn:
        wal = _wal_position(dsn)
        started = time.perf_counter()
        done = conn.execute(FLOOR_SQL).rowcount
        conn.commit()
        floor_seconds = time.perf_counter() - started
        floor_wal = _wal_position(dsn) - wal
    assert done == count, (done, count)
    print(f"expiry: floor {floor_seconds:.1f} s, {floor_wal / 2**20:,.0f} MiB of WAL", flush=True)
    _check_and_restore(dsn, count, "bench:floor")
    _drop_due(dsn)
    return {**measured, "floor": floor_seconds, "floor_wal_mib": floor_wal / 2**20}


def _drop_due(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE {DUE_TABLE}")
    _vacuum(dsn)


def _wal_position(dsn: str) -> int:
    """Bytes of WAL written by the server so far (every database's; the benchmark's dominate)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return int(conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')").fetchone()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--count", type=int, default=1_000_000)
    args = parser.parse_args()
    print(json.dumps(measure_expiry(args.dsn, args.count)))


if __name__ == "__main__":
    main()
