"""The forget ledger: every forget request, as the keyed fingerprint of its subject, in an
append-only file outside the database (`FORGET_LEDGER_PATH`, default `<APP_VAR_DIR>/forget-ledger.jsonl`).

A restore rolls the database back to the backup, forget requests included; the ledger is not in
the backup and a restore only appends to it, so it still lists every forget filed since, and the
restore re-applies them (governance.portability.backups). It holds no subject in clear: only
tenant, fingerprint (memory.fingerprints: an HMAC under the server's key), request id and times.
Keep it on storage that survives the database (a volume of its own, or shared by every host that
runs the app) and out of the database's backups.

Each line is one JSON object:
- `{"type": "forget", "request": id, "tenant_id", "tenant", "subject_fingerprint", "requested_at", "recorded_at"}`
- `{"type": "restore", "backup", "backup_started_at", "restored_at", "reapplied": [request ids]}`

A forget is recorded when its request commits (governance.forget.services calls
`record_forget_request_on_commit`, registered from GovernanceConfig.ready()) and again, if missing, by the
`forget_ledger` artifact during propagation (a crash between the commit and the first write is
covered by the second). Appends take an exclusive lock on the file and are fsynced; a line torn by
a crash mid-write is skipped when reading.
"""

import fcntl
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from governance.forget.models import ForgetRequest
from memory.fingerprints import subject_fingerprint

logger = logging.getLogger("governance.forgetting")


def ledger_path() -> Path:
    return Path(settings.FORGET_LEDGER_PATH)


@contextmanager
def _locked(path: Path) -> Iterator[int]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # releases the lock


def _read(fd: int) -> list[dict]:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    entries = []
    for line in b"".join(chunks).splitlines():
        try:
            entry = json.loads(line)
        except ValueError:  # a line torn by a crash mid-append
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def _append(fd: int, entries: list[dict]) -> None:
    if entries:
        os.write(fd, b"".join(json.dumps(entry, sort_keys=True).encode() + b"\n" for entry in entries))
        os.fsync(fd)


def read_ledger() -> list[dict]:
    path = ledger_path()
    if not path.exists():
        return []
    with _locked(path) as fd:
        return _read(fd)


def forget_entry(request: ForgetRequest) -> dict:
    """The ledger line of a request: the subject only as its keyed fingerprint."""
    return {
        "type": "forget",
        "request": str(request.pk),
        "tenant_id": request.tenant_id,
        "tenant": request.tenant.slug,
        "subject_fingerprint": subject_fingerprint(request.tenant_id, request.subject),
        "requested_at": request.requested_at.isoformat(),
        "recorded_at": timezone.now().isoformat(),
    }


def record_forget_requests(requests: list[ForgetRequest]) -> int:
    """Append the requests the ledger does not list yet; returns how many were added."""
    if not requests:
        return 0
    with _locked(ledger_path()) as fd:
        known = {entry.get("request") for entry in _read(fd) if entry.get("type") == "forget"}
        new = [forget_entry(request) for request in requests if str(request.pk) not in known]
        _append(fd, new)
    return len(new)


def record_forget_request_on_commit(request: ForgetRequest) -> None:
    """Called once the request has committed. Never fails the request: the `forget_ledger` artifact
    records it during propagation if this could not."""
    try:
        record_forget_requests([request])
    except OSError as exc:
        logger.error(
            "could not record the forget request in the ledger; propagation will retry",
            extra={"forget_request_id": str(request.pk), "error": type(exc).__name__},
        )


def record_restore(*, backup: str, backup_started_at: datetime, reapplied: list[str]) -> None:
    with _locked(ledger_path()) as fd:
        _append(
            fd,
            [
                {
                    "type": "restore",
                    "backup": backup,
                    "backup_started_at": backup_started_at.isoformat(),
                    "restored_at": timezone.now().isoformat(),
                    "reapplied": reapplied,
                }
            ],
        )


def forget_entries(*, since: datetime | None = None) -> list[dict]:
    """The ledger's forget lines (one per request, first wins), oldest first; `since` keeps those
    requested at or after it."""
    entries: dict[str, dict] = {}
    for entry in read_ledger():
        if entry.get("type") != "forget" or entry.get("request") in entries:
            continue
        requested_at = parse_datetime(str(entry.get("requested_at")))
        if requested_at is None or (since is not None and requested_at < since):
            continue
        entries[entry["request"]] = {**entry, "requested_at": requested_at}
    return sorted(entries.values(), key=lambda entry: entry["requested_at"])


class ForgetLedgerArtifact:
    """Makes sure the ledger lists the request (it normally does from the moment the request
    committed); removes nothing."""

    name = "forget_ledger"
    covers = ()

    def purge(self, request, record_ids):
        added = record_forget_requests([ForgetRequest.objects.select_related("tenant").get(pk=request.pk)])
        when = "now" if added else "when the request was filed"
        return 0, (
            f"Recorded in the forget ledger {when} (tenant and keyed subject fingerprint only), outside the "
            "database: a restore of an older backup re-applies this forget before it returns."
        )
