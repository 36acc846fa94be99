"""Domain errors raised by the lifecycle services. The API maps them to problem+json in one
exception handler; the reviewer UI turns them into messages. Messages never contain content."""


class DomainError(Exception):
    status = 400
    title = "Request could not be applied"

    def __init__(
        self, detail: str, *, errors: dict[str, list[str]] | None = None, code: str | None = None, title: str | None = None
    ):
        super().__init__(detail)
        self.detail = detail
        if title:
            self.title = title
        self.errors = errors or {}
        self.code = code or self.__class__.__name__


class ValidationFailed(DomainError):
    status = 400
    title = "Invalid memory"


class ScopeDenied(DomainError):
    """The request tries to act outside what its credential allows (another tenant or agent, a
    purpose the token lacks, a capability it was not given)."""

    status = 403
    title = "Outside the credential's scope"


class RecordNotFound(DomainError):
    status = 404
    title = "Not found"


class Conflict(DomainError):
    status = 409
    title = "Conflict"


class StaleVersion(Conflict):
    title = "Stale version"


class InvalidTransition(Conflict):
    title = "Transition does not apply"


class Gone(DomainError):
    """What the request names existed and was removed for good (an event-feed cursor older than
    the feed's retention)."""

    status = 410
    title = "Gone"
