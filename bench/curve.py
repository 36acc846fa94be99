"""The cost curve: one database grown in place (by default 1, 2 and 4 million records), the same
figures measured at each size, and each figure's growth fitted as an exponent k in
figure ~ records^k (least squares of log(figure) against log(records)).

    .venv/bin/python -m bench.curve                                     # 1, 2, 4 million (about an hour)
    .venv/bin/python -m bench.curve --sizes 0.05,0.1,0.2 --json /tmp/curve.json   # a quick check of the tool

The first size is `bench.seed` at scale = the size in millions (a fresh database `gm_curve`, the
search index rebuilt, vacuumed). Each later size adds small tenants (2 agents, 5,400 records ×
the first size each, as the seed's) with COPY, the search index's triggers on (they are
statement-level, so each COPY updates the index in one pass), plus a new 10,000-record (× the
first size) subject in the large tenant to forget, and then `VACUUM (ANALYZE)`. The recalling
tenant stays as seeded: the database grows by tenants, as a multi-tenant service does.

At each size (`bench.run`'s pieces, without their plain-SQL floors):
- recall p50/p95 through HTTP (gunicorn, 4 workers), subject-scoped and purpose-wide;
- writes/s through the batch endpoint (100 per request, 16 clients);
- forget of that size's subject: the API response, then the `propagate_forgets` job;
- expiry of a fixed number of due records by the `expire` job (records/s; put back after);
- one run of the `propose_duplicates` job over every active record (its proposals deleted after,
  so each size does the same work per record);
- bytes per record: the total size (indexes and TOAST included) of the record, history and
  search-index tables over the records.
The figures are printed as a Markdown table and written to `--json`.
"""

import argparse
import json
import math
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from bench.expiry import measure_expiry
from bench.run import (
    Server,
    cache_in_use,
    credentials,
    forget_subject,
    job_seconds,
    machine,
    measure_recall,
    measure_writes,
    post_json,
    prepare,
    run_job,
)
from bench.seed import PER_SMALL, copy_history, copy_records, reviewed_kinds, small_tenants

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/gm_curve"
SEEDED_PER_MILLION = 1_094_000  # bench.seed's records at scale 1.0


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def record_count(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT count(*) FROM memory_memoryrecord").fetchone()[0]


def grow(dsn: str, target: int, scale: float, step: int) -> dict:
    """Add small tenants until the database holds about `target` records, and one subject of
    10,000 × `scale` records in the large tenant to forget at this size; then vacuum and analyse."""
    started = time.perf_counter()
    per_tenant = int(PER_SMALL * scale)
    now = datetime.now(UTC)
    with psycopg.connect(dsn, autocommit=False) as conn, conn.cursor() as cur:
        current = cur.execute("SELECT count(*) FROM memory_memoryrecord").fetchone()[0]
        first = cur.execute("SELECT count(*) FROM memory_tenant WHERE slug LIKE 'bench-small-%%'").fetchone()[0]
        kinds = reviewed_kinds(cur)
        big, agent = cur.execute(
            "SELECT t.id, a.id FROM memory_tenant t JOIN memory_agent a ON a.tenant_id = t.id "
            "WHERE t.slug = 'bench-big' AND a.slug = 'agent-0'"
        ).fetchone()
        forget = int(10_000 * scale)
        tenants = max(0, math.ceil((target - current - forget) / per_tenant))
        ids = small_tenants(cur, first=first, count=tenants, per_tenant=per_tenant, kind_ids=kinds, now=now)
        copy_records(
            cur,
            dict(
                now=now,
                tenant_id=big,
                agent_ids=[agent],
                count=forget,
                subjects=1,
                subject_prefix=f"customer/forget-me-curve-{step}-",
                status="active",
                kind_ids=kinds,
                seed=100 + step,
            ),
        )
        copy_history(cur, "WHERE tenant_id = ANY(%s) OR subject = %s", (ids, f"customer/forget-me-curve-{step}-0"))
        conn.commit()
    seeded = time.perf_counter() - started
    started = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE)")
    return {"tenants": tenants, "seconds": round(seeded, 1), "vacuum": round(time.perf_counter() - started, 1)}


DEDUP_TABLES = ("governance_dedupproposaldrop", "governance_dedupproposal")


def measure_dedup(dsn: str) -> dict:
    summary = run_job(dsn, "propose_duplicates")
    assert summary["status"] == "succeeded", summary
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in DEDUP_TABLES:
            conn.execute(f"DELETE FROM {table}")
    counts = summary["counts"]
    return {"seconds": job_seconds(summary), "records": counts["records"], "proposals": counts["duplicate_proposals"]}


def bytes_per_record(dsn: str) -> dict:
    with psycopg.connect(dsn) as conn:
        records = conn.execute("SELECT count(*) FROM memory_memoryrecord").fetchone()[0]
        sizes: dict[str, int] = dict(
            (name, int(size))
            for name, size in conn.execute(
                # A partitioned table (the history, by month) has no storage of its own: its leaves'.
                "SELECT CASE WHEN c.relname LIKE 'memory_search_%%' THEN 'search' ELSE c.relname END, "
                "sum(coalesce((SELECT sum(pg_total_relation_size(t.relid)) FROM pg_partition_tree(c.oid) t), "
                "pg_total_relation_size(c.oid))) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND (c.relname IN "
                "('memory_memoryrecord', 'memory_historicalmemoryrecord') OR c.relname LIKE 'memory_search_%%') GROUP BY 1"
            )
        )
        database = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    total = sum(sizes.values())
    return {
        "records": records,
        "bytes": total / records,
        "record": sizes.get("memory_memoryrecord", 0) / records,
        "history": sizes.get("memory_historicalmemoryrecord", 0) / records,
        "search": sizes.get("search", 0) / records,
        "database_gib": database / 2**30,
    }


def measure(dsn: str, args: argparse.Namespace, subject: str) -> dict:
    token, _, _ = credentials(dsn)
    figures: dict = {"load_before": load_average()}
    server = Server(dsn)
    try:
        for _ in range(20):  # warm every worker
            post_json(server.base + "/api/v1/recall/", token, {"query": "warm up", "purpose": "support"})
        figures["recall"] = measure_recall(server, token, dsn, args.recalls)
        figures["writes"] = measure_writes(server, token, dsn, args.batch_writes, 16, 100, floor=False)
        figures["forget"] = forget_subject(server, token, dsn, subject)
    finally:
        server.stop()
    figures["expiry"] = measure_expiry(dsn, args.expire, floor=False)
    figures["dedup"] = measure_dedup(dsn)
    figures["size"] = bytes_per_record(dsn)  # after the writes, as the records count
    figures["load_after"] = load_average()
    return figures


# (label, unit, how to read it from a size's figures)
ROWS = (
    ("recall p50, subject-scoped (HTTP)", "ms", lambda f: f["recall"]["subject"]["p50"] * 1000),
    ("recall p95, subject-scoped (HTTP)", "ms", lambda f: f["recall"]["subject"]["p95"] * 1000),
    ("recall p50, purpose-wide (HTTP)", "ms", lambda f: f["recall"]["purpose"]["p50"] * 1000),
    ("recall p95, purpose-wide (HTTP)", "ms", lambda f: f["recall"]["purpose"]["p95"] * 1000),
    ("writes, batch endpoint (100 a request, 16 clients)", "records/s", lambda f: f["writes"]["api_per_s"]),
    ("expiry (`expire` job)", "records/s", lambda f: f["expiry"]["count"] / f["expiry"]["app"]),
    ("then the index sweep (`sweep_indexes` job)", "s", lambda f: f["expiry"]["sweep"]),
    ("forget a subject: API response", "ms", lambda f: f["forget"]["exclude"] * 1000),
    ("forget a subject: propagation (`propagate_forgets` job)", "s", lambda f: f["forget"]["propagate"]),
    ("dedup run (`propose_duplicates` job, every active record)", "s", lambda f: f["dedup"]["seconds"]),
    ("bytes per record: records + history + search index", "B", lambda f: f["size"]["bytes"]),
    ("… of which the record table", "B", lambda f: f["size"]["record"]),
    ("… the history table", "B", lambda f: f["size"]["history"]),
    ("… the search index's tables", "B", lambda f: f["size"]["search"]),
)


def fitted_exponent(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log(y) against log(x)."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sum((a - mx) ** 2 for a in lx)


def number(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def table(results: list[dict]) -> str:
    records = [r["size"]["records"] for r in results]
    head = "| figure | unit | " + " | ".join(f"{n / 1e6:.2f}M records" for n in records) + " | growth k (figure ~ records^k) |"
    lines = [head, "|---|---|" + "---|" * len(results) + "---|"]
    for label, unit, read in ROWS:
        values = [read(r) for r in results]
        k = fitted_exponent(records, values) if all(v > 0 for v in values) and len(values) > 1 else float("nan")
        lines.append(f"| {label} | {unit} | " + " | ".join(number(v) for v in values) + f" | {k:+.2f} |")
    lines.append(
        "| forget subject's records; expired records; active records the dedup run read | count | "
        + " | ".join(f"{r['forget']['affected']:,}; {r['expiry']['count']:,}; {r['dedup']['records']:,}" for r in results)
        + " | |"
    )
    lines.append("| database size | GiB | " + " | ".join(f"{r['size']['database_gib']:.1f}" for r in results) + " | |")
    lines.append(
        "| load average (1, 5, 15 min) before / after | | "
        + " | ".join(f"{r['load_before']} / {r['load_after']}" for r in results)
        + " | |"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", default=os.environ.get("BENCH_CURVE_DATABASE_URL", DEFAULT_DSN))
    parser.add_argument("--sizes", default="1,2,4", help="millions of records, ascending (the first is seeded fresh)")
    parser.add_argument("--recalls", type=int, default=100, help="recalls per scope at each size")
    parser.add_argument("--batch-writes", type=int, default=10_000, help="records written through the batch endpoint")
    parser.add_argument("--expire", type=int, default=None, help="records to expire at each size (default 100,000 × first size)")
    parser.add_argument("--json", default="/tmp/bench-curve.json", help="where the figures are written")
    parser.add_argument("--drop", action="store_true", help="drop the database at the end")
    args = parser.parse_args()
    sizes = [float(s) for s in args.sizes.split(",")]
    assert sizes == sorted(sizes), "sizes must ascend"
    scale = sizes[0]
    args.expire = args.expire or int(100_000 * scale)
    print(f"cache: {cache_in_use()}; machine: {machine()}; load {load_average()}", flush=True)
    started = time.perf_counter()
    prepare(args.dsn, True, scale)
    results = []
    for step, size in enumerate(sizes):
        if step:
            grown = grow(args.dsn, int(SEEDED_PER_MILLION * size), scale, step)
            print(f"grown to {record_count(args.dsn):,}: {grown}", flush=True)
        subject = "customer/forget-me-0" if step == 0 else f"customer/forget-me-curve-{step}-0"
        figures = measure(args.dsn, args, subject)
        print(json.dumps(figures, default=str), flush=True)
        results.append(figures)
        Path(args.json).write_text(json.dumps({"command": sys.argv, "results": results}, indent=1, default=str))
    print(f"\n{table(results)}\n\ntotal {time.perf_counter() - started:.0f} s", flush=True)
    if args.drop:
        admin = args.dsn.rsplit("/", 1)[0] + "/postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{args.dsn.rsplit("/", 1)[1]}" WITH (FORCE)')


if __name__ == "__main__":
    main()
