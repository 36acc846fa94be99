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
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from kombu import Connection

from governance.jobs.health import check_scheduler
from memory.engine import current
from memory.search import semantic

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


def starting_up(scheduler: dict[str, Any]) -> bool:
    """Within the grace period after start, with no job that has run and then gone stale."""
    if time.monotonic() - _STARTED > settings.HEALTH_STARTUP_GRACE_SECONDS or "jobs" not in scheduler:
        return False
    return all(job["ok"] or job["last_success_at"] is None for job in scheduler["jobs"].values())


def recall_serving() -> dict[str, Any]:
    """What answers recall here (`semantic.serving_report`); with the database down, only the error's class."""
    try:
        return semantic.serving_report()
    except Exception as exc:
        return {"error": type(exc).__name__}


def check_database() -> dict[str, Any]:
    try:
        engine = current()
        engine.ops.ping(connection)
    except Exception as exc:
        return {"ok": False, "error": type(exc).__name__}
    return {"ok": True, "vendor": engine.NAME}


def check_broker() -> dict[str, Any]:
    timeout = settings.HEALTH_CHECK_TIMEOUT
    transport_options = {**settings.CELERY_BROKER_TRANSPORT_OPTIONS, "socket_timeout": timeout, "socket_connect_timeout": timeout}
    try:
        with Connection(settings.CELERY_BROKER_URL, connect_timeout=timeout, transport_options=transport_options) as broker:
            # kombu takes seconds as a float here; its stubs say int
            broker.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=timeout)  # type: ignore[arg-type]
            transport = broker.transport.driver_type
    except Exception as exc:
        return {"ok": False, "error": type(exc).__name__}
    return {"ok": True, "transport": transport}
