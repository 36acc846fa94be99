"""The expire job's logic, called through the run wrapper (lock + JobRun) in-process."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from governance.jobs import run_job
from governance.jobs.expire import expire
from governance.models import JobRun
from memory.models import MemoryRecord, Status

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


def test_records_coming_due_during_a_run_wait_for_the_next_run(make_records):
    make_records(2)
    earlier = timezone.now() - timedelta(hours=3)  # a run that started before they came due
    assert expire(now=earlier, batch_size=10) == {"expired": 0}
    assert MemoryRecord.objects.filter(status=Status.ACTIVE).count() == 2


def test_expiry_writes_in_batches_not_per_record(make_records, django_assert_max_num_queries):
    make_records(60)
    # per batch of 20: a locking read, one UPDATE, one history INSERT (and savepoint statements);
    # one statement per record would be 60 or more
    with django_assert_max_num_queries(30) as captured:
        assert expire(now=timezone.now(), batch_size=20) == {"expired": 60}
    statements = [query["sql"].split()[0].upper() for query in captured.captured_queries]
    # three full batches, and a fourth locking read that finds nothing left
    assert [s for s in statements if s == "SELECT"] == ["SELECT"] * 4
    if connection.vendor == "postgresql":  # per batch one statement: update, copy into history
        batches = [q["sql"] for q in captured.captured_queries if q["sql"].startswith("WITH")]
        assert len(batches) == 3 and all("AS (UPDATE " in sql and " INSERT INTO " in sql for sql in batches)
    else:
        assert (statements.count("UPDATE"), statements.count("INSERT")) == (3, 3)


def test_records_sharing_one_expiry_moment_all_expire_across_batches_once_each(make_records, history):
    ids = make_records(23)
    moment = timezone.now() - timedelta(minutes=5)
    MemoryRecord.objects.filter(pk__in=ids).update(created_at=moment - timedelta(hours=1), expires_at=moment)
    # Batches of 5 walk (expires_at, id) past the previous batch: ties on expires_at split by id.
    assert expire(now=timezone.now(), batch_size=5) == {"expired": 23}
    assert MemoryRecord.objects.filter(pk__in=ids, status=Status.EXPIRED).count() == 23
    assert history.objects.filter(id__in=ids, history_change_reason="job.expire").values("id").distinct().count() == 23
    assert history.objects.filter(id__in=ids, history_change_reason="job.expire").count() == 23
