"""One structured log line per request: id, method, path (no query string: it may carry a
subject), status, duration and who called. Never bodies, never content. And a filter on the log
handler that keeps an exception's type and code locations but drops its message, which can quote a
row (PostgreSQL's "Failing row contains (...)")."""

import logging
import time
import traceback
import uuid

logger = logging.getLogger("governed_memory.request")


class RequestLogMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request_id = request.headers.get("X-Request-ID") or uuid.uuid4().hex
        request.request_id = request_id
        started = time.perf_counter()
        response = self.get_response(request)
        duration_ms = round((time.perf_counter() - started) * 1000, 2)
        response["X-Request-ID"] = request_id
        logger.info(
            "request",
            extra={
                "event": "request", "request_id": request_id, "method": request.method, "path": request.path,
                "status": response.status_code, "duration_ms": duration_ms, "actor": _actor_label(request),
            },
        )
        return response


def _actor_label(request) -> str:
    # DRF authenticates inside the view and keeps its user on the DRF request; the view stores the
    # actor label here (see memory.api) so the log names agents too.
    label = getattr(request, "actor_label", None)
    if label:
        return label
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return f"user:{user.get_username()}"
    return "anonymous"


class RedactExceptionFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            record.exception_type = type(exc).__name__
            record.code_locations = "".join(traceback.format_tb(exc.__traceback__))
            record.exc_info = None
            record.exc_text = None
        return True
