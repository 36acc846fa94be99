"""The Celery app. Reliability settings live in settings.py (CELERY_*); the schedule is built here
from settings.JOB_INTERVALS so a demo or a test can run every job every few seconds."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("governed_memory")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_finalize.connect
def _install_beat_schedule(sender: Celery, **kwargs) -> None:
    from django.conf import settings

    sender.conf.beat_schedule = {
        f"job-{name}": {
            "task": f"governance.tasks.run_{name}",
            "schedule": float(interval),
            # A tick nobody ran before the next one is due is dropped rather than piled up behind
            # a stopped worker: the next tick does the same work (jobs select by state).
            "options": {"expires": max(float(interval), 1.0)},
        }
        for name, interval in settings.JOB_INTERVALS.items()
        if interval and float(interval) > 0
    }
