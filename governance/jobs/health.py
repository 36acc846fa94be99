"""Whether the schedule runs: a job is stale when its last successful beat run is older than
JOB_STALE_AFTER_FACTOR x its interval + JOB_STALE_GRACE_SECONDS; a job that never succeeded is
measured from the first run beat ever recorded. /health/ reports it, and the `alerts` job alerts
on it."""

from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Min
from django.utils import timezone

from governance.jobs.models import JobRun
from governance.jobs.schedule import scheduled_intervals


def check_scheduler(now: datetime | None = None) -> dict[str, Any]:
    now = now or timezone.now()
    try:
        scheduled = scheduled_intervals()  # what beat runs now: the schedule admins edit
        beat_runs = JobRun.objects.filter(trigger="beat")
        first_seen = beat_runs.aggregate(first=Min("started_at"))["first"]
        last_success = {
            job: beat_runs.filter(job=job, status=JobRun.Status.SUCCEEDED)
            .order_by("-started_at")
            .values_list("finished_at", flat=True)
            .first()
            for job in scheduled
        }
    except Exception as exc:
        return {"ok": False, "error": type(exc).__name__}
    jobs = {}
    for job, interval in scheduled.items():
        stale_after = settings.JOB_STALE_AFTER_FACTOR * interval + settings.JOB_STALE_GRACE_SECONDS
        succeeded_at = last_success[job]
        since = succeeded_at or first_seen
        age = (now - since).total_seconds() if since else None
        jobs[job] = {
            "interval_seconds": interval,
            "last_success_at": succeeded_at.isoformat() if succeeded_at else None,
            "age_seconds": round(age, 1) if age is not None else None,
            "stale_after_seconds": stale_after,
            "ok": age is not None and age <= stale_after,
        }
    result: dict[str, Any] = {"ok": all(job["ok"] for job in jobs.values()), "jobs": jobs}
    if first_seen is None and scheduled:
        result["error"] = "no scheduled run has been recorded yet"
    return result
