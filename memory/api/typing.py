"""Request types for annotations: what our authentication (memory.api.authentication) and Django's
login guarantee about a request once it has been let through. Nothing builds these classes: a view
or helper annotated with one is handed the ordinary request, which already has these attributes.

Mixed views (agents and reviewers) narrow a request with `is_agent_request`, the one test of
"made with an agent token" that `request_actor` applies too."""

from typing import TypeGuard

from django.contrib.auth.models import User
from django.http import HttpRequest
from rest_framework.request import Request

from memory.models import AgentCredential


class AgentRequest(Request):
    """A request made with an agent token (a view behind `IsAgent`): `auth` is its credential and
    `user` stays anonymous (an agent is not a Django user)."""

    auth: AgentCredential


class UserRequest(HttpRequest):
    """A request of a logged-in user (admin pages, the review UI): `user` is never anonymous."""

    user: User


def is_agent_request(request: Request) -> TypeGuard[AgentRequest]:
    """Whether the request was made with an agent token (its `auth` is the credential)."""
    return isinstance(request.auth, AgentCredential)
