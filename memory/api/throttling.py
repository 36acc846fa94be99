"""Rate limit per credential: each agent token, reviewer token or reviewer session has its own
budget (`API_THROTTLE_RATE`, default 600/min: several hundred requests a minute covers an agent's
normal bursts); anonymous requests are limited per client address. A limited request is a 429
problem with `Retry-After`."""

from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from memory.models import AgentCredential, ReviewerToken


class CredentialRateThrottle(SimpleRateThrottle):
    scope = "credential"

    def get_rate(self) -> str | None:
        # Read at request time, not import time, so a changed setting (or a test override) applies.
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def get_cache_key(self, request, view) -> str:
        auth = request.auth
        if isinstance(auth, (AgentCredential, ReviewerToken)):
            # The token hash, not the row id: ids are reused after a database reset, hashes are not.
            ident = f"{type(auth).__name__}:{auth.token_hash}"
        elif request.user is not None and request.user.is_authenticated:
            ident = f"user:{request.user.pk}"
        else:
            ident = f"addr:{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}
