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
  (governance.forget.artifacts.tables_touched: the tables of the models they cover) and every search
  index's tables (memory.search.storage.storage_tables), whatever the statistics say: their
  dead-row counts reach `pg_stat_user_tables` seconds late, so a rewrite chosen by them misses
  what a forget just deleted. Statistics only add tables (any other one holding dead row versions).
  Then it verifies, per table: the table, its TOAST table and TOAST index and every index now live
  in files other than the ones they had before (`pg_relation_filenode`), and, where the role may
  stat server files (`pg_stat_file`: superusers, or granted), each old file is gone or empty.
  pg_repack skips a table whose lock it is not granted within `REPACK_WAIT_SECONDS`
  (memory.engine.postgres.ops) without an error; such a table, like one VACUUM FULL could not lock or plain VACUUM (no pg_repack) left in
  place, is not verified.

The `disk` forget artifact writes a receipt per request that says "Pending:" during propagation.
One job run serves every forget completed before it (a batch): it completes their receipts only
when every table is verified, with a note naming the tables "rewritten and verified"; otherwise
the receipts stay pending and name the tables not verified, and the next run rewrites and checks
again. A receipt is pending while its `completed_at` is not later than its request's completion:
only a rewrite that started after the request completed can have removed its old row versions.
"""

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import F, Q, QuerySet

from governance.forget.artifacts import tables_touched as artifacts_tables
from governance.forget.models import ForgetRequest, PropagationReceipt
from governance.jobs.schedule import scheduled_intervals
from memory.engine import current
from memory.search import storage

logger = logging.getLogger("governance.forgetting")

ARTIFACT = "disk"
JOB = "disk_rewrite"
NOTE_CHARS = 500  # PropagationReceipt.note


def remains_note(requested_at: datetime) -> str:
    """What no rewrite here reaches, stated plainly."""
    ages_out = requested_at + timedelta(days=settings.MEMORY_BACKUP_RETENTION_DAYS)
    return f"Beyond reach: {current().ops.DISK_BEYOND_REACH}; backups taken before the forget until they age out by {ages_out:%Y-%m-%d}."


# --------------------------------------------------------------------------------------------
# the artifact


class DiskArtifact:
    name = ARTIFACT
    covers = ()  # no model of its own: it rewrites the tables of the others
    completes_later = True  # the disk_rewrite job completes the receipt once it verified the rewrite

    def purge(self, request, record_ids):
        # SQLite checkpoints its write-ahead log once the chunk commits; PostgreSQL waits for the job.
        note = current().ops.disk_artifact_purge(_schedule_words)
        return 0, (note + remains_note(request.requested_at))[:NOTE_CHARS]


def _schedule_words() -> str:
    interval = scheduled_intervals().get(JOB) or 0
    return f"runs every {int(interval)} s" if interval else "is not scheduled (run manage.py run_job disk_rewrite)"


def pending_receipts(*, completed_before: datetime) -> QuerySet[PropagationReceipt]:
    return PropagationReceipt.objects.filter(
        Q(completed_at__isnull=True) | Q(completed_at__lte=F("forget_request__completed_at")),
        artifact=ARTIFACT,
        forget_request__status=ForgetRequest.Status.COMPLETED,
        forget_request__completed_at__lte=completed_before,
    )


# --------------------------------------------------------------------------------------------
# which tables


def tables_touched() -> list[str]:
    """The tables forget propagation writes to, by name: those of every registered artifact, and
    every search index's tables (the `search_indexes` artifact purges them outside the ORM). The
    order is the artifacts' (the search indexes', then the records' tables first): the rewrite and
    its receipt follow it."""
    return list(dict.fromkeys([*storage.storage_tables(), *artifacts_tables()]))


# --------------------------------------------------------------------------------------------
# rewriting and verifying


@dataclass
class Rewrite:
    method: str  # pg_repack | vacuum_full | vacuum | sqlite_checkpoint
    started_at: datetime
    how: str = ""  # the method in a receipt's words: "online by pg_repack"
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
            if not self.files_checked:
                gone = "out of use (this role may not stat the server's files)"
            else:
                gone = (
                    "checked gone after a CHECKPOINT" if self.checkpoint else "checked empty (the next checkpoint removes them)"
                )
            head = f"On disk at {at}: rewritten and verified: {len(self.verified)} tables ("
            tail = f"), {self.how}: new files for each, its TOAST table and indexes; the old files {gone}. {remains}"
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
    """Rewrite and verify what forgets left on disk, the engine's way (`memory.engine.*.ops.rewrite_for_forget`):
    PostgreSQL rewrites `tables_touched()` (and any table the statistics show with dead rows since
    `since`), SQLite checkpoints its log and merges its FTS5 indexes."""
    facts = current().ops.rewrite_for_forget(tables_touched, since=since, vacuum_full=settings.FORGET_DISK_VACUUM_FULL)
    rewrite = Rewrite(**facts)
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
