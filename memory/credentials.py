"""Agent credentials by token, cached briefly in the shared Django cache (Redis, or the file cache
every process on the machine shares) so that an API request does not look its token up in the
database every time.

Each usable credential (with its agent and tenant) is cached for CREDENTIAL_CACHE_SECONDS under
its token hash. Every way a credential changes drops its entry for every process: the revoke
service (a revoked credential or agent), the admin's revoke action, and saving or deleting a
credential; dropped at once and again when the change commits, so a request that read the row just
before the commit cannot keep the old state. A revoked token is therefore refused by the next
request; only a change made outside the app (raw SQL) waits for the entry to expire. Unknown or
revoked tokens are never cached: they are looked up every time.

In front of the shared cache, each process keeps the credentials it read for LOCAL_SECONDS, so that
most requests ask neither the database nor the cache (a Redis round trip per request otherwise;
docs/benchmarks.md). A change drops the entry in the process that makes it at
once, as above, and in every other process within LOCAL_SECONDS: a revoked token is refused within
a second everywhere.
"""

import time
from collections.abc import Iterable
from datetime import datetime

from django.core.cache import cache
from django.db import transaction
from django.db.models import QuerySet
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from memory.models import AgentCredential, hash_token

CREDENTIAL_CACHE_SECONDS = 30
LOCAL_SECONDS = 1.0
LOCAL_MAX = 1000  # entries this process keeps at most (it starts again when full)

_local: dict[str, tuple[float, AgentCredential]] = {}  # token hash -> (monotonic time read, credential)


def _key(token_hash: str) -> str:
    return f"memory:credential:{token_hash}"


def usable_credential(raw_token: str) -> AgentCredential | None:
    """The unrevoked credential of this raw token (with its agent and tenant), or None."""
    token_hash = hash_token(raw_token)
    held = _local.get(token_hash)
    if held is not None and time.monotonic() - held[0] < LOCAL_SECONDS:
        return held[1]
    read_at = time.monotonic()
    try:
        credential = cache.get(_key(token_hash))
    except Exception:  # an entry from another version of the model: look it up again
        credential = None
    if not isinstance(credential, AgentCredential):
        credential = AgentCredential.objects.usable().select_related("agent__tenant").filter(token_hash=token_hash).first()
        if credential is not None:
            cache.set(_key(token_hash), credential, CREDENTIAL_CACHE_SECONDS)
    if credential is None:
        _local.pop(token_hash, None)
    else:
        if len(_local) >= LOCAL_MAX:
            _local.clear()
        _local[token_hash] = (read_at, credential)
    return credential


def forget_cached_credentials(token_hashes: Iterable[str]) -> None:
    """Drop these tokens' entries now and again when the current transaction commits."""
    hashes = list(token_hashes)
    keys = [_key(token_hash) for token_hash in hashes]

    def forget() -> None:
        for token_hash in hashes:
            _local.pop(token_hash, None)
        cache.delete_many(keys)

    if keys:
        forget()
        transaction.on_commit(forget)


def revoke_tokens(tokens: QuerySet, *, at: datetime) -> int:
    """Revoke the unrevoked tokens of `tokens` (agent credentials or reviewer tokens) at `at` and drop
    their cached entries; returns how many were revoked."""
    hashes = list(tokens.filter(revoked_at__isnull=True).values_list("token_hash", flat=True))
    count = tokens.model.objects.filter(token_hash__in=hashes, revoked_at__isnull=True).update(revoked_at=at)
    forget_cached_credentials(hashes)
    return count


@receiver(post_save, sender=AgentCredential, dispatch_uid="memory-credential-cache-save")
@receiver(post_delete, sender=AgentCredential, dispatch_uid="memory-credential-cache-delete")
def _credential_changed(sender, instance: AgentCredential, **kwargs) -> None:
    forget_cached_credentials([instance.token_hash])
