"""Celery tasks, one per scheduled job, made from the job registry: each runs its job once through
`governance.jobs.run_job` (lock + JobRun) and returns its summary. A task takes only the trigger
the JobRun records (beat sends none: "beat"; the admin's "Run now" sends "admin"; a forget request
sends `propagate_forgets` at once with "forget_request", and a restore `disk_rewrite` with
"restore") and is safe to deliver twice: the lock skips a concurrent duplicate, and every job
selects its work by state, so a repeat finds nothing left to do.

Each task is named `governance.tasks.run_<job>` (governance.jobs.registry.task_name) and bound
here under that last part (`run_expire`, ...). Beat sends them by name (governance/jobs/schedule.py),
and its schedule rows in the database keep the names: they never change.
"""

from typing import Any

from celery import Task, shared_task

from governance.jobs import JOBS, job_run_summary, run_job
from governance.jobs.registry import task_name


def _job_task(job: str) -> Task:
    def run(trigger: str = "beat") -> dict[str, Any]:
        return job_run_summary(run_job(job, trigger=trigger))

    run.__name__ = run.__qualname__ = f"run_{job}"
    run.__doc__ = f"Run the `{job}` job once (governance.jobs.run_job) and return the run's summary."
    return shared_task(name=task_name(job))(run)


# job name -> its task
JOB_TASKS: dict[str, Task] = {job: _job_task(job) for job in JOBS}
globals().update({f"run_{job}": task for job, task in JOB_TASKS.items()})
