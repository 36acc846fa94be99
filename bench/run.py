"""The benchmark: a million memories on PostgreSQL, each figure measured through the app and
against a plain-SQL floor (the same work done with psycopg in the same run), written to the
generated part of docs/benchmarks.md (the rest of the file is kept).

    .venv/bin/python -m bench.run --fresh            # create gm_bench, migrate, seed ~1.1M, measure
    .venv/bin/python -m bench.run --fresh --scale 0.05 --out /tmp/bench.md   # a quick small run

Figures:
- recall latency p50/p95 through the HTTP API under gunicorn (subject-scoped and purpose-wide);
- write throughput through the HTTP API under gunicorn with 16 concurrent clients: the batch
  endpoint (100 records a request) and single writes;
- forget of a subject with 10,000 records: time until recall excludes them (the API call) and until
  propagation completes (the `propagate_forgets` job);
- quarantine queue page server time at 100,000 queued records;
- expiry of 1,000,000 due records by the `expire` job (bench.expiry), last, since it needs the
  records the others left.
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


# The app runs as in production: PostgreSQL, and Redis as the shared cache (credentials, rate
# limits) and broker. BENCH_REDIS_URL="" runs it on the file cache instead (the embedded default,
# about 3 ms more a request: the rate limit's window is a locked file).
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/8")


def app_env(dsn: str) -> dict:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=dsn.replace("postgresql://", "postgres://"),
        DEBUG="false",
        APP_ENV="development",
        API_THROTTLE_RATE="1000000/min",
        LOG_LEVEL="WARNING",
        APP_VAR_DIR="/tmp/gm-bench",
        DB_CONN_MAX_AGE="600",
        REDIS_URL=REDIS_URL,
    )
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    return env


def cache_in_use() -> str:
    """The shared cache the app runs with, as the report names it; fails if Redis is unreachable."""
    if not REDIS_URL:
        return "the file cache (BENCH_REDIS_URL empty)"
    import redis

    redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    return f"Redis ({REDIS_URL})"


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
    """gunicorn on a free port: 2 cores, so 4 sync workers (I/O waits on PostgreSQL). `root`: the
    checkout to serve (with its .venv), this one unless another is being compared (`bench.ab`)."""

    def __init__(self, dsn: str, workers: int = 4, root: Path = ROOT):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [
                str(root / ".venv/bin/gunicorn"),
                "config.wsgi",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                str(workers),
                "--log-level",
                "warning",
            ],
            cwd=root,
            env=app_env(dsn),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
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
    req = urllib.request.Request(
        url, data=data, method="POST", headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    )
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
        # Measured at a steady state, not while autovacuum works through a million fresh rows of
        # each table: vacuumed (visibility maps, free space) and analysed, as a live database is.
        started = time.perf_counter()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("VACUUM (ANALYZE)")
        print(f"vacuumed and analysed in {time.perf_counter() - started:.0f} s", flush=True)


def credentials(dsn: str) -> tuple[str, str, str]:
    """An agent token in the big tenant, a reviewer of the queue tenant (user, password)."""
    token = (
        manage(
            dsn, "issue_agent_token", "--tenant", "bench-big", "--agent", "agent-0", "--purposes", "support,sales", "--can-forget"
        )
        .strip()
        .splitlines()[-1]
    )
    manage(dsn, "create_reviewer", "bench-reviewer", "--tenant", "bench-queue", "--password", "bench-reviewer-pass")
    return token, "bench-reviewer", "bench-reviewer-pass"


# --------------------------------------------------------------------------------------------
# measurements

RECALL_QUERIES = [
    "customer prefers email invoice",
    "refund policy escalation",
    "deploy staging approval",
    "weekly report dashboard",
    "security audit password rotation",
    "shipping address delivery",
]

# The floor of recall: BM25 over the active lexical index's table by hand, in one statement (the
# app ranks per query term in streams and adds the priors): the scope and any query term through
# the index's GIN, the score from the stored term frequencies, the ten best records' content.
FLOOR_RECALL_SQL = """
WITH scoped AS MATERIALIZED (
  SELECT d.record_id, d.tf, d.doclen FROM {index} d
  WHERE d.vector @@ (quote_literal('scope ' || %(tenant)s || ' ' || %(agent)s || ' support')::tsquery {subject}
                     && to_tsquery('english', %(q)s))
    AND d.expires_at > now())
SELECT m.id, m.content, ranked.score FROM (
  SELECT s.record_id, sum((s.tf ->> w)::float8 / ((s.tf ->> w)::float8 + 1.2 * (0.25 + 0.75 * s.doclen / 14.0))) AS score
  FROM scoped s CROSS JOIN unnest(tsvector_to_array(to_tsvector('english', %(text)s))) AS w
  WHERE s.tf ? w GROUP BY s.record_id ORDER BY score DESC LIMIT 10) ranked
JOIN memory_memoryrecord m ON m.id = ranked.record_id ORDER BY ranked.score DESC
"""
SUBJECT_TSQUERY = "&& quote_literal('subject ' || %(subject)s)::tsquery"


def active_lexical_index(conn) -> str:
    (pk,) = conn.execute("SELECT id FROM memory_searchindex WHERE kind = 'lexical' AND status = 'active'").fetchone()
    return f"memory_search_lex_{pk}"


def recall_scope(conn) -> tuple[int, int, list[str]]:
    """The recalling agent's tenant id and agent id, and the subjects subject-scoped recall asks
    about: its 20 with the most active records."""
    tenant, agent = conn.execute(
        "SELECT t.id, a.id FROM memory_tenant t JOIN memory_agent a ON a.tenant_id = t.id "
        "WHERE t.slug = 'bench-big' AND a.slug = 'agent-0'"
    ).fetchone()
    subjects = [
        row[0]
        for row in conn.execute(
            "SELECT subject FROM memory_memoryrecord WHERE tenant_id = %s AND agent_id = %s AND purpose = 'support' "
            "AND status = 'active' GROUP BY subject ORDER BY count(*) DESC LIMIT 20",
            (tenant, agent),
        )
    ]
    return tenant, agent, subjects


def measure_recall(server: Server, token: str, dsn: str, n: int) -> dict:
    with psycopg.connect(dsn) as conn:
        tenant, agent, subjects = recall_scope(conn)
        index = active_lexical_index(conn)
        results = {}
        for scope in ("subject", "purpose"):
            api, floor = [], []
            for i in range(n):
                q = RECALL_QUERIES[i % len(RECALL_QUERIES)]
                body = {"query": q, "purpose": "support", "limit": 10, "token_budget": 800}
                params = {"q": " | ".join(q.split()), "text": q, "tenant": tenant, "agent": agent}
                sql = FLOOR_RECALL_SQL.format(index=index, subject="")
                if scope == "subject":
                    body["subject"] = params["subject"] = subjects[i % len(subjects)]
                    sql = FLOOR_RECALL_SQL.format(index=index, subject=SUBJECT_TSQUERY)
                status, payload, seconds = post_json(server.base + "/api/v1/recall/", token, body)
                assert status == 200, (status, payload)
                api.append(seconds)
                started = time.perf_counter()
                conn.execute(sql, params).fetchall()
                floor.append(time.perf_counter() - started)
            results[scope] = {
                "p50": percentile(api, 0.5),
                "p95": percentile(api, 0.95),
                "floor_p50": percentile(floor, 0.5),
                "floor_p95": percentile(floor, 0.95),
            }
    return results


WRITE_FLOOR_SQL = (
    "WITH r AS (INSERT INTO memory_memoryrecord (id, tenant_id, agent_id, subject, purpose, kind_id, content, "
    "content_hash, source_type, source_uri, session_id, turn_id, tool, source_version, contaminated, authority, "
    "trust, quarantine_reason, confidence, created_at, confirmed_at, expires_at, status, status_changed_at, version) "
    "SELECT gen_random_uuid(), %(tenant)s, %(agent)s, v.subject, 'support', %(kind)s, v.content, 'sha256:x', 'user_turn', '', "
    "v.session_id, v.turn_id, '', '', false, 'user', 'trusted', '', 0.8, now(), now(), now() + interval '30 days', "
    "'active', now(), 1 FROM unnest(%(subjects)s::text[], %(contents)s::text[], %(sessions)s::text[], %(turns)s::text[]) "
    "AS v(subject, content, session_id, turn_id) RETURNING *) "
    "INSERT INTO memory_historicalmemoryrecord (id, tenant_id, agent_id, subject, purpose, kind_id, content, "
    "content_hash, source_type, source_uri, session_id, turn_id, tool, source_version, contaminated, authority, "
    "trust, quarantine_reason, confidence, created_at, confirmed_at, expires_at, status, status_changed_at, "
    "version, history_date, history_type, history_change_reason, history_actor, history_note) "
    "SELECT id, tenant_id, agent_id, subject, purpose, kind_id, content, content_hash, source_type, source_uri, "
    "session_id, turn_id, tool, source_version, contaminated, authority, trust, quarantine_reason, confidence, "
    "created_at, confirmed_at, expires_at, status, status_changed_at, version, now(), '+', 'write.active', "
    "'bench', '' FROM r"
)


def write_body(i: int) -> dict:
    return {
        "kind": "episodic",
        "subject": f"customer/w{i % 500}",
        "purpose": "support",
        "content": f"Bench write {i}: customer asked about invoice currency and delivery dates.",
        "authority": "user",
        "confidence": 0.8,
        "provenance": {"source_type": "user_turn", "session_id": f"bench-{i // 10}", "turn_id": str(i)},
    }


def measure_writes(server: Server, token: str, dsn: str, total: int, clients: int, batch: int, floor: bool = True) -> dict:
    """Records written per second through HTTP by `clients` concurrent clients: one record per
    request (batch 1, the single-write endpoint) or `batch` per request (the batch endpoint), and
    (unless `floor` is false) the floor: the same rows and their history rows inserted with
    psycopg, `batch` per statement, same concurrency."""
    offset = int(time.time() * 1000) % 10_000_000 * 100  # fresh bodies on every run

    def one(n: int) -> int:
        start = offset + n * batch
        if batch == 1:
            return int(post_json(server.base + "/api/v1/memories/", token, write_body(start))[0] == 201)
        items = [write_body(i) for i in range(start, start + batch)]
        status, payload, _ = post_json(server.base + "/api/v1/memories/batch/", token, {"items": items})
        assert status == 200, (status, payload)
        return sum(result["status"] == 201 for result in payload["results"])

    requests = total // batch
    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        written = sum(pool.map(one, range(requests)))
    api_seconds = time.perf_counter() - started
    assert written == requests * batch, written
    if not floor:
        return {"api_per_s": written / api_seconds, "batch": batch}

    with psycopg.connect(dsn) as conn:
        tenant, agent, kind = conn.execute(
            "SELECT t.id, a.id, k.id FROM memory_tenant t JOIN memory_agent a ON a.tenant_id = t.id, memory_memorykind k "
            "WHERE t.slug = 'bench-big' AND a.slug = 'agent-0' AND k.name = 'episodic'"
        ).fetchone()
    local = threading.local()

    def floor_one(n: int) -> None:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = psycopg.connect(dsn, autocommit=False)
        bodies = [write_body(i) for i in range(offset + n * batch, offset + (n + 1) * batch)]
        with conn.transaction():
            conn.execute(
                WRITE_FLOOR_SQL,
                {
                    "tenant": tenant,
                    "agent": agent,
                    "kind": kind,
                    "subjects": [b["subject"] for b in bodies],
                    "contents": [b["content"] for b in bodies],
                    "sessions": [b["provenance"]["session_id"] for b in bodies],
                    "turns": [b["provenance"]["turn_id"] for b in bodies],
                },
            )

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(floor_one, range(requests)))
    floor_seconds = time.perf_counter() - started
    return {"api_per_s": written / api_seconds, "floor_per_s": written / floor_seconds, "batch": batch}


def forget_subject(server: Server, token: str, dsn: str, subject: str) -> dict:
    """Forget `subject` through the API: {"affected", "exclude" (the response's seconds, after
    which recall must exclude the subject: checked), "propagate" (the `propagate_forgets` job's)}."""
    status, payload, seconds = post_json(server.base + "/api/v1/forget/", token, {"subject": subject, "reason": "bench"})
    assert status == 202 and payload["affected"] > 0, (status, payload)
    status, recalled, _ = post_json(
        server.base + "/api/v1/recall/", token, {"query": "customer", "purpose": "support", "subject": subject}
    )
    assert status == 200 and recalled["items"] == [], recalled
    return {"affected": payload["affected"], "exclude": seconds, "propagate": job_seconds(run_job(dsn, "propagate_forgets"))}


def measure_forget(server: Server, token: str, dsn: str) -> dict:
    exclude, propagate, floor_exclude, floor_propagate = [], [], [], []
    from bench.seed import FORGET_RUNS

    with psycopg.connect(dsn) as conn:
        for run in range(FORGET_RUNS):
            forgot = forget_subject(server, token, dsn, f"customer/forget-me-{run}")
            exclude.append(forgot["exclude"])
            propagate.append(forgot["propagate"])
            # Floor on a copy of the same shape: the subject's records of another agent-less scope.
            floor_subject = f"bench-floor-forget-{run}"
            conn.execute(
                "UPDATE memory_memoryrecord SET subject = %s WHERE id IN (SELECT id FROM memory_memoryrecord "
                "WHERE subject LIKE 'customer/c%%' AND status = 'active' AND tenant_id = (SELECT id FROM memory_tenant "
                "WHERE slug = 'bench-big') LIMIT %s)",
                (floor_subject, forgot["affected"]),
            )
            conn.commit()
            started = time.perf_counter()
            conn.execute(
                "UPDATE memory_memoryrecord SET status = 'forgotten', version = version + 1 WHERE subject = %s", (floor_subject,)
            )
            conn.commit()
            floor_exclude.append(time.perf_counter() - started)
            started = time.perf_counter()
            conn.execute("UPDATE memory_memoryrecord SET content = '' WHERE subject = %s", (floor_subject,))
            conn.execute(
                "UPDATE memory_historicalmemoryrecord SET content = '' WHERE id IN "
                "(SELECT id FROM memory_memoryrecord WHERE subject = %s)",
                (floor_subject,),
            )
            conn.commit()
            floor_propagate.append(time.perf_counter() - started)
    return {
        "exclude": statistics.median(exclude),
        "propagate": statistics.median(propagate),
        "floor_exclude": statistics.median(floor_exclude),
        "floor_propagate": statistics.median(floor_propagate),
    }


def measure_queue_page(server: Server, dsn: str, user: str, password: str, n: int) -> dict:
    jar = CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    login_page = opener.open(server.base + "/accounts/login/").read().decode()
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login_page).group(1)
    opener.open(
        urllib.request.Request(
            server.base + "/accounts/login/",
            data=urlencode({"username": user, "password": password, "csrfmiddlewaretoken": csrf}).encode(),
            headers={"Referer": server.base + "/accounts/login/"},
        )
    ).read()
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
            conn.execute(
                "SELECT count(*) FROM memory_memoryrecord WHERE tenant_id = %s AND status = 'quarantined'", (tenant,)
            ).fetchone()
            conn.execute(
                "SELECT * FROM memory_memoryrecord WHERE tenant_id = %s AND status = 'quarantined' "
                "ORDER BY created_at, id LIMIT 25",
                (tenant,),
            ).fetchall()
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
    return (
        f"{os.cpu_count()} cores ({cpu}), {mem_gib:.0f} GiB RAM, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, PostgreSQL {pg}; app, database and load generator on the same machine"
    )


GENERATED_START = "<!-- bench.run: generated, rewritten by every run -->"
GENERATED_END = "<!-- bench.run: end of generated part; what follows is kept -->"


def write_report(path: Path, rows: list[tuple[str, str, str, str, str]], meta: dict) -> None:
    """Write the generated part (machine, data, figures) and keep everything else in the file:
    the part between the markers is replaced; a file without them keeps its sections after the
    first table's notes, i.e. every `## ` section but the old generated one."""
    lines = [
        GENERATED_START,
        f"Run on {meta['date']} with `{meta['command']}` (load average at the start: {meta['load']}).",
        "",
        f"Machine: {meta['machine']}.",
        "",
        f"App: gunicorn, 4 sync workers; PostgreSQL; {meta.get('cache', 'the file cache')} as the shared cache.",
        "",
        f"Data: {meta['records']:,} memory records (large tenant 100,000; quarantine tenant 100,000; "
        "160 small tenants), each with its history row.",
        "",
        "Recall and the queue page: percentiles over every request; writes, forget and expiry: one run each. The floor "
        "is the same work done with plain SQL through psycopg in the same run (no HTTP, no Django, no validation or "
        "history logic beyond what the SQL does).",
        "",
        "| figure | app | plain-SQL floor | ratio | target |",
        "|---|---|---|---|---|",
        *[f"| {a} | {b} | {c} | {d} | {e} |" for a, b, c, d, e in rows],
        GENERATED_END,
    ]
    generated = "\n".join(lines)
    old = path.read_text() if path.exists() else "# Benchmarks\n"
    if GENERATED_START in old and GENERATED_END in old:
        before, rest = old.split(GENERATED_START, 1)
        after = rest.split(GENERATED_END, 1)[1]
        text = before + generated + after
    else:  # the first run with markers: keep the title and every later section
        title, _, body = old.partition("\n")
        kept = body[body.index("\n## ") :] if "\n## " in body else ""
        text = f"{title}\n\n{generated}\n{kept}"
    path.write_text(text.rstrip("\n") + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_DSN))
    parser.add_argument("--fresh", action="store_true", help="drop, migrate and seed the benchmark database")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--recalls", type=int, default=200)
    parser.add_argument("--writes", type=int, default=2000, help="single writes (one record per request)")
    parser.add_argument("--batch-writes", type=int, default=20000, help="records written through the batch endpoint")
    parser.add_argument("--batch", type=int, default=100, help="records per batch request")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--expire", type=int, default=None, help="records to expire (default 1,000,000 × scale)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    args = parser.parse_args()
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "unknown"
    cache = cache_in_use()

    prepare(args.dsn, args.fresh, args.scale)
    token, user, password = credentials(args.dsn)
    server = Server(args.dsn)
    try:
        for _ in range(20):  # warm every worker (and its connection and caches)
            post_json(server.base + "/api/v1/recall/", token, {"query": "warm up", "purpose": "support"})
        recall = measure_recall(server, token, args.dsn, args.recalls)
        print("recall:", recall, flush=True)
        queue = measure_queue_page(server, args.dsn, user, password, 30)
        print("queue page:", queue, flush=True)
        single = measure_writes(server, token, args.dsn, args.writes, args.clients, 1)
        print("single writes:", single, flush=True)
        batched = measure_writes(server, token, args.dsn, args.batch_writes, args.clients, args.batch)
        print("batch writes:", batched, flush=True)
        forget = measure_forget(server, token, args.dsn)
        print("forget:", forget, flush=True)
    finally:
        server.stop()
    from bench.expiry import measure_expiry

    expiry = measure_expiry(args.dsn, args.expire or int(1_000_000 * args.scale))
    print("expiry:", expiry, flush=True)

    ms = lambda s: f"{s * 1000:.1f} ms"  # noqa: E731
    ratio = lambda a, b: f"{a / b:.1f}×" if b else "n/a"  # noqa: E731
    rows = []
    for scope, label in (("subject", "subject-scoped"), ("purpose", "purpose-wide")):
        r = recall[scope]
        target = "< 20 ms, ratio < 2" if scope == "subject" else "< 50 ms"
        rows.append((f"recall p50, {label} (HTTP)", ms(r["p50"]), ms(r["floor_p50"]), ratio(r["p50"], r["floor_p50"]), "—"))
        rows.append((f"recall p95, {label} (HTTP)", ms(r["p95"]), ms(r["floor_p95"]), ratio(r["p95"], r["floor_p95"]), target))
    for writes, label, target in (
        (batched, f"batch endpoint, {args.batch} per request", "≥ 500/s"),
        (single, "single writes", "—"),
    ):
        rows.append(
            (
                f"writes/s, {label}, {args.clients} concurrent clients (HTTP, gunicorn 4 workers)",
                f"{writes['api_per_s']:.0f}/s",
                f"{writes['floor_per_s']:.0f}/s",
                ratio(writes["floor_per_s"], writes["api_per_s"]),
                target,
            )
        )
    rows.append(
        (
            f"expire {expiry['count']:,} records, one history row each (job)",
            f"{expiry['app']:.1f} s",
            f"{expiry['floor']:.1f} s",
            ratio(expiry["app"], expiry["floor"]),
            "< 60 s for 1,000,000",
        )
    )
    rows.append(
        (
            f"then the search-index sweep of the {expiry['swept']:,} entries expiry left (job)",
            f"{expiry['sweep']:.1f} s",
            "—",
            "—",
            "—",
        )
    )
    rows.append(
        (
            "forget 10,000 records: excluded from recall (API response)",
            ms(forget["exclude"]),
            ms(forget["floor_exclude"]),
            ratio(forget["exclude"], forget["floor_exclude"]),
            "at once",
        )
    )
    rows.append(
        (
            "forget 10,000 records: propagation complete (job)",
            f"{forget['propagate']:.2f} s",
            f"{forget['floor_propagate']:.2f} s",
            ratio(forget["propagate"], forget["floor_propagate"]),
            "< 10 s",
        )
    )
    rows.append(
        (
            "quarantine page at 100,000 queued (HTTP, p50)",
            ms(queue["p50"]),
            ms(queue["floor_p50"]),
            ratio(queue["p50"], queue["floor_p50"]),
            "< 100 ms",
        )
    )
    with psycopg.connect(args.dsn) as conn:
        records = conn.execute("SELECT count(*) FROM memory_memoryrecord").fetchone()[0]
    write_report(
        Path(args.out),
        rows,
        {
            "date": time.strftime("%Y-%m-%d"),
            "machine": machine(),
            "records": records,
            "load": load,
            "cache": cache,
            "command": "python -m bench.run " + " ".join(sys.argv[1:]),
        },
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
