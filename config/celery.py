"""The Celery app. Reliability settings live in settings.py (CELERY_*); the schedule lives in the
database, where admins edit it, and beat reads it with django-celery-beat's database scheduler
(governance.jobs.schedule, seeded from settings.JOB_INTERVALS).

With the `semantic` extra installed, a worker (never beat) also prepares semantic recall when it
starts (docs/operations.md):
- the main process loads the model without running it (SEMANTIC_LOAD_AT_START;
  `memory.search.semantic.load_model`), so the pool processes it forks inherit it and share its
  memory pages; each pool process then runs it once (`warm_up`), so the first task that embeds
  does not wait for it;
- once the worker is ready, it queues the build of the semantic index when none was ever built
  (SEMANTIC_AUTO_INDEX; `memory.tasks.request_semantic_index`: built, gated and promoted like any
  other index).
Without the extra each of these does nothing."""

import os
from pathlib import Path
from typing import Any

from celery import Celery, bootsteps
from celery.signals import worker_init, worker_process_init, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("governed_memory")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


class WorkerHeartbeat(bootsteps.StartStopStep):
    """Touches this worker's heartbeat file from the main process's timer while it runs, and removes
    it when the worker stops (`governance.ops.heartbeat`; read by `manage.py probe worker`)."""

    requires = ("celery.worker.components:Timer",)

    def __init__(self, parent, **kwargs) -> None:
        super().__init__(parent, **kwargs)
        self.tref: Any = None
        self.path: Path | None = None

    def start(self, parent) -> None:
        from governance.ops import heartbeat

        path = self.path = heartbeat.path_for("worker", parent.hostname)
        heartbeat.touch(path)
        self.tref = parent.timer.call_repeatedly(heartbeat.interval(), heartbeat.touch, (path,), priority=10)

    def stop(self, parent) -> None:
        from governance.ops import heartbeat

        if self.tref is not None:
            self.tref.cancel()
        if self.path is not None:
            heartbeat.remove(self.path)


app.steps["worker"].add(WorkerHeartbeat)


def _load_at_start() -> bool:
    from django.conf import settings

    return settings.SEMANTIC_LOAD_AT_START


@worker_init.connect(dispatch_uid="config-celery-semantic-load")
def _load_semantic_model(**kwargs) -> None:
    """The worker's main process, before it forks its pool: load the model, never run it."""
    if _load_at_start():
        from memory.search import semantic

        semantic.load_model()


@worker_process_init.connect(dispatch_uid="config-celery-semantic-warm-up")
def _warm_up_semantic_model(**kwargs) -> None:
    """Each pool process, as it starts: run the (inherited) model once."""
    if _load_at_start():
        from memory.search import semantic

        semantic.warm_up()


@worker_ready.connect(dispatch_uid="config-celery-semantic-index")
def _request_semantic_index(**kwargs) -> None:
    """The main process, once ready: queue the semantic index's first build if it is due."""
    from django.db import connections

    from memory.tasks import request_semantic_index

    try:
        request_semantic_index()
    finally:
        connections.close_all()  # a pool process forked later must not inherit this connection
