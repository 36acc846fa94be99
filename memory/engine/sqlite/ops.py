"""SQLite operations around the records: what the scheduled jobs, the health check, forget
propagation, forgetting on disk and backups need of the database, written for SQLite.

- the job lock: an exclusive `flock` on a file next to the database file (SQLite is single-host:
  every process that can open the database can open the lock file);
- statements governance runs: linking rows to a query's result in one INSERT ... SELECT, deleting
  rows without Django's signals, "does this JSON object hold a count above zero", percentiles;
- forgetting on disk: `secure_delete` zeroes removed content at commit; the write-ahead log is
  checkpointed and truncated and every FTS5 index merged (the callers' prose about it is
  governance.portability.disk);
- backups: the online backup API, and a restore prepared in a staging file and copied over the
  live one in one step.

`memory.engine.postgres.ops` offers the same names.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timedelta
from math import floor
from pathlib import Path
from typing import Any, cast

from django.contrib.contenttypes.models import ContentType
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import BooleanField, DurationField, Expression, ExpressionWrapper, Field, ForeignKey, Model, QuerySet
from django.db.models.expressions import RawSQL
from django.utils import timezone

NAME = "sqlite"

# --------------------------------------------------------------------------------------------
# health and the job lock


def ping(connection: BaseDatabaseWrapper) -> None:
    """Open the database and run a statement; raises if it cannot."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def job_lock(connection: BaseDatabaseWrapper, job: str) -> AbstractContextManager[bool]:
    """Try to take job `job`'s lock without waiting; the context yields whether it was taken. An
    exclusive `flock` on a file next to the database file, which the kernel releases when the
    holding process exits."""
    return _file_lock(_lock_path(connection, job))


def _lock_path(connection: BaseDatabaseWrapper, job: str) -> Path:
    database = str(connection.settings_dict["NAME"])
    if database == ":memory:" or database.startswith("file:"):
        # An in-memory database lives in one process; a per-process lock directory is enough.
        return Path("/tmp") / f"governed-memory-{os.getpid()}.job-{job}.lock"
    return Path(f"{database}.job-{job}.lock")


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


# --------------------------------------------------------------------------------------------
# statements the ORM does not write


def link_rows(
    connection: BaseDatabaseWrapper, through: type[Model], *, owner: str, owner_pk: Any, target: str, targets: QuerySet
) -> None:
    """Insert one row of `through` per key `targets` selects (a values query of one column), each
    with `owner_pk` as its `owner`: one INSERT ... SELECT, so the keys never travel to Python and
    back (building ten thousand link instances costs more than the insert itself)."""
    quote = connection.ops.quote_name
    select_sql, select_params = targets.query.sql_with_params()
    fields = [cast("ForeignKey[Any, Any]", through._meta.get_field(name)) for name in (owner, target)]
    columns = ", ".join(quote(field.column) for field in fields)
    owner_value = fields[0].target_field.get_db_prep_value(owner_pk, connection)
    sql = f"INSERT INTO {quote(through._meta.db_table)} ({columns}) SELECT %s, linked.pk FROM ({select_sql}) linked"
    with connection.cursor() as cursor:
        cursor.execute(sql, (owner_value, *select_params))


def delete_rows(connection: BaseDatabaseWrapper, model: type[Model], pks: Sequence[Any]) -> int:
    """DELETE the rows of `model` with these keys in one statement, without Django's collector or
    signals (a `post_delete` receiver may copy what is being removed); returns how many went."""
    if not pks:
        return 0
    pk = model._meta.pk
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {quote(model._meta.db_table)} WHERE {quote(cast(str, pk.column))} IN ({', '.join(['%s'] * len(pks))})",
            [pk.get_db_prep_value(value, connection) for value in pks],
        )
        return cursor.rowcount


def json_has_nonzero_value(connection: BaseDatabaseWrapper, model: type[Model], field: str) -> Expression:
    """A boolean expression: the JSON object in `model.field` has a value other than zero."""
    quote = connection.ops.quote_name
    json_field = cast("Field[Any, Any]", model._meta.get_field(field))
    column = f"{quote(model._meta.db_table)}.{quote(cast(str, json_field.column))}"
    return RawSQL(f"EXISTS (SELECT 1 FROM json_each({column}) AS c WHERE c.value <> 0)", [], output_field=BooleanField())


def percentiles(queryset: QuerySet, duration: Expression, fractions: Sequence[float]) -> list[timedelta | None]:
    """Continuous percentiles of a duration over `queryset`, as PostgreSQL's `percentile_cont`
    computes them: SQLite has no such aggregate, so the two rows around each rank are read in
    order (ORDER BY with OFFSET) and interpolated."""
    ordered = queryset.annotate(value=ExpressionWrapper(duration, output_field=DurationField())).order_by("value")
    n = ordered.count()
    results: list[timedelta | None] = []
    for q in fractions:
        if not n:
            results.append(None)
            continue
        rank = (n - 1) * q
        around = list(ordered.values_list("value", flat=True)[floor(rank) : floor(rank) + 2])
        low, high = around[0], around[-1]
        results.append(low + (high - low) * (rank - floor(rank)))
    return results


# --------------------------------------------------------------------------------------------
# forgetting on disk

# What no rewrite here reaches, for the `disk` receipt.
DISK_BEYOND_REACH = "the file system's free blocks (the old -wal and deleted staging files) until reused"
# Appended to the search indexes' receipt: their purge merges the FTS5 segments.
INDEX_PURGE_NOTE = " FTS5 segments merged, so deleted words leave the file."


def disk_artifact_purge(schedule: Callable[[], str]) -> str:
    """What the `disk` forget artifact does at each propagation chunk (checkpoint the write-ahead
    log once the chunk commits), and its receipt's note meanwhile; the job's `schedule` is not
    needed to say it."""
    transaction.on_commit(checkpoint)
    return (
        "Pending: secure_delete zeroes removed content in the database file when each change commits; "
        "the write-ahead log is checkpointed after propagation and by the disk_rewrite job, which "
        "verifies it and completes this receipt. "
    )


def checkpoint() -> bool:
    """Copy the WAL into the database file and truncate it; True if no reader blocked it and no
    frame is left in the log (SQLite's own report: the `-wal` file is then 0 bytes)."""
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        busy, log, _done = cursor.fetchone()
    return not busy and log in (0, -1)  # -1: the database is not in WAL mode, so there is no log


def schema_relation_files(cursor: Any) -> list[Path]:
    """The files a forget's old bytes could stay in: the database file and its write-ahead log."""
    path = Path(cursor.db.settings_dict["NAME"])
    return [Path(f"{path}{suffix}") for suffix in ("", "-wal") if Path(f"{path}{suffix}").exists()]


def rewrite_for_forget(named: Callable[[], list[str]], *, since: datetime | None, vacuum_full: bool) -> dict[str, Any]:
    """Make forgetting reach the file and verify what SQLite reports: merge every FTS5 index (its
    segments keep a deleted row's tokens until merged), checkpoint and truncate the write-ahead
    log, and check that secure_delete is on for the connection and the checkpoint was not blocked.
    The whole file is done, so `named`, `since` and `vacuum_full` do not apply. Returns the facts
    for governance's `Rewrite`."""
    facts: dict[str, Any] = {"method": "sqlite_checkpoint", "how": "by a checkpoint", "started_at": timezone.now(), "reason": ""}
    connection = connections[DEFAULT_DB_ALIAS]
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA secure_delete")
        secure = bool(cursor.fetchone()[0])
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%fts5%'")
        for (name,) in cursor.fetchall():
            quoted = connection.ops.quote_name(name)
            cursor.execute(f"INSERT INTO {quoted}({quoted}) VALUES ('optimize')")
    facts["checkpoint"] = checkpoint()
    if not secure:
        facts["reason"] = "secure_delete is off on this connection (see DATABASES OPTIONS); the next run retries."
    elif not facts["checkpoint"]:
        facts["reason"] = "a reader held the write-ahead log, which still holds old page images; the next run checkpoints it."
    facts["finished_at"] = timezone.now()
    return facts


# --------------------------------------------------------------------------------------------
# backups

DUMP_NAME = "database.sqlite3"


@contextmanager
def _using_database(name: str) -> Iterator[None]:
    """Point the default connection at another database file (the copy) for the block."""
    connection = connections[DEFAULT_DB_ALIAS]
    connection.close()
    saved = connection.settings_dict["NAME"]
    connection.settings_dict["NAME"] = name
    ContentType.objects.clear_cache()
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict["NAME"] = saved
        ContentType.objects.clear_cache()


def dump(connection: BaseDatabaseWrapper, path: Path, describe: Callable[[], dict]) -> dict:
    """Copy the database to `path` with SQLite's online backup API (consistent while other
    connections keep writing), then run `describe()` against the copy, so what it reads describes
    exactly the dump; returns that."""
    source = sqlite3.connect(connection.settings_dict["NAME"], timeout=30)
    target = sqlite3.connect(path)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()
    with _using_database(str(path)):
        return describe()


def restore_dump(connection: BaseDatabaseWrapper, path: Path, *, details: dict, prepare: Callable[[], None]) -> None:
    """Replace the database by the copy at `path`, then `prepare()` it, before anyone reads it: the
    copy is moved to a staging file next to the live one and prepared there (the default
    connection points at it meanwhile), then copied over the live file with the online backup API
    in one step, so readers see the old database or the prepared one."""
    live = Path(connection.settings_dict["NAME"])
    staging = live.with_name(f"{live.name}.restore-{uuid.uuid4().hex[:8]}")
    try:
        os.replace(path, staging)
        with _using_database(str(staging)):
            prepare()
            with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
                cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.close()
        source = sqlite3.connect(staging)
        target = sqlite3.connect(live, timeout=60)
        try:
            target.execute("PRAGMA secure_delete=ON")
            source.backup(target)  # one step: readers see the old database or the restored one
            target.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            source.close()
            target.close()
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{staging}{suffix}").unlink(missing_ok=True)
