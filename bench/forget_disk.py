"""Forgetting on disk, checked by reading the files: `runs` times, a subject with a unique canary
in its name and content is written (records, history, an idempotent write result, the lexical
index's rows, terms and stats), forgotten and propagated in a session that stays open (a worker's),
and the `disk_rewrite` job runs in another session within a second of the forget, as it would if
the schedule fired right then; `pg_stat_reset()` just before the forget on every other run. Either
way no statistic knows of the forget's dead rows yet: the worker's session reports them seconds
later. After each run the files of every relation of the app's schema (tables, indexes, TOAST)
are read from the server's data directory and grepped for both canaries. Prints one JSON line per run and a summary; exits 1 if any canary
byte is left, a receipt is not completed, or the job starts later than a second after the forget.

    sudo .venv/bin/python -m bench.forget_disk --dsn postgresql://postgres@127.0.0.1:5432/gm_forget_disk --runs 20

Run it on the database server's host as a user who may read its data directory (root, or
postgres); the database named in the DSN is dropped and created again first.
"""

import argparse
import functools
import json
import os
import queue
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

import psycopg


def recreate(dsn: str) -> None:
    name = urlparse(dsn).path.lstrip("/")
    with psycopg.connect(dsn.replace(f"/{name}", "/postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


class Worker:
    """A thread with its own database session that stays open, as a Celery worker's does: the
    forget and its propagation run there, the disk step in another session. A server process
    reports its sessions' dead-row counts to `pg_stat_user_tables` up to seconds later, so the disk
    step cannot learn from them what the forget just deleted."""

    def __init__(self):
        self.jobs: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from django.db import connection

        while (job := self.jobs.get()) is not None:
            function, done = job
            try:
                done.put((function(), None))
            except Exception as exc:
                done.put((None, exc))
        connection.close()

    def call(self, function):
        done: queue.Queue = queue.Queue()
        self.jobs.put((function, done))
        result, error = done.get()
        if error is not None:
            raise error
        return result

    def stop(self) -> None:
        self.jobs.put(None)
        self.thread.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/gm_forget_disk")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    recreate(args.dsn)
    os.environ.update(
        DATABASE_URL=args.dsn.replace("postgresql://", "postgres://"),
        LOG_LEVEL="WARNING",
        APP_VAR_DIR=tempfile.mkdtemp(prefix="gm-forget-disk-"),
        DJANGO_SETTINGS_MODULE="config.settings",
    )
    os.environ.pop("REDIS_URL", None)  # nothing here needs the broker
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from governance.forget.services import forget_request_create
    from governance.jobs import run_job
    from governance.models import PropagationReceipt
    from governance.portability.disk import pending_receipts
    from memory.actors import Actor
    from memory.engine.postgres.ops import schema_relation_files
    from memory.models import Agent, AgentCredential, MemoryRecord, Tenant
    from memory.search.build import ensure_active_index
    from memory.services import memory_write

    call_command("migrate", interactive=False, verbosity=0)
    ensure_active_index()
    tenant = Tenant.objects.create(slug="bench", name="Bench")
    agent = Agent.objects.create(tenant=tenant, slug="bot")
    credential, _raw = AgentCredential.issue(agent=agent, purposes=["support"])
    actor = Actor.job("bench")

    def write(subject: str, content: str, key: str | None = None) -> None:
        memory_write(
            credential=credential,
            idempotency_key=key,
            data={
                "kind": "preference",
                "subject": subject,
                "purpose": "support",
                "content": content,
                "authority": "user",
                "confidence": 0.9,
                "provenance": {
                    "source_type": "user_turn",
                    "uri": f"chat://bench/{uuid.uuid4().hex}",
                    "session_id": "s-1",
                    "turn_id": "1",
                    "tool": None,
                    "source_version": None,
                    "observed_at": "2026-11-29T10:00:00Z",
                    "contaminated": False,
                },
            },
        )

    worker = Worker()

    def busy_then_forget(subject: str, reset: bool):
        """A busy worker's session reported its statistics a moment ago (the server takes a
        session's report at most once a second): the forget's deletes wait there for the next."""
        time.sleep(1.05)
        MemoryRecord.objects.count()
        if reset:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_stat_reset()")
        filed = time.monotonic()
        request = forget_request_create(actor=actor, tenant=tenant, subject=subject, reason="bench")
        run_job("propagate_forgets", trigger="bench")
        return request, filed

    control = f"zq{uuid.uuid4().hex}7"
    write("customer/control", f"Control note {control}.")
    failures, durations = 0, []
    for run in range(args.runs):
        secret, who = f"zq{uuid.uuid4().hex}7", f"zq{uuid.uuid4().hex}7"
        subject = f"customer/{who}"
        write(subject, f"Door code is {secret}.", key=f"key-{secret}")
        write(subject, f"Also {secret} on weekdays.")
        reset = run % 2 == 0
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_force_next_flush()")  # this session's counts are reported now
        request, filed = worker.call(functools.partial(busy_then_forget, subject, reset))
        lag = time.monotonic() - filed
        started = time.monotonic()
        job = run_job("disk_rewrite", trigger="bench")
        took = time.monotonic() - started
        durations.append(took)
        with connection.cursor() as cursor:
            cursor.execute("CHECKPOINT")
            files = schema_relation_files(cursor)
        blobs = [path.read_bytes() for path in files if path.exists()]
        left = {
            name: sum(blob.count(needle.encode()) for blob in blobs)
            for name, needle in (("content", secret), ("subject", who), ("control", control))
        }
        receipt = PropagationReceipt.objects.get(forget_request=request, artifact="disk")
        completed = not pending_receipts(completed_before=timezone.now()).filter(pk=receipt.pk).exists()
        ok = left["content"] == left["subject"] == 0 and left["control"] > 0 and completed and lag < 1.0
        failures += not ok
        print(
            json.dumps(
                {
                    "run": run + 1,
                    "stats_reset": reset,
                    "forget_to_disk_step_s": round(lag, 3),
                    "disk_step_s": round(took, 2),
                    "files_read": len(files),
                    "canary_bytes_left": left,
                    "tables_verified": job.counts.get("tables_verified"),
                    "tables_pending": job.counts.get("tables_pending"),
                    "receipt_completed": completed,
                    "ok": ok,
                }
            )
        )
    worker.stop()
    print(
        json.dumps(
            {
                "runs": args.runs,
                "failed": failures,
                "disk_step_s_median": round(sorted(durations)[len(durations) // 2], 2),
                "disk_step_s_max": round(max(durations), 2),
            }
        )
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
