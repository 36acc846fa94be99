"""Delivery through real parts: a Celery worker and beat as separate processes, the broker of the
environment (Redis in CI, the filesystem broker on a laptop) and the test database."""

import subprocess
import sys
import time

import pytest
from django.db.models import Count

from governance.jobs.locks import job_lock
from governance.jobs.runner import ABANDONED
from governance.models import ForgetRequest, JobRun
from memory.models import MemoryRecord, Status
from tests.processes import ROOT, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_beat_and_worker_expire_a_short_lived_memory_with_no_manual_step(celery_stack, write, history):
    short = write(ttl_seconds=2)
    lasting = write(ttl_seconds=3600)
    celery_stack.start_worker()
    celery_stack.start_beat(JOB_EXPIRE_INTERVAL="1")

    def expired():
        short.refresh_from_db()
        return short.status == Status.EXPIRED

    with celery_stack.explained():
        wait_for(expired, timeout=60, interval=0.25, what="the expire job to run from beat")
        row = history.objects.filter(id=short.pk).latest("history_date")
        assert (row.history_change_reason, row.history_actor, row.status, row.version) == (
            "job.expire",
            "job:expire",
            "expired",
            2,
        )
        assert history.objects.filter(id=short.pk).count() == 2  # the write and the expiry
        run = JobRun.objects.filter(job="expire", status=JobRun.Status.SUCCEEDED, counts__expired=1).get()
        assert run.trigger == "beat" and run.finished_at >= run.started_at
        lasting.refresh_from_db()
        assert lasting.status == Status.ACTIVE and lasting.version == 1


VISIBILITY_TIMEOUT = 3


def test_kill_9_mid_expiry_then_restart_expires_every_record_exactly_once(celery_stack, make_records, history):
    total = 10_000
    ids = make_records(total)
    # Small batches make the run long enough to be killed in the middle; a short visibility
    # timeout lets Redis hand the unacknowledged message to the restarted worker promptly.
    env = {"JOB_BATCH_SIZE": "200", "CELERY_VISIBILITY_TIMEOUT": str(VISIBILITY_TIMEOUT)}
    celery_stack.send("governance.tasks.run_expire", **env)
    worker = celery_stack.start_worker(**env)

    def expired_count() -> int:
        return MemoryRecord.objects.filter(status=Status.EXPIRED).count()

    with celery_stack.explained():
        wait_for(lambda: expired_count() > 0, timeout=60, interval=0.01, what="the first committed batch")
        delivered_before = time.monotonic()  # the worker took the message before its first batch
        celery_stack.kill(worker)
        at_kill = expired_count()
        assert 0 < at_kill < total, f"the kill must land mid-run, {at_kill} of {total} were expired"
        assert JobRun.objects.get(job="expire").status == JobRun.Status.RUNNING  # it died with the worker

        def lock_free() -> bool:  # the database drops the dead worker's session (and its locks)
            with job_lock("expire") as acquired:
                return acquired

        wait_for(lock_free, timeout=20, what="the killed worker's lock to be released")
        if celery_stack.uses_redis:
            # The message was never acknowledged: a starting worker restores unacknowledged
            # messages older than the visibility timeout and runs it. Nobody sends it again.
            time.sleep(max(0.0, VISIBILITY_TIMEOUT + 0.5 - (time.monotonic() - delivered_before)))
        else:
            # The filesystem broker deletes a message when a worker takes it, so it cannot come
            # back; in production beat's next tick does what this second send does.
            celery_stack.send("governance.tasks.run_expire", **env)
        celery_stack.start_worker(**env)
        wait_for(
            lambda: expired_count() == total and JobRun.objects.filter(job="expire", status=JobRun.Status.SUCCEEDED).exists(),
            timeout=90,
            interval=0.2,
            what=f"the restarted worker to finish the expiry ({expired_count()} of {total})",
        )

        assert MemoryRecord.objects.filter(pk__in=ids, status=Status.EXPIRED, version=2).count() == total
        per_record = (
            history.objects.filter(id__in=ids, history_change_reason="job.expire").values("id").annotate(rows=Count("history_id"))
        )
        assert per_record.count() == total
        assert {row["rows"] for row in per_record} == {1}
        killed, finished = JobRun.objects.filter(job="expire").order_by("started_at")[:2]
        assert (killed.status, killed.errors) == (JobRun.Status.FAILED, [ABANDONED])
        assert finished.status == JobRun.Status.SUCCEEDED and finished.counts["expired"] == total - at_kill


def test_two_beats_started_by_mistake_still_run_each_job_once_at_a_time(celery_stack, make_records, history):
    ids = make_records(3000)
    env = {"JOB_EXPIRE_INTERVAL": "1", "JOB_BATCH_SIZE": "100"}
    celery_stack.start_worker(concurrency=2, **env)
    celery_stack.start_beat(**env)
    celery_stack.start_beat(**env)
    with celery_stack.explained():
        wait_for(
            lambda: MemoryRecord.objects.filter(pk__in=ids, status=Status.EXPIRED).count() == len(ids),
            timeout=60,
            interval=0.2,
            what="the expiry to finish",
        )
        wait_for(lambda: JobRun.objects.filter(job="expire").count() >= 4, timeout=30, what="a few more ticks")
        assert history.objects.filter(id__in=ids, history_change_reason="job.expire").count() == len(ids)
        runs = JobRun.objects.filter(job="expire").exclude(status=JobRun.Status.RUNNING)
        assert sum(run.counts.get("expired", 0) for run in runs) == len(ids)
        assert not runs.filter(status=JobRun.Status.FAILED).exists()


def test_a_forget_request_is_propagated_by_the_worker_without_waiting_for_beat(celery_stack, write, tenant, reviewer):
    record = write(subject="customer/soon", content="Soon gone.")
    celery_stack.start_worker()  # and no beat: only the request's own message can start propagation
    script = (
        "from django.contrib.auth import get_user_model; from governance.forget.services import forget_request_create; "
        "from memory.actors import Actor; from memory.models import Tenant; "
        f"forget_request_create(actor=Actor.for_user(get_user_model().objects.get(pk={reviewer.pk})), "
        f"tenant=Tenant.objects.get(pk={tenant.pk}), subject='customer/soon', reason='erasure')"
    )
    subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "shell", "-c", script],
        cwd=ROOT,
        env=celery_stack.env,
        check=True,
        capture_output=True,
        timeout=60,
    )

    def completed():
        # a completed request keeps the subject's fingerprint, not the subject
        return ForgetRequest.objects.filter(tenant=tenant, status=ForgetRequest.Status.COMPLETED).first()

    with celery_stack.explained():
        request = wait_for(completed, timeout=60, interval=0.25, what="propagation sent by the forget request")
        assert request.receipts.count() >= 5
        assert JobRun.objects.get(job="propagate_forgets").trigger == "forget_request"
        record.refresh_from_db()
        assert record.content == "" and record.status == Status.FORGOTTEN
