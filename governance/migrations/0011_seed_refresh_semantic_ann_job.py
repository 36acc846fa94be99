"""The refresh_semantic_ann job (a semantic index's approximate nearest-neighbour partitions kept
close to the table) gets its periodic task, seeded like the jobs of migration 0006
(JOB_REFRESH_SEMANTIC_ANN_INTERVAL, else every 600 s). A database where beat already scheduled it
keeps its row."""

from importlib import import_module

from django.db import migrations

JOB_SCHEDULE = import_module("governance.migrations.0006_seed_job_schedule")
DEFAULTS = {"refresh_semantic_ann": 600}


def seed(apps, schema_editor):
    JOB_SCHEDULE.seed_jobs(apps, DEFAULTS)


def unseed(apps, schema_editor):
    names = [JOB_SCHEDULE.entry_name(job) for job in DEFAULTS]
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name__in=names).delete()


class Migration(migrations.Migration):
    dependencies = [("governance", "0010_seed_sweep_indexes_job")]

    operations = [migrations.RunPython(seed, unseed)]
