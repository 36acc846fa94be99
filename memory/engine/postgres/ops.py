"""PostgreSQL operations around the records: what the scheduled jobs, the health check, forget
propagation, forgetting on disk and backups need of the database, written for PostgreSQL.

- the job lock: a session-level advisory lock on a dedicated connection;
- statements governance runs: linking rows to a query's result in one INSERT ... SELECT, deleting
  rows without Django's signals, "does this JSON object hold a count above zero", percentiles;
- forgetting on disk: the tables forgets touched rewritten online by pg_repack (or VACUUM), and
  each checked to live in new files (the callers' prose about it is governance.portability.disk);
- backups: `pg_dump` in the snapshot the manifest is read in, and a restore run by this session in
  one transaction.

`memory.engine.sqlite.ops` offers the same names.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

from django.db import DatabaseError, connection, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Aggregate, BooleanField, DurationField, Expression, Field, ForeignKey, Model, QuerySet
from django.db.models.expressions import RawSQL
from django.utils import timezone

from memory.fences import lock_key

NAME = "postgresql"

# --------------------------------------------------------------------------------------------
# health and the job lock


def ping(connection: BaseDatabaseWrapper) -> None:
    """One round trip to the server; raises if it does not answer."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def job_lock(connection: BaseDatabaseWrapper, job: str) -> AbstractContextManager[bool]:
    """Try to take job `job`'s lock without waiting; the context yields whether it was taken. A
    session-level `pg_try_advisory_lock`: every process that reaches the database sees it, and the
    server releases it when the holding connection closes (its process died)."""
    return _advisory_lock(connection, lock_key(f"job.{job}"))


@contextmanager
def _advisory_lock(connection: BaseDatabaseWrapper, key: int) -> Iterator[bool]:
    # A dedicated connection, so nothing the job does to Django's connection (closing it after an
    # error, a Celery task boundary) can release the lock early.
    raw = connection.get_new_connection(connection.get_connection_params())
    try:
        raw.autocommit = True
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
    sql = f"EXISTS (SELECT 1 FROM jsonb_each_text({column}) AS c WHERE c.value NOT IN ('0', '0.0'))"
    return RawSQL(sql, [], output_field=BooleanField())


class _PercentileCont(Aggregate):
    """The continuous percentile (linear interpolation between the two nearest values)."""

    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"

    def __init__(self, expression: Expression, fraction: float, **extra: Any) -> None:
        super().__init__(expression, fraction=float(fraction), output_field=DurationField(), **extra)


def percentiles(queryset: QuerySet, duration: Expression, fractions: Sequence[float]) -> list[timedelta | None]:
    """Continuous percentiles of a duration over `queryset`, by `percentile_cont` in one query."""
    row = queryset.aggregate(**{f"p{i}": _PercentileCont(duration, q) for i, q in enumerate(fractions)})
    return [row[f"p{i}"] for i in range(len(fractions))]


# --------------------------------------------------------------------------------------------
# forgetting on disk

# What no rewrite here reaches, for the `disk` receipt.
DISK_BEYOND_REACH = "WAL segments until recycled and their archive expires; replicas until they replay the rewrite"
# Appended to the search indexes' receipt: nothing to add here (deleted entries go with the rewrite).
INDEX_PURGE_NOTE = ""
REPACK_WAIT_SECONDS = 60  # pg_repack (and VACUUM FULL) wait this long for a table's lock, then leave it (never kill a session)
REPACK_TIMEOUT_SECONDS = 3000


def disk_artifact_purge(schedule: Callable[[], str]) -> str:
    """What the `disk` forget artifact does at each propagation chunk (nothing: the rewrite is the
    `disk_rewrite` job's), and its receipt's note meanwhile; `schedule()` says when that job runs."""
    return (
        "Pending: PostgreSQL keeps deleted row versions in the table files until the tables are rewritten. "
        f"The disk_rewrite job ({schedule()}) rewrites the tables forgets touched, online with pg_repack, checks "
        "each got new files and completes this receipt. "
    )


def checkpoint() -> bool:
    """A CHECKPOINT, so the server can drop the files a rewrite left; False where the role may not
    (it needs a superuser or pg_checkpoint; the server's own checkpoint follows anyway)."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("CHECKPOINT")
    except DatabaseError:
        return False
    return True


def schema_relation_files(cursor: Any) -> list[Path]:
    """Every file (fork, segment) of every relation of the current schema, with each table's TOAST
    table and TOAST index, under the server's data directory (readable where the app runs on the
    database's host): where a forget's old bytes could stay, for the checks that grep them."""
    cursor.execute("SHOW data_directory")
    data = Path(cursor.fetchone()[0])
    cursor.execute(
        """WITH own AS (SELECT c.oid, c.reltoastrelid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                        WHERE n.nspname = current_schema()),
                rels AS (SELECT oid FROM own UNION SELECT reltoastrelid FROM own WHERE reltoastrelid <> 0
                         UNION SELECT i.indexrelid FROM pg_index i JOIN own ON i.indrelid = own.reltoastrelid)
           SELECT pg_relation_filepath(oid) FROM rels"""
    )
    bases = [data / row[0] for row in cursor.fetchall() if row[0]]
    return sorted(
        {
            path
            for base in bases
            for path in base.parent.glob(base.name + "*")
            if path.name == base.name or path.name[len(base.name)] in "._"
        }
    )


def _tables_to_rewrite(cursor: Any, named: list[str], *, since: datetime | None) -> list[str]:
    """The `named` tables (a partitioned one: its partitions), then any other table of the schema
    the statistics show holding dead row versions or vacuumed since `since`. Statistics lag
    (seconds behind a delete), so they only add."""
    cursor.execute("SELECT pg_stat_force_next_flush()")  # this session's own deletes count too (PostgreSQL 15+)
    cursor.execute(
        "SELECT relname FROM pg_stat_user_tables WHERE schemaname = current_schema() "
        "AND (n_dead_tup > 0 OR greatest(last_vacuum, last_autovacuum) >= %s)",
        [since or datetime(1970, 1, 1, tzinfo=UTC)],
    )
    dead = [row[0] for row in cursor.fetchall()]
    cursor.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND c.relkind = 'r' AND (c.relname = ANY(%s) OR EXISTS ("
        "  SELECT 1 FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent WHERE i.inhrelid = c.oid AND p.relname = ANY(%s)))",
        [sorted({*named, *dead}), named],
    )
    found = {row[0] for row in cursor.fetchall()}
    # The named tables in their order, then the others by name: each is rewritten in that order.
    return [table for table in named if table in found] + sorted(found - set(named))


def rewrite_for_forget(named: Callable[[], list[str]], *, since: datetime | None, vacuum_full: bool) -> dict[str, Any]:
    """Rewrite the tables forgets touched (`named()`, see `_tables_to_rewrite`) so that their old
    row versions leave the files, and verify it per table: the table, its TOAST table and index and
    every index now live in files other than before, and (where the role may stat server files)
    each old file is gone or empty. pg_repack copies a table online and swaps it in under a short
    lock; a table without a primary key, or every table where pg_repack is missing and
    `vacuum_full` is set, gets VACUUM FULL (locked meanwhile); else plain VACUUM, which verifies
    nothing. Returns the facts for governance's `Rewrite`: method (and `how`, in a receipt's
    words), times, tables, verified, pending, checkpoint, files_checked and the reason anything is
    pending."""
    with connection.cursor() as cursor:
        tables = _tables_to_rewrite(cursor, named(), since=since)
        binary, why_not = _repack_status(cursor)
        cursor.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relname = ANY(%s) AND EXISTS "
            "(SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary)",
            [tables],
        )
        keyed = {row[0] for row in cursor.fetchall()}
        before = _files(cursor, tables)
    facts: dict[str, Any] = {"started_at": timezone.now(), "tables": tables, "verified": [], "pending": [], "reason": ""}
    why: dict[str, str] = {}  # table -> why it may have been left as it was
    if binary is not None:
        facts["method"] = "pg_repack"
        why.update(_run_pg_repack(binary, [table for table in tables if table in keyed]))
        vacuum = [table for table in tables if table not in keyed]
        full = True  # pg_repack needs a primary key; a table without one is rewritten by VACUUM FULL (locked meanwhile)
    else:
        full = vacuum_full
        facts["method"] = "vacuum_full" if full else "vacuum"
        vacuum = tables
    with connection.cursor() as cursor:
        why.update(_vacuum(cursor, vacuum, full=full))
    facts["checkpoint"] = checkpoint()
    with connection.cursor() as cursor:
        after = _files(cursor, tables)
        facts["files_checked"], still_there = _old_files_with_bytes(cursor, before)
    for table in tables:
        old, new = set(before.get(table, {})), set(after.get(table, {}))
        replaced = old.isdisjoint(new)  # a table dropped meanwhile took its files with it
        if replaced and not still_there & set(before.get(table, {}).values()):
            facts["verified"].append(table)
        else:
            facts["pending"].append(table)
    if binary is None and not full:
        facts["reason"] = (
            f"No pg_repack: {why_not} Plain VACUUM ran, which leaves deleted row versions in the table "
            "files until their space is reused (no deadline). Install pg_repack, or set "
            "FORGET_DISK_VACUUM_FULL."
        )
    elif facts["pending"]:
        causes = sorted({why.get(table, "the table kept its old files") for table in facts["pending"]})
        facts["reason"] = "Left as they were: " + "; ".join(causes) + "."
    facts["how"] = "online by pg_repack" if facts["method"] == "pg_repack" else "by VACUUM FULL (tables locked meanwhile)"
    facts["finished_at"] = timezone.now()
    return facts


_REPACK_VERSION = re.compile(r"pg_repack (\d+(?:\.\d+)+)")
_REPACK_SKIPPED = re.compile(r"Skipping repack \S+ due to timeout")


def _repack_status(cursor: Any) -> tuple[str | None, str]:
    """(path of the pg_repack client, "") when it can run here, else (None, why not). Creates the
    extension in the database when the server has it and the role may (a superuser, once)."""
    binary = shutil.which("pg_repack")
    if binary is None:
        return None, "its client is not installed on this host (Debian: postgresql-15-repack)."
    cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_repack'")
    row = cursor.fetchone()
    if row is None:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_repack'")
        if cursor.fetchone() is None:
            return None, "the database server lacks the extension (Debian: postgresql-15-repack)."
        try:
            with transaction.atomic():
                cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_repack")
        except DatabaseError:
            return None, "the extension is not created in this database (CREATE EXTENSION pg_repack, as a superuser)."
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_repack'")
        row = cursor.fetchone()
    found = _REPACK_VERSION.search(subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30).stdout)
    if found is None or found.group(1) != row[0]:
        return None, f"its client and the extension (version {row[0]}) differ."
    return binary, ""


def _files(cursor: Any, tables: list[str]) -> dict[str, dict[int, str]]:
    """table -> {filenode: path} of the table, its TOAST table and TOAST index, and its indexes."""
    cursor.execute(
        "SELECT t.relname, pg_relation_filenode(r.oid), pg_relation_filepath(r.oid) "
        "FROM pg_class t JOIN pg_namespace n ON n.oid = t.relnamespace CROSS JOIN LATERAL ("
        "  SELECT t.oid UNION ALL SELECT t.reltoastrelid WHERE t.reltoastrelid <> 0 "
        "  UNION ALL SELECT i.indexrelid FROM pg_index i WHERE i.indrelid = t.oid "
        "    OR (t.reltoastrelid <> 0 AND i.indrelid = t.reltoastrelid)) AS r(oid) "
        "WHERE n.nspname = current_schema() AND t.relkind = 'r' AND t.relname = ANY(%s)",
        [tables],
    )
    files: dict[str, dict[int, str]] = {}
    for table, filenode, path in cursor.fetchall():
        files.setdefault(table, {})[filenode] = path
    return files


def _old_files_with_bytes(cursor: Any, before: dict[str, dict[int, str]]) -> tuple[bool, set[str]]:
    """(whether the server's files could be checked, the old files still holding bytes). Reading
    file sizes needs a superuser or EXECUTE on pg_stat_file; without it the catalog check stands."""
    cursor.execute("SELECT has_function_privilege('pg_catalog.pg_stat_file(text, boolean)', 'EXECUTE')")
    if not cursor.fetchone()[0]:
        return False, set()
    paths = sorted({path for files in before.values() for path in files.values()})
    cursor.execute("SELECT p FROM unnest(%s::text[]) AS p WHERE coalesce((pg_stat_file(p, true)).size, 0) > 0", [paths])
    return True, {row[0] for row in cursor.fetchall()}


def _vacuum(cursor: Any, tables: list[str], *, full: bool) -> dict[str, str]:
    """VACUUM (FULL) each table, waiting at most REPACK_WAIT_SECONDS for its lock; returns why a
    table could not be done."""
    failed: dict[str, str] = {}
    if not tables:
        return failed
    cursor.execute("SELECT set_config('lock_timeout', %s, false)", [f"{REPACK_WAIT_SECONDS}s"])
    try:
        for table in tables:
            try:
                cursor.execute(f"VACUUM {'FULL ' if full else ''}{connection.ops.quote_name(table)}")
            except DatabaseError:  # its message may quote nothing but the table; the class is enough here
                failed[table] = f"VACUUM{' FULL' if full else ''} was not granted the table's lock in {REPACK_WAIT_SECONDS} s"
    finally:
        cursor.execute("RESET lock_timeout")
    return failed


def _current_schema(connection: BaseDatabaseWrapper) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_schema()")
        return cursor.fetchone()[0]


def _run_pg_repack(binary: str, tables: list[str]) -> dict[str, str]:
    """Run pg_repack over each table in turn; returns why a table may have been left as it was.
    pg_repack exits 0 even when it skips a table whose lock it was not granted: the files tell.
    One run per table, so the order is ours and one failure leaves the others done."""
    params = connection.settings_dict
    schema = _current_schema(connection)
    command = [
        binary,
        "--no-superuser-check",
        "--no-kill-backend",
        f"--wait-timeout={REPACK_WAIT_SECONDS}",
        "--no-password",
        "--dbname",
        params["NAME"],
        "--host",
        params.get("HOST") or "127.0.0.1",
        "--port",
        str(params.get("PORT") or 5432),
        "--username",
        params.get("USER") or "postgres",
    ]
    env = {"PATH": "/usr/bin:/bin", "PGPASSWORD": params.get("PASSWORD") or "", "PGAPPNAME": "governed-memory disk_rewrite"}
    deadline = time.monotonic() + REPACK_TIMEOUT_SECONDS
    why: dict[str, str] = {}
    for table in tables:
        left = deadline - time.monotonic()
        if left <= 0:
            why[table] = f"pg_repack did not reach it within {REPACK_TIMEOUT_SECONDS} s"
            continue
        try:
            completed = subprocess.run(
                [*command, "--table", f"{schema}.{table}"], env=env, capture_output=True, text=True, timeout=left
            )
        except subprocess.TimeoutExpired:
            why[table] = f"pg_repack did not finish within {REPACK_TIMEOUT_SECONDS} s"
            continue
        # pg_repack's messages name tables, never row values.
        if _REPACK_SKIPPED.search(completed.stderr + completed.stdout):
            why[table] = f"pg_repack was not granted the table's lock in {REPACK_WAIT_SECONDS} s"
        elif completed.returncode != 0:
            last = (completed.stderr.strip().splitlines() or [""])[-1]
            why[table] = f"pg_repack failed (exit {completed.returncode}: {last[:120]})"
    return why


# --------------------------------------------------------------------------------------------
# backups

DUMP_NAME = "database.pgdump"


def _client_env(params: dict) -> tuple[list[str], dict[str, str]]:
    """Connection arguments and environment for the client programs (pg_dump, pg_restore)."""
    args = [
        "--host",
        params.get("HOST") or "127.0.0.1",
        "--port",
        str(params.get("PORT") or 5432),
        "--username",
        params.get("USER") or "postgres",
        "--no-password",
    ]
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PGPASSWORD": params.get("PASSWORD") or "",
        "PGDATABASE": params["NAME"],
    }
    return args, env


def _run(command: list[str], env: dict[str, str], *, what: str, **kwargs: Any) -> subprocess.CompletedProcess:
    completed = subprocess.run(command, env=env, capture_output=True, **kwargs)
    if completed.returncode != 0:
        stderr = completed.stderr.decode(errors="replace") if isinstance(completed.stderr, bytes) else completed.stderr
        # The client programs' errors name objects, not row values; only the last line is kept.
        last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
        raise ChildProcessError(f"{what} failed (exit {completed.returncode}): {last}")
    return completed


def dump(connection: BaseDatabaseWrapper, path: Path, describe: Callable[[], dict]) -> dict:
    """Write the app's schema to `path` (`pg_dump -Fc`) in the snapshot of a REPEATABLE READ
    transaction in which `describe()` also runs, so what it reads (the manifest's counts) describes
    exactly the dump. Returns what `describe()` returned, with the schema's name. A failing client
    program raises ChildProcessError."""
    args, env = _client_env(connection.settings_dict)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            cursor.execute("SELECT pg_export_snapshot(), current_schema()")
            snapshot, schema = cursor.fetchone()
        details = {**describe(), "database_schema": schema}
        _run(
            ["pg_dump", *args, "--format=custom", f"--schema={schema}", f"--snapshot={snapshot}", "--file", str(path)],
            env,
            what="pg_dump",
            timeout=3600,
        )
    return details


def restore_dump(connection: BaseDatabaseWrapper, path: Path, *, details: dict, prepare: Callable[[], None]) -> None:
    """Replace the database by the dump at `path`, then `prepare()` it, before anyone reads it: one
    transaction of this session drops the app's schema, runs the dump's SQL and COPY data (streamed
    from pg_restore), calls `prepare()` and commits; other sessions wait on the dropped tables'
    locks meanwhile and then see the prepared database. `details` is what `dump` returned."""
    _args, env = _client_env(connection.settings_dict)
    schema = details.get("database_schema") or _current_schema(connection)
    reader = subprocess.Popen(
        ["pg_restore", "--no-owner", "--file", "-", str(path)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    script = reader.stdout
    assert script is not None  # stdout=PIPE
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(f"DROP SCHEMA IF EXISTS {connection.ops.quote_name(schema)} CASCADE")
                _run_script(cursor, script)
            if reader.wait(timeout=3600) != 0:
                last = (reader.stderr.read().decode(errors="replace") if reader.stderr else "").strip().splitlines()[-1:]
                raise ChildProcessError(f"pg_restore failed (exit {reader.returncode}): {last}")
            prepare()
    finally:
        if reader.poll() is None:
            reader.kill()
        reader.wait()


_SET_LINE = re.compile(rb"^SET (\w+) = |set_config\('(\w+)'")


def _run_script(cursor: Any, lines: Iterable[bytes]) -> None:
    """Execute a pg_restore SQL script: runs of statements as one simple query each, `COPY ...
    FROM stdin;` blocks through psycopg's COPY, psql meta-commands (`\\restrict`) skipped. The
    session settings the script changes (search_path above all) are put back afterwards."""
    statements: list[bytes] = []
    changed: dict[str, str] = {}
    lines = iter(lines)

    def flush() -> None:
        if statements:
            cursor.execute(b"".join(statements).decode())
            statements.clear()

    for line in lines:
        if line.startswith(b"\\"):
            continue
        found = _SET_LINE.search(line)
        if found:
            name = (found.group(1) or found.group(2)).decode()
            if name not in changed:
                cursor.execute("SELECT current_setting(%s)", [name])
                changed[name] = cursor.fetchone()[0]
        if line.startswith(b"COPY ") and line.rstrip().endswith(b"FROM stdin;"):
            flush()
            with cursor.cursor.copy(line.decode().rstrip().rstrip(";")) as copy:
                for row in lines:
                    if row == b"\\.\n":
                        break
                    copy.write(row)
            continue
        statements.append(line)
    flush()
    for name, value in changed.items():
        cursor.execute("SELECT set_config(%s, %s, false)", [name, value])
