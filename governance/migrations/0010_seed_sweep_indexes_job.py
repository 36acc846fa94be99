"""The sweep_indexes job (search-index entries of records expired in time) gets its periodic task,
seeded like the jobs of migration 0006 (JOB_SWEEP_INDEXES_INTERVAL, else every 300 s). A database
where beat already scheduled it keeps its row."""

from importlib import import_module

from django.db import migrations

JOB_SCHEDULE = import_module("governance.migrations.0006_seed_job_schedule")
DEFAULTS = {"sweep_indexes": 300}


def seed(apps, schema_editor):
    JOB_SCHEDULE.seed_jobs(apps, DEFAULTS)


def unseed(apps, schema_editor):
    names = [JOB_SCHEDULE.entry_name(job) for job in DEFAULTS]
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name__in=names).delete()


class Migration(migrations.Migration):
    dependencies = [("governance", "0009_receipt_completed_when_done")]

    operations = [migrations.RunPython(seed, unseed)]
