"""The job schedule moves from environment variables to django-celery-beat's tables, where admins
see and edit it: one periodic task per job, seeded from settings.JOB_INTERVALS (the JOB_*_INTERVAL
variables, else their defaults). A job already scheduled there is left as it is."""

from django.conf import settings
from django.db import migrations


def seed(apps, schema_editor):
    from governance.jobs.schedule import seed_job_schedule

    seed_job_schedule(
        apps.get_model("django_celery_beat", "PeriodicTask"),
        apps.get_model("django_celery_beat", "IntervalSchedule"),
        intervals={job: float(seconds) for job, seconds in settings.JOB_INTERVALS.items()},
        defaults=settings.JOB_INTERVAL_DEFAULTS,
    )


def unseed(apps, schema_editor):
    from governance.jobs.schedule import entry_name

    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(
        name__in=[entry_name(job) for job in settings.JOB_INTERVALS]
    ).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0005_revocations_alerts_and_digests"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(seed, unseed)]
