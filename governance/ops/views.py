"""Operations endpoints. `GET /health/` (no auth): 200 when the database answers, the broker
accepts a connection and every scheduled job has succeeded recently enough; else 503 naming the
failing checks. A job is stale when its last successful beat run is older than
JOB_STALE_AFTER_FACTOR x its interval + JOB_STALE_GRACE_SECONDS; a job that never succeeded is
measured from the first run beat ever recorded. Errors are reported by class only: the endpoint is
public and exception texts can carry hosts or row values."""

import logging
import time
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Min
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from kombu import Connection

from governance.jobs.schedule import scheduled_intervals
from governance.models import JobRun

logger = logging.getLogger("governance.ops")


# When this process started: for a grace period after it, a scheduler that has not yet completed its
# first runs means "starting", not "failing" (beat's first ticks come a little after the web server).
_STARTED = time.monotonic()


@require_GET
@never_cache
def health(request: HttpRequest) -> JsonResponse:
    checks = {"database": check_database(), "broker": check_broker(), "scheduler": check_scheduler()}
    failing = [name for name, result in checks.items() if not result["ok"]]
    if failing == ["scheduler"] and starting_up(checks["scheduler"]):
        body = {
            "status": "starting",
            "checks": checks,
            "note": "The scheduled jobs have not all run yet since the service started; this is normal for "
            f"the first {settings.HEALTH_STARTUP_GRACE_SECONDS:g} seconds.",
        }
        return JsonResponse(body, status=200)
    body: dict[str, Any] = {"status": "fail" if failing else "ok", "checks": checks}
    if failing:
        body["failing"] = failing
        logger.warning("health check failing", extra={"failing": failing})
    return JsonResponse(body, status=503 if failing else 200)


def starting_up(scheduler: dict[str, Any]) -> bool:
    """Within the grace period after start, with no job that has run and then gone stale."""
    if time.monotonic() - _STARTED > settings.HEALTH_STARTUP_GRACE_SECONDS or "jobs" not in scheduler:
        return False
    return all(job["ok"] or job["last_success_at"] is None for job in scheduler["jobs"].values())


def check_database() -> dict[str, Any]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        return {"ok": False, "error": type(exc).__name__}
    return {"ok": True, "vendor": connection.vendor}


def check_broker() -> dict[str, Any]:
    timeout = settings.HEALTH_CHECK_TIMEOUT
    transport_options = {**settings.CELERY_BROKER_TRANSPORT_OPTIONS, "socket_timeout": timeout, "socket_connect_timeout": timeout}
    try:
        with Connection(settings.CELERY_BROKER_URL, connect_timeout=timeout, transport_options=transport_options) as broker:
            broker.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=timeout)
            transport = broker.transport.driver_type
    except Exception as exc:
        return {"ok": False, "error": type(exc).__name__}
    return {"ok": True, "transport": transport}


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
