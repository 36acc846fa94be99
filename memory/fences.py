"""Transaction-scoped locks that order writes against the changes that must see them: which locks
there are, what they are called and in which order they are taken. How a database takes them is
its engine's (`take_locks` in memory.engine's lifecycle modules):

- PostgreSQL: advisory locks held until the transaction ends (`pg_advisory_xact_lock`, shared or
  exclusive). They live in the server's lock table, so taking one writes nothing to disk and,
  unlike a unique violation, logs nothing.
- SQLite: every writing transaction begins IMMEDIATE (config.settings), so writers already run one
  at a time and a check made inside the transaction holds until it commits: nothing to take.

Two fences use them:

- **The revocation fence**, one per tenant. Every write takes it shared for its whole transaction
  and re-checks its credential and the tenant's source holds after taking it; a revocation takes
  it exclusive before it revokes anything. A write therefore either commits before the revocation
  selects what to send back to quarantine (and is selected), or checks after the revocation
  committed (and sees it). Writes never wait for each other; they wait for a revocation only while
  it runs.
- **An idempotency key**: a write that names a key takes the key's lock exclusive, then looks for
  an earlier use, so two requests with one key never both insert it (no unique violation, whose
  server log line would carry the key).

Locks are always taken in this order (the fence, then keys in ascending lock-key order), so two
writes never wait for each other in a cycle.
"""

import hashlib
from collections.abc import Iterable

from memory import engine

_NAMESPACE = "governed_memory."


def lock_key(name: str) -> int:
    """A stable signed 64-bit key for a lock name (PostgreSQL's advisory locks take a bigint)."""
    digest = hashlib.sha256((_NAMESPACE + name).encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def hold(names: Iterable[str], *, shared: bool = False) -> None:
    """Take the named locks until the current transaction ends (call inside `transaction.atomic`),
    in ascending key order, so every transaction takes its locks in one order."""
    keys = sorted({lock_key(name) for name in names})
    if keys:
        engine.current().lifecycle.take_locks(keys, shared=shared)


def revocation_fence(tenant_id: int) -> str:
    return f"revocation:{tenant_id}"


def idempotency_lock(credential_id: int, key: str) -> str:
    return f"idempotency:{credential_id}:{key}"
