"""Synthetic data for the benchmark, loaded with COPY (rows generated here, one COPY per tenant's
share) with the search-index triggers off (the caller rebuilds the index afterwards, one bulk
load), so a million records take a minute or two rather than an hour of ORM calls. `bench.curve`
grows a seeded database with more small tenants through the same functions, triggers on.

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
import hashlib
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

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


def _record_lines(
    *,
    tenant_id: int,
    agent_ids: list[int],
    count: int,
    subjects: int,
    subject_prefix: str,
    status: str | None,
    kind_ids: list[int],
    seed: int,
    now: datetime,
) -> Iterator[str]:
    """COPY text lines for `count` records: content is 8-20 vocabulary words chosen from the row
    number; `status` None is mostly active (1 in 20 quarantined, 1 in 20 superseded)."""
    n_words, n_agents, n_kinds = len(WORDS), len(agent_ids), len(kind_ids)
    observed = (now - timedelta(days=1)).isoformat()
    for g in range(1, count + 1):
        content = " ".join(WORDS[(g * 7919 + i * 104729 + seed) % n_words] for i in range(1, 9 + g % 13))
        digest = hashlib.sha256(content.encode()).hexdigest()
        created = (now - timedelta(days=g % 300)).isoformat()
        expires = (now + timedelta(days=30 + g % 300)).isoformat()
        row_status = status or ("quarantined" if g % 20 == 0 else "superseded" if g % 20 == 1 else "active")
        trust, reason = ("untrusted", "bench") if row_status == "quarantined" else ("trusted", "")
        authority = "third_party" if g % 10 == 0 else "user"
        yield (
            f"{uuid.uuid4()}\t{tenant_id}\t{agent_ids[g % n_agents]}\t{subject_prefix}{g % subjects}\t"
            f"{'sales' if g % 4 == 0 else 'support'}\t{kind_ids[(g // 7) % n_kinds]}\t{content}\tsha256:{digest}\t"
            f"user_turn\tchat://bench/{g}\ts-{g // 20}\t{g % 20}\t\t\t{observed}\tf\t{authority}\t{trust}\t{reason}\t"
            f"\\N\t\\N\t{0.5 + (g % 50) / 100:.2f}\t{created}\t\\N\t\\N\t{created}\t{expires}\t\\N\t{row_status}\t"
            f"{created}\t1\t\\N\n"
        )


def copy_records(cur, *shapes: dict) -> None:
    """One COPY of the records `_record_lines` generates for each of `shapes` (its keywords)."""
    with cur.copy(f"COPY memory_memoryrecord ({RECORD_COLUMNS}) FROM STDIN") as copy:
        chunk: list[str] = []
        for shape in shapes:
            for line in _record_lines(**shape):
                chunk.append(line)
                if len(chunk) == 5000:
                    copy.write("".join(chunk))
                    chunk = []
        if chunk:
            copy.write("".join(chunk))


def create_tenant(cur, slug: str, agents: int) -> tuple[int, list[int]]:
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


def reviewed_kinds(cur) -> list[int]:
    cur.execute("SELECT id, name FROM memory_memorykind")
    kinds = dict((name, pk) for pk, name in cur.fetchall())
    return [kinds["semantic"], kinds["preference"], kinds["procedural"], kinds["episodic"]]


def copy_history(cur, where: str = "", params: tuple = ()) -> None:
    """One creation history row per record (those `where` selects, or every record), as the
    write service leaves."""
    columns = RECORD_COLUMNS.replace(", last_used_at", "")
    cur.execute(
        f"""
        INSERT INTO memory_historicalmemoryrecord ({columns}, history_date,
            history_change_reason, history_type, history_user_id, history_actor, history_note)
        SELECT {columns}, created_at, 'write.' || status, '+', NULL, 'bench:seed', ''
        FROM memory_memoryrecord {where}
        """,
        params or None,
    )


SMALL_TENANTS, PER_SMALL = 160, 5_400


def small_tenants(
    cur, *, first: int, count: int, per_tenant: int, kind_ids: list[int], now: datetime, per_copy: int = 40
) -> list[int]:
    """`count` small tenants `bench-small-NNN` numbered from `first`, 2 agents, `per_tenant` records
    over 200 subjects each, `per_copy` tenants' records a COPY (with the search index's triggers
    on, one pass of them per COPY); returns their ids."""
    shapes = []
    for n in range(first, first + count):
        sid, sagents = create_tenant(cur, f"bench-small-{n:03d}", 2)
        shapes.append(
            dict(
                tenant_id=sid,
                agent_ids=sagents,
                count=per_tenant,
                subjects=200,
                subject_prefix="customer/s",
                status=None,
                kind_ids=kind_ids,
                seed=10 + n,
                now=now,
            )
        )
    for start in range(0, len(shapes), per_copy):
        copy_records(cur, *shapes[start : start + per_copy])
    return [shape["tenant_id"] for shape in shapes]


def seed(dsn: str, scale: float = 1.0) -> dict:
    started = time.perf_counter()
    big = int(100_000 * scale)
    forget = int(10_000 * scale)
    queue = int(100_000 * scale)
    now = datetime.now(UTC)
    with psycopg.connect(dsn, autocommit=False) as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM memory_memoryrecord")
        if cur.fetchone()[0]:
            raise SystemExit("The benchmark database already has records; use --fresh to recreate it.")
        cur.execute("SET session_replication_role = replica")  # no triggers: the index is rebuilt after
        reviewed = reviewed_kinds(cur)
        tid, agents = create_tenant(cur, "bench-big", 5)
        shape = dict(tenant_id=tid, kind_ids=reviewed, now=now)
        copy_records(
            cur, dict(shape, agent_ids=agents, count=big, subjects=2000, subject_prefix="customer/c", status=None, seed=1)
        )
        # FORGET_RUNS subjects of `forget` records each, one per repetition of the forget benchmark.
        copy_records(
            cur,
            dict(
                shape,
                agent_ids=agents[:1],
                count=forget * FORGET_RUNS,
                subjects=FORGET_RUNS,
                subject_prefix="customer/forget-me-",
                status="active",
                seed=2,
            ),
        )
        qid, qagents = create_tenant(cur, "bench-queue", 3)
        copy_records(
            cur,
            dict(
                now=now,
                tenant_id=qid,
                agent_ids=qagents,
                count=queue,
                subjects=500,
                subject_prefix="lead/l",
                status="quarantined",
                kind_ids=reviewed,
                seed=3,
            ),
        )
        small_tenants(cur, first=0, count=SMALL_TENANTS, per_tenant=int(PER_SMALL * scale), kind_ids=reviewed, now=now)
        copy_history(cur)
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
