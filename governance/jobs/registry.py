"""The job registry: job name -> the import path of its function, the name of the Celery task
that runs it, and the lookup that imports the function.

A leaf module (it imports nothing from the project): the runner, the schedule and the tasks
(governance.tasks) depend on it, and each feature's job function lives in its feature, named here
by path, so the jobs machinery imports no feature.
"""

from collections.abc import Callable

from django.utils.module_loading import import_string

JobFunction = Callable[..., dict[str, int]]

JOBS: dict[str, str] = {
    "expire": "governance.retention.expire.expire",
    "propagate_forgets": "governance.forget.jobs.propagate_forgets",
    "propose_duplicates": "governance.dedup.jobs.propose_duplicates",
    "prune": "governance.retention.prune.prune",
    "golden_recall": "governance.golden.jobs.golden_recall",
    "disk_rewrite": "governance.portability.jobs.disk_rewrite",
    "alerts": "governance.alerts.jobs.alerts",
    "sweep_indexes": "governance.retention.sweep_indexes.sweep_indexes",
    "refresh_semantic_ann": "governance.retention.refresh_ann.refresh_semantic_ann",
    "deliver_webhooks": "governance.events.delivery.deliver_webhooks",
}

# Every job's Celery task is named after it. The names are stored in the database (beat's schedule
# rows, seeded by migration governance 0006), so they never change.
TASK_PREFIX = "governance.tasks.run_"


def task_name(job: str) -> str:
    return f"{TASK_PREFIX}{job}"


def job_of_task(task: str) -> str | None:
    """The job a task name runs, or None for a task that is not one of the scheduled jobs."""
    job = task.removeprefix(TASK_PREFIX) if task.startswith(TASK_PREFIX) else None
    return job if job in JOBS else None


class UnknownJob(LookupError):
    pass


class JobUnavailable(RuntimeError):
    """The job's function cannot be imported (its module is missing or broken)."""


def job_function(name: str) -> JobFunction:
    try:
        path = JOBS[name]
    except KeyError:
        raise UnknownJob(f"Unknown job {name!r}; known jobs: {', '.join(sorted(JOBS))}.") from None
    try:
        return import_string(path)
    except ImportError as exc:
        raise JobUnavailable(f"Job {name!r} cannot be loaded from {path}: {exc}") from exc
