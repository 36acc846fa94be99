"""The job schedule moves from environment variables to django-celery-beat's tables, where admins
see and edit it: one periodic task per job, seeded from the JOB_*_INTERVAL variables (as read by
settings.JOB_INTERVALS), else the defaults below. A job already scheduled there is left as it is.

Frozen: the jobs, their task names and defaults are the ones this migration was written for, held
here literally; jobs added since are scheduled by `governance.jobs.schedule.ensure_job_schedule`
when beat starts."""

import math

from django.conf import settings
from django.db import migrations

DEFAULTS = {
    "expire": 60,
    "propagate_forgets": 30,
    "propose_duplicates": 3600,
    "prune": 6 * 3600,
    "golden_recall": 86400,
    "disk_rewrite": 3600,
    "alerts": 300,
}


def task_name(job):
    return f"governance.tasks.run_{job}"


def entry_name(job):
    return f"job-{job}"


def seed(apps, schema_editor):
    seed_jobs(apps, DEFAULTS)


def seed_jobs(apps, defaults):
    """A periodic task for each job of `defaults` that has none (migration 0010 seeds a later job)."""
    periodic_task = apps.get_model("django_celery_beat", "PeriodicTask")
    interval_model = apps.get_model("django_celery_beat", "IntervalSchedule")
    scheduled = set(periodic_task.objects.filter(task__in=[task_name(job) for job in defaults]).values_list("task", flat=True))
    for job, default in defaults.items():
        if task_name(job) in scheduled:
            continue
        seconds = float(getattr(settings, "JOB_INTERVALS", {}).get(job, default))
        enabled = seconds > 0
        every = max(1, math.ceil(seconds if enabled else default))
        interval = interval_model.objects.filter(every=every, period="seconds").order_by("pk").first()
        if interval is None:
            interval = interval_model.objects.create(every=every, period="seconds")
        variable = f"JOB_{job.upper()}_INTERVAL"
        periodic_task.objects.create(
            name=entry_name(job),
            task=task_name(job),
            interval=interval,
            enabled=enabled,
            description=(
                f"Scheduled job {job}: seeded from {variable} (default {default} s). When {variable} is set in beat's "
                "environment, beat writes it here at each start; otherwise this row decides."
            ),
        )


def unseed(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name__in=[entry_name(job) for job in DEFAULTS]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0005_revocations_alerts_and_digests"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(seed, unseed)]
