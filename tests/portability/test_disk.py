"""Forgetting reaches the disk: after a forget, its propagation and the disk step, the database's
files hold no copy of the forgotten content or subject, checked by reading the bytes of the files
themselves (tests run as root beside the machine's PostgreSQL, whose data directory they read). The
disk step names its tables from the forget artifacts, not from lagging statistics, and verifies
each rewrite; a receipt claims only what was verified, stays pending naming what was not, and the
next run completes it. One rewrite serves every forget completed before it, and the service keeps
answering meanwhile."""

import functools
import queue
import threading
import time

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from governance.forget.artifacts import artifact_tables, registered_artifacts
from governance.forget.services import forget_request_create
from governance.jobs import run_job
from governance.models import ForgetRequest, JobRun, PropagationReceipt
from governance.portability import disk
from memory.engine import current
from memory.engine.postgres import ops as pg_ops
from memory.models import MemoryRecord
from memory.search import storage, vectors
from memory.search.build import ensure_active_index
from memory.search.models import SearchIndex
from memory.services import memory_confirm, memory_promote
from tests.governance.test_forget_propagation import canary
from tests.portability.conftest import bytes_on_disk, database_files

pytestmark = pytest.mark.django_db(transaction=True)
PG = "postgresql"


@pytest.fixture(autouse=True)
def search_storage_of_existing_indexes_only(transactional_db):
    """An earlier transactional test's flush removes the search index rows but leaves their tables
    and triggers behind, which then hold copies that no forget artifact knows of; a deployment
    never has such orphans (memory.search.storage.drop_storage_except)."""
    storage.drop_storage_except({index.storage_name for index in SearchIndex.objects.all()})


@pytest.fixture
def lexical_index(transactional_db):
    """The active lexical index, so every write below is copied into its tables too."""
    return ensure_active_index()


def index_bytes(needle: str) -> int:
    """Occurrences of `needle` in the files of the search index tables only (PostgreSQL)."""
    with connection.cursor() as cursor:
        cursor.execute("CHECKPOINT")
        cursor.execute("SHOW data_directory")
        data = cursor.fetchone()[0]
        cursor.execute(
            "SELECT pg_relation_filepath(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relname LIKE 'memory\\_search\\_%%'"
        )
        paths = [f"{data}/{row[0]}" for row in cursor.fetchall() if row[0]]
    return sum(open(path, "rb").read().count(needle.encode()) for path in paths)


class Worker:
    """A thread with its own database session that stays open while the test goes on, as a
    Celery worker's does. A forget propagated there is counted in `pg_stat_user_tables` only when
    that session reports its statistics, up to seconds later: a disk step run meanwhile from
    another session cannot learn from them which tables the forget touched."""

    def __init__(self):
        self.jobs: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (job := self.jobs.get()) is not None:
            function, done = job
            try:
                done.put((function(), None))
            except Exception as exc:  # raised again in the test's thread
                done.put((None, exc))
        connection.close()

    def call(self, function):
        done: queue.Queue = queue.Queue()
        self.jobs.put((function, done))
        result, error = done.get(timeout=60)
        if error is not None:
            raise error
        return result

    def stop(self) -> None:
        self.jobs.put(None)
        self.thread.join(timeout=30)


def busy_then_forget(tenant, reviewer_actor, subject: str, *, reset_statistics: bool) -> tuple[ForgetRequest, float]:
    """In a busy worker's session, which reported its statistics a moment ago (the server takes a
    session's report at most once a second): the forget's deletes then wait in the session for its
    next report, seconds away. Optionally every statistic is reset first. Returns the request and
    when it was filed."""
    if connection.vendor == PG:
        time.sleep(1.05)
        MemoryRecord.objects.count()  # reported as the statement ends
        if reset_statistics:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_stat_reset()")
    filed = time.monotonic()
    return forget(tenant, reviewer_actor, subject), filed


def forget(tenant, reviewer_actor, subject: str) -> ForgetRequest:
    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject=subject, reason="erasure")
    run_job("propagate_forgets", trigger="run_job")
    return request


def seed(write, reviewer_actor, *, subject: str, secret: str) -> None:
    """The subject's memories where a forget leaves dead row versions: records and their history,
    an idempotent write result, a reviewer's note, and the search index's rows, terms and stats."""
    kept = write(subject=subject, content=f"Door code is {secret}.", idempotency_key=f"key-{secret}")
    memory_confirm(record_id=kept.pk, expected_version=1, actor=reviewer_actor, note="Checked.")
    claim = write(
        subject=subject,
        content=f"A page says {secret} too.",
        authority="third_party",
        provenance={"source_type": "web_page", "uri": "https://example.com/page"},
    )
    memory_promote(record_id=claim.pk, expected_version=1, actor=reviewer_actor, note=f"Checked the page: {secret}")


def receipt_of(request: ForgetRequest) -> PropagationReceipt:
    return request.receipts.get(artifact="disk")


def is_pending(receipt: PropagationReceipt) -> bool:
    return disk.pending_receipts(completed_before=timezone.now()).filter(pk=receipt.pk).exists()


# --------------------------------------------------------------------------------------------
# which tables


def test_the_tables_come_from_the_artifacts_and_every_search_index_not_from_statistics(lexical_index):
    named = disk.tables_touched()
    base = lexical_index.storage_name
    expected = {base, f"{base}_terms", f"{base}_stats"} if connection.vendor == PG else {base, f"{base}_doc"}
    assert expected <= set(named)
    assert {
        "memory_memoryrecord",
        "memory_historicalmemoryrecord",
        "memory_idempotencykey",
        "governance_forgetrequest",
        "django_admin_log",
    } <= set(named)
    for artifact in registered_artifacts():  # each artifact's own account, covers or tables()
        assert artifact_tables(artifact) <= set(named)

    class OutsideTheOrm:
        name, covers = "outside", ()

        def tables(self):
            return ["some_cache_table"]

    assert artifact_tables(OutsideTheOrm()) == {"some_cache_table"}
    semantic = storage.storage_name("semantic", 9999)  # a semantic index's table (memory.search.vectors)
    vectors.create_storage(semantic)
    try:
        assert semantic in disk.tables_touched()
    finally:
        storage.drop_storage(semantic)
    if connection.vendor == PG:  # with every statistic reset, the rewrite still names them all
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_reset()")
            rewritten = set(pg_ops._tables_to_rewrite(cursor, disk.tables_touched(), since=None))
            # The history table is partitioned by month (memory 0025): each partition is rewritten, as
            # pg_repack works per table, and the partitioned parent, which holds no rows, is not.
            partitions = {partition.name for partition in current().history.history_partitions()}
            assert len(partitions) >= 4 and partitions <= rewritten  # this month, two ahead, the default
            assert set(named) - {"memory_historicalmemoryrecord"} <= rewritten


# --------------------------------------------------------------------------------------------
# forget, then the disk step at once: nothing left in any file


RUNS = 4


def test_a_disk_step_right_after_the_forget_leaves_no_canary_in_any_table_or_index_file(
    tenant,
    write,
    reviewer_actor,
    lexical_index,
):
    control = canary()
    write(subject="customer/frank", content=f"Frank's note {control}.")
    durations, worker = [], Worker()
    for run_number in range(RUNS):
        secret, who = canary(), canary()
        subject = f"customer/{who}"
        seed(write, reviewer_actor, subject=subject, secret=secret)
        if connection.vendor == PG:
            assert index_bytes(secret) > 0 and index_bytes(who) > 0  # the index tables do hold copies
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_stat_force_next_flush()")  # this session's counts are reported now
        request, filed = worker.call(
            functools.partial(busy_then_forget, tenant, reviewer_actor, subject, reset_statistics=run_number % 2 == 0)
        )
        assert time.monotonic() - filed < 1.0  # the disk step starts within a second of the forget
        started = time.monotonic()
        run = run_job("disk_rewrite", trigger="run_job")
        durations.append(time.monotonic() - started)

        assert (run.status, run.counts["requests_completed"], run.counts["tables_pending"]) == (JobRun.Status.SUCCEEDED, 1, 0)
        for needle in (secret, who):
            assert bytes_on_disk(needle) == 0, f"run {run_number}: a forgotten canary is still in the files"
        receipt = receipt_of(request)
        assert not is_pending(receipt) and receipt.note.startswith("On disk at")
        if connection.vendor == PG:
            assert "rewritten and verified" in receipt.note and receipt.removed == run.counts["tables_verified"]
            assert lexical_index.storage_name in receipt.note or "more)" in receipt.note
    worker.stop()
    assert bytes_on_disk(control) > 0  # the grep does see content that was not forgotten
    assert len(database_files()) > (20 if connection.vendor == PG else 0)
    print(
        f"\n{RUNS} forgets, disk step right after each: 0 canary bytes left; steps took "
        f"{', '.join(f'{d:.1f}' for d in durations)} s"
    )


def test_a_forgotten_canary_leaves_the_database_files(tenant, write, reviewer_actor, lexical_index):
    secret, control = canary(), canary()
    kept = write(subject="customer/erin", content=f"Erin's door code is {secret}.")
    memory_confirm(record_id=kept.pk, expected_version=1, actor=reviewer_actor, note="Checked.")
    write(subject="customer/frank", content=f"Frank's note {control}.")
    request = forget(tenant, reviewer_actor, "customer/erin")

    if connection.vendor == "sqlite":
        # secure_delete zeroed the content when propagation committed; the WAL was checkpointed
        assert bytes_on_disk(secret) == 0
    before = bytes_on_disk(secret)
    pending = receipt_of(request)  # propagation done, the rewrite not yet: open, and saying so
    assert pending.completed_at is None and pending.note.startswith("Pending:")
    run = run_job("disk_rewrite", trigger="run_job")

    assert run.status == JobRun.Status.SUCCEEDED and run.counts["requests_completed"] == 1
    assert bytes_on_disk(secret) == 0
    assert bytes_on_disk(control) > 0
    if connection.vendor == PG:
        assert bytes_on_disk(secret, scope="database") == 0
        print(f"\ncanary copies in the schema's files after propagation: {before}; after the rewrite: 0")
    receipt = receipt_of(request)
    assert receipt.completed_at > ForgetRequest.objects.get(pk=request.pk).completed_at
    assert "On disk at" in receipt.note and "Beyond reach" in receipt.note and "age out by" in receipt.note
    assert len(receipt.note) <= 500
    if connection.vendor == PG:
        assert "pg_repack" in receipt.note and "rewritten and verified" in receipt.note
        assert receipt.removed == run.counts["tables_verified"] >= 5
    else:
        assert "truncated to 0 bytes" in receipt.note


# --------------------------------------------------------------------------------------------
# a receipt claims only what was verified


def test_a_table_left_unrewritten_keeps_the_receipt_pending_by_name_and_the_next_run_completes_it(
    tenant,
    write,
    reviewer_actor,
    lexical_index,
    monkeypatch,
):
    secret = canary()
    seed(write, reviewer_actor, subject="customer/erin", secret=secret)
    request = forget(tenant, reviewer_actor, "customer/erin")
    holder = connection.copy()  # another session, as a long report or a stuck client would be
    released = threading.Event()
    if connection.vendor == PG:
        # pg_repack rewrites the named tables in name order and skips one whose lock it is not
        # granted in time; lock the first, and let go once the others wait for this transaction.
        monkeypatch.setattr(pg_ops, "REPACK_WAIT_SECONDS", 1)
        with connection.cursor() as cursor:
            locked = pg_ops._tables_to_rewrite(cursor, disk.tables_touched(), since=None)[0]
        holder.ensure_connection()
        holder.connection.autocommit = False
        holder.connection.execute(f'LOCK TABLE "{locked}" IN ACCESS SHARE MODE')
        threading.Timer(5.0, lambda: (holder.connection.commit(), released.set())).start()
    else:
        # A reader in the middle of a read transaction keeps the WAL from being checkpointed (the
        # checkpoint waits for it as long as the busy timeout, shortened here).
        holder.ensure_connection()
        holder.connection.execute("BEGIN")
        holder.connection.execute("SELECT count(*) FROM memory_memoryrecord").fetchone()
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA busy_timeout = 300")
        locked = None

    first = run_job("disk_rewrite", trigger="run_job")
    if connection.vendor == "sqlite":
        holder.connection.execute("COMMIT")
        connection.close()  # the configured busy timeout again
        released.set()
    released.wait(10)
    holder.close()

    receipt = receipt_of(request)
    assert first.counts["requests_completed"] == 0 and is_pending(receipt)
    assert receipt.note.startswith("Pending: not verified on disk") and receipt.removed == 0
    if connection.vendor == PG:
        assert first.counts["tables_pending"] == 1 and first.counts["tables_verified"] >= 5
        assert f"1 of {first.counts['tables_verified'] + 1} tables ({locked})" in receipt.note
        assert "not granted the table's lock in 1 s" in receipt.note and "retries them" in receipt.note
    else:
        assert "a reader held the write-ahead log" in receipt.note

    second = run_job("disk_rewrite", trigger="run_job")
    receipt.refresh_from_db()
    assert (second.counts["requests"], second.counts["requests_completed"], second.counts["tables_pending"]) == (1, 1, 0)
    assert not is_pending(receipt) and receipt.note.startswith("On disk at")
    if connection.vendor == PG:
        assert receipt.removed == second.counts["tables_verified"] and locked in disk.tables_touched()
    assert bytes_on_disk(secret) == 0


def test_one_rewrite_serves_every_forget_completed_before_it(tenant, write, reviewer_actor):
    requests = []
    for name in ("ann", "bob", "cyd"):
        write(subject=f"customer/{name}", content=f"{name} {canary()}")
        requests.append(forget(tenant, reviewer_actor, f"customer/{name}"))
    pending = PropagationReceipt.objects.filter(artifact="disk", forget_request__in=requests)
    assert all(receipt.note.startswith("Pending:") and is_pending(receipt) for receipt in pending)

    first = run_job("disk_rewrite", trigger="run_job")
    assert (first.counts["requests"], first.counts["requests_completed"]) == (3, 3)
    done = list(pending.all())
    assert len({receipt.completed_at for receipt in done}) == 1 and len({receipt.note for receipt in done}) == 1
    assert not any(receipt.note.startswith("Pending") for receipt in done)
    second = run_job("disk_rewrite", trigger="run_job")
    assert (second.counts["requests"], second.counts["tables_verified"]) == (0, 0)  # nothing pending, nothing rewritten


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
                response = client.post(
                    "/api/v1/recall/",
                    {"query": "fact customer", "purpose": "support"},
                    content_type="application/json",
                    HTTP_AUTHORIZATION=f"Bearer {credential.raw_token}",
                )
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
    assert errors == [] and len(during) >= (3 if connection.vendor == PG else 1)
    assert max(during) < 2.0
    print(f"\nrewrite {finished - started:.2f} s; {len(during)} recalls answered meanwhile, slowest {max(during) * 1000:.0f} ms")


def test_where_the_disk_cannot_be_reached_the_receipt_says_what_remains_and_stays_pending(
    tenant,
    write,
    reviewer_actor,
    monkeypatch,
):
    write(subject="customer/erin", content=f"Erin {canary()}")
    request = forget(tenant, reviewer_actor, "customer/erin")
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA secure_delete=OFF")
        expected = "secure_delete is off"
    else:
        monkeypatch.setattr("shutil.which", lambda name: None)  # a host without the pg_repack client
        expected = "No pg_repack: its client is not installed"
    run = run_job("disk_rewrite", trigger="run_job")
    receipt = receipt_of(request)
    assert run.counts["requests_completed"] == 0
    assert receipt.note.startswith("Pending: not verified") and expected in receipt.note and "Beyond reach" in receipt.note
    assert receipt.removed == 0 and is_pending(receipt)
    connection.close()  # back to the configured connection settings (secure_delete on)
    monkeypatch.undo()
    assert run_job("disk_rewrite", trigger="run_job").counts["requests_completed"] == 1
    assert MemoryRecord.objects.filter(status="forgotten").count() == 1
