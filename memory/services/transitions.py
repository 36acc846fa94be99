"""Single-record transitions, compare-and-swap: the record is locked, the caller's expected version
and the transition's source statuses (`memory.models.TRANSITIONS`) are checked, and exactly one
history row is written with its reason (`review.promote`, `agent.confirm`, ...), actor and note,
and one outbox event (memory.outbox) in the same transaction."""

import uuid
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from memory.actors import Actor
from memory.errors import Conflict, InvalidTransition, RecordNotFound, ScopeDenied, StaleVersion, ValidationFailed
from memory.metrics import TRANSITIONS as TRANSITION_COUNT
from memory.metrics import WRITES, count_conflict, count_on_commit
from memory.models import TRANSITIONS, Authority, MemoryRecord, SourceType, Status, Trust, content_digest
from memory.outbox.models import EventType
from memory.outbox.write import EVENT_OF_TRANSITION, write_event_of
from memory.policy import checked_correction, checked_note, correction_expires_at, on_activation
from memory.selectors import records_in_scope
from memory.services.history import TRANSITION_FIELDS, _stamp

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def _lock_in_order(ids: Iterable) -> None:
    """Lock several records in primary-key order, the one order every multi-row lock here uses,
    so two transactions that need the same rows queue instead of deadlocking."""
    list(MemoryRecord.objects.select_for_update().filter(pk__in=list(ids)).order_by("pk").values_list("pk", flat=True))


def _supersede_locked(record: MemoryRecord, *, actor: Actor, reason: str, now: datetime, note: str = "") -> None:
    """The `supersede` transition of a record the caller has locked and checked (a correction
    replacing it, or a reviewer's choice of another record)."""
    record.status = TRANSITIONS["supersede"][1]
    record.status_changed_at = now
    record.version += 1
    _stamp(record, actor=actor, reason=reason, note=note)
    record.save(update_fields=TRANSITION_FIELDS)
    write_event_of(record, EventType.SUPERSEDED, now=now)
    count_on_commit(TRANSITION_COUNT, "supersede")


def _require_version(expected_version) -> None:
    if isinstance(expected_version, bool) or not isinstance(expected_version, int):
        raise ValidationFailed("expected_version is required.", errors={"expected_version": ["Must be an integer."]})


def _check_applies(record: MemoryRecord, name: str, expected_version: int) -> None:
    """Compare-and-swap on the locked row: the caller's version, then the allowed statuses."""
    if record.version != expected_version:
        count_conflict("stale_version")
        raise StaleVersion(
            f"The memory is at version {record.version}, not {expected_version}: reload and decide again.",
            code="stale_version",
        )
    if record.status not in TRANSITIONS[name][0]:
        count_conflict("invalid_transition")
        raise InvalidTransition(f"Cannot {name} a memory that is {record.status}.", code="invalid_transition")


def _transition(
    name: str,
    *,
    record_id: uuid.UUID | str,
    expected_version: int,
    actor: Actor,
    note: str = "",
    mutate: Callable[[MemoryRecord, datetime], None] | None = None,
) -> MemoryRecord:
    _, target = TRANSITIONS[name]
    _require_version(expected_version)
    with transaction.atomic():
        record = records_in_scope(actor).select_for_update().filter(pk=record_id).first()
        if record is None:
            raise RecordNotFound("No such memory in your scope.")
        _check_applies(record, name, expected_version)
        now = timezone.now()
        became_active = record.status != target == Status.ACTIVE
        if record.status != target:
            record.status = target
            record.status_changed_at = now
        if mutate:
            mutate(record, now)
        record.version += 1
        _stamp(record, actor=actor, reason=f"{actor.channel}.{name}", note=note)
        record.save(update_fields=TRANSITION_FIELDS)
        event = EVENT_OF_TRANSITION[name]
        if event:
            write_event_of(record, event, now=now)
        count_on_commit(TRANSITION_COUNT, name)
        if became_active:
            on_activation([record])
        return record


def _require_human(actor: Actor, action: str) -> "User":
    """The reviewer acting, or ScopeDenied if the actor is not one."""
    if not actor.is_human or actor.user is None:
        raise ScopeDenied(f"Only a human reviewer may {action} a memory.")
    return actor.user


def _mark_reviewed(actor: Actor, *, verified: bool = True) -> Callable[[MemoryRecord, datetime], None]:
    """Who reviewed the record and when; `verified`: the review vouched for it (a rejection does
    not: a refused claim keeps the trust it came with, it is not "verified")."""

    def mutate(record: MemoryRecord, now: datetime) -> None:
        if verified:
            record.trust = Trust.VERIFIED
        record.reviewed_by = actor.user
        record.reviewed_at = now

    return mutate


def memory_promote(*, record_id, expected_version: int, actor: Actor, note: str = "") -> MemoryRecord:
    """quarantined -> active, trust verified. Humans only. A record that corrects another supersedes
    it now; if the corrected record has moved on meanwhile (superseded by another correction,
    expired, forgotten), the promotion is a conflict: the correction no longer applies as written."""
    _require_human(actor, "promote")
    review = _mark_reviewed(actor)

    corrected: list[tuple[MemoryRecord, datetime]] = []  # the record a correction replaces, and when

    def mutate(record: MemoryRecord, now: datetime) -> None:
        if record.supersedes_id:
            previous = MemoryRecord.objects.get(pk=record.supersedes_id)  # locked below, with the record
            if previous.status not in TRANSITIONS["supersede"][0]:
                count_conflict("supersession")
                raise Conflict(
                    f"This memory corrects one that is now {previous.status}: the correction no longer applies. "
                    "Reject it, or let the agent write it again.",
                    code="supersedes_not_active",
                )
            corrected.append((previous, now))
        review(record, now)
        record.confirmed_at = now

    with transaction.atomic():
        corrects = records_in_scope(actor).filter(pk=record_id).values_list("supersedes_id", flat=True).first()
        if corrects is not None:  # the correction and the record it corrects, in key order
            _lock_in_order([record_id, corrects])
        record = _transition(
            "promote", record_id=record_id, expected_version=expected_version, actor=actor, note=note, mutate=mutate
        )
        for previous, now in corrected:
            _supersede_locked(previous, actor=actor, reason=f"{actor.channel}.supersede", now=now, note=note)
        return record


def memory_reject(*, record_id, expected_version: int, actor: Actor, note: str = "") -> MemoryRecord:
    """quarantined -> rejected. Humans only."""
    _require_human(actor, "reject")
    return _transition(
        "reject",
        record_id=record_id,
        expected_version=expected_version,
        actor=actor,
        note=note,
        mutate=_mark_reviewed(actor, verified=False),
    )


def memory_confirm(*, record_id, expected_version: int, actor: Actor, note: str = "") -> MemoryRecord:
    """Re-checked against its source: confirmed_at = now. A human confirmation verifies the record."""
    if actor.is_agent and not (actor.credential is not None and actor.credential.can_confirm):
        raise ScopeDenied("This token may not confirm memories.")
    if not (actor.is_agent or actor.is_human):
        raise ScopeDenied("Only reviewers and agents with the confirm capability may confirm.")
    review = _mark_reviewed(actor) if actor.is_human else None

    def mutate(record: MemoryRecord, now: datetime) -> None:
        record.confirmed_at = now
        if review:
            review(record, now)

    return _transition("confirm", record_id=record_id, expected_version=expected_version, actor=actor, note=note, mutate=mutate)


def memory_retire(*, record_id, expected_version: int, actor: Actor, note: str = "") -> MemoryRecord:
    """active -> expired now. Humans only."""
    _require_human(actor, "retire")

    def mutate(record: MemoryRecord, now: datetime) -> None:
        record.expires_at = max(now, record.created_at + timedelta(microseconds=1))

    return _transition("retire", record_id=record_id, expected_version=expected_version, actor=actor, note=note, mutate=mutate)


def memory_restore(*, record_id, expected_version: int, actor: Actor, note: str = "") -> MemoryRecord:
    """superseded -> active again (undoing a supersession). Humans only; a record past its expiry
    stays superseded, since expiry would take it out at once."""
    _require_human(actor, "restore")

    def mutate(record: MemoryRecord, now: datetime) -> None:
        if record.expires_at <= now:
            raise InvalidTransition("The memory has expired meanwhile; it is not restored.", code="expired")

    return _transition("restore", record_id=record_id, expected_version=expected_version, actor=actor, note=note, mutate=mutate)


def memory_supersede(*, record_id, expected_version: int, actor: Actor, content: str, note: str = "") -> MemoryRecord:
    """A reviewer's correction: a new active, verified record with the corrected content replaces
    the old one, which becomes superseded. The new record's provenance names the reviewer."""
    reviewer = _require_human(actor, "supersede")
    content = checked_correction(content)
    with transaction.atomic():
        old = _transition("supersede", record_id=record_id, expected_version=expected_version, actor=actor, note=note)
        now = timezone.now()
        username = reviewer.get_username()
        record = MemoryRecord(
            tenant_id=old.tenant_id,
            agent_id=old.agent_id,
            subject=old.subject,
            purpose=old.purpose,
            kind_id=old.kind_id,
            content=content,
            content_hash=content_digest(content),
            source_type=SourceType.OPERATOR_CONFIG,
            source_uri=f"review://{username}/corrects/{old.pk}",
            session_id="",
            turn_id="",
            tool="",
            source_version=str(old.version),
            observed_at=now,
            contaminated=False,
            authority=Authority.OPERATOR,
            trust=Trust.VERIFIED,
            reviewed_by=actor.user,
            reviewed_at=now,
            confidence=1.0,
            created_at=now,
            confirmed_at=now,
            status_changed_at=now,
            expires_at=correction_expires_at(old.kind, now),
            valid_from=None,
            valid_to=None,
            status=Status.ACTIVE,
            version=1,
            supersedes=old,
        )
        _stamp(record, actor=actor, reason=f"{actor.channel}.correct", note=note)
        record.save(force_insert=True)
        write_event_of(record, EventType.WRITTEN, now=now)
        count_on_commit(WRITES, record.status)
        on_activation([record])
        return record


def memory_supersede_by(
    *,
    record_id,
    expected_version: int,
    by_record_id,
    actor: Actor,
    note: str = "",
    action: str = "supersede_by",
) -> MemoryRecord:
    """A reviewer's decision that an existing active record replaces another one (its duplicate, or
    the losing side of a contradiction): `record_id` becomes superseded. Humans only.

    Both records must be active and share tenant, agent and purpose. The replacing record is left
    untouched and gets no `supersedes` link: it may already correct another record, and one record
    can replace several, so the link is written into the history note ("Superseded by <id>") and
    kept by the caller (a dedup proposal). Compare-and-swap on `expected_version`; exactly one
    history row, reason `<channel>.<action>` (e.g. `review.dedup_accept`)."""
    _require_human(actor, "supersede")
    _require_version(expected_version)
    try:
        target_id, by_id = uuid.UUID(str(record_id)), uuid.UUID(str(by_record_id))
    except ValueError:
        raise RecordNotFound("No such memory in your scope.") from None
    if target_id == by_id:
        raise InvalidTransition("A memory cannot supersede itself.", code="self_supersession")
    with transaction.atomic():
        # Lock both rows in primary-key order so two decisions over the same pair cannot deadlock.
        locked = {r.pk: r for r in records_in_scope(actor).select_for_update().filter(pk__in=[target_id, by_id]).order_by("pk")}
        record, replacement = locked.get(target_id), locked.get(by_id)
        if record is None or replacement is None:
            raise RecordNotFound("No such memory in your scope.")
        _check_applies(record, "supersede", expected_version)
        if replacement.status != Status.ACTIVE:
            count_conflict("invalid_transition")
            raise InvalidTransition(f"The replacing memory is {replacement.status}, not active.", code="replacement_not_active")
        if (record.tenant_id, record.agent_id, record.purpose) != (
            replacement.tenant_id,
            replacement.agent_id,
            replacement.purpose,
        ):
            raise InvalidTransition("The replacing memory belongs to another agent or purpose.", code="scope_mismatch")
        history_note = checked_note(f"Superseded by {replacement.pk}." + (f" {note}" if note else ""))
        _supersede_locked(record, actor=actor, reason=f"{actor.channel}.{action}", now=timezone.now(), note=history_note)
        return record


def memory_expire(*, record_id, expected_version: int, actor: Actor) -> MemoryRecord:
    """One record past its expiry -> expired."""

    def mutate(record: MemoryRecord, now: datetime) -> None:
        if record.expires_at > now:
            raise InvalidTransition("The memory has not expired yet.", code="not_expired")

    return _transition("expire", record_id=record_id, expected_version=expected_version, actor=actor, mutate=mutate)
