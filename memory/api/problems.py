"""Every API error as an RFC 9457 problem (`application/problem+json`): `type`, `title`,
`status`, `detail`, `instance`, plus `errors` (field -> messages) on validation failures.

One exception handler maps domain errors (`memory.errors.DomainError`), DRF's own errors (401, 403,
404, 405, 415, malformed JSON, 429 with Retry-After) and anything unexpected (a 500 that says
nothing about the cause). Problems never carry stack traces, SQL or memory content, and neither
does the log line of an unexpected error: only its type and the code locations.
"""

import logging
import math

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, JsonResponse
from django.urls import Resolver404, resolve
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import set_rollback

from memory.api.parsers import PayloadTooLarge
from memory.errors import DomainError
from memory.validation import flatten_errors

logger = logging.getLogger("memory.api")

PROBLEM_CONTENT_TYPE = "application/problem+json"
TYPE_PREFIX = "urn:governed-memory:problem:"

# DRF exception -> (problem code, title)
_DRF_PROBLEMS: list[tuple[type[exceptions.APIException], str, str]] = [
    (exceptions.ValidationError, "validation_failed", "Invalid request"),
    (exceptions.ParseError, "malformed_request", "Malformed request body"),
    (exceptions.NotAuthenticated, "not_authenticated", "Authentication required"),
    (exceptions.AuthenticationFailed, "authentication_failed", "Authentication failed"),
    (exceptions.PermissionDenied, "permission_denied", "Forbidden"),
    (exceptions.NotFound, "not_found", "Not found"),
    (exceptions.MethodNotAllowed, "method_not_allowed", "Method not allowed"),
    (exceptions.NotAcceptable, "not_acceptable", "Not acceptable"),
    (exceptions.UnsupportedMediaType, "unsupported_media_type", "Unsupported media type"),
    (exceptions.Throttled, "throttled", "Too many requests"),
    (PayloadTooLarge, "payload_too_large", "Request body too large"),
]


def problem(
    *, status: int, code: str, title: str, detail: str, instance: str, errors: dict[str, list[str]] | None = None
) -> dict:
    body = {"type": TYPE_PREFIX + code, "title": title, "status": status, "detail": detail, "instance": instance}
    if errors:
        body["errors"] = errors
    return body


def domain_problem(exc: DomainError, *, instance: str) -> dict:
    """A domain error (a service's refusal) as a problem body."""
    body = problem(
        status=exc.status, code=_snake(exc.code), title=exc.title, detail=exc.detail, instance=instance, errors=exc.errors
    )
    body.update(getattr(exc, "extensions", None) or {})  # extension members, e.g. a pruned record's pruned_at
    return body


def _instance(context) -> str:
    request = context.get("request")
    return request.path if request is not None else ""


def problem_exception_handler(exc, context):
    """REST_FRAMEWORK["EXCEPTION_HANDLER"]: every exception a DRF view raises becomes a problem."""
    instance = _instance(context)
    if isinstance(exc, RequestDataTooBig):  # Django's own limit, met before the parser's
        exc = PayloadTooLarge()
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()

    if isinstance(exc, DomainError):
        set_rollback()
        return Response(domain_problem(exc, instance=instance), status=exc.status, content_type=PROBLEM_CONTENT_TYPE)

    if isinstance(exc, exceptions.APIException):
        set_rollback()
        code, title = next(((c, t) for cls, c, t in _DRF_PROBLEMS if isinstance(exc, cls)), ("error", "Request failed"))
        headers = {}
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = exc.auth_header
        if isinstance(exc, exceptions.Throttled) and exc.wait is not None:
            headers["Retry-After"] = str(max(1, math.ceil(exc.wait)))
        errors = None
        if isinstance(exc, exceptions.ValidationError):
            errors = flatten_errors(exc.detail)
            detail = "The request is invalid: see errors."
        else:
            detail = str(exc.detail)
            if isinstance(exc, exceptions.UnsupportedMediaType):
                detail += ' Send a JSON body with the header "Content-Type: application/json".'
            elif isinstance(exc, exceptions.NotAuthenticated):
                detail += ' Send "Authorization: Bearer <token>".'
        body = problem(status=exc.status_code, code=code, title=title, detail=detail, instance=instance, errors=errors)
        return Response(body, status=exc.status_code, headers=headers, content_type=PROBLEM_CONTENT_TYPE)

    # Unexpected: roll back, log where it happened (not the message, which may quote a row), and
    # answer a bare 500.
    set_rollback()
    logger.error("Unhandled %s in %s", type(exc).__name__, instance, exc_info=exc)  # the handler drops the message
    body = problem(
        status=500,
        code="server_error",
        title="Internal server error",
        detail="The request could not be completed.",
        instance=instance,
    )
    return Response(body, status=500, content_type=PROBLEM_CONTENT_TYPE)


def _snake(code: str) -> str:
    if "_" in code or code.islower():
        return code
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(code))


@csrf_exempt  # it changes nothing; a CSRF 403 would hide the real answer
def api_not_found(request, *args, **kwargs) -> JsonResponse:
    """Catch-all for unknown URLs under /api/: a problem, not an HTML page. Hints at the missing
    trailing slash, the most common slip."""
    detail = "No such API endpoint."
    if not request.path.endswith("/"):
        try:
            match = resolve(request.path + "/")
            if match.func is not api_not_found:
                detail = f"No such API endpoint. Did you mean {request.path}/ (with a trailing slash)?"
        except Resolver404:
            pass
    body = problem(status=404, code="not_found", title="Not found", detail=detail, instance=request.path)
    return JsonResponse(body, status=404, content_type=PROBLEM_CONTENT_TYPE)
