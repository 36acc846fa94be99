"""The benchmark: a million memories on PostgreSQL, each figure measured through the app and
against a plain-SQL floor (the same work done with psycopg in the same run), written to
docs/benchmarks.md.

    .venv/bin/python -m bench.run --fresh            # create gm_bench, migrate, seed 1M, measure
    .venv/bin/python -m bench.run                    # measure again on the existing data
    .venv/bin/python -m bench.run --fresh --scale 0.05 --out /tmp/bench.md   # a quick small run

Figures (medians over repetitions):
- recall latency p50/p95 through the HTTP API under gunicorn (subject-scoped and purpose-wide);
- write throughput through the HTTP API under gunicorn with concurrent clients;
- expiry of 100,000 records (the `expire` job via `manage.py run_job`);
- forget of a subject with 10,000 records: time until recall excludes them (the API call) and until
  propagation completes (the `propagate_forgets` job);
- quarantine queue page server time at 100,000 queued records.
"""

import argparse
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from http.cookiejar import CookieJar
from pathlib import Path
from urllib.parse import urlencode

import psycopg

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/gm_bench"
REPEATS = 3


# --------------------------------------------------------------------------------------------
# helpers


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def app_env(dsn: str) -> dict:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=dsn.replace("postgresql://", "postgres://"), DEBUG="false", APP_ENV="development",
        API_THROTTLE_RATE="1000000/min", LOG_LEVEL="WARNING", APP_VAR_DIR="/tmp/gm-bench",
        DB_CONN_MAX_AGE="600",
    )
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    return env


def manage(dsn: str, *args: str) -> str:
    out = subprocess.run([PY, "manage.py", *args], cwd=ROOT, env=app_env(dsn), check=True, capture_output=True, text=True)
    return out.stdout


def run_job(dsn: str, name: str) -> dict:
    last = manage(dsn, "run_job", name).strip().splitlines()[-1]
    return json.loads(last)


def job_seconds(summary: dict) -> float:
    from datetime import datetime

    started = datetime.fromisoformat(summary["started_at"])
    finished = datetime.fromisoformat(summary["finished_at"])
    return (finished - started).total_seconds()


class Server:
    """gunicorn on a free port: 2 cores, so 4 sync workers (I/O waits on PostgreSQL)."""

    def __init__(self, dsn: str, workers: int = 4):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [str(ROOT / ".venv/bin/gunicorn"), "config.wsgi", "--bind", f"127.0.0.1:{self.port}", "--workers", str(workers),
             "--log-level", "warning"],
            cwd=ROOT, env=app_env(dsn), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                urllib.request.urlopen(self.base + "/accounts/login/", timeout=1).read()
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("gunicorn did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)


def post_json(url: str, token: str, body: dict, timeout: float = 60) -> tuple[int, dict, float]:
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST", headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            payload = json.loads(resp.read() or b"{}")
            status = resp.status
    except urllib.error.HTTPError as exc:
        payload, status = json.loads(exc.read() or b"{}"), exc.code
    return status, payload, time.perf_counter() - started


# --------------------------------------------------------------------------------------------
# setup


def prepare(dsn: str, fresh: bool, scale: float) -> None:
    admin_dsn = dsn.rsplit("/", 1)[0] + "/postgres"
    dbname = dsn.rsplit("/", 1)[1]
    if fresh:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{dbname}"')
        manage(dsn, "migrate", "--noinput", "-v0")
        from bench.seed import seed

        print("seeding:", seed(dsn, scale), flush=True)
        started = time.perf_counter()
        manage(dsn, "rebuild_index", "lexical-default", "--wait")  # the seed ran with the index's triggers off
        print(f"search index rebuilt in {time.perf_counter() - started:.0f} s", flush=True)


def credentials(dsn: str) -> tuple[str, str, str]:
    """An agent token in the big tenant, a reviewer of the queue tenant (user, password)."""
    token = manage(dsn, "issue_agent_token", "--tenant", "bench-big", "--agent", "agent-0", "--purposes", "support,sales",
                   "--can-forget").strip().splitlines()[-1]
    manage(dsn, "create_reviewer", "bench-reviewer", "--tenant", "bench-queue", "--password", "bench-reviewer-pass")
    return token, "bench-reviewer", "bench-reviewer-pass"


# --------------------------------------------------------------------------------------------
# measurements

RECALL_QUERIES = ["customer prefers email invoice", "refund policy escalation", "deploy staging approval",
                  "weekly report dashboard", "security audit password rotation", "shipping address delivery"]

# The app's own plan, by hand: the hard filters materialised first, then any query term matched and
# ranked within them; the floor also reads the content of the ten best rows.
FLOOR_RECALL_SQL = """
WITH scoped AS MATERIALIZED (
  SELECT r.id, r.search_vector FROM memory_memoryrecord r
  WHERE r.tenant_id = %(tenant)s AND r.agent_id = %(agent)s AND r.purpose = 'support' AND r.status = 'active'
    AND r.expires_at > now() {subject})
SELECT m.id, m.content, ranked.rank FROM (
  SELECT scoped.id, ts_rank_cd(scoped.search_vector, q, 32) AS rank FROM scoped, to_tsquery('english', %(q)s) q
  WHERE scoped.search_vector @@ q ORDER BY rank DESC LIMIT 10) ranked
JOIN memory_memoryrecord m ON m.id = ranked.id ORDER BY ranked.rank DESC
"""


def measure_recall(server: Server, token: str, dsn: str, n: int) -> dict:
    with psycopg.connect(dsn) as conn:
        tenant, agent = conn.execute(
            "SELECT t.id, a.id FROM memory_tenant t JOIN memory_agent a ON a.tenant_id = t.id "
            "WHERE t.slug = 'bench-big' AND a.slug = 'agent-0'").fetchone()
        subjects = [row[0] for row in conn.execute(
            "SELECT subject FROM memory_memoryrecord WHERE tenant_id = %s AND agent_id = %s AND purpose = 'support' "
            "AND status = 'active' GROUP BY subject ORDER BY count(*) DESC LIMIT 20", (tenant, agent))]
        results = {}
        for scope in ("subject", "purpose"):
            api, floor = [], []
            for i in range(n):
                q = RECALL_QUERIES[i % len(RECALL_QUERIES)]
                body = {"query": q, "purpose": "support", "limit": 10, "token_budget": 800}
                params = {"q": " | ".join(q.split()), "tenant": tenant, "agent": agent}
                sql = FLOOR_RECALL_SQL.format(subject="")
                if scope == "subject":
                    body["subject"] = params["subject"] = subjects[i % len(subjects)]
                    sql = FLOOR_RECALL_SQL.format(subject="AND r.subject = %(subject)s")
                status, payload, seconds = post_json(server.base + "/api/v1/recall/", token, body)
                assert status == 200, (status, payload)
                api.append(seconds)
                started = time.perf_counter()
                conn.execute(sql, params).fetchall()
                floor.append(time.perf_counter() - started)
            results[scope] = {"p50": percentile(api, 0.5), "p95": percentile(api, 0.95),
                              "floor_p50": percentile(floor, 0.5), "floor_p95": percentile(floor, 0.95)}
    return results


def measure_writes(server: Server, token: str, dsn: str, total: int, clients: int) -> dict:
    def body(i: int) -> dict:
        return {"kind": "episodic", "subject": f"customer/w{i % 500}", "purpose": "support",
                "content": f"Bench write {i}: customer asked about invoice currency and delivery dates.",
                "authority": "user", "confidence": 0.8,
                "provenance": {"source_type": "user_turn", "session_id": f"bench-{i // 10}", "turn_id": str(i)}}

    def one(i: int) -> int:
        return post_json(server.base + "/api/v1/memories/", token, body(i))[0]

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        statuses = list(pool.map(one, range(total)))
    api_seconds = time.perf_counter() - started
    assert all(s == 201 for s in statuses), {s for s in statuses}

    # Floor: the same rows (record + creation history row) inserted with psycopg, same concurrency.
    with psycopg.connect(dsn) as conn:
        tenant, agent, kind = conn.execute(
            "SELECT t.id, a.id, k.id FROM memory_tenant t JOIN memory_agent a ON a.tenant_id = t.id, memory_memorykind k "
            "WHERE t.slug = 'bench-big' AND a.slug = 'agent-0' AND k.name = 'episodic'").fetchone()
    local = threading.local()

    def floor_one(i: int) -> None:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = psycopg.connect(dsn, autocommit=False)
        b = body(i)
        with conn.transaction():
            conn.execute(
                "WITH r AS (INSERT INTO memory_memoryrecord (id, tenant_id, agent_id, subject, purpose, kind_id, content, "
                "content_hash, source_type, source_uri, session_id, turn_id, tool, source_version, contaminated, authority, "
                "trust, quarantine_reason, confidence, created_at, confirmed_at, expires_at, status, status_changed_at, version) "
                "VALUES (gen_random_uuid(), %s, %s, %s, 'support', %s, %s, 'sha256:x', 'user_turn', '', %s, %s, '', '', false, "
                "'user', 'trusted', '', 0.8, now(), now(), now() + interval '30 days', 'active', now(), 1) RETURNING *) "
                "INSERT INTO memory_historicalmemoryrecord (id, tenant_id, agent_id, subject, purpose, kind_id, content, "
                "content_hash, source_type, source_uri, session_id, turn_id, tool, source_version, contaminated, authority, "
                "trust, quarantine_reason, confidence, created_at, confirmed_at, expires_at, status, status_changed_at, "
                "version, history_date, history_type, history_change_reason, history_actor, history_note) "
                "SELECT id, tenant_id, agent_id, subject, purpose, kind_id, content, content_hash, source_type, source_uri, "
                "session_id, turn_id, tool, source_version, contaminated, authority, trust, quarantine_reason, confidence, "
                "created_at, confirmed_at, expires_at, status, status_changed_at, version, now(), '+', 'write.active', "
                "'bench', '' FROM r",
                (tenant, agent, b["subject"], kind, b["content"], b["provenance"]["session_id"], b["provenance"]["turn_id"]),
            )

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(floor_one, range(total)))
    floor_seconds = time.perf_counter() - started
    return {"api_per_s": total / api_seconds, "floor_per_s": total / floor_seconds}


EXPIRE_FLOOR_SQL = """
WITH x AS (
  UPDATE memory_memoryrecord SET status = 'expired', status_changed_at = now(), version = version + 1
  WHERE id IN (SELECT id FROM memory_memoryrecord WHERE status IN ('active', 'quarantined') AND expires_at <= now())
  RETURNING *)
INSERT INTO memory_historicalmemoryrecord (id, tenant_id, agent_id, subject, purpose, kind_id, content, content_hash,
  source_type, source_uri, session_id, turn_id, tool, source_version, observed_at, contaminated, authority, trust,
  quarantine_reason, reviewed_by_id, reviewed_at, confidence, created_at, valid_from, valid_to, confirmed_at, expires_at,
  status, status_changed_at, version, supersedes_id, history_date, history_type, history_change_reason, history_actor, history_note)
SELECT id, tenant_id, agent_id, subject, purpose, kind_id, content, content_hash, source_type, source_uri, session_id,
  turn_id, tool, source_version, observed_at, contaminated, authority, trust, quarantine_reason, reviewed_by_id,
  reviewed_at, confidence, created_at, valid_from, valid_to, confirmed_at, expires_at, status, status_changed_at, version,
  supersedes_id, now(), '~', 'job.expire', 'bench', '' FROM x
"""


def _make_due(conn, count: int, tenant_prefix: str) -> None:
    """Set-up, not measured: `count` active records of small tenants become due."""
    conn.execute(
        "UPDATE memory_memoryrecord SET expires_at = now() - interval '1 second' WHERE id IN ("
        "SELECT r.id FROM memory_memoryrecord r JOIN memory_tenant t ON t.id = r.tenant_id "
        "WHERE t.slug LIKE %s AND r.status = 'active' AND r.created_at < now() - interval '1 day' LIMIT %s)",
        (tenant_prefix + "%", count),
    )
    conn.commit()


def measure_expiry(dsn: str, count: int) -> dict:
    app, floor = [], []
    with psycopg.connect(dsn) as conn:
        for _ in range(REPEATS):
            _make_due(conn, count, "bench-small-")
            summary = run_job(dsn, "expire")
            assert summary["counts"].get("expired", 0) >= count * 0.99, summary
            app.append(job_seconds(summary))
            _make_due(conn, count, "bench-small-")
            started = time.perf_counter()
            conn.execute(EXPIRE_FLOOR_SQL)
            conn.commit()
            floor.append(time.perf_counter() - started)
    return {"app": statistics.median(app), "floor": statistics.median(floor), "count": count}


def measure_forget(server: Server, token: str, dsn: str) -> dict:
    exclude, propagate, floor_exclude, floor_propagate = [], [], [], []
    from bench.seed import FORGET_RUNS

    with psycopg.connect(dsn) as conn:
        for run in range(FORGET_RUNS):
            subject = f"customer/forget-me-{run}"
            status, payload, seconds = post_json(server.base + "/api/v1/forget/", token,
                                                 {"subject": subject, "reason": "bench"})
            assert status == 202 and payload["affected"] > 0, (status, payload)
            exclude.append(seconds)
            status, recalled, _ = post_json(server.base + "/api/v1/recall/", token,
                                            {"query": "customer", "purpose": "support", "subject": subject})
            assert status == 200 and recalled["items"] == [], recalled
            propagate.append(job_seconds(run_job(dsn, "propagate_forgets")))
            # Floor on a copy of the same shape: the subject's records of another agent-less scope.
            floor_subject = f"bench-floor-forget-{run}"
            conn.execute(
                "UPDATE memory_memoryrecord SET subject = %s WHERE id IN (SELECT id FROM memory_memoryrecord "
                "WHERE subject LIKE 'customer/c%%' AND status = 'active' AND tenant_id = (SELECT id FROM memory_tenant "
                "WHERE slug = 'bench-big') LIMIT %s)", (floor_subject, payload["affected"]))
            conn.commit()
            started = time.perf_counter()
            conn.execute("UPDATE memory_memoryrecord SET status = 'forgotten', version = version + 1 WHERE subject = %s",
                         (floor_subject,))
            conn.commit()
            floor_exclude.append(time.perf_counter() - started)
            started = time.perf_counter()
            conn.execute("UPDATE memory_memoryrecord SET content = '' WHERE subject = %s", (floor_subject,))
            conn.execute("UPDATE memory_historicalmemoryrecord SET content = '' WHERE id IN "
                         "(SELECT id FROM memory_memoryrecord WHERE subject = %s)", (floor_subject,))
            conn.commit()
            floor_propagate.append(time.perf_counter() - started)
    return {"exclude": statistics.median(exclude), "propagate": statistics.median(propagate),
            "floor_exclude": statistics.median(floor_exclude), "floor_propagate": statistics.median(floor_propagate)}


def measure_queue_page(server: Server, dsn: str, user: str, password: str, n: int) -> dict:
    jar = CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    login_page = opener.open(server.base + "/accounts/login/").read().decode()
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login_page).group(1)
    opener.open(urllib.request.Request(
        server.base + "/accounts/login/", data=urlencode({"username": user, "password": password,
                                                          "csrfmiddlewaretoken": csrf}).encode(),
        headers={"Referer": server.base + "/accounts/login/"})).read()
    times = []
    for _ in range(n):
        started = time.perf_counter()
        with opener.open(server.base + "/review/quarantine/") as resp:
            assert resp.status == 200
            resp.read()
        times.append(time.perf_counter() - started)
    floor = []
    with psycopg.connect(dsn) as conn:
        tenant = conn.execute("SELECT id FROM memory_tenant WHERE slug = 'bench-queue'").fetchone()[0]
        for _ in range(n):
            started = time.perf_counter()
            conn.execute("SELECT count(*) FROM memory_memoryrecord WHERE tenant_id = %s AND status = 'quarantined'",
                         (tenant,)).fetchone()
            conn.execute("SELECT * FROM memory_memoryrecord WHERE tenant_id = %s AND status = 'quarantined' "
                         "ORDER BY created_at, id LIMIT 25", (tenant,)).fetchall()
            floor.append(time.perf_counter() - started)
    return {"p50": percentile(times, 0.5), "p95": percentile(times, 0.95), "floor_p50": percentile(floor, 0.5)}


# --------------------------------------------------------------------------------------------
# report


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    with psycopg.connect(DEFAULT_DSN.rsplit("/", 1)[0] + "/postgres") as conn:
        pg = conn.execute("SHOW server_version").fetchone()[0]
    return (f"{os.cpu_count()} cores ({cpu}), {mem_gib:.0f} GiB RAM, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}, PostgreSQL {pg}; app, database and load generator on the same machine")


def write_report(path: Path, rows: list[tuple[str, str, str, str, str]], meta: dict) -> None:
    lines = [
        "# Benchmarks", "",
        f"Run on {meta['date']} with `{meta['command']}`.", "",
        f"Machine: {meta['machine']}.", "",
        f"Data: {meta['records']:,} memory records (large tenant 100,000; quarantine tenant 100,000; "
        "160 small tenants), each with its history row.", "",
        "Each figure is a median over repetitions; the floor is the same work done with plain SQL through psycopg in "
        "the same run (no HTTP, no Django, no validation or history logic beyond what the SQL does).", "",
        "| figure | median | plain-SQL floor | ratio | target |", "|---|---|---|---|---|",
    ]
    lines += [f"| {a} | {b} | {c} | {d} | {e} |" for a, b, c, d, e in rows]
    lines += ["", meta.get("notes", "")]
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_DSN))
    parser.add_argument("--fresh", action="store_true", help="drop, migrate and seed the benchmark database")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--recalls", type=int, default=200)
    parser.add_argument("--writes", type=int, default=3000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    args = parser.parse_args()

    prepare(args.dsn, args.fresh, args.scale)
    token, user, password = credentials(args.dsn)
    server = Server(args.dsn)
    try:
        post_json(server.base + "/api/v1/recall/", token, {"query": "warm up", "purpose": "support"})
        recall = measure_recall(server, token, args.dsn, args.recalls)
        print("recall:", recall, flush=True)
        queue = measure_queue_page(server, args.dsn, user, password, 30)
        print("queue page:", queue, flush=True)
        writes = measure_writes(server, token, args.dsn, args.writes, args.clients)
        print("writes:", writes, flush=True)
        forget = measure_forget(server, token, args.dsn)
        print("forget:", forget, flush=True)
    finally:
        server.stop()
    expiry = measure_expiry(args.dsn, int(100_000 * args.scale))
    print("expiry:", expiry, flush=True)

    ms = lambda s: f"{s * 1000:.1f} ms"  # noqa: E731
    ratio = lambda a, b: f"{a / b:.1f}×" if b else "n/a"  # noqa: E731
    rows = []
    for scope, label in (("subject", "subject-scoped"), ("purpose", "purpose-wide")):
        r = recall[scope]
        rows.append((f"recall p50, {label} (HTTP)", ms(r["p50"]), ms(r["floor_p50"]), ratio(r["p50"], r["floor_p50"]), "—"))
        rows.append((f"recall p95, {label} (HTTP)", ms(r["p95"]), ms(r["floor_p95"]), ratio(r["p95"], r["floor_p95"]),
                     "< 20 ms, ratio < 2"))
    rows.append((f"writes/s, {args.clients} concurrent clients (HTTP, gunicorn 4 workers)", f"{writes['api_per_s']:.0f}/s",
                 f"{writes['floor_per_s']:.0f}/s", ratio(writes["floor_per_s"], writes["api_per_s"]), "≥ 500/s"))
    rows.append((f"expire {expiry['count']:,} records (job)", f"{expiry['app']:.2f} s", f"{expiry['floor']:.2f} s",
                 ratio(expiry["app"], expiry["floor"]), "1M in < 60 s"))
    rows.append(("forget 10,000 records: excluded from recall (API response)", ms(forget["exclude"]),
                 ms(forget["floor_exclude"]), ratio(forget["exclude"], forget["floor_exclude"]), "at once"))
    rows.append(("forget 10,000 records: propagation complete (job)", f"{forget['propagate']:.2f} s",
                 f"{forget['floor_propagate']:.2f} s", ratio(forget["propagate"], forget["floor_propagate"]), "< 10 s"))
    rows.append(("quarantine page at 100,000 queued (HTTP, p50)", ms(queue["p50"]), ms(queue["floor_p50"]),
                 ratio(queue["p50"], queue["floor_p50"]), "< 100 ms"))
    with psycopg.connect(args.dsn) as conn:
        records = conn.execute("SELECT count(*) FROM memory_memoryrecord").fetchone()[0]
    write_report(Path(args.out), rows, {
        "date": time.strftime("%Y-%m-%d"), "machine": machine(), "records": records,
        "command": "python -m bench.run " + " ".join(sys.argv[1:]),
    })
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
