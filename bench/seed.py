"""Synthetic data for the benchmark, generated inside PostgreSQL (INSERT ... SELECT over
generate_series) with the search-index triggers off (the caller rebuilds the index afterwards, one
bulk load), so a million records take a minute or two rather than an hour of ORM calls.

Shape (defaults; scale with --scale):
- `bench-big`: the large tenant, 100,000 records over 5 agents, 2 purposes and 2,000 subjects,
  plus subjects `customer/forget-me-0..2` with 10,000 records each (one per forget repetition);
- `bench-queue`: 100,000 quarantined records (the quarantine-page benchmark);
- 160 small tenants with 5,400 records each;
about 1,094,000 records in all at scale 1.0 (so that, after the forget benchmark, a million are still
active or quarantined for the expiry benchmark), each with its creation history row. Content is drawn from a
vocabulary so full-text ranking has realistic term frequencies; statuses are mostly active with some
quarantined, expired and superseded.
"""

import argparse
import time

import psycopg

WORDS = (
    "customer prefers email phone invoice billing contact weekly monthly refund plan enterprise starter "
    "deploy staging production approval review ticket escalation priority outage latency region europe "
    "america asia support sales renewal discount contract legal security audit password rotation backup "
    "restore database cache queue worker schedule meeting monday friday morning evening timezone language "
    "english german french spanish summary report dashboard metric alert threshold owner manager team "
    "finance engineering product design feedback bug feature request roadmap quarter budget invoice currency "
    "euro dollar pound shipping address warehouse delivery return policy warranty license seat upgrade"
).split()

FORGET_RUNS = 3

RECORD_COLUMNS = (
    "id, tenant_id, agent_id, subject, purpose, kind_id, content, content_hash, source_type, source_uri, session_id, "
    "turn_id, tool, source_version, observed_at, contaminated, authority, trust, quarantine_reason, reviewed_by_id, "
    "reviewed_at, confidence, created_at, valid_from, valid_to, confirmed_at, expires_at, last_used_at, status, "
    "status_changed_at, version, supersedes_id"
)


def _insert_records(
    cur,
    *,
    tenant_id: int,
    agent_ids: list[int],
    count: int,
    subjects: int,
    subject_prefix: str,
    status_sql: str,
    kind_ids: list[int],
    seed: int,
) -> None:
    """One INSERT ... SELECT: content is 8-20 vocabulary words chosen from the row number."""
    cur.execute(
        f"""
        INSERT INTO memory_memoryrecord ({RECORD_COLUMNS})
        SELECT gen_random_uuid(), %(tenant)s, (%(agents)s::bigint[])[1 + g %% cardinality(%(agents)s::bigint[])],
               %(prefix)s || (g %% %(subjects)s), CASE WHEN g %% 4 = 0 THEN 'sales' ELSE 'support' END,
               (%(kinds)s::bigint[])[1 + (g / 7) %% cardinality(%(kinds)s::bigint[])],
               c.content, 'sha256:' || encode(sha256(convert_to(c.content, 'UTF8')), 'hex'),
               'user_turn', 'chat://bench/' || g, 's-' || (g / 20), (g %% 20)::text, '', '', now() - interval '1 day',
               false, CASE WHEN g %% 10 = 0 THEN 'third_party' ELSE 'user' END, 'trusted', '', NULL, NULL,
               0.5 + (g %% 50) / 100.0,
               now() - ((g %% 300) || ' days')::interval, NULL, NULL,
               now() - ((g %% 300) || ' days')::interval, now() + ((30 + g %% 300) || ' days')::interval, NULL,
               {status_sql}, now() - ((g %% 300) || ' days')::interval, 1, NULL
        FROM generate_series(1, %(count)s) AS g
        CROSS JOIN LATERAL (
            SELECT string_agg((%(words)s::text[])[1 + ((g * 7919 + i * 104729 + %(seed)s) %% cardinality(%(words)s::text[]))], ' ')
                   AS content
            FROM generate_series(1, 8 + (g %% 13)) AS i
        ) AS c
        """,
        {
            "tenant": tenant_id,
            "agents": agent_ids,
            "prefix": subject_prefix,
            "subjects": subjects,
            "kinds": kind_ids,
            "count": count,
            "words": WORDS,
            "seed": seed,
        },
    )


def seed(dsn: str, scale: float = 1.0) -> dict:
    started = time.perf_counter()
    big = int(100_000 * scale)
    forget = int(10_000 * scale)
    queue = int(100_000 * scale)
    small_tenants, per_small = 160, int(5_400 * scale)
    with psycopg.connect(dsn, autocommit=False) as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM memory_memoryrecord")
        if cur.fetchone()[0]:
            raise SystemExit("The benchmark database already has records; use --fresh to recreate it.")
        cur.execute("SET session_replication_role = replica")  # no triggers: the index is rebuilt after
        cur.execute("SELECT id, name FROM memory_memorykind")
        kinds = dict((name, pk) for pk, name in cur.fetchall())
        reviewed = [kinds["semantic"], kinds["preference"], kinds["procedural"], kinds["episodic"]]

        def tenant(slug: str, agents: int) -> tuple[int, list[int]]:
            cur.execute("INSERT INTO memory_tenant (slug, name, created_at) VALUES (%s, %s, now()) RETURNING id", (slug, slug))
            tid = cur.fetchone()[0]
            ids = []
            for n in range(agents):
                cur.execute(
                    "INSERT INTO memory_agent (tenant_id, slug, name, created_at) VALUES (%s, %s, %s, now()) RETURNING id",
                    (tid, f"agent-{n}", f"agent-{n}"),
                )
                ids.append(cur.fetchone()[0])
            return tid, ids

        active_mostly = "CASE WHEN g %% 20 = 0 THEN 'quarantined' WHEN g %% 20 = 1 THEN 'superseded' ELSE 'active' END"
        tid, agents = tenant("bench-big", 5)
        _insert_records(
            cur,
            tenant_id=tid,
            agent_ids=agents,
            count=big,
            subjects=2000,
            subject_prefix="customer/c",
            status_sql=active_mostly,
            kind_ids=reviewed,
            seed=1,
        )
        # FORGET_RUNS subjects of `forget` records each, one per repetition of the forget benchmark.
        _insert_records(
            cur,
            tenant_id=tid,
            agent_ids=agents[:1],
            count=forget * FORGET_RUNS,
            subjects=FORGET_RUNS,
            subject_prefix="customer/forget-me-",
            status_sql="'active'",
            kind_ids=reviewed,
            seed=2,
        )
        qid, qagents = tenant("bench-queue", 3)
        _insert_records(
            cur,
            tenant_id=qid,
            agent_ids=qagents,
            count=queue,
            subjects=500,
            subject_prefix="lead/l",
            status_sql="'quarantined'",
            kind_ids=reviewed,
            seed=3,
        )
        for n in range(small_tenants):
            sid, sagents = tenant(f"bench-small-{n:03d}", 2)
            _insert_records(
                cur,
                tenant_id=sid,
                agent_ids=sagents,
                count=per_small,
                subjects=200,
                subject_prefix="customer/s",
                status_sql=active_mostly,
                kind_ids=reviewed,
                seed=10 + n,
            )
        cur.execute(
            "UPDATE memory_memoryrecord SET trust = 'untrusted', quarantine_reason = 'bench' WHERE status = 'quarantined'"
        )
        # One creation history row per record, as the write service leaves.
        cur.execute(
            f"""
            INSERT INTO memory_historicalmemoryrecord ({RECORD_COLUMNS.replace(", last_used_at", "")}, history_date,
                history_change_reason, history_type, history_user_id, history_actor, history_note)
            SELECT {RECORD_COLUMNS.replace(", last_used_at", "")}, created_at, 'write.' || status, '+', NULL, 'bench:seed', ''
            FROM memory_memoryrecord
            """
        )
        conn.commit()
        cur.execute("SELECT count(*) FROM memory_memoryrecord")
        total = cur.fetchone()[0]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE memory_memoryrecord")
        conn.execute("VACUUM ANALYZE memory_historicalmemoryrecord")
    return {"records": total, "seconds": round(time.perf_counter() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    print(seed(args.dsn, args.scale))


if __name__ == "__main__":
    main()
