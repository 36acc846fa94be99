"""The job registry: job name -> the import path of its function, and the lookup that imports it.

A leaf module (it imports nothing from the project): the runner and the schedule depend on it, and
the package re-exports both without an import cycle.
"""

from collections.abc import Callable

from django.utils.module_loading import import_string

JobFunction = Callable[..., dict[str, int]]

JOBS: dict[str, str] = {
    "expire": "governance.jobs.expire.expire",
    "propagate_forgets": "governance.jobs.propagate_forgets.propagate_forgets",
    "propose_duplicates": "governance.dedup.jobs.propose_duplicates",
    "prune": "governance.jobs.prune.prune",
    "golden_recall": "governance.golden.jobs.golden_recall",
    "disk_rewrite": "governance.jobs.disk_rewrite.disk_rewrite",
    "alerts": "governance.alerts.jobs.alerts",
    "sweep_indexes": "governance.jobs.sweep_indexes.sweep_indexes",
}


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
