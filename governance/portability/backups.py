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
import tarfile
import tempfile
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder
from django.db.models import Count
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from governance.forget.models import ForgetRequest, ForgetTombstone, PropagationReceipt
from governance.forget.propagation import propagate_open_forget_requests
from governance.forget.services import forget_request_create
from governance.jobs import run_job
from governance.jobs.models import JobRun
from governance.portability import disk, ledger
from governance.tasks import JOB_TASKS
from memory.actors import Actor
from memory.engine import current
from memory.models import Agent, MemoryRecord, Tenant

logger = logging.getLogger("governance.backups")

FORMAT = "governed-memory-backup/1"
MANIFEST = "manifest.json"
# A forget filed shortly before the backup started may have committed after pg_dump took its
# snapshot; ledger entries this much older than the backup are re-applied too if the backup lacks them.
REFORGET_MARGIN = timedelta(hours=1)
RESTORE_RECEIPT = "restore"


class BackupError(RuntimeError):
    """The backup or restore could not be done; the message says why. Nothing live was changed."""


def _connection():
    return connections[DEFAULT_DB_ALIAS]


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
    engine = current()
    manifest = {"format": FORMAT, "id": str(uuid.uuid4()), "vendor": engine.NAME}
    with tempfile.TemporaryDirectory(prefix="gm-backup-", dir=outfile.parent) as workdir:
        dump = Path(workdir) / engine.ops.DUMP_NAME
        started_at = timezone.now()
        manifest["started_at"] = started_at.isoformat()
        try:
            manifest.update(engine.ops.dump(connection, dump, _describe))
        except ChildProcessError as exc:  # pg_dump failed; its message names objects, not row values
            raise BackupError(str(exc)) from None
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
        started_at=started_at,
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


def _describe() -> dict:
    """The manifest's account of the database the default connection reads: the engine calls it
    in the dump's own snapshot (PostgreSQL) or against the copy (SQLite)."""
    return {"counts": _counts(), "schema": _schema_version(_connection())}


# --------------------------------------------------------------------------------------------
# restore


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
        member = archive.extractfile(MANIFEST)
        if member is None:  # not a regular file
            raise KeyError(MANIFEST)
        manifest = json.load(member)
    except (OSError, tarfile.TarError, KeyError, ValueError, TypeError):
        raise BackupError(f"{infile} is not a backup made by `manage.py backup` (no readable {MANIFEST}).") from None
    if manifest.get("format") != FORMAT:
        archive.close()
        raise BackupError(f"Unknown backup format {manifest.get('format')!r}; this version reads {FORMAT}.")
    return manifest, archive


def _backup_started_at(manifest: dict) -> datetime:
    """When the backup started, as its manifest says (`backup` writes it in ISO 8601)."""
    started_at = parse_datetime(manifest["started_at"])
    if started_at is None:
        raise BackupError("The manifest's start time is not a time: the backup is damaged.")
    return started_at


def _check_restorable(manifest: dict, connection) -> None:
    if manifest["vendor"] != current().NAME:
        raise BackupError(f"The backup is of a {manifest['vendor']} database; this app runs on {current().NAME}.")
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
        try:
            current().ops.restore_dump(connection, dump, details=manifest, prepare=lambda: _reforget_restored(manifest, result))
        except ChildProcessError as exc:  # pg_restore failed; nothing live changed (its transaction rolled back)
            raise BackupError(str(exc)) from None
    connection.close()
    ContentType.objects.clear_cache()
    reapplied = [str(r.forget_request) for r in result.reforgotten if r.forget_request]
    ledger.record_restore(backup=manifest["id"], backup_started_at=_backup_started_at(manifest), reapplied=reapplied)
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
        "database": current().NAME,
        **{key: counts.get(key, 0) for key in ("requests", "requests_completed", "tables_verified", "tables_pending")},
        "errors": list(run.errors),
    }
    outcome["complete"] = run.status == JobRun.Status.SUCCEEDED and outcome["requests_completed"] == outcome["requests"]
    if not outcome["complete"]:
        try:
            JOB_TASKS[disk.JOB].apply_async(kwargs={"trigger": "restore"}, retry=False)
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
    since = _backup_started_at(manifest) - REFORGET_MARGIN
    contained = {str(pk) for pk in ForgetRequest.objects.values_list("pk", flat=True)}
    actor = Actor.job("restore")
    for entry in ledger.forget_entries(since=since):
        if entry["request"] in contained:
            continue
        item = Reforget(original_request=entry["request"], requested_at=entry["requested_at"], tenant=str(entry.get("tenant")))
        result.reforgotten.append(item)
        tenant_id = entry.get("tenant_id")
        tenant = Tenant.objects.filter(pk=tenant_id, slug=entry.get("tenant")).first() if tenant_id is not None else None
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
