"""The Celery app. Reliability settings live in settings.py (CELERY_*); the schedule lives in the
database, where admins edit it, and beat reads it with django-celery-beat's database scheduler
(governance.jobs.schedule, seeded from settings.JOB_INTERVALS)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("governed_memory")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
