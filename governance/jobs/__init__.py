"""The scheduled jobs' machinery: a registry from job name to job function and task name (in
`registry`), and (in `runner`) the one wrapper every run goes through, from beat or from
`manage.py run_job`: it takes the job's lock (`locks`), records a `JobRun` (`models`) and logs a
structured line. `schedule` keeps beat's schedule rows, `health` says which jobs went stale,
`selectors` reads the last runs and `admin` shows runs and schedule. The job functions live with
their features (governance.retention, governance.forget, governance.dedup, ...); nothing here
imports them.

A job function is `def job(*, now, batch_size) -> dict[str, int]`: it selects its work by state
and cutoff, works in chunks that each commit, skips what is already done (so a redelivered or
doubled run does no harm) and returns counts. Functions are named by import path and imported when
a run starts, so a job whose module is missing fails that run clearly (a failed `JobRun` saying
so) instead of breaking every import of this package.
"""

from governance.jobs.registry import JOBS, JobFunction, JobUnavailable, UnknownJob, job_function
from governance.jobs.runner import JobIncomplete, job_run_summary, run_job

__all__ = [
    "JOBS",
    "JobFunction",
    "JobIncomplete",
    "JobUnavailable",
    "UnknownJob",
    "job_function",
    "job_run_summary",
    "run_job",
]
