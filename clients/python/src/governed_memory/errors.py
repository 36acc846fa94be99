"""Errors the client raises. Every API error is an RFC 9457 problem (`application/problem+json`)
turned into one typed exception per status, carrying the problem's fields and its field errors
(`errors`: field -> messages). The server never puts memory content in a problem, and neither do
these exceptions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from governed_memory.models import Memory

PROBLEM_TYPE_PREFIX = "urn:governed-memory:problem:"


class GovernedMemoryError(Exception):
    """Base class of everything this package raises."""


class InvalidArgument(GovernedMemoryError, ValueError):
    """A value the client refuses before it sends anything: an id that is not a UUID (ids go into
    URL paths), an idempotency key an HTTP header cannot carry, text that is not valid Unicode, a
    URL too long to send. Nothing reached the server."""


class TransportError(GovernedMemoryError):
    """The server could not be reached or stopped answering (after the retries an idempotent call
    gets). `__cause__` is the underlying httpx error."""


class UnexpectedResponse(GovernedMemoryError):
    """A successful status with a body this client cannot read (not JSON, or a field it needs is
    missing or of the wrong type)."""

    def __init__(self, message: str, *, status: int):
        super().__init__(message)
        self.status = status


class APIError(GovernedMemoryError):
    """The server refused the request with a problem. Nothing was written (a failed request writes
    nothing). `code` is the problem type without its URN prefix, e.g. `stale_version`."""

    def __init__(self, problem: Mapping[str, Any], *, status: int):
        self.problem: dict[str, Any] = dict(problem)
        self.status = status
        self.type: str = str(problem.get("type") or "about:blank")
        self.title: str = str(problem.get("title") or "Request failed")
        self.detail: str = str(problem.get("detail") or "")
        self.instance: str = str(problem.get("instance") or "")
        self.errors: dict[str, list[str]] = _field_errors(problem.get("errors"))
        super().__init__(self._message())

    @property
    def code(self) -> str:
        return self.type.removeprefix(PROBLEM_TYPE_PREFIX)

    def _message(self) -> str:
        message = f"{self.status} {self.title}"
        if self.detail:
            message += f": {self.detail}"
        for field, messages in self.errors.items():
            message += f"\n  {field}: {' '.join(messages)}"
        return message


class ValidationError(APIError):
    """400 (and 413, 415): the body is invalid. `errors` names every field and what is wrong."""


class AuthenticationError(APIError):
    """401: missing, unknown or revoked token."""


class ScopeDenied(APIError):
    """403: outside what the token allows (a purpose it lacks, operator authority without the
    capability, forgetting or confirming without it, a reviewer-only action)."""


class NotFound(APIError):
    """404: no such record (or forget request) in your scope."""


class Gone(APIError):
    """410: an event-feed cursor older than the feed's retention; read again from `after=None`."""


class Conflict(APIError):
    """409: a stale `expected_version` or `supersedes_version`, a transition that does not apply to
    the record's status, or an idempotency key reused with another body. For a call about one
    record (confirm, or a write that supersedes one) the client reads the record back:
    `current` is it as it is now and `current_version` its version, so the caller can decide
    again and retry with that version."""

    def __init__(self, problem: Mapping[str, Any], *, status: int):
        super().__init__(problem, status=status)
        version = problem.get("current_version")
        self.current_version: int | None = version if isinstance(version, int) and not isinstance(version, bool) else None
        self.current: Memory | None = None

    def _attach_current(self, record: Memory) -> None:
        self.current = record
        if self.current_version is None:
            self.current_version = record.version
        self.args = (self._message() + f"\n  current version: {self.current_version} (status {record.status})",)


class RateLimited(APIError):
    """429, after the retries the client's policy allows. `retry_after` is the server's
    `Retry-After` in seconds (None if it sent none)."""

    def __init__(self, problem: Mapping[str, Any], *, status: int, retry_after: float | None = None):
        self.retry_after = retry_after
        super().__init__(problem, status=status)


class ServerError(APIError):
    """5xx: the server failed; the problem says nothing about the cause."""


_BY_STATUS: dict[int, type[APIError]] = {
    400: ValidationError,
    413: ValidationError,
    415: ValidationError,
    401: AuthenticationError,
    403: ScopeDenied,
    404: NotFound,
    409: Conflict,
    410: Gone,
}


def error_from_problem(status: int, problem: Mapping[str, Any], *, retry_after: float | None = None) -> APIError:
    """The typed exception for a problem with this status."""
    if status == 429:
        return RateLimited(problem, status=status, retry_after=retry_after)
    if status >= 500:
        return ServerError(problem, status=status)
    return _BY_STATUS.get(status, APIError)(problem, status=status)


def _field_errors(value: Any) -> dict[str, list[str]]:
    if not isinstance(value, Mapping):
        return {}
    errors: dict[str, list[str]] = {}
    for field, messages in value.items():
        if isinstance(messages, (list, tuple)):
            errors[str(field)] = [str(message) for message in messages]
        else:
            errors[str(field)] = [str(messages)]
    return errors
