"""The run wrapper every job goes through: lock, JobRun, errors, and the registry that names the
jobs beat schedules."""

import logging
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from config.celery import app as celery_app
from governance import jobs
from governance.jobs import JOBS, JobIncomplete, UnknownJob, job_run_summary, run_job
from governance.jobs.locks import job_lock
from governance.jobs.runner import ABANDONED
from governance.jobs.schedule import JobScheduler
from governance.jobs.selectors import last_job_runs
from governance.models import JobRun
from memory.models import MemoryRecord, Status

pytestmark = pytest.mark.django_db


def test_every_scheduled_job_has_a_registry_entry_a_task_and_a_beat_entry():
    assert set(settings.JOB_INTERVALS) == set(JOBS)
    celery_app.loader.import_default_modules()
    for name in JOBS:
        assert f"governance.tasks.run_{name}" in celery_app.tasks
    schedule = JobScheduler(app=celery_app, lazy=True).all_as_schedule()  # what beat's database scheduler reads
    for name, interval in settings.JOB_INTERVALS.items():
        entry = schedule[f"job-{name}"]
        assert (entry.task, entry.schedule.run_every.total_seconds()) == (f"governance.tasks.run_{name}", float(interval))


def test_a_run_finding_the_lock_held_is_recorded_as_skipped_and_does_nothing(make_records):
    ids = make_records(3)
    with job_lock("expire") as acquired:
        assert acquired
        run = run_job("expire")
    assert run.status == JobRun.Status.SKIPPED and run.counts == {} and "lock" in run.errors[0]
    assert MemoryRecord.objects.filter(pk__in=ids, status=Status.ACTIVE).count() == 3
    assert run_job("expire").counts == {"expired": 3}  # the lock was released


def test_locks_are_per_job():
    with job_lock("expire") as expire_lock, job_lock("prune") as prune_lock:
        assert expire_lock and prune_lock
        with job_lock("expire") as second_expire_lock:
            assert not second_expire_lock


def test_a_run_left_running_by_a_dead_worker_is_marked_failed_by_the_next_run():
    dead = JobRun.objects.create(job="expire", status=JobRun.Status.RUNNING, started_at=timezone.now() - timedelta(minutes=5))
    other_job = JobRun.objects.create(job="prune", status=JobRun.Status.RUNNING, started_at=timezone.now())
    run = run_job("expire")
    dead.refresh_from_db()
    other_job.refresh_from_db()
    assert (dead.status, dead.errors) == (JobRun.Status.FAILED, [ABANDONED]) and dead.finished_at is not None
    assert other_job.status == JobRun.Status.RUNNING  # only the job whose lock was taken
    assert run.status == JobRun.Status.SUCCEEDED


def test_a_job_that_raises_leaves_a_failed_run_with_a_content_free_error(monkeypatch, caplog):
    def explode(*, now, batch_size):
        raise RuntimeError("disk full")

    monkeypatch.setattr("governance.retention.expire.expire", explode)
    with caplog.at_level(logging.INFO, logger="governance.jobs"):
        run = run_job("expire")
    assert run.status == JobRun.Status.FAILED and run.errors == ["RuntimeError: disk full"]
    assert run.finished_at is not None
    failed_line = next(r for r in caplog.records if r.getMessage() == "job run raised")
    assert failed_line.job == "expire" and "runner.py" in failed_line.stack


def test_database_errors_are_recorded_by_class_only(monkeypatch):
    from django.db import IntegrityError

    def violate(*, now, batch_size):
        raise IntegrityError("duplicate key value violates unique constraint DETAIL: Key (content)=(secret words)")

    monkeypatch.setattr("governance.retention.expire.expire", violate)
    run = run_job("expire")
    assert run.status == JobRun.Status.FAILED
    assert "secret words" not in run.errors[0] and run.errors[0].startswith("IntegrityError")


def test_a_partly_done_job_keeps_its_counts_and_errors(monkeypatch):
    def partial(*, now, batch_size):
        raise JobIncomplete({"requests_completed": 2, "requests_failed": 1}, ["forget request x: boom"])

    monkeypatch.setattr("governance.retention.expire.expire", partial)
    run = run_job("expire")
    assert (run.status, run.counts, run.errors) == (
        JobRun.Status.FAILED,
        {"requests_completed": 2, "requests_failed": 1},
        ["forget request x: boom"],
    )


def test_a_job_whose_module_is_missing_fails_its_run_clearly_not_the_import(monkeypatch):
    monkeypatch.setitem(JOBS, "ghost", "governance.no_such_module.ghost_job")
    run = run_job("ghost")
    assert run.status == JobRun.Status.FAILED
    assert run.errors[0].startswith("JobUnavailable: Job 'ghost' cannot be loaded from governance.no_such_module.ghost_job")


def test_an_unknown_job_name_is_refused_without_a_run():
    with pytest.raises(UnknownJob, match=r"known jobs: (\w+, )*expire, "):
        run_job("nope")
    assert not JobRun.objects.exists()


def test_summary_has_the_contract_fields_and_latest_runs_per_job(make_records):
    make_records(1)
    failed = JobRun.objects.create(
        job="expire",
        status=JobRun.Status.FAILED,
        started_at=timezone.now() - timedelta(hours=1),
        finished_at=timezone.now() - timedelta(hours=1),
    )
    run = run_job("expire", trigger="run_job")
    summary = job_run_summary(run)
    assert {"job", "started_at", "finished_at", "counts", "errors"} <= set(summary)
    assert (summary["job"], summary["counts"], summary["errors"]) == ("expire", {"expired": 1}, [])
    statuses = {status["job"]: status for status in last_job_runs()}
    assert set(statuses) == set(jobs.JOBS)
    assert statuses["expire"]["run"] == run and statuses["expire"]["last_success"] == run
    assert failed.pk != run.pk and statuses["prune"]["run"] is None
