"""Read-your-writes with read replicas (installed by the settings only when DATABASE_REPLICA_URLS
is set): a request that wrote anything through the ORM leaves its writer's position
(`memory.replicas.note_write`), so the same agent's or reviewer's next reads do not go to a
replica that has not replayed it."""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from memory import replicas
from memory.engine.routing import tracking_writes
from memory.models import AgentCredential


class ReadYourWritesMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        with tracking_writes() as wrote:
            response = self.get_response(request)
        if wrote[0]:
            replicas.note_write(writer(request))
        return response


def writer(request: HttpRequest) -> str | None:
    """The read-your-writes key of whoever made `request`: the token's agent, else the user."""
    auth = getattr(request, "auth", None)  # DRF copies the authenticated token onto the request
    if isinstance(auth, AgentCredential):
        return replicas.writer_key(agent_id=auth.agent_id)
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return replicas.writer_key(user_id=user.pk)
    return None
