"""One run of a job at a time, across processes and hosts, even if two beat processes run.

The lock lives with the database the jobs write, and the operating system or the database server
drops it when its holder dies (kill -9, OOM), so a crashed worker never leaves a stale lock that
would block the redelivered task:

- PostgreSQL: a session-level `pg_try_advisory_lock` on a dedicated connection. Every process
  that can reach the database sees it; the server releases it when that connection closes.
- SQLite: an exclusive `flock` on a file next to the database file. SQLite is single-host by
  nature, so every process that can open the database can open the lock file; the kernel releases
  the lock when the process exits.

A lock held in Redis was considered and not used: it needs a TTL, and a TTL either outlives a
killed worker (blocking the retry) or expires under a long batch (letting a second run in).
"""

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.db import DEFAULT_DB_ALIAS, connections

from memory.fences import lock_key


def advisory_lock_key(name: str) -> int:
    """A stable signed 64-bit key per job name (pg advisory locks take a bigint)."""
    return lock_key(f"job.{name}")


@contextmanager
def job_lock(name: str, *, using: str = DEFAULT_DB_ALIAS) -> Iterator[bool]:
    """Try to take the lock of job `name` without waiting; yields whether it was taken."""
    connection = connections[using]
    if connection.vendor == "postgresql":
        with _postgres_advisory_lock(connection, name) as acquired:
            yield acquired
    elif connection.vendor == "sqlite":
        with _file_lock(_sqlite_lock_path(connection, name)) as acquired:
            yield acquired
    else:  # pragma: no cover - the project supports PostgreSQL and SQLite only
        raise NotImplementedError(f"No job lock for database vendor {connection.vendor!r}.")


@contextmanager
def _postgres_advisory_lock(connection, name: str) -> Iterator[bool]:
    # A dedicated connection, so nothing the job does to Django's connection (closing it after an
    # error, a Celery task boundary) can release the lock early.
    raw = connection.get_new_connection(connection.get_connection_params())
    try:
        raw.autocommit = True
        key = advisory_lock_key(name)
        with raw.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
            acquired = bool(cursor.fetchone()[0])
        try:
            yield acquired
        finally:
            if acquired:
                with raw.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
    finally:
        raw.close()


def _sqlite_lock_path(connection, name: str) -> Path:
    database = str(connection.settings_dict["NAME"])
    if database == ":memory:" or database.startswith("file:"):
        # An in-memory database lives in one process; a per-process lock directory is enough.
        return Path("/tmp") / f"governed-memory-{os.getpid()}.job-{name}.lock"
    return Path(f"{database}.job-{name}.lock")


@contextmanager
def _file_lock(path: Path) -> Iterator[bool]:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Each call opens its own file description, so two threads of one process exclude each other too.
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            acquired = True
        except BlockingIOError:
            acquired = False
        try:
            yield acquired
        finally:
            if acquired:
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
