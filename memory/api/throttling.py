"""Rate limit per credential: each agent token, reviewer token or reviewer session has its own
budget (`API_THROTTLE_RATE`, default 600/min: several hundred requests a minute covers an agent's
normal bursts); anonymous requests are limited per client address. A limited request is a 429
problem with `Retry-After`.

The budget is per token across every web worker: the request history lives in the shared cache
(Redis, or the file cache every process on the machine shares; see CACHES), and reading and
updating it happens under a short per-token lock taken with the cache's atomic `add()`, so two
workers cannot both spend the last request of a window.

With Redis the window is a sorted set that one Lua script reads and updates atomically: one round
trip per request instead of four (take the lock, read, write, release). The script still honours a
lock another process holds (one running the locking code, during a rolling deploy)."""

import time
import uuid

from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from memory.models import AgentCredential, ReviewerToken

LOCK_SECONDS = 5  # a lock left by a killed worker expires after this
LOCK_WAIT_SECONDS = 2  # a request that cannot get its token's lock in this time is limited
LOCK_POLL_SECONDS = 0.002


class CredentialRateThrottle(SimpleRateThrottle):
    scope = "credential"
    lock_busy = False
    # Set by SimpleRateThrottle.__init__ from the rate (None without one); DRF's stubs leave them out.
    num_requests: int | None
    duration: int | None

    def get_rate(self) -> str | None:
        # Read at request time, not import time, so a changed setting (or a test override) applies.
        # The ignore: DRF's stubs type the rates as numbers; they are strings such as "600/min".
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)  # type: ignore[return-value]

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
        client = _redis_client(self.cache)
        if client is not None:
            return self._allow_by_script(client, self.get_cache_key(request, view))
        lock = f"{self.get_cache_key(request, view)}:lock"
        if not self._acquire(lock):
            self.lock_busy = True  # that many concurrent requests for one token: limited, retry in 1 s
            return False
        try:
            # DRF's sliding window: read the history, compare, append, write back.
            return super().allow_request(request, view)
        finally:
            self.cache.delete(lock)

    def _allow_by_script(self, client, key: str) -> bool:
        self.now = self.timer()
        allowed, count, oldest = _window_script(client)(
            keys=[self.cache.make_and_validate_key(f"{key}:window"), self.cache.make_and_validate_key(f"{key}:lock")],
            args=[repr(self.now), self.duration, self.num_requests, f"{self.now!r}:{uuid.uuid4().hex[:8]}"],
        )
        if allowed < 0:
            self.lock_busy = True
            return False
        # What DRF's wait() reads: the requests in the window, the oldest last.
        self.history = [float(oldest)] * int(count) if count else []
        return bool(allowed)

    def wait(self) -> float | None:
        return 1.0 if self.lock_busy else super().wait()

    def _acquire(self, lock: str) -> bool:
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while not self.cache.add(lock, 1, LOCK_SECONDS):
            if time.monotonic() >= deadline:
                return False
            time.sleep(LOCK_POLL_SECONDS)
        return True


# KEYS: the window (a sorted set of request times), the lock of the locking path. ARGV: now,
# duration, limit, a unique member. Returns {allowed (1, 0, or -1 when the lock is held), requests
# in the window before this one, the oldest one's time}.
WINDOW_SCRIPT = """
if redis.call('EXISTS', KEYS[2]) == 1 then return {-1, 0, ''} end
local now, duration, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - duration)
local count = redis.call('ZCARD', KEYS[1])
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local allowed = 0
if count < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[4])
  allowed = 1
end
redis.call('PEXPIRE', KEYS[1], math.ceil(duration * 1000))
return {allowed, count, oldest[2] or ''}
"""
_scripts: dict[int, object] = {}


def _redis_client(cache):
    """The raw client of Django's Redis cache backend, or None for any other backend."""
    from django.core.cache import DEFAULT_CACHE_ALIAS, caches
    from django.core.cache.backends.redis import RedisCache
    from django.utils.connection import ConnectionProxy

    backend = caches[DEFAULT_CACHE_ALIAS] if isinstance(cache, ConnectionProxy) else cache
    return backend._cache.get_client(write=True) if isinstance(backend, RedisCache) else None


def _window_script(client):
    script = _scripts.get(id(client.connection_pool))
    if script is None:
        script = _scripts[id(client.connection_pool)] = client.register_script(WINDOW_SCRIPT)
    return script
