"""Reads of the job runs for the reviewer home page and the dashboard."""

from django.conf import settings
from django.db.models import OuterRef, Subquery

from governance.jobs.models import JobRun


def last_job_runs() -> list[dict]:
    """The latest run and the latest successful run of every scheduled job, in two queries; a job
    that never ran is listed too: `{"job", "run", "last_success"}`."""

    def latest(**filters) -> dict[str, JobRun]:
        newest = JobRun.objects.filter(job=OuterRef("job"), **filters).order_by("-started_at", "-pk").values("pk")[:1]
        return {run.job: run for run in JobRun.objects.filter(pk=Subquery(newest))}

    runs, successes = latest(), latest(status=JobRun.Status.SUCCEEDED)
    names = list(settings.JOB_INTERVALS) + sorted(set(runs) - set(settings.JOB_INTERVALS))
    return [{"job": name, "run": runs.get(name), "last_success": successes.get(name)} for name in names]
