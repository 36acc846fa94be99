"""One structured log line per request: id, method, path (no query string: it may carry a
subject), status, duration and who called. Never bodies, never content. And two filters on the log
handler: one keeps an exception's type and code locations but drops its message, which can quote a
row (PostgreSQL's "Failing row contains (...)"); the other replaces the request Django attaches to
its own records (django.request, django.security.*) by its method and path: the JSON formatter
would print the request's repr, query string (and so a subject) included."""

import logging
import time
import traceback
import uuid

from django.http import HttpRequest

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
                "event": "request",
                "request_id": request_id,
                "method": request.method,
                "path": request.path,
                "status": response.status_code,
                "duration_ms": duration_ms,
                "actor": _actor_label(request),
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


class RequestPathFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        request = record.__dict__.pop("request", None)
        if isinstance(request, HttpRequest):
            record.method = request.method
            record.path = request.path
            request_id = getattr(request, "request_id", None)
            if request_id:
                record.request_id = request_id
        # Anything else under that name (runserver passes its socket) is dropped too.
        return True
