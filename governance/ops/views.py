"""Operations endpoints. `GET /health/` (no auth): 200 when the database answers, the broker
accepts a connection and every scheduled job has succeeded recently enough (governance.jobs.health);
else 503 naming the failing checks. Errors are reported by class only: the endpoint is public and
exception texts can carry hosts or row values.

The body also says what answers recall in the web process that served it (`recall`: "hybrid" or
"lexical", the active indexes, whether this process holds the semantic model, and why recall is
lexical when it is; `memory.search.semantic.serving_report`). That is information, not a check:
lexical recall is recall working, so it never turns the status to "fail"."""

import logging
import time
from typing import Any

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from governance.jobs.health import check_scheduler
from governance.ops.checks import check_broker, check_database, recall_serving
from governance.ops.probes import probe

logger = logging.getLogger("governance.ops")


# When this process started: for a grace period after it, a scheduler that has not yet completed its
# first runs means "starting", not "failing" (beat's first ticks come a little after the web server).
_STARTED = time.monotonic()


@require_GET
@never_cache
def health(request: HttpRequest) -> JsonResponse:
    checks = {"database": check_database(), "broker": check_broker(), "scheduler": check_scheduler()}
    failing = [name for name, result in checks.items() if not result["ok"]]
    body: dict[str, Any]
    if failing == ["scheduler"] and starting_up(checks["scheduler"]):
        body = {
            "status": "starting",
            "checks": checks,
            "recall": recall_serving(),
            "note": "The scheduled jobs have not all run yet since the service started; this is normal for "
            f"the first {settings.HEALTH_STARTUP_GRACE_SECONDS:g} seconds.",
        }
        return JsonResponse(body, status=200)
    body = {"status": "fail" if failing else "ok", "checks": checks, "recall": recall_serving()}
    if failing:
        body["failing"] = failing
        logger.warning("health check failing", extra={"failing": failing})
    return JsonResponse(body, status=503 if failing else 200)


@require_GET
@never_cache
def live(request: HttpRequest) -> JsonResponse:
    """The web process answers: nothing else is checked (`governance.ops.probes`)."""
    return JsonResponse({"status": "ok", "role": "web", "probe": "live", "checks": {}})


@require_GET
@never_cache
def ready(request: HttpRequest) -> JsonResponse:
    """The web process can serve: the database answers and recall's model is here when it should be."""
    ok, body = probe("web")
    return JsonResponse(body, status=200 if ok else 503)


def starting_up(scheduler: dict[str, Any]) -> bool:
    """Within the grace period after start, with no job that has run and then gone stale."""
    if time.monotonic() - _STARTED > settings.HEALTH_STARTUP_GRACE_SECONDS or "jobs" not in scheduler:
        return False
    return all(job["ok"] or job["last_success_at"] is None for job in scheduler["jobs"].values())
