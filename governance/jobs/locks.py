"""One run of a job at a time, across processes and hosts, even if two beat processes run.

The lock lives with the database the jobs write, and the operating system or the database server
drops it when its holder dies (kill -9, OOM), so a crashed worker never leaves a stale lock that
would block the redelivered task. Each engine takes it its own way (`memory.engine.*.ops.job_lock`):

- PostgreSQL: a session-level advisory lock on a dedicated connection. Every process that can
  reach the database sees it; the server releases it when that connection closes.
- SQLite: an exclusive `flock` on a file next to the database file. SQLite is single-host by
  nature, so every process that can open the database can open the lock file; the kernel releases
  the lock when the process exits.

A lock held in Redis was considered and not used: it needs a TTL, and a TTL either outlives a
killed worker (blocking the retry) or expires under a long batch (letting a second run in).
"""

from contextlib import AbstractContextManager

from django.db import DEFAULT_DB_ALIAS, connections

from memory.engine import current


def job_lock(name: str, *, using: str = DEFAULT_DB_ALIAS) -> AbstractContextManager[bool]:
    """Try to take the lock of job `name` without waiting; the context yields whether it was taken."""
    return current(using).ops.job_lock(connections[using], name)
