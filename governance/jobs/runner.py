"""The one way a job runs: under its lock, with a `JobRun` that says when it ran, what it did and
what went wrong, and a structured log line (ids, counts, durations; never content).

A run that finds the lock held records a `skipped` JobRun and does nothing: two beat processes
started by mistake, or a redelivered message racing a live run, cost one row. A run that takes the
lock first marks any `running` JobRun of the same job as failed: holding the lock proves its
worker died (kill -9, OOM) before it could finish the row.
"""

import logging
import time
import traceback
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from governance.jobs.locks import job_lock
from governance.jobs.models import JobRun
from governance.jobs.registry import JOBS, job_function

logger = logging.getLogger("governance.jobs")

ABANDONED = "abandoned: the process running it died before finishing (its lock was free)"


class JobIncomplete(Exception):
    """Raised by a job that did part of its work: the run is `failed`, yet its counts are kept."""

    def __init__(self, counts: dict[str, int], errors: list[str]):
        super().__init__("; ".join(errors))
        self.counts = counts
        self.errors = errors


def describe_error(exc: BaseException) -> str:
    """A one-line error for the JobRun and the log. Database messages may quote row values (and so
    content), so only their class is kept."""
    if isinstance(exc, DatabaseError):
        return f"{type(exc).__name__}: database error (details withheld: they may quote row values)"
    message = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def run_job(name: str, *, trigger: str = "beat", batch_size: int | None = None, now: datetime | None = None) -> JobRun:
    """Run job `name` once, synchronously, and return its JobRun (succeeded, failed or skipped).
    Never raises for a failure of the job itself: the JobRun records it."""
    if name not in JOBS:
        job_function(name)  # raises UnknownJob with the list of names
    batch_size = batch_size or settings.JOB_BATCH_SIZE
    with job_lock(name) as acquired:
        now = now or timezone.now()
        if not acquired:
            run = JobRun.objects.create(
                job=name,
                status=JobRun.Status.SKIPPED,
                started_at=now,
                finished_at=now,
                trigger=trigger,
                errors=["skipped: another run of this job holds its lock"],
            )
            _log(run, duration=0.0)
            return run
        abandoned = JobRun.objects.filter(job=name, status=JobRun.Status.RUNNING).update(
            status=JobRun.Status.FAILED,
            finished_at=now,
            errors=[ABANDONED],
        )
        if abandoned:
            logger.warning("job runs abandoned", extra={"job": name, "abandoned_runs": abandoned})
        run = JobRun.objects.create(job=name, status=JobRun.Status.RUNNING, started_at=now, trigger=trigger)
        started = time.monotonic()
        try:
            counts = job_function(name)(now=now, batch_size=batch_size)
            run.status, run.counts = JobRun.Status.SUCCEEDED, dict(counts or {})
        except JobIncomplete as exc:
            run.status, run.counts, run.errors = JobRun.Status.FAILED, dict(exc.counts), list(exc.errors)
        except Exception as exc:  # the JobRun is the report; the worker must not crash or retry in a loop
            run.status, run.errors = JobRun.Status.FAILED, [describe_error(exc)]
            logger.error(
                "job run raised",
                extra={
                    "job": name,
                    "job_run_id": run.pk,
                    "error": describe_error(exc),
                    "stack": "".join(traceback.format_tb(exc.__traceback__)),
                },
            )
        duration = time.monotonic() - started
        run.finished_at = timezone.now()
        # Saved before the lock is released, so the next holder never sees this run as abandoned.
        run.save(update_fields=["status", "counts", "errors", "finished_at"])
        _log(run, duration=duration)
        return run


def _log(run: JobRun, *, duration: float) -> None:
    level = logging.WARNING if run.status == JobRun.Status.FAILED else logging.INFO
    logger.log(
        level,
        "job run finished",
        extra={
            "job": run.job,
            "job_run_id": run.pk,
            "status": run.status,
            "trigger": run.trigger,
            "duration_ms": round(duration * 1000, 1),
            "counts": run.counts,
            "error_count": len(run.errors),
        },
    )


def job_run_summary(run: JobRun) -> dict[str, Any]:
    """The contract's summary of one run (what `manage.py run_job` prints)."""
    return {
        "job": run.job,
        "id": run.pk,
        "status": run.status,
        "trigger": run.trigger,
        "started_at": run.started_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "counts": run.counts,
        "errors": run.errors,
    }
