"""Forget artifacts: the registry of every store that can hold a copy of a record's content, the
built-in artifacts, and the coverage check that no store is forgotten by a forget.

An artifact is any object with a `name`, a `covers` tuple (labels of the models whose rows it
cleans, used by the coverage check) and `purge(request, record_ids) -> (removed, note)`; one that
writes tables no model describes names them in `tables()` (see `artifact_tables`). One with
`at_completion = True` runs once, after every chunk, in the transaction that completes the
request (with no record ids). One with `completes_later = True` leaves its receipt's completion
time empty: its own job completes it (the disk rewrite, once verified). A new derived store
(embeddings, summaries elsewhere, a recall cache) registers its own purge, e.g. from its
AppConfig.ready():

    from governance.forget.artifacts import register_artifact
    register_artifact(EmbeddingArtifact())

Provenance strings (source URI, session id, turn id, tool, source version) are content too, and
so is the subject: where a record's content is removed, so are they, and the subject is replaced by
its keyed fingerprint (memory.fingerprints), so a later forget of the same subject still finds the
rows. The request itself keeps the subject as filed until it completes; the `forget_request`
artifact then fingerprints it too.

`uncovered_references()` lists models that point at memory records and are neither covered by an
artifact nor declared content-free below; a test keeps it empty, so a new store cannot be
forgotten by accident. Receipts and their notes never contain content.
"""

import uuid
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Protocol, runtime_checkable

from django.apps import apps
from django.conf import settings
from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db.models import Case, F, Q, QuerySet, Value, When

from governance.forget.models import ForgetRequest, ForgetTombstone
from memory.fingerprints import is_subject_fingerprint, subject_fingerprint
from memory.models import IdempotencyKey, MemoryRecord, Status
from memory.services import record_id_set


@runtime_checkable
class ForgetArtifact(Protocol):
    name: str

    @property
    def covers(self) -> tuple[str, ...]:
        """Labels of the models whose rows the artifact cleans (what the coverage check reads)."""

    def purge(self, request: ForgetRequest, record_ids: Sequence[uuid.UUID]) -> tuple[int, str]:
        """Remove every copy of the given forgotten records' content from this artifact; return how
        many items were removed now (0 on a repeat) and a content-free note for the receipt."""


_ARTIFACTS: list[ForgetArtifact] = []


def register_artifact(artifact: ForgetArtifact, *, before: str | None = None) -> ForgetArtifact:
    """Add (or replace, by name) an artifact; `before` puts it ahead of a named one."""
    if not isinstance(artifact, ForgetArtifact) or not artifact.name:
        raise TypeError("A forget artifact needs a name, covers and purge(request, record_ids).")
    _ARTIFACTS[:] = [existing for existing in _ARTIFACTS if existing.name != artifact.name]
    names = [existing.name for existing in _ARTIFACTS]
    _ARTIFACTS.insert(names.index(before) if before in names else len(_ARTIFACTS), artifact)
    return artifact


def registered_artifacts() -> tuple[ForgetArtifact, ...]:
    return tuple(_ARTIFACTS)


def artifact_tables(artifact: ForgetArtifact) -> set[str]:
    """The database tables an artifact's purge writes to, whose files keep the old row versions
    until they are rewritten (governance.portability.disk): what its `tables()` names, for storage
    outside the ORM, else the tables of the models it covers."""
    named = getattr(artifact, "tables", None)
    if callable(named):
        return set(named())
    return {apps.get_model(label)._meta.db_table for label in artifact.covers}


def tables_touched() -> list[str]:
    """Every table a forget's propagation may write to, by the registered artifacts' own account,
    in the artifacts' order (the records' tables early)."""
    return list(dict.fromkeys(table for artifact in _ARTIFACTS for table in sorted(artifact_tables(artifact))))


# --------------------------------------------------------------------------------------------
# the built-in artifacts

# A record's provenance strings: where the claim came from, which can name or point at a person as
# well as the content can. Blanked wherever the content is.
PROVENANCE_STRING_FIELDS = ("source_uri", "session_id", "turn_id", "tool", "source_version")
# What a forgotten record or history row no longer holds: the content, its sha256 (a hash of a short
# claim confirms a guess of it, so it is a copy too) and the provenance strings.
CONTENT_FIELDS = ("content", "content_hash", *PROVENANCE_STRING_FIELDS)


def _history_model():
    return MemoryRecord.history.model


def scrub_rows(rows: QuerySet, *, blank: tuple[str, ...]) -> int:
    """One UPDATE over the rows of `rows` (a model with `tenant_id` and `subject`) that still hold
    something: the `blank` fields emptied and the subject replaced by its keyed fingerprint.
    Returns how many rows changed (0 on a repeat). The fingerprint is an HMAC, which neither
    database computes, so it is worked out here once per distinct (tenant, subject): a handful per
    chunk."""
    plain = {
        (tenant_id, subject)
        for tenant_id, subject in rows.order_by().values_list("tenant_id", "subject").distinct()
        if not is_subject_fingerprint(subject)
    }
    holding = Q(subject__in={subject for _, subject in plain})
    for field in blank:
        holding |= ~Q(**{field: ""})
    changes: dict = {field: "" for field in blank}
    if plain:
        changes["subject"] = Case(
            *[
                When(tenant_id=tenant_id, subject=subject, then=Value(subject_fingerprint(tenant_id, subject)))
                for tenant_id, subject in sorted(plain)
            ],
            default=F("subject"),
        )
    return rows.filter(holding).update(**changes)


class RecordContentArtifact:
    name = "record_content"
    covers = ("memory.MemoryRecord",)

    def purge(self, request, record_ids):
        # Not a status change (the record is already `forgotten`, with its history row), so a
        # set-based update without history is right; the history rows are scrubbed separately.
        if not record_ids:
            return 0, self._note
        forgotten = MemoryRecord.objects.filter(pk__in=record_id_set(record_ids), status=Status.FORGOTTEN)
        return scrub_rows(forgotten, blank=CONTENT_FIELDS), self._note

    _note = (
        "Content, its sha256 (content_hash) and provenance strings (source URI, session, turn, tool, source "
        "version) blanked on the forgotten records, derived ones included; subject replaced by its keyed "
        "fingerprint; source type and times kept."
    )


class HistoryRowsArtifact:
    """Every django-simple-history row of the records. `content`, its hash and the provenance
    strings are the copy; `history_note` is a reviewer's free text, which may quote the content
    ("rejected: says ..."), so it is blanked too; the subject becomes its fingerprint, as on the
    record. The transition name (history_change_reason), the actor, the user and the time stay:
    the audit trail still shows who did what and when, just not what the memory said or where from."""

    name = "history_rows"

    @property
    def covers(self):
        return (_history_model()._meta.label,)

    def purge(self, request, record_ids):
        if not record_ids:
            return 0, self._note
        rows = _history_model().objects.filter(id__in=record_id_set(record_ids))
        return scrub_rows(rows, blank=(*CONTENT_FIELDS, "history_note")), self._note

    _note = (
        "Content, its sha256, provenance strings and reviewer notes blanked in every historical row, subject "
        "replaced by its keyed fingerprint; transition names, actors and times kept."
    )


class IdempotencyKeysArtifact:
    """A stored write result references its record and keeps the sha256 of the request body, which
    held the content: the entry is deleted (a retry with the same key is then a new write)."""

    name = "idempotency_keys"
    covers = ("memory.IdempotencyKey",)

    def purge(self, request, record_ids):
        removed = IdempotencyKey.objects.filter(record_id__in=record_id_set(record_ids)).delete()[0] if record_ids else 0
        return removed, "Stored idempotent write results (and the body hash they keep) deleted."


class CacheArtifact:
    """The Django cache holds API rate-limit counters and the dashboard's aggregate numbers (counts
    and ages, no content): no code caches records or recall results (recall reads the database on
    every request). A store that starts caching them must register its own purge here."""

    name = "cache"
    covers = ()

    def purge(self, request, record_ids):
        return (
            0,
            "Nothing cached: no code caches records or recall results (the cache holds rate-limit counters and dashboard counts).",
        )


FORGOTTEN_REPR = "forgotten memory"


class AdminLogArtifact:
    """django.contrib.admin's LogEntry keeps a `str()` of the object (kind and subject) and a
    free-text change message for every admin action on a record."""

    name = "admin_log"
    covers = ("admin.LogEntry",)

    def purge(self, request, record_ids):
        if not record_ids:
            return 0, self._note
        content_type = ContentType.objects.get_for_model(MemoryRecord)
        removed = (
            LogEntry.objects.filter(content_type=content_type, object_id__in=record_id_set(record_ids, as_text=True))
            .filter(~Q(object_repr=FORGOTTEN_REPR) | ~Q(change_message=""))
            .update(object_repr=FORGOTTEN_REPR, change_message="")
        )
        return removed, self._note

    _note = "Admin log entries of the records: description and change message replaced; action, user and time kept."


class ExternalBackupsArtifact:
    name = "external_backups"
    covers = ()

    def purge(self, request, record_ids):
        days = settings.MEMORY_BACKUP_RETENTION_DAYS
        ages_out = request.requested_at + timedelta(days=days)
        return 0, (
            f"Unreachable from the app: database backups taken before {request.requested_at:%Y-%m-%d %H:%M} UTC still "
            f"hold the content until they age out by {ages_out:%Y-%m-%d} (MEMORY_BACKUP_RETENTION_DAYS={days}). "
            "After a restore, re-forget the subject: its tombstone survives pruning."
        )


class ForgetRequestSubjectArtifact:
    """The request itself: once everything else is done, its subject is replaced by the keyed
    fingerprint, the same one the records and the tombstone keep, so a later request for the same
    subject still finds them. Until then it keeps the subject as filed, which artifacts may match
    on. The reason (the requester's reference, e.g. a ticket number) and the counts stay."""

    name = "forget_request"
    covers = ("governance.ForgetRequest",)
    at_completion = True

    def purge(self, request, record_ids):
        subject = ForgetRequest.objects.filter(pk=request.pk).values_list("subject", flat=True).get()
        fingerprint = subject_fingerprint(request.tenant_id, subject)
        ForgetTombstone.objects.get_or_create(
            tenant_id=request.tenant_id,
            subject_fingerprint=fingerprint,
            defaults={"forgotten_at": request.requested_at},
        )
        removed = ForgetRequest.objects.filter(pk=request.pk).exclude(subject=fingerprint).update(subject=fingerprint)
        return removed, (
            "The request's subject replaced by its keyed fingerprint (as on the records and the tombstone); "
            "reason and counts kept."
        )


for _artifact in (
    RecordContentArtifact(),
    HistoryRowsArtifact(),
    IdempotencyKeysArtifact(),
    CacheArtifact(),
    AdminLogArtifact(),
    ExternalBackupsArtifact(),
    ForgetRequestSubjectArtifact(),
):
    register_artifact(_artifact)

# --------------------------------------------------------------------------------------------
# coverage: nothing that points at a record may be forgotten by the forget

# Models that reference records but hold no copy of their content, and why.
CONTENT_FREE_REFERENCES: dict[str, str] = {
    "memory.MemoryRecord_derived_from": "pairs of record ids (derivation links)",
    "governance.ForgetRequest_records": "pairs of ids (request, record)",
    "governance.DedupProposalDrop": "ids and versions",
    "memory.SourceHold": "the id of the write that raised a hold, beside keyed fingerprints",
    "memory.HistoricalSourceHold": "the same, as each history row of a hold keeps it",
}


def models_referencing_records() -> set[str]:
    """Labels of every model with a foreign key or many-to-many to MemoryRecord (through tables
    and history models included)."""
    labels = set()
    for model in apps.get_models(include_auto_created=True):
        for field in model._meta.get_fields():
            if field.is_relation and not field.auto_created and field.related_model is MemoryRecord:
                labels.add(model._meta.label)
    return labels


def uncovered_references(artifacts: Iterable[ForgetArtifact] | None = None) -> set[str]:
    covered = {label for artifact in (artifacts if artifacts is not None else _ARTIFACTS) for label in artifact.covers}
    return models_referencing_records() - covered - set(CONTENT_FREE_REFERENCES)
