"""Who is calling the API: bearer tokens (agent credentials `gma_...`, reviewers' personal tokens
`gmr_...`), or a reviewer's browser session; and the `Actor` the services act as.

An agent is not a Django user: for an agent token `request.user` stays anonymous and
`request.auth` is the `AgentCredential`. That keeps agents out of anything guarded by Django's user
machinery, and keeps simple-history from trying to store a non-user as the history user (the audit
trail names the agent through the actor label instead). Permissions (`memory.api.permissions`)
decide from the actor, never from `request.user` alone.
"""

from django.contrib.auth.models import AnonymousUser
from django.utils.translation import gettext_lazy as _
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from memory.actors import Actor
from memory.api.typing import is_agent_request
from memory.credentials import usable_credential
from memory.models import AgentCredential, ReviewerToken, hash_token

BEARER = b"bearer"


class BearerTokenAuthentication(BaseAuthentication):
    """`Authorization: Bearer <token>`. Agent tokens authenticate as (AnonymousUser, credential);
    reviewer tokens as (user, reviewer token). Unknown, revoked or malformed tokens are a 401."""

    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if not parts:
            return None  # no header: the session (or nobody) may still authenticate the request
        if parts[0].lower() != BEARER:
            raise exceptions.AuthenticationFailed(_("Unsupported authorization scheme: send 'Authorization: Bearer <token>'."))
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed(_("Malformed Authorization header: expected 'Bearer <token>'."))
        try:
            raw = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed(_("Invalid token.")) from None
        if raw.startswith(AgentCredential.TOKEN_PREFIX):
            user, credential = self._agent(raw)
            _label_request(request, Actor.for_credential(credential).label)
            return user, credential
        if raw.startswith(ReviewerToken.TOKEN_PREFIX):
            user, token = self._reviewer(raw)
            _label_request(request, f"user:{user.get_username()}")
            return user, token
        raise exceptions.AuthenticationFailed(_("Invalid token."))

    def authenticate_header(self, request) -> str:
        # Makes unauthenticated requests a 401 (with this challenge) rather than a 403.
        return 'Bearer realm="api"'

    @staticmethod
    def _agent(raw: str):
        credential = usable_credential(raw)  # cached for a second at most (memory.credentials)
        if credential is None:
            raise exceptions.AuthenticationFailed(_("Invalid or revoked token."))
        return AnonymousUser(), credential

    @staticmethod
    def _reviewer(raw: str):
        token = ReviewerToken.objects.select_related("user").filter(token_hash=hash_token(raw), revoked_at__isnull=True).first()
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed(_("Invalid or revoked token."))
        return token.user, token


def _label_request(request, label: str) -> None:
    # The request log middleware (outside DRF) names the caller from this attribute.
    request._request.actor_label = label


def request_actor(request) -> Actor | None:
    """The actor behind an authenticated request (computed once per request), or None."""
    if hasattr(request, "_memory_actor"):
        return request._memory_actor
    actor: Actor | None
    if is_agent_request(request):
        actor = Actor.for_credential(request.auth)
    elif request.user is not None and request.user.is_authenticated:
        actor = Actor.for_user(request.user)
    else:
        actor = None
    request._memory_actor = actor
    return actor


def permitted_actor(request: Request) -> Actor:
    """The actor a view acts as, once its permission classes let the request through (every one
    of them requires an actor, so the 401 here is only a backstop)."""
    actor = request_actor(request)
    if actor is None:
        raise exceptions.NotAuthenticated()
    return actor


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """Tells the OpenAPI schema (and the Swagger UI "Authorize" button) about bearer tokens."""

    target_class = "memory.api.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An agent token (gma_...) from `manage.py issue_agent_token`, or a reviewer's "
            "personal token (gmr_...) from `manage.py create_reviewer`.",
        }
