"""The job schedule: one django-celery-beat `PeriodicTask` per job (named `job-<name>`, sending
`governance.tasks.run_<name>`), which beat's database scheduler reads and admins see and edit in
the admin (Periodic tasks). A change there reaches a running beat within seconds.

Where the rows come from:
- migration governance 0006 seeds them from `settings.JOB_INTERVALS` (the `JOB_<NAME>_INTERVAL`
  variables, else `JOB_INTERVAL_DEFAULTS`); an interval of 0 seeds the job disabled;
- beat, at each start (`JobScheduler`), creates a job's row again if it is missing, and writes the
  interval of every `JOB_<NAME>_INTERVAL` *set in its environment* into that job's row: a variable
  pins its job (a demo or a test can still run a job every second); an unset one leaves the row
  to the admin.

Beat only sends the task; the job's lock (governance.jobs.locks) still makes sure one run of a job
happens at a time, whatever sends it (two beats, a redelivery, a "Run now" in the admin).
"""

import copy
import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, cast

from celery import current_app, schedules
from celery.contrib.django.task import DjangoTask
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask, PeriodicTasks
from django_celery_beat.schedulers import DatabaseScheduler, ModelEntry

from governance.jobs.registry import JOBS, job_of_task, task_name
from governance.ops import heartbeat

ENTRY_PREFIX = "job-"


def entry_name(job: str) -> str:
    return f"{ENTRY_PREFIX}{job}"


def seed_job_schedule(
    periodic_task_model,
    interval_model,
    *,
    intervals: Mapping[str, float],
    defaults: Mapping[str, float],
    overwrite: set[str] | frozenset = frozenset(),
) -> list[str]:
    """Create the row of every job in `intervals` that has none, and set the interval of the jobs in
    `overwrite`; returns the jobs it wrote. Takes the models as arguments so a migration can pass its
    historical ones. An interval of 0 (off) keeps the job's default interval, disabled."""
    written = []
    # A job's row is found by the task it sends, so a row an admin renamed is still the job's (and
    # not joined by a second one sending the same task); the row named `job-<name>` first.
    existing: dict[str, Any] = {}  # rows of the model passed in, current or historical
    rows = periodic_task_model.objects.filter(task__in=[task_name(j) for j in intervals]).order_by("pk")
    for row in sorted(rows, key=lambda row: row.name != entry_name(job_of_task(row.task) or "")):
        existing.setdefault(row.task, row)
    for job, seconds in intervals.items():
        row = existing.get(task_name(job))
        if row is not None and job not in overwrite:
            continue
        enabled = bool(seconds) and seconds > 0
        every = max(1, math.ceil(seconds if enabled else defaults.get(job) or 1))
        interval = interval_model.objects.filter(every=every, period="seconds").order_by(
            "pk"
        ).first() or interval_model.objects.create(every=every, period="seconds")
        fields = {
            "task": task_name(job),
            "interval": interval,
            "crontab": None,
            "solar": None,
            "clocked": None,
            "enabled": enabled,
        }
        if row is None:
            periodic_task_model.objects.create(
                name=entry_name(job),
                description=describe(job),
                **fields,
            )
        else:
            for field, value in fields.items():
                setattr(row, field, value)
            row.save()
        written.append(job)
    return written


def describe(job: str) -> str:
    variable = settings.JOB_INTERVAL_VARIABLES.get(job, f"JOB_{job.upper()}_INTERVAL")
    default = settings.JOB_INTERVAL_DEFAULTS.get(job)
    return (
        f"Scheduled job {job}: seeded from {variable} (default {default} s). When {variable} is set in beat's "
        "environment, beat writes it here at each start; otherwise this row decides."
    )


def ensure_job_schedule(*, pinned: set[str] | None = None) -> list[str]:
    """What beat does at start: create missing rows from `settings.JOB_INTERVALS` and pin the jobs
    whose variable is set in the environment (`settings.JOB_INTERVALS_FROM_ENV`)."""
    pinned = set(settings.JOB_INTERVALS_FROM_ENV if pinned is None else pinned)
    intervals = {job: float(settings.JOB_INTERVALS.get(job, settings.JOB_INTERVAL_DEFAULTS.get(job, 0))) for job in JOBS}
    with transaction.atomic():
        written = seed_job_schedule(
            PeriodicTask, IntervalSchedule, intervals=intervals, defaults=settings.JOB_INTERVAL_DEFAULTS, overwrite=pinned
        )
    if written:
        PeriodicTasks.update_changed()
    return written


def set_job_intervals(intervals: dict[str, float]) -> None:
    """Set jobs' intervals (seconds; 0 disables) as an admin would."""
    with transaction.atomic():
        seed_job_schedule(
            PeriodicTask, IntervalSchedule, intervals=intervals, defaults=settings.JOB_INTERVAL_DEFAULTS, overwrite=set(intervals)
        )
        # Jobs not named are off, so a caller states the whole schedule.
        PeriodicTask.objects.filter(task__in=[task_name(job) for job in JOBS if job not in intervals]).update(enabled=False)
    PeriodicTasks.update_changed()


CRONTAB_PROBE_SPAN = timedelta(days=8)
CRONTAB_PROBE_MAX_RUNS = 12_000  # every minute for eight days


def period_seconds(schedule: schedules.BaseSchedule) -> float | None:
    """The longest time between two runs of a schedule: its interval, or for a crontab the longest
    gap among its next runs. None for schedules without a period (solar, clocked)."""
    if isinstance(schedule, schedules.crontab):
        probe = copy.copy(schedule)
        start = moment = timezone.now()
        gaps: list[float] = []
        previous: datetime | None = None
        # Every run over the next eight days (so a weekend gap is seen whatever today is), and at
        # least two; capped for schedules that run every minute.
        for _ in range(CRONTAB_PROBE_MAX_RUNS):
            probe.nowfun = lambda moment=moment: moment  # type: ignore[attr-defined]  # celery-types misspells it nowfunc
            moment = moment + probe.remaining_estimate(moment) + timedelta(seconds=1)
            if previous is not None:
                gaps.append((moment - previous).total_seconds())
            previous = moment
            if gaps and moment - start > CRONTAB_PROBE_SPAN:
                break
        return max(gaps)
    if isinstance(schedule, schedules.schedule):
        return schedule.run_every.total_seconds()  # type: ignore[attr-defined]  # set by __init__; celery-types lacks it
    return None


def scheduled_intervals() -> dict[str, float]:
    """{job: seconds between runs} of every job beat runs now (enabled rows), in registry order."""
    rows = PeriodicTask.objects.filter(enabled=True, task__in=[task_name(job) for job in JOBS]).select_related(
        "interval", "crontab", "solar", "clocked"
    )
    found: dict[str, float] = {}
    for row in rows:
        job = job_of_task(row.task)
        period = period_seconds(row.schedule)
        if job and period:
            found[job] = min(found.get(job, period), period)
    return {job: found[job] for job in JOBS if job in found}


def enqueue_job(job: str, *, trigger: str) -> None:
    """Send the task beat sends for `job` (once the current transaction commits), with `trigger`
    recorded on its JobRun. The job's lock still allows one run at a time."""
    current_app.loader.import_default_modules()
    # Celery's Django fixup makes every task of this app a DjangoTask.
    task = cast("DjangoTask[..., Any]", current_app.tasks[task_name(job)])
    task.delay_on_commit(trigger=trigger)


class JobEntry(ModelEntry):
    def __init__(self, model, app=None):
        super().__init__(model, app=app)
        # A tick nobody ran before the next one is due is dropped rather than piled up behind a
        # stopped worker: the next tick does the same work (jobs select by state).
        if "expires" not in self.options and job_of_task(self.task):
            period = period_seconds(self.schedule)
            if period:
                self.options["expires"] = max(period, 1.0)


class JobScheduler(DatabaseScheduler):
    """django-celery-beat's database scheduler, which first makes sure every job has its row."""

    Entry = JobEntry

    def setup_schedule(self):
        ensure_job_schedule()
        # The library notices a change only after a change it has seen; with none recorded yet (rows
        # written by the seed migration), an admin's first edit would wait for its 5-minute full sync.
        PeriodicTasks.update_changed()
        super().setup_schedule()

    def tick(self, *args, **kwargs):
        # beat's liveness: each tick touches its heartbeat file (`manage.py probe beat`)
        heartbeat.touch(heartbeat.path_for("beat"))
        return super().tick(*args, **kwargs)

    def install_default_entries(self, data):
        # The only default entry is celery.backend_cleanup, for a result backend this app does not use.
        pass
