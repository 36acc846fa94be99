"""What the replica fences cost a read (memory.replicas): a fresh database with some records, a
streaming replica of it made by bin/replica-setup (no apply delay), and recall through the service
timed three ways: on the primary with no replica configured, on the replica with no fence open for
the tenant, and on the replica with a fence open that it has replayed past (the fence check then
asks the replica how far it has replayed). Also the fence check alone, with its statements.

    .venv/bin/python -m bench.replica_fence --database postgres://postgres@127.0.0.1:5432/gm_replica_bench

Needs root (or the postgres user) on a machine whose PostgreSQL it may add a replication line to
(bin/replica-setup); the database is dropped and the replica removed at the end. Prints one JSON object.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1] * 1000, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database", required=True)
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--recalls", type=int, default=300)
    args = parser.parse_args()
    admin = args.database.rsplit("/", 1)[0] + "/postgres"
    name = args.database.rsplit("/", 1)[1]
    subprocess.run(["psql", admin, "-qc", f'DROP DATABASE IF EXISTS "{name}"'], check=True)
    subprocess.run(["psql", admin, "-qc", f'CREATE DATABASE "{name}"'], check=True)
    env = {**os.environ, "DATABASE_URL": args.database, "SEMANTIC_AUTO_INDEX": "false", "SEMANTIC_LOAD_AT_START": "false"}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    directory = Path(tempfile.mkdtemp(prefix="gm-replica-bench-"))
    os.chmod(directory, 0o755)
    standby = directory / "standby"
    made = subprocess.run(
        [ROOT / "bin" / "replica-setup", "up", standby, "5441", "0"], env=env, capture_output=True, text=True, check=True
    )
    try:
        os.environ.update(env)
        os.environ["DATABASE_REPLICA_URLS"] = made.stdout.strip() + name
        os.environ["APP_VAR_DIR"] = str(directory / "var")
        print(json.dumps(_measure(args.records, args.recalls), indent=2))
    finally:
        from django.db import connections

        connections.close_all()
        subprocess.run([ROOT / "bin" / "replica-setup", "down", standby], env=env, check=False)
        shutil.rmtree(directory, ignore_errors=True)
        subprocess.run(["psql", admin, "-qc", f'DROP DATABASE IF EXISTS "{name}"'], check=False)


def _measure(records: int, recalls: int) -> dict:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from django.db import DEFAULT_DB_ALIAS, connections
    from django.test.utils import CaptureQueriesContext

    from memory import engine, replicas
    from memory.models import Agent, AgentCredential, ReplicaFence, Tenant
    from memory.recall import parse_recall, recall
    from memory.services import memory_write

    tenant = Tenant.objects.create(slug="bench", name="Bench")
    agent = Agent.objects.create(tenant=tenant, slug="bot")
    credential, _ = AgentCredential.issue(agent=agent, purposes=["support"])
    words = ["invoice", "refund", "shipping", "email", "phone", "manager", "approval", "template", "blue", "weekly"]
    for n in range(records):
        memory_write(
            credential=credential,
            data={
                "kind": "preference",
                "subject": f"customer/{n % 50}",
                "purpose": "support",
                "content": f"Customer {n} prefers {words[n % 10]} and {words[(n * 7) % 10]} ({n}).",
                "authority": "user",
                "confidence": 0.9,
                "provenance": {"source_type": "user_turn", "session_id": f"s-{n}", "contaminated": False},
            },
            idempotency_key=None,
        )
    replication = engine.current().replication
    target = replication.wal_position(DEFAULT_DB_ALIAS)
    while (replication.replayed_position("replica_0") or 0) < target:
        time.sleep(0.1)
    query = parse_recall({"purpose": "support", "query": "refund approval manager", "limit": 10})
    results: dict[str, object] = {"records": records, "recalls": recalls}

    def timed(read) -> dict[str, float]:
        for _ in range(10):
            read()
        samples = []
        for _ in range(recalls):
            start = time.perf_counter()
            read()
            samples.append(time.perf_counter() - start)
        return _percentiles(samples)

    def on_replica():
        return replicas.read_on_replica(lambda: recall(credential=credential, q=query), tenant_ids=[tenant.pk], writer=None)

    results["recall_primary_no_fence_check"] = timed(lambda: recall(credential=credential, q=query))
    results["fence_check_no_fence"] = timed(lambda: replicas.choose(tenant_ids=[tenant.pk], writer=None))
    results["recall_replica_no_fence"] = timed(on_replica)
    ReplicaFence.objects.create(tenant=tenant, lsn=replication.wal_position(DEFAULT_DB_ALIAS))
    while (replication.replayed_position("replica_0") or 0) < target:
        time.sleep(0.1)
    time.sleep(0.5)
    results["fence_check_fence_passed"] = timed(lambda: replicas.choose(tenant_ids=[tenant.pk], writer=None))
    results["recall_replica_fence_passed"] = timed(on_replica)
    for label, fenced in (("statements_no_fence", False), ("statements_fence_open", True)):
        if not fenced:
            ReplicaFence.objects.all().delete()
        else:
            ReplicaFence.objects.create(tenant=tenant, lsn=replication.wal_position(DEFAULT_DB_ALIAS))
        for alias in (DEFAULT_DB_ALIAS, "replica_0"):
            connections[alias].queries_log.clear()  # the log is capped: a full one counts nothing new
        with (
            CaptureQueriesContext(connections[DEFAULT_DB_ALIAS]) as primary,
            CaptureQueriesContext(connections["replica_0"]) as replica,
        ):
            replicas.choose(tenant_ids=[tenant.pk], writer=None)
        results[label] = {"primary": len(primary.captured_queries), "replica": len(replica.captured_queries)}
    return results


if __name__ == "__main__":
    main()
