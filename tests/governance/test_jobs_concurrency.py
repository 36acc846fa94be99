"""Two runs of a job at the same time do the work once: as two operating-system processes (two
`manage.py run_job`, the way two beats or a beat and an operator would collide), and, below the
lock, as two threads calling the job function directly (row locks that skip what the other holds)."""

import json
import os
import subprocess
import sys
import threading

import pytest
from django.db import connection

from governance.models import JobRun
from governance.retention.expire import ACTOR, expire
from memory.models import MemoryRecord, Status
from tests.processes import ROOT, database_url_for_subprocesses

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_concurrent_run_job_processes_expire_each_record_once(make_records, history, tmp_path):
    ids = make_records(2000)
    env = {**os.environ, "DATABASE_URL": database_url_for_subprocesses(), "APP_VAR_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, str(ROOT / "manage.py"), "run_job", "expire", "--batch-size", "100"]
    processes = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [process.communicate(timeout=120) for process in processes]
    assert [process.returncode for process in processes] == [0, 0], outputs
    summaries = [json.loads(stdout.strip().splitlines()[-1]) for stdout, _ in outputs]

    assert sum(summary["counts"].get("expired", 0) for summary in summaries) == len(ids)
    assert {summary["status"] for summary in summaries} <= {"succeeded", "skipped"}
    assert MemoryRecord.objects.filter(pk__in=ids, status=Status.EXPIRED, version=2).count() == len(ids)
    assert history.objects.filter(id__in=ids, history_change_reason="job.expire").count() == len(ids)
    assert JobRun.objects.filter(job="expire").count() == 2


def test_even_without_the_lock_concurrent_expiry_transitions_each_record_once(make_records, history):
    ids = make_records(1500)
    now = MemoryRecord.objects.latest("expires_at").expires_at
    barrier = threading.Barrier(3)
    results: list[int] = []

    def run() -> None:
        barrier.wait()
        try:
            results.append(expire(now=now, batch_size=50)["expired"])
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(results) == len(ids)
    assert history.objects.filter(id__in=ids, history_change_reason="job.expire").count() == len(ids)
    assert MemoryRecord.objects.filter(pk__in=ids, version=2).count() == len(ids)


@pytest.mark.parametrize("walk", [None, "index", "blocks"])
@pytest.mark.postgresql(reason="SQLite has one writer at a time: no transaction holds a record while the job runs")
def test_a_record_a_reviewer_is_transitioning_during_the_run_keeps_the_reviewers_transition_only(
    make_records, history, reviewer_actor, walk
):
    """The run skips the record the reviewer's open transaction holds, without waiting for it, and
    the reviewer's transition is its only one: one history row, no `job.expire` beside it."""
    from django.db import transaction

    from memory.services import memory_expire_due, memory_retire

    ids = make_records(30)
    held = ids[11]
    holding, release, committed = threading.Event(), threading.Event(), threading.Event()

    def reviewer() -> None:
        try:
            with transaction.atomic():
                memory_retire(record_id=held, expected_version=1, actor=reviewer_actor)
                holding.set()
                release.wait(15)
            committed.set()
        finally:
            connection.close()

    thread = threading.Thread(target=reviewer)
    thread.start()
    try:
        assert holding.wait(15)
        now = MemoryRecord.objects.latest("expires_at").expires_at
        assert memory_expire_due(actor=ACTOR, now=now, batch_size=4, walk=walk) == 29
        assert not committed.is_set()  # the run did not wait for the reviewer
    finally:
        release.set()
        thread.join(20)
    assert committed.is_set()
    rows = history.objects.filter(id=held, version=2)
    assert list(rows.values_list("history_change_reason", "status")) == [("review.retire", Status.EXPIRED)]
    assert not history.objects.filter(id=held, history_change_reason="job.expire").exists()
    others = [pk for pk in ids if pk != held]
    assert history.objects.filter(id__in=others, history_change_reason="job.expire").count() == 29
    assert MemoryRecord.objects.filter(pk__in=ids, status=Status.EXPIRED, version=2).count() == 30
    # The next run finds nothing: the retired record is no longer due.
    assert memory_expire_due(actor=ACTOR, now=now, walk=walk) == 0
