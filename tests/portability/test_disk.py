"""Forgetting reaches the disk: after a forget, its propagation and (PostgreSQL) the scheduled
rewrite, the database's files hold no copy of the forgotten content, checked by reading the bytes
of the files themselves (CI runs as root on the machine's PostgreSQL). One rewrite serves every
forget completed before it, the service keeps answering meanwhile, and the `disk` receipt of each
forget says when it happened, how, and what remains."""

import threading
import time
from pathlib import Path

import pytest
from django.db import connection
from django.test import Client

from governance.jobs import run_job
from governance.models import JobRun, PropagationReceipt
from governance.portability import disk
from governance.services import forget_request_create
from memory.models import MemoryRecord
from memory.search import storage
from memory.search.models import SearchIndex
from memory.services import memory_confirm
from tests.governance.test_forget_propagation import canary

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def search_storage_of_existing_indexes_only(transactional_db):
    """An earlier transactional test's flush removes the search index rows but leaves their tables
    and triggers behind, which then hold copies that no forget artifact knows of; a deployment
    never has such orphans (memory.search.storage.drop_storage_except)."""
    storage.drop_storage_except({index.storage_name for index in SearchIndex.objects.all()})

# the record table and its history: where content and its copies live
CONTENT_TABLES = ("memory_memoryrecord", "memory_historicalmemoryrecord")


def pg_relation_files(tables: tuple[str, ...]) -> list[Path]:
    """Every file of the tables, their TOAST tables and all their indexes (every fork and segment)."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW data_directory")
        data = Path(cursor.fetchone()[0])
        cursor.execute(
            """WITH t AS (SELECT c.oid, c.reltoastrelid FROM pg_class c WHERE c.oid = ANY(%s::regclass[])),
                    rels AS (SELECT oid FROM t UNION SELECT reltoastrelid FROM t WHERE reltoastrelid <> 0)
               SELECT pg_relation_filepath(oid) FROM rels
               UNION SELECT pg_relation_filepath(i.indexrelid) FROM pg_index i WHERE i.indrelid IN (SELECT oid FROM rels)""",
            [list(tables)],
        )
        bases = [data / row[0] for row in cursor.fetchall() if row[0]]
    return sorted({path for base in bases for path in base.parent.glob(base.name + "*")
                   if path.name == base.name or path.name[len(base.name)] in "._"})


def database_directory_files() -> list[Path]:
    with connection.cursor() as cursor:
        cursor.execute("SHOW data_directory")
        data = Path(cursor.fetchone()[0])
        cursor.execute("SELECT oid FROM pg_database WHERE datname = current_database()")
        return sorted(p for p in (data / "base" / str(cursor.fetchone()[0])).iterdir() if p.is_file())


def copies_on_disk(needle: str, *, whole_database: bool = False) -> int:
    """Occurrences of `needle` in the bytes of the database's files: SQLite's file and its WAL;
    on PostgreSQL (after a CHECKPOINT, so what is in memory is on disk too) the content tables'
    files, or every file of the database."""
    raw = needle.encode()
    if connection.vendor == "sqlite":
        path = Path(connection.settings_dict["NAME"])
        return sum(Path(f"{path}{suffix}").read_bytes().count(raw) for suffix in ("", "-wal") if Path(f"{path}{suffix}").exists())
    with connection.cursor() as cursor:
        cursor.execute("CHECKPOINT")
    files = database_directory_files() if whole_database else pg_relation_files(CONTENT_TABLES)
    return sum(path.read_bytes().count(raw) for path in files if path.exists())


def forget(tenant, reviewer_actor, subject: str):
    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject=subject, reason="erasure")
    run_job("propagate_forgets", trigger="run_job")
    return request


def test_a_forgotten_canary_leaves_the_database_files(tenant, write, reviewer_actor):
    secret, control = canary(), canary()
    kept = write(subject="customer/erin", content=f"Erin's door code is {secret}.")
    memory_confirm(record_id=kept.pk, expected_version=1, actor=reviewer_actor, note="Checked.")
    write(subject="customer/frank", content=f"Frank's note {control}.")
    request = forget(tenant, reviewer_actor, "customer/erin")

    if connection.vendor == "sqlite":
        # secure_delete zeroed the content when propagation committed; the WAL was checkpointed
        assert copies_on_disk(secret) == 0
    before = copies_on_disk(secret)
    run = run_job("disk_rewrite", trigger="run_job")

    assert run.status == JobRun.Status.SUCCEEDED and run.counts["requests_completed"] == 1
    assert copies_on_disk(secret) == 0
    assert copies_on_disk(control) > 0  # the grep does see content that was not forgotten
    if connection.vendor == "postgresql":
        assert copies_on_disk(secret, whole_database=True) == 0
        print(f"\ncanary copies in the content tables' files after propagation: {before}; after the rewrite: 0")
    receipt = request.receipts.get(artifact="disk")
    assert receipt.completed_at > request.__class__.objects.get(pk=request.pk).completed_at
    assert "On disk at" in receipt.note and "Beyond reach" in receipt.note and "age out by" in receipt.note
    if connection.vendor == "postgresql":
        assert "pg_repack" in receipt.note and receipt.removed == run.counts["tables_rewritten"] >= 2


def test_one_rewrite_serves_every_forget_completed_before_it(tenant, write, reviewer_actor):
    requests = []
    for name in ("ann", "bob", "cyd"):
        write(subject=f"customer/{name}", content=f"{name} {canary()}")
        requests.append(forget(tenant, reviewer_actor, f"customer/{name}"))
    pending = PropagationReceipt.objects.filter(artifact="disk", forget_request__in=requests)
    assert all(receipt.note.startswith("Pending") for receipt in pending)

    first = run_job("disk_rewrite", trigger="run_job")
    assert (first.counts["requests"], first.counts["requests_completed"]) == (3, 3)
    done = list(pending.all())
    assert len({receipt.completed_at for receipt in done}) == 1 and len({receipt.note for receipt in done}) == 1
    second = run_job("disk_rewrite", trigger="run_job")
    assert (second.counts["requests"], second.counts["tables_rewritten"]) == (0, 0)  # nothing pending, nothing rewritten


def test_the_service_keeps_answering_while_the_tables_are_rewritten(tenant, credential, write, reviewer_actor):
    for i in range(100):
        write(subject=f"customer/c{i % 20}", content=f"Fact {i} about the customer.")
    forget(tenant, reviewer_actor, "customer/c3")
    latencies, errors, stop = [], [], threading.Event()

    def agent() -> None:
        client = Client()
        try:
            while not stop.is_set():
                started = time.monotonic()
                response = client.post("/api/v1/recall/", {"query": "fact customer", "purpose": "support"},
                                       content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {credential.raw_token}")
                latencies.append((started, time.monotonic() - started))
                if response.status_code != 200:
                    errors.append(response.status_code)
        finally:
            connection.close()

    thread = threading.Thread(target=agent, daemon=True)
    thread.start()
    time.sleep(0.3)
    started = time.monotonic()
    run = run_job("disk_rewrite", trigger="run_job")
    finished = time.monotonic()
    time.sleep(0.2)
    stop.set()
    thread.join(timeout=30)

    assert run.status == JobRun.Status.SUCCEEDED and run.counts["requests_completed"] == 1
    during = [seconds for at, seconds in latencies if at <= finished and at + seconds >= started]  # overlapping the job
    assert errors == [] and len(during) >= (3 if connection.vendor == "postgresql" else 1)
    assert max(during) < 2.0
    print(f"\nrewrite {finished - started:.2f} s; {len(during)} recalls answered meanwhile, slowest {max(during) * 1000:.0f} ms")


def test_where_the_disk_cannot_be_reached_the_receipt_says_what_remains_and_stays_pending(
    tenant, write, reviewer_actor, monkeypatch,
):
    write(subject="customer/erin", content=f"Erin {canary()}")
    request = forget(tenant, reviewer_actor, "customer/erin")
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA secure_delete=OFF")
        expected = "secure_delete is off"
    else:
        monkeypatch.setattr(disk.shutil, "which", lambda name: None)  # a host without the pg_repack client
        expected = "no pg_repack: its client is not installed"
    run = run_job("disk_rewrite", trigger="run_job")
    receipt = request.receipts.get(artifact="disk")
    assert run.counts["requests_completed"] == 0
    assert receipt.note.startswith("Not yet on disk") and expected in receipt.note and "Beyond reach" in receipt.note
    assert receipt.removed == 0 and receipt.completed_at <= request.__class__.objects.get(pk=request.pk).completed_at
    connection.close()  # back to the configured connection settings (secure_delete on)
    monkeypatch.undo()
    assert run_job("disk_rewrite", trigger="run_job").counts["requests_completed"] == 1
    assert MemoryRecord.objects.filter(status="forgotten").count() == 1
