"""The scheduled jobs: a registry from job name to job function, and (in `runner`) the one wrapper
every run goes through, from beat or from `manage.py run_job`: it takes the job's lock, records a
`JobRun` and logs a structured line.

A job function is `def job(*, now, batch_size) -> dict[str, int]`: it selects its work by state
and cutoff, works in chunks that each commit, skips what is already done (so a redelivered or
doubled run does no harm) and returns counts. Functions are named by import path and imported when
a run starts, so a job whose module is missing fails that run clearly (a failed `JobRun` saying
so) instead of breaking every import of this package.
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


# The runner imports the registry above, so it is imported last.
from governance.jobs.runner import JobIncomplete, job_run_summary, run_job  # noqa: E402

__all__ = [
    "JOBS", "JobFunction", "JobIncomplete", "JobUnavailable", "UnknownJob",
    "job_function", "job_run_summary", "run_job",
]
