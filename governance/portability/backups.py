"""Consistent backups of the database, and restores that never bring a forgotten subject back.

A backup is one tar file (mode 0600: it holds content in clear) with
- `manifest.json`: format, id, database vendor, start and end time, the migrations applied (the
  schema version), counts (records per status, history rows, forget requests, tombstones, ...)
  and the dump's size and sha256;
- the dump: PostgreSQL's own custom format (`pg_dump -Fc` of the app's schema, the counts read in
  the very snapshot pg_dump dumps, via `pg_export_snapshot`), or SQLite's online backup API (a
  consistent copy while the app keeps running).

A restore
1. checks the manifest (format, vendor, checksum) and that this code knows every migration of
   the backup (a backup from a newer version is refused);
2. records in the forget ledger any forget request of the live database it lacks;
3. restores the backup and, before anyone can read it, migrates it to this code's schema, then
   re-applies, oldest first, every forget of the ledger the backup does not contain (requested
   since an hour before the backup started, its request absent from the backup), as a forget
   request by the subject's fingerprint with a `restore` receipt saying so, and propagates every
   open forget request to the end. PostgreSQL: all of it in one transaction of the restoring
   session (the app's schema dropped, the backup's SQL and COPY data run, then the re-forget),
   so other sessions wait and then see the re-forgotten database. SQLite: in a staging file next
   to the live one, then copied over the live file with the online backup API in one step;
4. appends a `restore` line to the ledger and records a `restore` JobRun;
5. runs the `disk_rewrite` job at once (governance.portability.disk): the restore wrote every
   table anew and the re-forget left the re-forgotten rows' old versions in those files, which
   must not wait for the schedule. Its run (tables rewritten and verified, or pending and retried
   by the job, which is also sent to the workers then) is in the result.
"""

import hashlib
import io
import json
import logging
import os
import re
import sqlite3
import subprocess
import tarfile
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder
from django.db.models import Count
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from governance.forgetting import propagate_open_forget_requests
from governance.jobs import run_job
from governance.models import ForgetRequest, ForgetTombstone, JobRun, PropagationReceipt
from governance.portability import disk, ledger
from governance.services import forget_request_create
from memory.actors import Actor
from memory.models import Agent, MemoryRecord, Tenant

logger = logging.getLogger("governance.backups")

FORMAT = "governed-memory-backup/1"
MANIFEST = "manifest.json"
DUMP_NAMES = {"postgresql": "database.pgdump", "sqlite": "database.sqlite3"}
# A forget filed shortly before the backup started may have committed after pg_dump took its
# snapshot; ledger entries this much older than the backup are re-applied too if the backup lacks them.
REFORGET_MARGIN = timedelta(hours=1)
RESTORE_RECEIPT = "restore"


class BackupError(RuntimeError):
    """The backup or restore could not be done; the message says why. Nothing live was changed."""


def _connection():
    return connections[DEFAULT_DB_ALIAS]


# --------------------------------------------------------------------------------------------
# PostgreSQL client programs


def _pg_args(params: dict, *, database: str | None = None) -> tuple[list[str], dict[str, str]]:
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
        "PGDATABASE": database or params["NAME"],
    }
    return args, env


def _run(command: list[str], env: dict, *, what: str, **kwargs) -> subprocess.CompletedProcess:
    completed = subprocess.run(command, env=env, capture_output=True, **kwargs)
    if completed.returncode != 0:
        stderr = completed.stderr.decode(errors="replace") if isinstance(completed.stderr, bytes) else completed.stderr
        # The client programs' errors name objects, not row values; only the last line is kept.
        last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
        raise BackupError(f"{what} failed (exit {completed.returncode}): {last}")
    return completed


def _schema(connection) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_schema()")
        return cursor.fetchone()[0]


# --------------------------------------------------------------------------------------------
# manifest


def _counts() -> dict:
    by_status = dict(MemoryRecord.objects.order_by().values("status").annotate(n=Count("pk")).values_list("status", "n"))
    return {
        "tenants": Tenant.objects.count(),
        "agents": Agent.objects.count(),
        "records": sum(by_status.values()),
        "records_by_status": dict(sorted(by_status.items())),
        "history_rows": MemoryRecord.history.model.objects.count(),
        "forget_requests": ForgetRequest.objects.count(),
        "tombstones": ForgetTombstone.objects.count(),
    }


def _schema_version(connection) -> dict:
    applied = sorted(f"{app}.{name}" for app, name in MigrationRecorder(connection).applied_migrations())
    latest: dict[str, str] = {}
    for item in applied:
        app, name = item.split(".", 1)
        latest[app] = max(latest.get(app, ""), name)
    return {"latest": dict(sorted(latest.items())), "applied": applied}


@dataclass
class BackupResult:
    path: Path
    manifest: dict


def backup(outfile: Path) -> BackupResult:
    """Write a backup of the default database to `outfile` (a tar; replaced atomically)."""
    connection = _connection()
    if connection.in_atomic_block:
        raise BackupError("A backup cannot run inside a transaction.")
    outfile = outfile.resolve()
    outfile.parent.mkdir(parents=True, exist_ok=True)
    manifest = {"format": FORMAT, "id": str(uuid.uuid4()), "vendor": connection.vendor}
    with tempfile.TemporaryDirectory(prefix="gm-backup-", dir=outfile.parent) as workdir:
        dump = Path(workdir) / DUMP_NAMES.get(connection.vendor, "database")
        manifest["started_at"] = timezone.now().isoformat()
        if connection.vendor == "postgresql":
            manifest.update(_pg_dump_consistent(connection, dump))
        elif connection.vendor == "sqlite":
            manifest.update(_sqlite_backup(connection, dump))
        else:  # pragma: no cover - the project supports PostgreSQL and SQLite only
            raise BackupError(f"No backup for database vendor {connection.vendor!r}.")
        manifest["finished_at"] = timezone.now().isoformat()
        manifest["dump"] = {"name": dump.name, "bytes": dump.stat().st_size, "sha256": _sha256(dump)}
        manifest["ledger_entries"] = len(ledger.read_ledger())
        partial = Path(workdir) / "backup.tar"
        with tarfile.open(partial, "w") as archive:
            data = json.dumps(manifest, indent=2, sort_keys=True).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size, info.mtime, info.mode = len(data), int(timezone.now().timestamp()), 0o600
            archive.addfile(info, io.BytesIO(data))
            archive.add(dump, arcname=dump.name)
        os.chmod(partial, 0o600)
        os.replace(partial, outfile)
    JobRun.objects.create(
        job="backup",
        status=JobRun.Status.SUCCEEDED,
        trigger="command",
        started_at=parse_datetime(manifest["started_at"]),
        finished_at=timezone.now(),
        counts={"records": manifest["counts"]["records"], "bytes": outfile.stat().st_size},
    )
    logger.info(
        "backup written",
        extra={"backup_id": manifest["id"], "bytes": outfile.stat().st_size, "records": manifest["counts"]["records"]},
    )
    return BackupResult(outfile, manifest)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _pg_dump_consistent(connection, dump: Path) -> dict:
    """pg_dump of the app's schema in the snapshot of a REPEATABLE READ transaction that also
    reads the counts and the applied migrations: the manifest describes exactly the dump."""
    args, env = _pg_args(connection.settings_dict)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            cursor.execute("SELECT pg_export_snapshot(), current_schema()")
            snapshot, schema = cursor.fetchone()
        details = {"counts": _counts(), "schema": _schema_version(connection), "database_schema": schema}
        _run(
            ["pg_dump", *args, "--format=custom", f"--schema={schema}", f"--snapshot={snapshot}", "--file", str(dump)],
            env,
            what="pg_dump",
            timeout=3600,
        )
    return details


def _sqlite_backup(connection, dump: Path) -> dict:
    """SQLite's online backup API: a consistent copy while other connections keep writing."""
    source = sqlite3.connect(connection.settings_dict["NAME"], timeout=30)
    target = sqlite3.connect(dump)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()
    with _using_database(str(dump)):
        details = {"counts": _counts(), "schema": _schema_version(_connection())}
    return details


# --------------------------------------------------------------------------------------------
# restore


@contextmanager
def _using_database(name: str) -> Iterator[None]:
    """Point the default connection at another database (the staging copy) for the block."""
    connection = _connection()
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


@dataclass
class Reforget:
    original_request: str
    requested_at: datetime
    tenant: str
    forget_request: uuid.UUID | None = None
    affected: int = 0
    skipped: str = ""


@dataclass
class RestoreResult:
    manifest: dict
    reforgotten: list[Reforget] = field(default_factory=list)
    propagated: int = 0
    counts: dict = field(default_factory=dict)
    job_run_id: int | None = None
    disk: dict = field(default_factory=dict)  # the disk_rewrite run that followed

    def summary(self) -> dict:
        return {
            "backup": self.manifest["id"],
            "backup_started_at": self.manifest["started_at"],
            "reapplied_forgets": len([r for r in self.reforgotten if r.forget_request]),
            "records_reforgotten": sum(r.affected for r in self.reforgotten),
            "skipped_forgets": len([r for r in self.reforgotten if r.skipped]),
            "requests_propagated": self.propagated,
            "counts": self.counts,
            "disk_rewrite": self.disk,
        }


def read_manifest(infile: Path) -> tuple[dict, tarfile.TarFile]:
    try:
        archive = tarfile.open(infile, "r")  # noqa: SIM115  (returned open: the caller reads the members, then closes it)
        manifest = json.load(archive.extractfile(MANIFEST))
    except (OSError, tarfile.TarError, KeyError, ValueError, TypeError):
        raise BackupError(f"{infile} is not a backup made by `manage.py backup` (no readable {MANIFEST}).") from None
    if manifest.get("format") != FORMAT:
        archive.close()
        raise BackupError(f"Unknown backup format {manifest.get('format')!r}; this version reads {FORMAT}.")
    return manifest, archive


def _check_restorable(manifest: dict, connection) -> None:
    if manifest["vendor"] != connection.vendor:
        raise BackupError(f"The backup is of a {manifest['vendor']} database; this app runs on {connection.vendor}.")
    known = {f"{app}.{name}" for app, name in MigrationLoader(None, ignore_no_migrations=True).graph.nodes}
    unknown = sorted(set(manifest["schema"]["applied"]) - known)
    if unknown:
        raise BackupError(
            f"The backup was made by a newer version of the app (migrations unknown here: "
            f"{', '.join(unknown[:5])}). Upgrade the code first."
        )


def restore(infile: Path) -> RestoreResult:
    """Restore `infile` over the default database, re-applying every forget the backup lacks
    before the live database changes. On any error the live database is left as it was."""
    connection = _connection()
    if connection.in_atomic_block:
        raise BackupError("A restore cannot run inside a transaction.")
    started_at = timezone.now()
    manifest, archive = read_manifest(Path(infile))
    with archive, tempfile.TemporaryDirectory(prefix="gm-restore-") as workdir:
        _check_restorable(manifest, connection)
        member = manifest["dump"]["name"]
        try:
            archive.extract(member, workdir, filter="data")
        except (KeyError, tarfile.TarError, OSError):
            raise BackupError(f"The backup lacks its dump ({member}).") from None
        dump = Path(workdir) / member
        if _sha256(dump) != manifest["dump"]["sha256"]:
            raise BackupError("The dump does not match the manifest's sha256: the backup is damaged.")
        _ledger_live_requests()
        result = RestoreResult(manifest)
        if connection.vendor == "postgresql":
            _pg_restore(connection, dump, result)
        else:
            _sqlite_restore(connection, dump, result)
    connection.close()
    ContentType.objects.clear_cache()
    reapplied = [str(r.forget_request) for r in result.reforgotten if r.forget_request]
    ledger.record_restore(backup=manifest["id"], backup_started_at=parse_datetime(manifest["started_at"]), reapplied=reapplied)
    summary = result.summary()
    run = JobRun.objects.create(
        job="restore",
        status=JobRun.Status.SUCCEEDED,
        trigger="command",
        started_at=started_at,
        finished_at=timezone.now(),
        counts={key: value for key, value in summary.items() if isinstance(value, int)},
    )
    result.job_run_id = run.pk
    logger.info(
        "backup restored", extra={"backup_id": manifest["id"], **{k: v for k, v in summary.items() if isinstance(v, int)}}
    )
    result.disk = _rewrite_disk_now()
    return result


def _rewrite_disk_now() -> dict:
    """Run the `disk_rewrite` job now, the way `manage.py run_job` does: the restored tables hold
    the re-forgotten rows' old versions. If it could not finish (its lock held by a run that
    started before the restore, a table it could not rewrite), the task is also sent to the workers
    (best effort: beat's schedule remains)."""
    run = run_job(disk.JOB, trigger="restore")
    counts = run.counts or {}
    outcome = {
        "run": run.pk,
        "status": run.status,
        "database": _connection().vendor,
        **{key: counts.get(key, 0) for key in ("requests", "requests_completed", "tables_verified", "tables_pending")},
        "errors": list(run.errors),
    }
    outcome["complete"] = run.status == JobRun.Status.SUCCEEDED and outcome["requests_completed"] == outcome["requests"]
    if not outcome["complete"]:
        from governance.tasks import run_disk_rewrite

        try:
            run_disk_rewrite.apply_async(kwargs={"trigger": "restore"}, retry=False)
            outcome["sent_to_workers"] = True
        except Exception as exc:  # the restore has committed; the schedule runs the job anyway
            logger.warning("could not send the disk rewrite to the workers", extra={"error": type(exc).__name__})
            outcome["sent_to_workers"] = False
    return outcome


def _ledger_live_requests() -> None:
    """The live database's forget requests into the ledger (they normally are already): after the
    restore, the ledger is the only place they are known."""
    try:
        requests = list(ForgetRequest.objects.select_related("tenant"))
    except Exception:  # a live database that is empty or broken: nothing to carry over
        logger.warning("could not read the live database's forget requests before the restore")
        return
    ledger.record_forget_requests(requests)


def _reforget_restored(manifest: dict, result: RestoreResult) -> None:
    """In the restored database, before anyone is served from it: migrate it to this code's
    schema, re-forget what the backup lacks, propagate every open forget request."""
    call_command("migrate", interactive=False, verbosity=0)
    since = parse_datetime(manifest["started_at"]) - REFORGET_MARGIN
    contained = {str(pk) for pk in ForgetRequest.objects.values_list("pk", flat=True)}
    actor = Actor.job("restore")
    for entry in ledger.forget_entries(since=since):
        if entry["request"] in contained:
            continue
        item = Reforget(original_request=entry["request"], requested_at=entry["requested_at"], tenant=str(entry.get("tenant")))
        result.reforgotten.append(item)
        tenant = Tenant.objects.filter(pk=entry.get("tenant_id"), slug=entry.get("tenant")).first()
        if tenant is None:
            item.skipped = "tenant not in the backup: nothing of it to forget"
            continue
        request = forget_request_create(
            actor=actor,
            tenant=tenant,
            subject=entry["subject_fingerprint"],
            reason=f"Re-applied after restoring backup {manifest['id']}: forget request {entry['request']} of "
            f"{entry['requested_at']:%Y-%m-%d %H:%M} UTC is newer than the backup.",
        )
        item.forget_request, item.affected = request.pk, request.affected
        PropagationReceipt.objects.create(
            forget_request=request,
            artifact=RESTORE_RECEIPT,
            removed=request.affected,
            completed_at=timezone.now(),
            note=(
                f"Restore of backup {manifest['id']} (started {manifest['started_at'][:16]} UTC): the backup predates forget "
                f"request {entry['request']}, kept in the forget ledger; re-applied before the restore returned."
            )[:500],
        )
    for _request, outcome in propagate_open_forget_requests(batch_size=1000):
        if isinstance(outcome, Exception):
            raise BackupError(
                f"Propagating forget request {_request.pk} in the restored database failed: {type(outcome).__name__}."
            )
        result.propagated += 1
    result.counts = _counts()


def _pg_restore(connection, dump: Path, result: RestoreResult) -> None:
    """One transaction of our own session: drop the app's schema, run the backup's SQL (statements
    and COPY data, streamed from pg_restore), migrate, re-forget, propagate, commit. Other sessions
    wait on the dropped tables' locks meanwhile and then see the restored, re-forgotten database."""
    _args, env = _pg_args(connection.settings_dict)
    schema = result.manifest.get("database_schema") or _schema(connection)
    reader = subprocess.Popen(
        ["pg_restore", "--no-owner", "--file", "-", str(dump)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(f"DROP SCHEMA IF EXISTS {connection.ops.quote_name(schema)} CASCADE")
                _run_script(cursor, reader.stdout)
            if reader.wait(timeout=3600) != 0:
                raise BackupError(
                    f"pg_restore failed (exit {reader.returncode}): "
                    f"{reader.stderr.read().decode(errors='replace').strip().splitlines()[-1:]}"
                )
            _reforget_restored(result.manifest, result)
    finally:
        if reader.poll() is None:
            reader.kill()
        reader.wait()


_SET_LINE = re.compile(rb"^SET (\w+) = |set_config\('(\w+)'")


def _run_script(cursor, lines) -> None:
    """Execute a pg_restore SQL script: runs of statements as one simple query each, `COPY ...
    FROM stdin;` blocks through psycopg's COPY, psql meta-commands (`\\restrict`) skipped. The
    session settings the script changes (search_path above all) are put back afterwards."""
    statements: list[bytes] = []
    changed: dict[str, str] = {}

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


def _sqlite_restore(connection, dump: Path, result: RestoreResult) -> None:
    live = Path(connection.settings_dict["NAME"])
    staging = live.with_name(f"{live.name}.restore-{uuid.uuid4().hex[:8]}")
    try:
        os.replace(dump, staging)
        with _using_database(str(staging)):
            _reforget_restored(result.manifest, result)
            with _connection().cursor() as cursor:
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
