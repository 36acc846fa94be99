"""The checks /health/ and the role probes share: the database, the broker, what serves recall.
Errors are reported by class only (the endpoints are public; exception texts can carry hosts or row
values)."""

from typing import Any

from django.conf import settings
from django.db import connection
from kombu import Connection

from memory import replicas
from memory.engine import current
from memory.search import semantic


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


def check_replicas() -> dict[str, Any]:
    """The read replicas (DATABASE_REPLICA_URLS), each reachable or not and how far it lags. Always
    ok: a replica that is down or behind costs the primary more reads, not a refused one (replica
    reads fall back to the primary), so it marks the process degraded, not unready."""
    found = replicas.status(settings.HEALTH_CHECK_TIMEOUT)
    down = sorted(alias for alias, report in found.items() if not report["ok"])
    return {"ok": True, "degraded": bool(down), "down": down, "replicas": found}
