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

from governance.jobs.expire import expire
from governance.models import JobRun
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
