"""Forgetting that reaches the disk.

Forget propagation blanks content with UPDATEs and DELETEs. Both databases keep the old bytes for a
while: PostgreSQL leaves the previous row versions in the table and index files (plain VACUUM marks
their space reusable but does not erase it), SQLite leaves freed cells in its pages and old page
images in its write-ahead log.

- SQLite runs with `PRAGMA secure_delete=ON` (config/settings.py): content a change removes is
  zeroed in the page when the change commits. After each propagation chunk commits, and in every
  run of the `disk_rewrite` job, the WAL is checkpointed and truncated, so no old page image stays
  in the `-wal` file either; the job also merges every FTS5 index, whose segments keep a deleted
  row's tokens until merged.
- PostgreSQL: the `disk_rewrite` job (beat, every `JOB_DISK_REWRITE_INTERVAL` seconds) rewrites the
  tables forgets touched with pg_repack, which builds a fresh copy of a table and its indexes while
  the service keeps reading and writing it, then swaps it in under a lock held for milliseconds (a
  table without a primary key, which pg_repack cannot copy online, gets VACUUM FULL); a CHECKPOINT
  then lets the server drop the old files. The tables: those of every model a forget artifact
  cleans, plus any other table of the schema holding dead row versions (search index tables, say).
  One run serves every forget completed since the last one (a batch). Without pg_repack (client
  on this host and extension in the database), the job runs plain VACUUM, or VACUUM FULL if
  `FORGET_DISK_VACUUM_FULL` (which locks each table while it is rewritten), and the receipt says
  what remains.

The `disk` forget artifact writes a receipt per request that says "pending" during propagation;
the job completes it (date, method, tables). A receipt is pending while its `completed_at` is not
later than its request's completion: only a rewrite that started after the request completed can
have removed its old row versions.
"""

import logging
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

from django.apps import apps
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from governance.jobs.schedule import scheduled_intervals
from governance.models import ForgetRequest, JobRun, PropagationReceipt

logger = logging.getLogger("governance.forgetting")

ARTIFACT = "disk"
JOB = "disk_rewrite"
REPACK_WAIT_SECONDS = 60  # pg_repack waits this long for a table's lock, then skips it (never kills a session)
REPACK_TIMEOUT_SECONDS = 3000


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

    def purge(self, request, record_ids):
        if connection.vendor == "sqlite":
            transaction.on_commit(checkpoint_sqlite)
            return 0, ("Pending: secure_delete zeroes removed content in the database file when each change commits; "
                       "the write-ahead log is checkpointed after propagation and by the disk_rewrite job, which "
                       "completes this receipt. " + remains_note(request.requested_at))[:500]
        interval = scheduled_intervals().get(JOB) or 0
        when = f"runs every {int(interval)} s" if interval else "is not scheduled (run manage.py run_job disk_rewrite)"
        return 0, ("Pending: PostgreSQL keeps deleted row versions in the table files until the tables are rewritten. "
                   f"The disk_rewrite job ({when}) rewrites the tables forgets touched, online with pg_repack, and "
                   "completes this receipt with its date. " + remains_note(request.requested_at))[:500]


def pending_receipts(*, completed_before: datetime) -> QuerySet[PropagationReceipt]:
    return PropagationReceipt.objects.filter(
        artifact=ARTIFACT, forget_request__status=ForgetRequest.Status.COMPLETED,
        forget_request__completed_at__lte=completed_before,
        completed_at__lte=F("forget_request__completed_at"),
    )


# --------------------------------------------------------------------------------------------
# which tables


def content_tables() -> list[str]:
    """Tables of every model a registered forget artifact cleans (records, history rows, ...)."""
    from governance.forgetting import registered_artifacts

    tables = set()
    for artifact in registered_artifacts():
        for label in artifact.covers:
            tables.add(apps.get_model(label)._meta.db_table)
    return sorted(tables)


def _pg_tables_to_rewrite(cursor, *, since: datetime | None) -> list[str]:
    """The artifacts' tables, plus any other table of the schema that holds dead row versions or
    was vacuumed since the last rewrite (e.g. search index tables, link tables)."""
    cursor.execute("SELECT pg_stat_force_next_flush()")  # this session's own deletes count too (PostgreSQL 15+)
    cursor.execute(
        "SELECT relname FROM pg_stat_user_tables WHERE schemaname = current_schema() "
        "AND (n_dead_tup > 0 OR greatest(last_vacuum, last_autovacuum) >= %s)",
        [since or datetime(1970, 1, 1, tzinfo=dt_timezone.utc)],
    )
    dead = {row[0] for row in cursor.fetchall()}
    cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
    existing = {row[0] for row in cursor.fetchall()}
    return sorted((set(content_tables()) | dead) & existing)


# --------------------------------------------------------------------------------------------
# rewriting


@dataclass
class Rewrite:
    method: str  # pg_repack | vacuum_full | vacuum | sqlite_checkpoint
    started_at: datetime
    finished_at: datetime | None = None
    rewritten: list[str] = field(default_factory=list)  # tables whose files were replaced
    not_rewritten: list[str] = field(default_factory=list)
    complete: bool = False  # every old row version of the tables is gone from the files
    checkpoint: bool = False
    reason: str = ""  # why not complete

    def note(self, requested_at: datetime) -> str:
        at = f"{self.finished_at:%Y-%m-%d %H:%M} UTC"
        if not self.complete:
            done = f"Not yet on disk ({at}): {self.reason}"
        elif self.method == "sqlite_checkpoint":
            done = f"On disk at {at}: secure_delete zeroed the removed content at commit; the WAL was checkpointed and truncated."
        else:
            how = "online by pg_repack" if self.method == "pg_repack" else "by VACUUM FULL (tables locked meanwhile)"
            done = (f"On disk at {at}: {len(self.rewritten)} tables rewritten {how}; "
                    f"{'a CHECKPOINT' if self.checkpoint else 'the next checkpoint'} dropped the old files.")
        return f"{done} {remains_note(requested_at)}"[:500]


def rewrite_tables(*, since: datetime | None = None) -> Rewrite:
    if connection.vendor == "sqlite":
        return _sqlite_rewrite()
    return _pg_rewrite(since=since)


def checkpoint_sqlite() -> bool:
    """Copy the WAL into the database file and truncate it; False if a reader kept part of it."""
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        busy, _log, _done = cursor.fetchone()
    return not busy


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
    rewrite.complete = secure and rewrite.checkpoint
    if not secure:
        rewrite.reason = "secure_delete is off on this connection (see DATABASES OPTIONS); the next run retries."
    elif not rewrite.checkpoint:
        rewrite.reason = "a reader held the write-ahead log; the next run checkpoints it."
    rewrite.finished_at = timezone.now()
    return rewrite


_REPACK_VERSION = re.compile(r"pg_repack (\d+(?:\.\d+)+)")


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
        before = _filenodes(cursor, tables)
    started = timezone.now()
    if binary is not None:
        rewrite = Rewrite(method="pg_repack", started_at=started)
        _run_pg_repack(binary, [table for table in tables if table in keyed])
        vacuum = [table for table in tables if table not in keyed]
        full = True  # pg_repack needs a primary key; a table without one is rewritten by VACUUM FULL (locked meanwhile)
    else:
        full = settings.FORGET_DISK_VACUUM_FULL
        rewrite = Rewrite(method="vacuum_full" if full else "vacuum", started_at=started, reason=(
            f"no pg_repack: {why_not} Plain VACUUM ran; deleted row versions stay in the table files until their space "
            "is reused (no deadline). Install pg_repack, or set FORGET_DISK_VACUUM_FULL."))
        vacuum = tables
    with connection.cursor() as cursor:
        for table in vacuum:
            cursor.execute(f"VACUUM {'FULL ' if full else ''}{connection.ops.quote_name(table)}")
        after = _filenodes(cursor, tables)
        rewrite.rewritten = [table for table in tables if after.get(table) != before.get(table)]
        rewrite.not_rewritten = [table for table in tables if table not in rewrite.rewritten]
        try:
            with transaction.atomic():
                cursor.execute("CHECKPOINT")
            rewrite.checkpoint = True
        except DatabaseError:  # needs a superuser or pg_checkpoint; the server's own checkpoint follows
            rewrite.checkpoint = False
    rewrite.complete = not rewrite.not_rewritten
    if binary is not None and not rewrite.complete:
        rewrite.reason = (f"pg_repack left {len(rewrite.not_rewritten)} tables as they were (a lock not granted in "
                          f"{REPACK_WAIT_SECONDS} s, or no primary key); the next run retries.")
    rewrite.finished_at = timezone.now()
    return rewrite


def _filenodes(cursor, tables: list[str]) -> dict[str, int]:
    cursor.execute(
        "SELECT c.relname, pg_relation_filenode(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND c.relname = ANY(%s)",
        [tables],
    )
    return dict(cursor.fetchall())


def _run_pg_repack(binary: str, tables: list[str]) -> None:
    if not tables:
        return
    params = connection.settings_dict
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_schema()")
        schema = cursor.fetchone()[0]
    command = [binary, "--no-superuser-check", "--no-kill-backend", f"--wait-timeout={REPACK_WAIT_SECONDS}",
               "--no-password", "--dbname", params["NAME"], "--host", params.get("HOST") or "127.0.0.1",
               "--port", str(params.get("PORT") or 5432), "--username", params.get("USER") or "postgres"]
    for table in tables:
        command += ["--table", f"{schema}.{table}"]
    env = {"PATH": "/usr/bin:/bin", "PGPASSWORD": params.get("PASSWORD") or "", "PGAPPNAME": "governed-memory disk_rewrite"}
    completed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=REPACK_TIMEOUT_SECONDS)
    if completed.returncode != 0:
        # pg_repack's messages name tables, never row values.
        raise RuntimeError(f"pg_repack failed (exit {completed.returncode}): {completed.stderr.strip().splitlines()[-1:]}")
