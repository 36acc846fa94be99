"""Rate limit per credential: each agent token, reviewer token or reviewer session has its own
budget (`API_THROTTLE_RATE`, default 600/min: several hundred requests a minute covers an agent's
normal bursts); anonymous requests are limited per client address. A limited request is a 429
problem with `Retry-After`.

The budget is per token across every web worker: the request history lives in the shared cache
(Redis, or the file cache every process on the machine shares; see CACHES), and reading and
updating it happens under a short per-token lock taken with the cache's atomic `add()`, so two
workers cannot both spend the last request of a window."""

import time

from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from memory.models import AgentCredential, ReviewerToken

LOCK_SECONDS = 5  # a lock left by a killed worker expires after this
LOCK_WAIT_SECONDS = 2  # a request that cannot get its token's lock in this time is limited
LOCK_POLL_SECONDS = 0.002


class CredentialRateThrottle(SimpleRateThrottle):
    scope = "credential"
    lock_busy = False

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

    def allow_request(self, request, view) -> bool:
        if self.rate is None:
            return True
        lock = f"{self.get_cache_key(request, view)}:lock"
        if not self._acquire(lock):
            self.lock_busy = True  # that many concurrent requests for one token: limited, retry in 1 s
            return False
        try:
            # DRF's sliding window: read the history, compare, append, write back.
            return super().allow_request(request, view)
        finally:
            self.cache.delete(lock)

    def wait(self) -> float | None:
        return 1.0 if self.lock_busy else super().wait()

    def _acquire(self, lock: str) -> bool:
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while not self.cache.add(lock, 1, LOCK_SECONDS):
            if time.monotonic() >= deadline:
                return False
            time.sleep(LOCK_POLL_SECONDS)
        return True
