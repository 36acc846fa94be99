"""Notes back into the app: every note is a write through the lifecycle services
(`memory.services.memory_write_batch`), so it is validated, admitted or quarantined, and recorded
with its history row exactly as an agent's write would be.

- Provenance: source type `import`; the note's URI, session, turn, tool, observed time and
  contamination are kept as they were, and `source_version` holds
  `"<original id> <original source type>[ <original source version>]"`, so the original's
  identity and kind of source stay on the record (`import_source_version`).
- Admission: a claim of user or operator authority from an import is quarantined unless the
  credential may import trusted memory (`can_import_trusted`); agent and third-party claims,
  contaminated sessions and summaries are quarantined as for any write. Trust, review and status
  are never taken from the file: the server decides them again.
- Idempotent: a note whose original id was imported before for the same agent (found by the
  `source_version` above) is reported `already_imported` and writes nothing; each write also
  carries the idempotency key `import:<original id>`, which settles two imports racing.
- Links: a note is written after the notes it depends on (the record it corrects, the records it
  was derived from), in waves. A summary gets `derived_from` mapped to the new ids, or is an error
  if a source was not imported. A correction gets `supersedes` (at the corrected record's current
  version) when the corrected record is active here, which supersedes it as a live correction
  would; otherwise it is imported without the link and the report says why.
- Not imported: tombstones of forgotten records, records expired or rejected at the source or
  expired since the export (`skipped`); notes a guard refuses, e.g. a subject forgotten here
  (`refused`). A malformed note is an `error` with a reason and writes nothing; the others still go.

Messages never quote content.
"""

import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from memory.errors import DomainError
from memory.models import PURPOSE_MAX_CHARS, AgentCredential, MemoryRecord, SourceType, Status, Tenant, content_digest
from memory.policy import CHUNK
from memory.portable.notes import INDEX_NAME, Note, NoteError, parse_note
from memory.services import memory_write_batch
from memory.validation import BATCH_MAX_ITEMS

# A guard refuses notes the app must not take back: (tenant, subjects) -> {subject: reason}.
ImportGuard = Callable[[Tenant, set[str]], dict[str, str]]
_GUARDS: list[ImportGuard] = []

NOT_IMPORTED_STATUSES: dict[str | None, str] = {
    Status.EXPIRED: "Expired at the source: not imported.",
    Status.REJECTED: "Rejected by a reviewer at the source: not imported.",
}
SOURCE_VERSION_MAX_CHARS = 200


def register_import_guard(guard: ImportGuard) -> None:
    if guard not in _GUARDS:
        _GUARDS.append(guard)


def import_source_version(original_id: uuid.UUID, source_type: str, source_version: str | None) -> str:
    """The imported record's `source_version`: the original's id and source type (and version)."""
    return f"{original_id} {source_type}" + (f" {source_version}" if source_version else "")


def import_idempotency_key(original_id: uuid.UUID) -> str:
    return f"import:{original_id}"


# --------------------------------------------------------------------------------------------
# the report


@dataclass
class FileResult:
    path: str
    outcome: str  # imported | already_imported | skipped | refused | error
    source_id: str | None = None
    record_id: uuid.UUID | None = None
    status: str | None = None
    messages: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "outcome": self.outcome,
            "source_id": self.source_id,
            "record_id": str(self.record_id) if self.record_id else None,
            "status": self.status,
            "messages": self.messages,
        }


OUTCOMES = ("imported", "already_imported", "skipped", "refused", "error")


@dataclass
class ImportReport:
    files: list[FileResult]

    def counts(self) -> dict[str, int]:
        counts = {outcome: 0 for outcome in OUTCOMES}
        for result in self.files:
            counts[result.outcome] += 1
        return {"files": len(self.files), **counts}

    @property
    def errors(self) -> list[FileResult]:
        return [result for result in self.files if result.outcome == "error"]


# --------------------------------------------------------------------------------------------
# reading the files


def read_directory(root: Path) -> Iterator[tuple[str, bytes | OSError]]:
    """Every `*.md` under `root` but the export's `index.md`, in path order, as (relative path,
    bytes or the error that stopped the read)."""
    for path in sorted(p for p in root.rglob("*.md") if p.is_file()):
        relative = path.relative_to(root).as_posix()
        if relative == INDEX_NAME:
            continue
        try:
            yield relative, path.read_bytes()
        except OSError as exc:
            yield relative, exc


@dataclass
class _Candidate:
    result: FileResult
    note: Note
    source_version: str
    supersedes: uuid.UUID | None
    derived_from: list[uuid.UUID]

    @property
    def depends_on(self) -> list[uuid.UUID]:
        return ([self.supersedes] if self.supersedes else []) + self.derived_from


def _error(result: FileResult, message: str) -> None:
    result.outcome = "error"
    result.messages.append(message)


def _uuid_or_none(value: Any) -> uuid.UUID | None:
    if value is None:
        return None
    return uuid.UUID(str(value))


def _candidate(result: FileResult, note: Note, *, now: datetime) -> _Candidate | None:
    """The note as something to write, or None with the result set to skipped or error."""
    meta = note.meta
    if note.is_tombstone:
        result.outcome = "skipped"
        result.messages.append("A forgotten record (tombstone): nothing to import.")
        return None
    if note.status in NOT_IMPORTED_STATUSES:
        result.outcome = "skipped"
        result.messages.append(NOT_IMPORTED_STATUSES[note.status])
        return None
    expires_at = parse_datetime(meta["expires_at"]) if isinstance(meta.get("expires_at"), str) else None
    if expires_at is not None and timezone.is_aware(expires_at) and expires_at <= now:
        result.outcome = "skipped"
        result.messages.append("Expired since the export (its expires_at has passed): not imported.")
        return None
    provenance = meta.get("provenance")
    if not isinstance(provenance, dict) or not isinstance(provenance.get("source_type"), str):
        _error(result, "provenance: a mapping with the original source_type is required.")
        return None
    if provenance["source_type"] not in SourceType.values:
        _error(result, f"provenance.source_type: must be one of {', '.join(SourceType.values)}.")
        return None
    if "content_hash" in meta and meta["content_hash"] != content_digest(note.content):
        _error(
            result,
            "The body does not match content_hash: the content was changed or cut since the export. "
            "To import an edited note on purpose, remove its content_hash line.",
        )
        return None
    original_version = provenance.get("source_version")
    source_version = import_source_version(
        note.id, provenance["source_type"], original_version if isinstance(original_version, str) else None
    )
    if len(source_version) > SOURCE_VERSION_MAX_CHARS:
        _error(
            result,
            f"provenance.source_version: too long to keep with the original id ({SOURCE_VERSION_MAX_CHARS} characters in all).",
        )
        return None
    try:
        supersedes = _uuid_or_none(meta.get("supersedes"))
        derived = meta.get("derived_from") or []
        if not isinstance(derived, list):
            raise ValueError
        derived_from = list(dict.fromkeys(uuid.UUID(str(source)) for source in derived))
    except ValueError:
        _error(result, "supersedes and derived_from must be record ids (UUIDs).")
        return None
    return _Candidate(result, note, source_version, supersedes, derived_from)


def _write_body(candidate: _Candidate) -> dict[str, Any]:
    meta, provenance = candidate.note.meta, candidate.note.meta["provenance"]
    body: dict[str, Any] = {
        name: meta[name] for name in ("kind", "subject", "purpose", "authority", "confidence") if name in meta
    }
    body["content"] = candidate.note.content
    body["provenance"] = {
        "source_type": SourceType.IMPORT.value,
        **{name: provenance.get(name) for name in ("uri", "session_id", "turn_id", "tool")},
        "source_version": candidate.source_version,
        "observed_at": meta.get("observed_at"),
        "contaminated": provenance.get("contaminated", False),
    }
    body.update({name: meta.get(name) for name in ("expires_at", "valid_from", "valid_to")})
    body["idempotency_key"] = import_idempotency_key(candidate.note.id)
    return body


def _problem(error: DomainError) -> str:
    details = "; ".join(f"{name}: {' '.join(messages)}" for name, messages in sorted(error.errors.items()))
    return f"{error.detail} {details}".strip()


# --------------------------------------------------------------------------------------------
# the import


def import_notes(
    *,
    files: Iterable[tuple[str, bytes | OSError]],
    credential: AgentCredential | None = None,
    agent=None,
    trusted: bool = False,
    now: datetime | None = None,
) -> ImportReport:
    """Import every file (relative path, bytes) as one agent; see the module doc. Writes with
    `credential`, or else with the agent's import credential (`import_credential`, trusted or not)."""
    now = now or timezone.now()
    results: list[FileResult] = []
    candidates: dict[uuid.UUID, _Candidate] = {}
    seen: set[uuid.UUID] = set()
    for path, data in files:
        result = FileResult(path=path, outcome="imported")
        results.append(result)
        if isinstance(data, OSError):
            _error(result, f"Could not be read ({type(data).__name__}).")
            continue
        try:
            note = parse_note(data)
        except NoteError as exc:
            _error(result, str(exc))
            continue
        result.source_id = str(note.id)
        if note.id in seen:
            _error(result, "Another file has the same id: each record is imported once.")
            continue
        seen.add(note.id)
        candidate = _candidate(result, note, now=now)
        if candidate is not None:
            candidates[note.id] = candidate

    if credential is None:
        purposes = {c.note.meta.get("purpose") for c in candidates.values()}
        credential = import_credential(agent, trusted=trusted, purposes=purposes)
    _apply_guards(credential.agent.tenant, candidates)
    resolved = _already_imported(credential.agent, candidates)
    _write_in_waves(credential, candidates, resolved)
    _final_statuses(results)
    return ImportReport(results)


def _apply_guards(tenant: Tenant, candidates: dict[uuid.UUID, _Candidate]) -> None:
    subjects = {c.note.meta["subject"] for c in candidates.values() if isinstance(c.note.meta.get("subject"), str)}
    refused: dict[str, str] = {}
    for guard in _GUARDS:
        refused.update(guard(tenant, subjects) if subjects else {})
    for original_id, candidate in list(candidates.items()):
        subject = candidate.note.meta.get("subject")
        reason = refused.get(subject) if isinstance(subject, str) else None
        if reason:
            candidate.result.outcome = "refused"
            candidate.result.messages.append(reason)
            del candidates[original_id]


def _already_imported(agent, candidates: dict[uuid.UUID, _Candidate]) -> dict[uuid.UUID, uuid.UUID]:
    """Original id -> record here, for notes this agent imported before; those are done."""
    by_version = {c.source_version: original_id for original_id, c in candidates.items()}
    resolved: dict[uuid.UUID, uuid.UUID] = {}
    versions = list(by_version)
    for start in range(0, len(versions), CHUNK):
        earlier = (
            MemoryRecord.objects.filter(
                tenant_id=agent.tenant_id,
                agent=agent,
                source_type=SourceType.IMPORT,
                source_version__in=versions[start : start + CHUNK],
            )
            .exclude(status=Status.FORGOTTEN)
            .order_by("created_at")
            .values_list("source_version", "pk")
        )
        for source_version, pk in earlier:
            original_id = by_version[source_version]
            if original_id in resolved:
                continue
            resolved[original_id] = pk
            candidate = candidates.pop(original_id)
            candidate.result.outcome, candidate.result.record_id = "already_imported", pk
    return resolved


def _write_in_waves(
    credential: AgentCredential, pending: dict[uuid.UUID, _Candidate], resolved: dict[uuid.UUID, uuid.UUID]
) -> None:
    while pending:
        ready = [c for c in pending.values() if all(dep in resolved or dep not in pending for dep in c.depends_on)]
        if not ready:
            for candidate in pending.values():
                _error(
                    candidate.result, "Its supersedes / derived_from links form a cycle with other files: none of them imported."
                )
            return
        for candidate in ready:
            del pending[candidate.note.id]
        ready.sort(key=lambda c: (str(c.note.meta.get("created_at") or ""), str(c.note.id)))
        targets = {resolved[c.supersedes] for c in ready if c.supersedes in resolved}
        state = {
            pk: (status, version)
            for pk, status, version in MemoryRecord.objects.filter(pk__in=targets).values_list("pk", "status", "version")
        }
        writes: list[tuple[_Candidate, dict]] = []
        for candidate in ready:
            body = _linked_body(candidate, resolved, state)
            if body is not None:
                writes.append((candidate, body))
        for start in range(0, len(writes), BATCH_MAX_ITEMS):
            chunk = writes[start : start + BATCH_MAX_ITEMS]
            outcomes = memory_write_batch(credential=credential, items=[body for _, body in chunk])
            for (candidate, _), outcome in zip(chunk, outcomes, strict=True):
                if outcome.record is None:
                    assert outcome.error is not None  # a result without a record carries its error
                    _error(candidate.result, _problem(outcome.error))
                    continue
                resolved[candidate.note.id] = outcome.record.pk
                candidate.result.record_id = outcome.record.pk
                if outcome.replayed:
                    candidate.result.outcome = "already_imported"


def _linked_body(candidate: _Candidate, resolved: dict[uuid.UUID, uuid.UUID], state: dict) -> dict | None:
    """The write body with the links mapped to the records here, or None (an error) when a
    summary's source was not imported."""
    missing = [str(source) for source in candidate.derived_from if source not in resolved]
    if missing:
        _error(
            candidate.result,
            f"Derived from records that were not imported ({', '.join(missing)}): a summary is imported only with its sources.",
        )
        return None
    body = _write_body(candidate)
    if candidate.derived_from:
        body["derived_from"] = [str(resolved[source]) for source in candidate.derived_from]
    if candidate.supersedes:
        target = resolved.get(candidate.supersedes)
        status, version = state.get(target, (None, None))
        if target is None:
            candidate.result.messages.append(
                f"Corrects {candidate.supersedes}, which was not imported: imported without the supersedes link."
            )
        elif status != Status.ACTIVE:
            candidate.result.messages.append(
                f"Corrects {candidate.supersedes}, which is {status} here (a correction applies to an active record): "
                "imported without the supersedes link."
            )
        else:
            body.update(supersedes=str(target), supersedes_version=version)
    return body


def _final_statuses(results: list[FileResult]) -> None:
    ids = [result.record_id for result in results if result.record_id]
    statuses: dict[uuid.UUID, str] = {}
    for start in range(0, len(ids), CHUNK):
        statuses.update(MemoryRecord.objects.filter(pk__in=ids[start : start + CHUNK]).values_list("pk", "status"))
    for result in results:
        if result.record_id:
            result.status = statuses.get(result.record_id)


# --------------------------------------------------------------------------------------------
# the credential an import writes with


def import_credential(agent, *, trusted: bool, purposes: Iterable[object]) -> AgentCredential:
    """The agent's import credential (one trusted, one not), created on first use; its token is
    never shown, so it serves only imports run on the server. It may carry operator authority
    (admission still quarantines such claims unless `trusted`) and gains the purposes an import
    needs; anything in `purposes` that is not a purpose (a note's missing or malformed one) is left out."""
    label = "import (trusted)" if trusted else "import"
    wanted = {purpose for purpose in purposes if isinstance(purpose, str) and 0 < len(purpose) <= PURPOSE_MAX_CHARS}
    credential = (
        AgentCredential.objects.usable()
        .filter(agent=agent, label=label, can_import_trusted=trusted, can_assert_operator=True)
        .order_by("created_at")
        .first()
    )
    if credential is None:
        credential, _ = AgentCredential.issue(
            agent=agent, purposes=sorted(wanted), label=label, can_assert_operator=True, can_import_trusted=trusted
        )
    elif not wanted <= set(credential.purposes):
        credential.purposes = sorted(set(credential.purposes) | wanted)
        credential.save(update_fields=["purposes"])
    return credential
