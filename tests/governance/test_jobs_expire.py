"""The expire job's logic, called through the run wrapper (lock + JobRun) in-process."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from governance.jobs import run_job
from governance.models import JobRun
from governance.retention.expire import ACTOR, expire
from memory.models import MemoryRecord, Status
from memory.services import memory_expire_due

pytestmark = pytest.mark.django_db


def test_due_active_and_quarantined_records_expire_with_one_job_history_row_each(make_records, history):
    active = make_records(5)
    quarantined = make_records(3, status=Status.QUARANTINED)
    not_due = make_records(2, expired=False)
    rejected = make_records(2, status=Status.REJECTED)

    run = run_job("expire", trigger="run_job", batch_size=2)  # several batches

    assert (run.status, run.counts, run.errors, run.trigger) == (JobRun.Status.SUCCEEDED, {"expired": 8}, [], "run_job")
    expired = MemoryRecord.objects.filter(pk__in=active + quarantined)
    assert set(expired.values_list("status", "version")) == {(Status.EXPIRED, 2)}
    assert all(r.status_changed_at == run.started_at for r in expired)
    rows = history.objects.filter(id__in=active + quarantined, history_change_reason="job.expire")
    assert rows.count() == 8
    assert set(rows.values_list("history_actor", "status", "history_type")) == {("job:expire", "expired", "~")}
    untouched = MemoryRecord.objects.filter(pk__in=not_due + rejected)
    assert set(untouched.values_list("version", flat=True)) == {1}
    assert not history.objects.filter(id__in=not_due + rejected, history_change_reason="job.expire").exists()


def test_a_second_run_finds_nothing_left_to_do(make_records, history):
    ids = make_records(4)
    first = run_job("expire")
    second = run_job("expire")
    assert (first.counts, second.counts) == ({"expired": 4}, {"expired": 0})
    assert history.objects.filter(id__in=ids, history_change_reason="job.expire").count() == 4


def _records_table_of_this_test() -> None:
    """PostgreSQL: the records table emptied as a new relation for this test's transaction (rolled
    back after it), then its statistics read again once filled (`_analyze`): the walk through the
    table depends on its size in pages and rows, which earlier tests' rolled-back rows would
    otherwise decide."""
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(f"TRUNCATE {MemoryRecord._meta.db_table} CASCADE")


def _analyze() -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {MemoryRecord._meta.db_table}")


def test_records_coming_due_during_a_run_wait_for_the_next_run(make_records):
    make_records(2)
    earlier = timezone.now() - timedelta(hours=3)  # a run that started before they came due
    assert expire(now=earlier, batch_size=10) == {"expired": 0}
    assert MemoryRecord.objects.filter(status=Status.ACTIVE).count() == 2


def test_expiry_writes_in_batches_not_per_record(make_records, django_assert_max_num_queries):
    if connection.vendor == "postgresql":
        # Along the expiry index, per batch of 20 one statement (select and lock, update, copy into
        # history), and a fourth that finds nothing left; through the table, one per range of
        # pages, however many records it holds. Besides, the table's size (and, to choose the
        # walk, the due records counted): one statement per record would be 60 or more.
        for walk, most in (("index", 5), ("blocks", 12)):
            _records_table_of_this_test()
            make_records(60)
            _analyze()
            with django_assert_max_num_queries(most * 3) as captured:
                assert memory_expire_due(actor=ACTOR, now=timezone.now(), batch_size=20, walk=walk) == 60
            batches = [q["sql"] for q in captured.captured_queries if q["sql"].startswith("WITH")]
            assert 0 < len(batches) <= most
            assert all("AS (UPDATE " in sql and "AS (INSERT INTO " in sql for sql in batches)
            assert all(("ctid >=" in sql) == (walk == "blocks") for sql in batches)
            others = {q["sql"].split()[0] for q in captured.captured_queries if not q["sql"].startswith("WITH")}
            assert others <= {"SAVEPOINT", "RELEASE", "SELECT"}  # the SELECTs: the table's size
            assert sum(q["sql"].startswith("SELECT") for q in captured.captured_queries) <= 3
        return
    make_records(60)
    # per batch of 20: a locking read, one UPDATE, one history INSERT, one outbox INSERT (the
    # batch's `memory.expired` events, memory.outbox), and savepoint statements
    with django_assert_max_num_queries(33) as captured:
        assert expire(now=timezone.now(), batch_size=20) == {"expired": 60}
    statements = [query["sql"].split()[0].upper() for query in captured.captured_queries]
    # three full batches, and a fourth locking read that finds nothing left
    assert [s for s in statements if s == "SELECT"] == ["SELECT"] * 4
    assert (statements.count("UPDATE"), statements.count("INSERT")) == (3, 6)


@pytest.mark.postgresql(reason="SQLite walks the expiry index")
def test_postgresql_walks_the_table_when_many_are_due_and_the_index_when_few(
    make_records, history, django_assert_max_num_queries
):
    _records_table_of_this_test()
    make_records(300, expired=False)
    few = make_records(2)
    _analyze()
    with django_assert_max_num_queries(20) as captured:
        assert expire(now=timezone.now(), batch_size=1000) == {"expired": 2}
    assert any("ORDER BY expires_at, id LIMIT" in q["sql"] for q in captured.captured_queries)
    assert not any("ctid >=" in q["sql"] for q in captured.captured_queries)
    many = make_records(300)
    _analyze()
    with django_assert_max_num_queries(40) as captured:
        assert expire(now=timezone.now(), batch_size=1000) == {"expired": 300}
    assert any("ctid >=" in q["sql"] for q in captured.captured_queries)
    rows = history.objects.filter(id__in=few + many, history_change_reason="job.expire")
    assert rows.count() == rows.values("id").distinct().count() == 302


@pytest.mark.parametrize("walk", ["index", "blocks"])
@pytest.mark.postgresql(reason="SQLite has one walk")
def test_either_walk_expires_only_due_active_or_quarantined_records_once(make_records, history, walk):
    due = make_records(7) + make_records(4, status=Status.QUARANTINED)
    kept = make_records(3, expired=False) + make_records(3, status=Status.REJECTED)
    assert memory_expire_due(actor=ACTOR, now=timezone.now(), batch_size=2, walk=walk) == 11
    assert memory_expire_due(actor=ACTOR, now=timezone.now(), batch_size=2, walk=walk) == 0
    assert set(MemoryRecord.objects.filter(pk__in=due).values_list("status", "version")) == {(Status.EXPIRED, 2)}
    assert set(MemoryRecord.objects.filter(pk__in=kept).values_list("version", flat=True)) == {1}
    rows = history.objects.filter(id__in=due + kept, history_change_reason="job.expire")
    assert sorted(rows.values_list("id", flat=True)) == sorted(due)
    assert set(rows.values_list("history_actor", "status", "version")) == {("job:expire", Status.EXPIRED, 2)}


@pytest.mark.parametrize("walk", ["index", "blocks"])
@pytest.mark.postgresql(reason="SQLite has one walk")
def test_max_batches_stops_a_walk_and_the_next_run_goes_on(make_records, history, walk):
    ids = make_records(40)
    first = memory_expire_due(actor=ACTOR, now=timezone.now(), batch_size=5, walk=walk, max_batches=1)
    assert first < 40  # one batch (a range of pages may hold none)
    assert first + memory_expire_due(actor=ACTOR, now=timezone.now(), batch_size=5, walk=walk) == 40
    assert history.objects.filter(id__in=ids, history_change_reason="job.expire").count() == 40


def test_records_sharing_one_expiry_moment_all_expire_across_batches_once_each(make_records, history):
    ids = make_records(23)
    moment = timezone.now() - timedelta(minutes=5)
    MemoryRecord.objects.filter(pk__in=ids).update(created_at=moment - timedelta(hours=1), expires_at=moment)
    # Batches of 5 walk (expires_at, id) past the previous batch: ties on expires_at split by id.
    assert expire(now=timezone.now(), batch_size=5) == {"expired": 23}
    assert MemoryRecord.objects.filter(pk__in=ids, status=Status.EXPIRED).count() == 23
    assert history.objects.filter(id__in=ids, history_change_reason="job.expire").values("id").distinct().count() == 23
    assert history.objects.filter(id__in=ids, history_change_reason="job.expire").count() == 23


@pytest.mark.parametrize("walk", ["index", "blocks"])
@pytest.mark.postgresql(reason="SQLite has one walk")
def test_sharing_one_expiry_moment_either_postgresql_walk_expires_each_once(make_records, history, walk):
    ids = make_records(23)
    moment = timezone.now() - timedelta(minutes=5)
    MemoryRecord.objects.filter(pk__in=ids).update(created_at=moment - timedelta(hours=1), expires_at=moment)
    assert memory_expire_due(actor=ACTOR, now=timezone.now(), batch_size=5, walk=walk) == 23
    assert history.objects.filter(id__in=ids, history_change_reason="job.expire").values("id").distinct().count() == 23
    assert history.objects.filter(id__in=ids, history_change_reason="job.expire").count() == 23
