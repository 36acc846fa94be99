"""Forgetting that reaches the disk, checked rather than assumed.

Forget propagation blanks content with UPDATEs and DELETEs. Both databases keep the old bytes for a
while: PostgreSQL leaves the previous row versions in the table and index files (plain VACUUM marks
their space reusable but does not erase it), SQLite leaves freed cells in its pages and old page
images in its write-ahead log.

- SQLite runs with `PRAGMA secure_delete=ON` (config/settings.py): content a change removes is
  zeroed in the page when the change commits. After each propagation chunk commits, and in every
  run of the `disk_rewrite` job, the WAL is checkpointed and truncated; the job also merges every
  FTS5 index, whose segments keep a deleted row's tokens until merged. The job verifies what
  SQLite reports: secure_delete on for the connection, and a checkpoint that was not blocked and
  left no frame in the log (the `-wal` file is then 0 bytes).
- PostgreSQL: the `disk_rewrite` job (beat, every `JOB_DISK_REWRITE_INTERVAL` seconds) rewrites
  with pg_repack, which builds a fresh copy of a table and its indexes while the service keeps
  reading and writing it, then swaps it in under a lock held for milliseconds (a table without a
  primary key, which pg_repack cannot copy online, gets VACUUM FULL); a CHECKPOINT then lets the
  server drop the old files. The tables are the ones the forget artifacts name
  (governance.forgetting.tables_touched: the tables of the models they cover) and every search
  index's tables (memory.search.storage.storage_tables), whatever the statistics say: their
  dead-row counts reach `pg_stat_user_tables` seconds late, so a rewrite chosen by them misses
  what a forget just deleted. Statistics only add tables (any other one holding dead row versions).
  Then it verifies, per table: the table, its TOAST table and TOAST index and every index now live
  in files other than the ones they had before (`pg_relation_filenode`), and, where the role may
  stat server files (`pg_stat_file`: superusers, or granted), each old file is gone or empty.
  pg_repack skips a table whose lock it is not granted within `REPACK_WAIT_SECONDS` without an
  error; such a table, like one VACUUM FULL could not lock or plain VACUUM (no pg_repack) left in
  place, is not verified.

The `disk` forget artifact writes a receipt per request that says "Pending:" during propagation.
One job run serves every forget completed before it (a batch): it completes their receipts only
when every table is verified, with a note naming the tables "rewritten and verified"; otherwise
the receipts stay pending and name the tables not verified, and the next run rewrites and checks
again. A receipt is pending while its `completed_at` is not later than its request's completion:
only a rewrite that started after the request completed can have removed its old row versions.
"""

import logging
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from governance.jobs.schedule import scheduled_intervals
from governance.models import ForgetRequest, PropagationReceipt
from memory.search import storage

logger = logging.getLogger("governance.forgetting")

ARTIFACT = "disk"
JOB = "disk_rewrite"
REPACK_WAIT_SECONDS = 60  # pg_repack (and VACUUM FULL) wait this long for a table's lock, then leave it (never kill a session)
REPACK_TIMEOUT_SECONDS = 3000
NOTE_CHARS = 500  # PropagationReceipt.note


def remains_note(requested_at: datetime) -> str:
    """What no rewrite here reaches, stated plainly."""
    ages_out = requested_at + timedelta(days=settings.MEMORY_BACKUP_RETENTION_DAYS)
    if connection.vendor == "sqlite":
        where = "the file system's free blocks (the old -wal and deleted staging files) until reused"
    else:
        where = "WAL segments until recycled and their archive expires; replicas until they replay the rewrite"
    return f"Beyond reach: {where}; backups taken before the forget until they age out by {ages_out:%Y-%m-%d}."


# --------------------------------------------------------------------------------------------
# the artifact


class DiskArtifact:
    name = ARTIFACT
    covers = ()  # no model of its own: it rewrites the tables of the others
    completes_later = True  # the disk_rewrite job completes the receipt once it verified the rewrite

    def purge(self, request, record_ids):
        if connection.vendor == "sqlite":
            transaction.on_commit(checkpoint_sqlite)
            return 0, (
                "Pending: secure_delete zeroes removed content in the database file when each change commits; "
                "the write-ahead log is checkpointed after propagation and by the disk_rewrite job, which "
                "verifies it and completes this receipt. " + remains_note(request.requested_at)
            )[:NOTE_CHARS]
        interval = scheduled_intervals().get(JOB) or 0
        when = f"runs every {int(interval)} s" if interval else "is not scheduled (run manage.py run_job disk_rewrite)"
        return 0, (
            "Pending: PostgreSQL keeps deleted row versions in the table files until the tables are rewritten. "
            f"The disk_rewrite job ({when}) rewrites the tables forgets touched, online with pg_repack, checks "
            "each got new files and completes this receipt. " + remains_note(request.requested_at)
        )[:NOTE_CHARS]


def pending_receipts(*, completed_before: datetime) -> QuerySet[PropagationReceipt]:
    return PropagationReceipt.objects.filter(
        Q(completed_at__isnull=True) | Q(completed_at__lte=F("forget_request__completed_at")),
        artifact=ARTIFACT,
        forget_request__status=ForgetRequest.Status.COMPLETED,
        forget_request__completed_at__lte=completed_before,
    )


def schema_relation_files(cursor) -> list[Path]:
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


# --------------------------------------------------------------------------------------------
# which tables


def tables_touched() -> list[str]:
    """The tables forget propagation writes to, by name: those of every registered artifact, and
    every search index's tables (the `search_indexes` artifact purges them outside the ORM). The
    order is the artifacts' (the search indexes', then the records' tables first): the rewrite and
    its receipt follow it."""
    from governance.forgetting import tables_touched as artifacts_tables

    return list(dict.fromkeys([*storage.storage_tables(), *artifacts_tables()]))


def _pg_tables_to_rewrite(cursor, *, since: datetime | None) -> list[str]:
    """The tables forgets touch (a partitioned one: its partitions), then any other table of the
    schema the statistics show holding dead row versions or vacuumed since the last rewrite.
    Statistics lag, so they only add."""
    named = tables_touched()
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


# --------------------------------------------------------------------------------------------
# rewriting and verifying


@dataclass
class Rewrite:
    method: str  # pg_repack | vacuum_full | vacuum | sqlite_checkpoint
    started_at: datetime
    finished_at: datetime | None = None
    tables: list[str] = field(default_factory=list)  # named for the rewrite
    verified: list[str] = field(default_factory=list)  # new files for the table, its TOAST and indexes; old ones gone
    pending: list[str] = field(default_factory=list)  # not verified: the next run retries them
    checkpoint: bool = False
    files_checked: bool = False  # the old files were seen gone on the server, not only replaced in the catalog
    reason: str = ""  # why something is pending

    @property
    def complete(self) -> bool:
        """Every old row version of the tables is verified gone from the files."""
        return not self.pending and not self.reason

    def note(self, requested_at: datetime) -> str:
        at = f"{self.finished_at:%Y-%m-%d %H:%M} UTC"
        remains = remains_note(requested_at)
        if self.method == "sqlite_checkpoint":
            done = (
                f"On disk at {at}, verified: secure_delete zeroed the removed content at commit, every FTS5 index "
                "was merged, and the write-ahead log was checkpointed and truncated to 0 bytes."
                if self.complete
                else f"Pending: not verified on disk at {at}: {self.reason}"
            )
            return f"{done} {remains}"[:NOTE_CHARS]
        if self.complete:
            how = "online by pg_repack" if self.method == "pg_repack" else "by VACUUM FULL (tables locked meanwhile)"
            if not self.files_checked:
                gone = "out of use (this role may not stat the server's files)"
            else:
                gone = (
                    "checked gone after a CHECKPOINT" if self.checkpoint else "checked empty (the next checkpoint removes them)"
                )
            head = f"On disk at {at}: rewritten and verified: {len(self.verified)} tables ("
            tail = f"), {how}: new files for each, its TOAST table and indexes; the old files {gone}. {remains}"
            return (head + name_list(self.verified, room=NOTE_CHARS - len(head) - len(tail)) + tail)[:NOTE_CHARS]
        head = f"Pending: not verified on disk at {at}: {len(self.pending)} of {len(self.tables)} tables ("
        tail = (
            f") {self.reason} The disk_rewrite job retries them. Rewritten and verified meanwhile: "
            f"{len(self.verified)} tables. {remains}"
        )
        return (head + name_list(self.pending, room=max(NOTE_CHARS - len(head) - len(tail), 80)) + tail)[:NOTE_CHARS]


def name_list(names: list[str], *, room: int) -> str:
    """The names in at most `room` characters, those sharing a prefix written once
    (`memory_{memoryrecord, idempotencykey}`), the last ones left out as "and N more" if need be."""
    for shown in range(len(names), 0, -1):
        groups: dict[str, list[str]] = {}
        for name in names[:shown]:
            prefix, _, rest = name.partition("_")
            groups.setdefault(prefix, []).append(rest)
        parts = [
            f"{prefix}_{{{', '.join(rests)}}}" if len(rests) > 1 else f"{prefix}_{rests[0]}" if rests[0] else prefix
            for prefix, rests in groups.items()
        ]
        text = ", ".join(parts) + (f" and {len(names) - shown} more" if shown < len(names) else "")
        if len(text) <= room:
            return text
    return f"{len(names)} tables"


def rewrite_tables(*, since: datetime | None = None) -> Rewrite:
    if connection.vendor == "sqlite":
        return _sqlite_rewrite()
    return _pg_rewrite(since=since)


def checkpoint_sqlite() -> bool:
    """Copy the WAL into the database file and truncate it; True if no reader blocked it and no
    frame is left in the log (SQLite's own report: the `-wal` file is then 0 bytes)."""
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        busy, log, _done = cursor.fetchone()
    return not busy and log in (0, -1)  # -1: the database is not in WAL mode, so there is no log


def _sqlite_rewrite() -> Rewrite:
    rewrite = Rewrite(method="sqlite_checkpoint", started_at=timezone.now())
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA secure_delete")
        secure = bool(cursor.fetchone()[0])
        # An FTS5 index keeps a deleted row's tokens in its segments until they are merged: merge
        # every one (search indexes merge their own at propagation; this also reaches any other).
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%fts5%'")
        for (name,) in cursor.fetchall():
            quoted = connection.ops.quote_name(name)
            cursor.execute(f"INSERT INTO {quoted}({quoted}) VALUES ('optimize')")
    rewrite.checkpoint = checkpoint_sqlite()
    if not secure:
        rewrite.reason = "secure_delete is off on this connection (see DATABASES OPTIONS); the next run retries."
    elif not rewrite.checkpoint:
        rewrite.reason = "a reader held the write-ahead log, which still holds old page images; the next run checkpoints it."
    rewrite.finished_at = timezone.now()
    return rewrite


_REPACK_VERSION = re.compile(r"pg_repack (\d+(?:\.\d+)+)")
_REPACK_SKIPPED = re.compile(r"Skipping repack \S+ due to timeout")


def pg_repack_status(cursor) -> tuple[str | None, str]:
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


def _pg_rewrite(*, since: datetime | None) -> Rewrite:
    with connection.cursor() as cursor:
        tables = _pg_tables_to_rewrite(cursor, since=since)
        binary, why_not = pg_repack_status(cursor)
        cursor.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relname = ANY(%s) AND EXISTS "
            "(SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary)",
            [tables],
        )
        keyed = {row[0] for row in cursor.fetchall()}
        before = _pg_files(cursor, tables)
    started = timezone.now()
    why: dict[str, str] = {}  # table -> why it may have been left as it was
    if binary is not None:
        rewrite = Rewrite(method="pg_repack", started_at=started, tables=tables)
        why.update(_run_pg_repack(binary, [table for table in tables if table in keyed]))
        vacuum = [table for table in tables if table not in keyed]
        full = True  # pg_repack needs a primary key; a table without one is rewritten by VACUUM FULL (locked meanwhile)
    else:
        full = settings.FORGET_DISK_VACUUM_FULL
        rewrite = Rewrite(method="vacuum_full" if full else "vacuum", started_at=started, tables=tables)
        vacuum = tables
    with connection.cursor() as cursor:
        why.update(_vacuum(cursor, vacuum, full=full))
        try:
            with transaction.atomic():
                cursor.execute("CHECKPOINT")
            rewrite.checkpoint = True
        except DatabaseError:  # needs a superuser or pg_checkpoint; the server's own checkpoint follows
            rewrite.checkpoint = False
        after = _pg_files(cursor, tables)
        rewrite.files_checked, still_there = _old_files_with_bytes(cursor, before)
    for table in tables:
        old, new = set(before.get(table, {})), set(after.get(table, {}))
        replaced = old.isdisjoint(new)  # a table dropped meanwhile took its files with it
        if replaced and not still_there & set(before.get(table, {}).values()):
            rewrite.verified.append(table)
        else:
            rewrite.pending.append(table)
    if binary is None and not full:
        rewrite.reason = (
            f"No pg_repack: {why_not} Plain VACUUM ran, which leaves deleted row versions in the table "
            "files until their space is reused (no deadline). Install pg_repack, or set "
            "FORGET_DISK_VACUUM_FULL."
        )
    elif rewrite.pending:
        causes = sorted({why.get(table, "the table kept its old files") for table in rewrite.pending})
        rewrite.reason = "Left as they were: " + "; ".join(causes) + "."
    rewrite.finished_at = timezone.now()
    logger.info(
        "disk rewrite",
        extra={
            "method": rewrite.method,
            "tables_verified": rewrite.verified,
            "tables_pending": rewrite.pending,
            "checkpoint": rewrite.checkpoint,
            "files_checked": rewrite.files_checked,
        },
    )
    return rewrite


def _pg_files(cursor, tables: list[str]) -> dict[str, dict[int, str]]:
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


def _old_files_with_bytes(cursor, before: dict[str, dict[int, str]]) -> tuple[bool, set[str]]:
    """(whether the server's files could be checked, the old files still holding bytes). Reading
    file sizes needs a superuser or EXECUTE on pg_stat_file; without it the catalog check stands."""
    cursor.execute("SELECT has_function_privilege('pg_catalog.pg_stat_file(text, boolean)', 'EXECUTE')")
    if not cursor.fetchone()[0]:
        return False, set()
    paths = sorted({path for files in before.values() for path in files.values()})
    cursor.execute("SELECT p FROM unnest(%s::text[]) AS p WHERE coalesce((pg_stat_file(p, true)).size, 0) > 0", [paths])
    return True, {row[0] for row in cursor.fetchall()}


def _vacuum(cursor, tables: list[str], *, full: bool) -> dict[str, str]:
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


def _run_pg_repack(binary: str, tables: list[str]) -> dict[str, str]:
    """Run pg_repack over each table in turn; returns why a table may have been left as it was.
    pg_repack exits 0 even when it skips a table whose lock it was not granted: the files tell.
    One run per table, so the order is ours and one failure leaves the others done."""
    params = connection.settings_dict
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_schema()")
        schema = cursor.fetchone()[0]
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
