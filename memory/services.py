"""Lifecycle services: the only code that creates memory records or changes their status.

Every function is keyword-only and atomic; every transition takes the caller's expected version
(compare-and-swap under a row lock) and leaves exactly one history row per record with its reason
(`review.promote`, `job.expire`, ...), its actor and an optional note. The API, the reviewer UI,
the admin and the Celery jobs all call these.
"""

import hashlib
import json
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable

from django.conf import settings
from django.db import connections, router, transaction
from django.db.models import BooleanField, F, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.utils import timezone
from simple_history.utils import bulk_create_with_history

from memory import usage
from memory.actors import Actor
from memory.admission import Gate, admission, enter_gate, raise_holds
from memory.credentials import revoke_tokens
from memory.errors import Conflict, DomainError, InvalidTransition, RecordNotFound, ScopeDenied, StaleVersion, ValidationFailed
from memory.fences import hold, idempotency_lock, revocation_fence
from memory.fingerprints import records_about, source_fingerprint
from memory.metrics import TRANSITIONS as TRANSITION_COUNT
from memory.metrics import WRITES, count_conflict, count_on_commit
from memory.models import (
    IDEMPOTENCY_KEY_MAX_CHARS, NOTE_MAX_CHARS, TRANSITIONS, AgentCredential, Authority, IdempotencyKey, MemoryKind,
    MemoryRecord, SourceHold, SourceType, Status, Trust,
    content_digest,
)
from memory.risk import risk_flags_value
from memory.search.semantic import embed_after_commit
from memory.selectors import records_in_scope
from memory.validation import BatchItemSerializer, WriteDraft, parse_write, parse_writes

# Fields a transition may change; bulk updates write exactly these.
TRANSITION_FIELDS = ["status", "status_changed_at", "version", "trust", "reviewed_by", "reviewed_at", "confirmed_at", "expires_at"]


@dataclass(frozen=True)
class WriteResult:
    record: MemoryRecord
    replayed: bool  # True when an Idempotency-Key returned an earlier result


# --------------------------------------------------------------------------------------------
# history helpers


def checked_note(note: str) -> str:
    """A transition's note as the history row keeps it: too long is an error, never cut short."""
    if len(note) > NOTE_MAX_CHARS:
        raise ValidationFailed("The note is too long.", errors={"note": [f"At most {NOTE_MAX_CHARS} characters."]})
    return note


def _lock_in_order(ids: Iterable) -> None:
    """Lock several records in primary-key order, the one order every multi-row lock here uses,
    so two transactions that need the same rows queue instead of deadlocking."""
    list(MemoryRecord.objects.select_for_update().filter(pk__in=list(ids)).order_by("pk").values_list("pk", flat=True))


def _stamp(record: MemoryRecord, *, actor: Actor, reason: str, note: str = "") -> None:
    """Attach who/why to the instance; simple-history copies it into the history row on save."""
    record._change_reason = reason
    record._history_actor = actor.label
    record._history_note = checked_note(note)
    if actor.user is not None:
        record._history_user = actor.user


def _bulk_transition(ids: list[uuid.UUID], *, target: str, now: datetime, actor: Actor, reason: str, note: str = "") -> int:
    """Move a batch of locked records to one status with one history row each, entirely in the
    database: one UPDATE for the records, one INSERT ... SELECT copying them into the history table
    (what simple-history would write, without loading a row into Python). The caller holds the row
    locks and has checked the transition applies."""
    if not ids:
        return 0
    changed = MemoryRecord.objects.filter(pk__in=ids).update(status=target, status_changed_at=now, version=F("version") + 1)
    _copy_into_history(ids, history_date=now, actor=actor, reason=reason, note=note)
    _count_moved(reason, changed)
    return changed


def _count_moved(reason: str, changed: int) -> None:
    """Count a bulk move in the transitions metric, by the transition its history reason names
    (`job.expire` -> expire; a lineage forget counts as a forget)."""
    count_on_commit(TRANSITION_COUNT, reason.split(".", 1)[-1].removesuffix("_lineage"), changed)


def _bulk_transition_in_place(selected: QuerySet, *, target: str, now: datetime, actor: Actor, reason: str,
                              note: str = "") -> int:
    """PostgreSQL: `_bulk_transition` of the records `selected` (a queryset of primary keys, which
    may lock them: `select_for_update(skip_locked=True)`) as one statement, without the keys
    travelling to Python and back: the selection, the UPDATE and the history INSERT ... SELECT from
    its RETURNING. Returns how many records moved."""
    connection = connections[router.db_for_write(MemoryRecord)]
    selected_sql, selected_params = selected.query.sql_with_params()
    sql = f"WITH selected (at) AS ({selected_sql}), {_in_place_transition_sql(connection, match='r.id = selected.at')}"
    params = (*selected_params, target, connection.ops.adapt_datetimefield_value(now),
              *_history_params(history_date=now, actor=actor, reason=reason, note=note))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        changed = cursor.fetchone()[0]
    _count_moved(reason, changed)
    return changed


# The history columns `_copy_into_history` fills besides the tracked fields (a test keeps this in
# step with the history model).
HISTORY_COLUMNS = ("history_date", "history_change_reason", "history_type", "history_user_id", "history_actor", "history_note")


def _history_tracked_fields() -> list:
    return [f for f in MemoryRecord.history.model._meta.concrete_fields if not f.name.startswith("history_")]


def _history_params(*, history_date: datetime, actor: Actor, reason: str, note: str) -> tuple:
    """The values of HISTORY_COLUMNS, in that order."""
    connection = connections[router.db_for_write(MemoryRecord)]
    return (connection.ops.adapt_datetimefield_value(history_date), reason, "~",
            actor.user.pk if actor.user is not None else None, actor.label, checked_note(note))


def _copy_into_history(ids: list[uuid.UUID], *, history_date: datetime, actor: Actor, reason: str, note: str) -> None:
    history = MemoryRecord.history.model
    tracked = _history_tracked_fields()
    rows = MemoryRecord.objects.filter(pk__in=ids).order_by().values(*[f.attname for f in tracked])
    select_sql, select_params = rows.query.sql_with_params()
    connection = connections[router.db_for_write(MemoryRecord)]
    quote = connection.ops.quote_name
    columns = [quote(f.column) for f in tracked]
    extras = list(HISTORY_COLUMNS)
    sql = (
        f"INSERT INTO {quote(history._meta.db_table)} ({', '.join(columns + [quote(c) for c in extras])}) "
        f"SELECT {', '.join('s.' + c for c in columns)}, %s, %s, %s, %s, %s, %s FROM ({select_sql}) s"
    )
    # The placeholders of the history columns come first in the statement, the subquery's after.
    params = (*_history_params(history_date=history_date, actor=actor, reason=reason, note=note), *select_params)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


# --------------------------------------------------------------------------------------------
# write


def request_fingerprint(data: Any) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def reject_foreign_scope(data: Any, credential: AgentCredential) -> Any:
    """Tenant and agent come from the token. A body naming another tenant or agent is a 403;
    naming the token's own is allowed and dropped. Returns the body without those fields (a null
    stays, for the body's serializer to accept or refuse)."""
    if not isinstance(data, Mapping):
        return data
    agent = credential.agent
    own = {"tenant": agent.tenant.slug, "agent": agent.slug}
    for name, value in own.items():
        if data.get(name) is not None and data[name] != value:
            raise ScopeDenied(f"The body names another {name} than the token's.", errors={name: [f"Not your {name}."]})
    return {key: value for key, value in data.items() if key not in own or value is None}


def memory_write(*, credential: AgentCredential, data: Any, idempotency_key: str | None = None) -> WriteResult:
    """Validate and store one memory for the credential's tenant and agent.

    Raises ValidationFailed (400), ScopeDenied (403) or Conflict (409); on any error nothing is written.
    """
    if idempotency_key is not None and not (0 < len(idempotency_key) <= IDEMPOTENCY_KEY_MAX_CHARS):
        raise ValidationFailed(f"Idempotency-Key must be 1 to {IDEMPOTENCY_KEY_MAX_CHARS} characters.",
                               errors={"Idempotency-Key": ["Invalid length."]})
    fingerprint = request_fingerprint(data) if idempotency_key else ""
    if idempotency_key:
        replay = _idempotent_replay(credential, idempotency_key, fingerprint)  # a retry's fast path
        if replay:
            return replay

    now = timezone.now()
    draft = _checked_draft(data, credential=credential, now=now)
    actor = Actor.for_credential(credential)

    with transaction.atomic():
        gate = enter_gate(credential)
        if idempotency_key:  # a concurrent request with the same key waits here, then replays this one
            hold([idempotency_lock(credential.pk, idempotency_key)])
            replay = _idempotent_replay(credential, idempotency_key, fingerprint)
            if replay:
                return replay
        record = _create_record(draft, credential=credential, actor=actor, now=now, gate=gate)
        gate.store_raised(actor)
        if idempotency_key:
            IdempotencyKey.objects.create(
                credential=credential, key=idempotency_key, fingerprint=fingerprint, response_status=201, record=record
            )
    return WriteResult(record=record, replayed=False)


def _checked_draft(data: Any, *, credential: AgentCredential, now: datetime) -> WriteDraft:
    """A write body validated and checked against what the credential may do; nothing written."""
    return _allowed(parse_write(reject_foreign_scope(data, credential), now=now), credential)


def _allowed(draft: WriteDraft, credential: AgentCredential) -> WriteDraft:
    """The draft if the credential may write it, else ScopeDenied or ValidationFailed."""
    if not credential.allows_purpose(draft.purpose):
        raise ScopeDenied(f"This token may not use purpose '{draft.purpose}'.", errors={"purpose": ["Not allowed for this token."]})
    if draft.authority == Authority.OPERATOR and not credential.can_assert_operator:
        raise ScopeDenied("This token may not assert operator authority.", errors={"authority": ["Operator authority not allowed."]})
    if draft.derived_from and draft.authority != Authority.AGENT:
        raise ValidationFailed(
            "A derived record is the agent's own claim.", errors={"authority": ["Derived records must have authority 'agent'."]}
        )
    return draft


def _idempotent_replay(credential: AgentCredential, key: str, fingerprint: str) -> WriteResult | None:
    entry = IdempotencyKey.objects.filter(credential=credential, key=key).select_related("record").first()
    return _replayed(entry, fingerprint) if entry is not None else None


def _replayed(entry: IdempotencyKey, fingerprint: str) -> WriteResult:
    if entry.fingerprint != fingerprint:
        count_conflict("idempotency")
        raise Conflict("This Idempotency-Key was used with a different body.", code="idempotency_mismatch")
    if entry.record is None:
        raise Conflict("The record this Idempotency-Key created no longer exists.", code="idempotency_gone")
    return WriteResult(record=entry.record, replayed=True)


def _create_record(draft: WriteDraft, *, credential: AgentCredential, actor: Actor, now: datetime, gate: Gate) -> MemoryRecord:
    sources = _derivation_sources(draft, credential) if draft.derived_from else []
    superseded = _lock_supersession_target(draft, credential) if draft.supersedes else None
    contaminated = any(source.contaminated for source in sources)
    record = _new_record(draft, credential=credential, actor=actor, now=now, gate=gate, contaminated=contaminated,
                         supersedes=superseded)
    record.save(force_insert=True)
    count_on_commit(WRITES, record.status)
    if record.status == Status.ACTIVE:
        embed_after_commit([record.pk])
    if sources:
        record.derived_from.set(sources)
    if superseded is not None and record.status == Status.ACTIVE:
        _supersede_locked(superseded, actor=actor, reason=f"{actor.channel}.supersede", now=now)
    return record


def _new_record(draft: WriteDraft, *, credential: AgentCredential, actor: Actor, now: datetime, gate: Gate,
                contaminated: bool = False, supersedes: MemoryRecord | None = None) -> MemoryRecord:
    """The unsaved record a write stores, admitted or quarantined (memory.admission), stamped for its
    history row; a contaminated one holds its session for the writes that follow."""
    agent = credential.agent
    provenance = {**draft.provenance, "contaminated": True} if contaminated else draft.provenance
    flags = risk_flags_value(draft.content)
    status, trust, why = admission(draft, credential, gate, risk_flags=flags, contaminated=contaminated)
    record = MemoryRecord(
        tenant=agent.tenant, agent=agent, subject=draft.subject, purpose=draft.purpose, kind=draft.kind,
        content=draft.content, content_hash=content_digest(draft.content),
        source_type=provenance["source_type"], source_uri=provenance["uri"], session_id=provenance["session_id"],
        turn_id=provenance["turn_id"], tool=provenance["tool"], source_version=provenance["source_version"],
        observed_at=provenance["observed_at"], contaminated=provenance["contaminated"],
        authority=draft.authority, trust=trust, quarantine_reason=why, confidence=draft.confidence,
        created_at=now, confirmed_at=now, status_changed_at=now, expires_at=draft.expires_at,
        valid_from=draft.valid_from, valid_to=draft.valid_to, status=status, version=1, supersedes=supersedes,
        written_by=credential, risk_flags=flags,
    )
    _stamp(record, actor=actor, reason=f"write.{status}")
    gate.observe(record)
    return record


# --------------------------------------------------------------------------------------------
# batch write


@dataclass(frozen=True)
class BatchItemResult:
    index: int
    record: MemoryRecord | None = None
    replayed: bool = False
    error: DomainError | None = None

    @property
    def status(self) -> int:
        return 201 if self.record is not None else self.error.status


@dataclass
class _BatchItem:
    index: int
    body: Any
    key: str | None
    fingerprint: str
    draft: WriteDraft


def memory_write_batch(*, credential: AgentCredential, items: list[Mapping]) -> list[BatchItemResult]:
    """Up to BATCH_MAX_ITEMS writes, each exactly as `memory_write` would store it (validated,
    admitted or quarantined, one history row, its own idempotency key), in item order. Every item
    is validated before anything is written; plain items are stored set-based (one insert for the
    records, one for their history rows, one for their keys), corrections and summaries one by
    one, each in a savepoint so that one item's conflict leaves the others."""
    now = timezone.now()
    actor = Actor.for_credential(credential)
    kinds = {kind.name: kind for kind in MemoryKind.objects.all()}
    results: dict[int, BatchItemResult] = {}
    prepared: list[_BatchItem] = []
    bodies: list[Any] = []
    for index, item in enumerate(items):
        try:
            bodies.append(reject_foreign_scope(item, credential))
        except DomainError as exc:
            results[index] = BatchItemResult(index, error=exc)
            bodies.append(None)
    parsed = iter(parse_writes([body for body in bodies if body is not None], now=now, kinds=kinds,
                               serializer_class=BatchItemSerializer))
    for index, item in enumerate(items):
        if bodies[index] is None:
            continue
        try:
            draft = next(parsed)
            if isinstance(draft, DomainError):
                raise draft
            draft = _allowed(draft, credential)
            # The key is not part of the body it stands for (as the header is not, on a single write).
            body = {name: value for name, value in item.items() if name != "idempotency_key"}
            key = item.get("idempotency_key")
            prepared.append(_BatchItem(index, body, key, request_fingerprint(body) if key else "", draft))
        except DomainError as exc:
            results[index] = BatchItemResult(index, error=exc)

    keyed = sorted({item.key for item in prepared if item.key})
    with transaction.atomic():
        gate = enter_gate(credential)
        # Each key's lock before looking for its earlier use: a concurrent request with one of these
        # keys waits for this one, then replays it (memory.fences).
        hold([idempotency_lock(credential.pk, key) for key in keyed])
        earlier = {entry.key: entry for entry in IdempotencyKey.objects.filter(credential=credential, key__in=keyed).select_related("record")}
        to_write: list[_BatchItem] = []
        first_with_key: dict[str, _BatchItem] = {}
        repeats: list[_BatchItem] = []
        for item in prepared:
            try:
                if item.key in earlier:
                    results[item.index] = BatchItemResult(item.index, record=_replayed(earlier[item.key], item.fingerprint).record, replayed=True)
                elif item.key in first_with_key:  # the same key twice in one batch: the first write answers both
                    if first_with_key[item.key].fingerprint != item.fingerprint:
                        raise Conflict("This idempotency_key was used with a different body.", code="idempotency_mismatch")
                    repeats.append(item)
                else:
                    if item.key:
                        first_with_key[item.key] = item
                    to_write.append(item)
            except DomainError as exc:
                results[item.index] = BatchItemResult(item.index, error=exc)
        results.update(_store_batch(to_write, credential=credential, actor=actor, now=now, gate=gate))
    for item in repeats:
        first = results[first_with_key[item.key].index]
        results[item.index] = BatchItemResult(item.index, record=first.record, replayed=True, error=first.error)
    return [results[index] for index in range(len(items))]


def _store_batch(items: list[_BatchItem], *, credential: AgentCredential, actor: Actor, now: datetime,
                 gate: Gate) -> dict[int, BatchItemResult]:
    results: dict[int, BatchItemResult] = {}
    plain = [item for item in items if not (item.draft.supersedes or item.draft.derived_from)]
    records = [_new_record(item.draft, credential=credential, actor=actor, now=now, gate=gate) for item in plain]
    if records:
        bulk_create_with_history(records, MemoryRecord, default_date=now,
                                 custom_historical_attrs={"history_actor": actor.label, "history_note": ""})
        for status, count in Counter(record.status for record in records).items():
            count_on_commit(WRITES, status, count)
        embed_after_commit([record.pk for record in records if record.status == Status.ACTIVE])
    results.update({item.index: BatchItemResult(item.index, record=record) for item, record in zip(plain, records)})
    for item in items:
        if item.index in results:
            continue
        try:
            with transaction.atomic():
                results[item.index] = BatchItemResult(item.index, record=_create_record(
                    item.draft, credential=credential, actor=actor, now=now, gate=gate))
        except DomainError as exc:
            results[item.index] = BatchItemResult(item.index, error=exc)
    gate.store_raised(actor)
    IdempotencyKey.objects.bulk_create([
        IdempotencyKey(credential=credential, key=item.key, fingerprint=item.fingerprint, response_status=201,
                       record=results[item.index].record)
        for item in items if item.key and results[item.index].record is not None
    ])
    return results


def _derivation_sources(draft: WriteDraft, credential: AgentCredential) -> list[MemoryRecord]:
    agent = credential.agent
    sources = list(
        MemoryRecord.objects.filter(
            pk__in=draft.derived_from, tenant_id=agent.tenant_id, agent=agent, purpose=draft.purpose,
        ).exclude(status=Status.FORGOTTEN)
    )
    if len(sources) != len(draft.derived_from):
        raise ValidationFailed(
            "Some sources are not records of this agent and purpose.",
            errors={"derived_from": ["Every source must be an existing, unforgotten record in your scope and purpose."]},
        )
    return sources


def _lock_supersession_target(draft: WriteDraft, credential: AgentCredential) -> MemoryRecord:
    agent = credential.agent
    target = (
        MemoryRecord.objects.select_for_update()
        .filter(pk=draft.supersedes, tenant_id=agent.tenant_id, agent=agent, purpose=draft.purpose)
        .first()
    )
    if target is None or target.status != Status.ACTIVE or target.version != draft.supersedes_version:
        count_conflict("supersession")
    if target is None:
        raise Conflict("supersedes must name a record of your tenant, agent and purpose.", code="supersedes_unknown")
    if target.status != Status.ACTIVE:
        raise Conflict(f"The record to supersede is {target.status}, not active.", code="supersedes_not_active")
    if target.version != draft.supersedes_version:
        raise StaleVersion(
            f"The record to supersede is at version {target.version}, not {draft.supersedes_version}.",
            code="stale_version",
        )
    return target


def _supersede_locked(record: MemoryRecord, *, actor: Actor, reason: str, now: datetime, note: str = "") -> None:
    record.status = Status.SUPERSEDED
    record.status_changed_at = now
    record.version += 1
    _stamp(record, actor=actor, reason=reason, note=note)
    record.save(update_fields=TRANSITION_FIELDS)
    count_on_commit(TRANSITION_COUNT, "supersede")


# --------------------------------------------------------------------------------------------
# single-record transitions (compare-and-swap)


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
    name: str, *, record_id: uuid.UUID | str, expected_version: int, actor: Actor, note: str = "",
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
        count_on_commit(TRANSITION_COUNT, name)
        if became_active:
            embed_after_commit([record.pk])
        return record


def _require_human(actor: Actor, action: str) -> None:
    if not actor.is_human:
        raise ScopeDenied(f"Only a human reviewer may {action} a memory.")


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

    corrected: list[MemoryRecord] = []

    def mutate(record: MemoryRecord, now: datetime) -> None:
        if record.supersedes_id:
            previous = MemoryRecord.objects.get(pk=record.supersedes_id)  # locked below, with the record
            if previous.status != Status.ACTIVE:
                count_conflict("supersession")
                raise Conflict(
                    f"This memory corrects one that is now {previous.status}: the correction no longer applies. "
                    "Reject it, or let the agent write it again.", code="supersedes_not_active",
                )
            corrected.append(previous)
        review(record, now)
        record.confirmed_at = now

    with transaction.atomic():
        corrects = records_in_scope(actor).filter(pk=record_id).values_list("supersedes_id", flat=True).first()
        if corrects is not None:  # the correction and the record it corrects, in key order
            _lock_in_order([record_id, corrects])
        record = _transition("promote", record_id=record_id, expected_version=expected_version, actor=actor, note=note, mutate=mutate)
        for previous in corrected:
            _supersede_locked(previous, actor=actor, reason=f"{actor.channel}.supersede", now=record.reviewed_at, note=note)
        return record


def memory_reject(*, record_id, expected_version: int, actor: Actor, note: str = "") -> MemoryRecord:
    """quarantined -> rejected. Humans only."""
    _require_human(actor, "reject")
    return _transition("reject", record_id=record_id, expected_version=expected_version, actor=actor, note=note,
                       mutate=_mark_reviewed(actor, verified=False))


def memory_confirm(*, record_id, expected_version: int, actor: Actor, note: str = "") -> MemoryRecord:
    """Re-checked against its source: confirmed_at = now. A human confirmation verifies the record."""
    if actor.is_agent and not actor.credential.can_confirm:
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


def memory_supersede(
    *, record_id, expected_version: int, actor: Actor, content: str, note: str = ""
) -> MemoryRecord:
    """A reviewer's correction: a new active, verified record with the corrected content replaces
    the old one, which becomes superseded. The new record's provenance names the reviewer."""
    _require_human(actor, "supersede")
    content = (content or "").strip()
    if not content:
        raise ValidationFailed("The correction is empty.", errors={"content": ["Content may not be empty."]})
    if len(content) > settings.MEMORY_MAX_CONTENT_CHARS:
        raise ValidationFailed("The correction is too long.", errors={"content": [f"At most {settings.MEMORY_MAX_CONTENT_CHARS} characters."]})
    with transaction.atomic():
        old = _transition("supersede", record_id=record_id, expected_version=expected_version, actor=actor, note=note)
        now = timezone.now()
        username = actor.user.get_username()
        record = MemoryRecord(
            tenant_id=old.tenant_id, agent_id=old.agent_id, subject=old.subject, purpose=old.purpose, kind_id=old.kind_id,
            content=content, content_hash=content_digest(content),
            source_type=SourceType.OPERATOR_CONFIG, source_uri=f"review://{username}/corrects/{old.pk}",
            session_id="", turn_id="", tool="", source_version=str(old.version), observed_at=now, contaminated=False,
            authority=Authority.OPERATOR, trust=Trust.VERIFIED, reviewed_by=actor.user, reviewed_at=now,
            confidence=1.0, created_at=now, confirmed_at=now, status_changed_at=now,
            expires_at=now + min(old.kind.default_ttl, old.kind.max_ttl),
            valid_from=None, valid_to=None, status=Status.ACTIVE, version=1, supersedes=old,
        )
        _stamp(record, actor=actor, reason=f"{actor.channel}.correct", note=note)
        record.save(force_insert=True)
        count_on_commit(WRITES, record.status)
        embed_after_commit([record.pk])
        return record


def memory_supersede_by(
    *, record_id, expected_version: int, by_record_id, actor: Actor, note: str = "", action: str = "supersede_by",
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
        if (record.tenant_id, record.agent_id, record.purpose) != (replacement.tenant_id, replacement.agent_id, replacement.purpose):
            raise InvalidTransition("The replacing memory belongs to another agent or purpose.", code="scope_mismatch")
        history_note = checked_note(f"Superseded by {replacement.pk}." + (f" {note}" if note else ""))
        _supersede_locked(record, actor=actor, reason=f"{actor.channel}.{action}", now=timezone.now(), note=history_note)
        return record


# --------------------------------------------------------------------------------------------
# batch transitions (jobs and forget)


def memory_expire(*, record_id, expected_version: int, actor: Actor) -> MemoryRecord:
    """One record past its expiry -> expired."""

    def mutate(record: MemoryRecord, now: datetime) -> None:
        if record.expires_at > now:
            raise InvalidTransition("The memory has not expired yet.", code="not_expired")

    return _transition("expire", record_id=record_id, expected_version=expected_version, actor=actor, mutate=mutate)


def memory_expire_due(*, actor: Actor, now: datetime | None = None, batch_size: int = 2000,
                      max_batches: int | None = None, walk: str | None = None) -> int:
    """Expire every active or quarantined record past `expires_at`, one locked batch per
    transaction. Rows another transaction holds are skipped (a run never waits for a reviewer's
    transaction, so it cannot deadlock with one), so concurrent runs never double a transition,
    and a run killed mid-way loses only its uncommitted batch, which the next run picks up; as do
    records a concurrent update moves behind the walk meanwhile.

    PostgreSQL walks one of two ways (`walk`, chosen here unless given, for tests): along the
    expiry index in (expires_at, id) order ("index"), or, when at least as many records are due as
    the table has pages, through the table in physical order ("blocks"): records sharing one
    expires_at follow each other in id order, which is random on disk, so a large expiry along the
    index touched every page of the table again in every batch, and after each checkpoint wrote
    each of them whole to the WAL again (a million records sharing one moment: 85 s and 5.3 GB of
    WAL along the index, 62 s and 4.0 GB through the table, as much as one plain UPDATE of them all)."""
    now = now or timezone.now()
    allowed_from, target = TRANSITIONS["expire"]
    reason = f"{actor.channel}.expire"
    connection = connections[router.db_for_write(MemoryRecord)]
    if connection.vendor == "postgresql":
        return _expire_due_in_place(connection, now=now, batch_size=batch_size, max_batches=max_batches, walk=walk,
                                    allowed_from=list(allowed_from), target=target, actor=actor, reason=reason)
    table = connection.ops.quote_name(MemoryRecord._meta.db_table)
    keyset = (MemoryRecord._meta.get_field("expires_at"), MemoryRecord._meta.pk)
    total = batches = 0
    after = None  # (expires_at, id) of the last record of the previous batch
    while max_batches is None or batches < max_batches:
        # Each batch starts after the last one, along the expiry index: it never re-reads the
        # entries of records earlier batches expired.
        due = MemoryRecord.objects.select_for_update(skip_locked=True).filter(status__in=allowed_from, expires_at__lte=now)
        if after is not None:  # a row comparison: the index scan starts there (an OR of the two would not)
            due = due.filter(RawSQL(f"({table}.expires_at, {table}.id) > (%s, %s)", after, output_field=BooleanField()))
        with transaction.atomic():
            rows = list(due.order_by("expires_at", "pk").values_list("expires_at", "pk")[:batch_size])
            ids = [pk for _, pk in rows]
            if not ids:
                break
            done = _bulk_transition(ids, target=target, now=now, actor=actor, reason=reason)
        total += done
        batches += 1
        if len(rows) < batch_size:
            break
        after = tuple(field.get_db_prep_value(value, connection) for field, value in zip(keyset, rows[-1]))
    return total


def _expire_due_in_place(connection, *, now: datetime, batch_size: int, max_batches: int | None, walk: str | None,
                         allowed_from: list[str], target: str, actor: Actor, reason: str) -> int:
    """PostgreSQL's `memory_expire_due`: each batch one statement (the selection, locking with
    SKIP LOCKED, the UPDATE, which checks status and time again, and the history INSERT from its
    RETURNING), no key travelling to Python and back."""
    quote = connection.ops.quote_name
    table = quote(MemoryRecord._meta.db_table)
    stamp = connection.ops.adapt_datetimefield_value(now)
    due = "status = ANY(%s) AND expires_at <= %s"
    due_params = [allowed_from, stamp]
    size = "SELECT pg_relation_size(%s::regclass) / current_setting('block_size')::int"  # the table's pages
    with connection.cursor() as cursor:
        cursor.execute(f"{size}, greatest(reltuples, 0) FROM pg_class WHERE oid = %s::regclass", [table, table])
        pages, tuples = cursor.fetchone()
        if walk is None:
            # Counted along the expiry index, and never more than `pages`: cheap when few are due.
            cursor.execute(f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {due} LIMIT %s) d", [*due_params, max(pages, 1)])
            walk = "blocks" if cursor.fetchone()[0] >= max(pages, 1) else "index"
    moved = _in_place_transition_sql(connection, match="r.ctid = selected.at" if walk == "blocks" else "r.id = selected.at",
                                     recheck="r.status = ANY(%s) AND r.expires_at <= %s")
    moved_params = [target, stamp, *due_params, *_history_params(history_date=now, actor=actor, reason=reason, note="")]
    total = batches = 0
    if walk == "blocks":
        # About `batch_size` rows per statement, from the table's average rows per page; pages
        # added while the run goes (new versions of records, moved by updates) are walked too.
        step = max(1, int(batch_size * pages / tuples) if tuples > 0 else batch_size // 20)
        start = 0
        while max_batches is None or batches < max_batches:
            if start >= pages:
                with connection.cursor() as cursor:
                    cursor.execute(size, [table])
                    pages = cursor.fetchone()[0]
                if start >= pages:
                    break
            selected = (f"SELECT ctid FROM {table} WHERE ctid >= %s::tid AND ctid < %s::tid AND {due} "
                        f"FOR UPDATE SKIP LOCKED")
            with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
                cursor.execute(f"WITH selected (at) AS MATERIALIZED ({selected}), {moved}",
                               [f"({start},0)", f"({start + step},0)", *due_params, *moved_params])
                done = cursor.fetchone()[0]
                _count_moved(reason, done)
            total += done
            start += step
            batches += 1
    else:
        after: tuple | None = None  # (expires_at, id) of the last record of the previous batch
        while max_batches is None or batches < max_batches:
            # Each batch starts after the last one, along the expiry index: it never re-reads the
            # entries of records earlier batches expired (dead until vacuum, and when many records
            # share one expires_at, read again from the heap by every batch). A row comparison: the
            # index scan starts there (an OR of the two would not).
            keyset = "AND (expires_at, id) > (%s, %s) " if after else ""
            selected = (f"SELECT id, expires_at FROM {table} WHERE {due} {keyset}"
                        f"ORDER BY expires_at, id LIMIT %s FOR UPDATE SKIP LOCKED")
            with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
                cursor.execute(
                    f"WITH selected (at, expires_at) AS MATERIALIZED ({selected}), {moved}, "
                    f"(SELECT count(*) FROM selected), last.* FROM (SELECT expires_at, at FROM selected "
                    f"ORDER BY expires_at DESC, at DESC LIMIT 1) last",
                    [*due_params, *(after or ()), batch_size, *moved_params])
                row = cursor.fetchone()
                _count_moved(reason, row[0] if row else 0)
            if row is None:
                break
            done, selected_count, *last = row
            total += done
            batches += 1
            if selected_count < batch_size:
                break
            after = tuple(last)
    return total


def _in_place_transition_sql(connection, *, match: str, recheck: str = "TRUE") -> str:
    """The rest of a `WITH selected (at ...) AS (...)` statement that moves the records `match`
    finds (`r` a record, `selected.at` a selected key) and still satisfy `recheck` to a status,
    with one history row each, and selects how many moved, as its first column. Parameters: the
    status, the moment, `recheck`'s, then `_history_params`. The UPDATE evaluates `recheck` again on
    the newest version of a row changed meanwhile, so a record another transaction moved is left.
    PostgreSQL only."""
    quote = connection.ops.quote_name
    table = quote(MemoryRecord._meta.db_table)
    columns = [quote(f.column) for f in _history_tracked_fields()]
    return (
        f"moved AS (UPDATE {table} r SET {quote('status')} = %s, {quote('status_changed_at')} = %s, "
        f"{quote('version')} = r.{quote('version')} + 1 FROM selected WHERE {match} AND {recheck} "
        f"RETURNING {', '.join('r.' + c for c in columns)}), "
        f"written AS (INSERT INTO {quote(MemoryRecord.history.model._meta.db_table)} "
        f"({', '.join(columns + [quote(c) for c in HISTORY_COLUMNS])}) "
        f"SELECT {', '.join('moved.' + c for c in columns)}, %s, %s, %s, %s, %s, %s FROM moved RETURNING 1) "
        f"SELECT (SELECT count(*) FROM written)"
    )


@dataclass(frozen=True)
class ForgetOutcome:
    record_ids: list[uuid.UUID]  # every record forgotten now, lineage included
    subject_count: int  # of which directly about the subject
    lineage_count: int  # derived records forgotten because a source was


def memory_forget_subject(*, tenant_id: int, subject: str, actor: Actor, reason: str = "") -> ForgetOutcome:
    """Logical forget, synchronous: every record of the subject (whatever its status), and every
    record derived from one of them, becomes `forgotten`. A reviewer forgets across the tenant (an
    erasure request); an agent only within its own records, since its token fixes the agent. Recall
    excludes them as soon as this commits; content is removed from storage by forget propagation.
    Records already forgotten, whose subject propagation replaced by its keyed fingerprint, match
    too (`memory.fingerprints.records_about`) and count as nothing left to forget.

    Set-based whatever the number of records: the ids travel to the database as one parameter
    (`record_id_set`), and on PostgreSQL each of the two transitions is one statement (records and
    history rows together, as the expire job moves a batch)."""
    if not actor.may_access_tenant(tenant_id):
        raise RecordNotFound("No such tenant in your scope.")
    if actor.is_agent and not actor.credential.can_forget:
        raise ScopeDenied("This token may not forget subjects.")
    now = timezone.now()
    with transaction.atomic():
        pending = MemoryRecord.objects.exclude(status=Status.FORGOTTEN)
        direct = set(records_about(records_in_scope(actor), tenant_id=tenant_id, subject=subject)
                     .exclude(status=Status.FORGOTTEN).values_list("pk", flat=True))
        lineage: set[uuid.UUID] = set()
        frontier = direct
        while frontier:  # derived records of derived records, too
            frontier = (set(pending.filter(derived_from__in=record_id_set(frontier)).values_list("pk", flat=True))
                        - direct - lineage)
            lineage |= frontier
        locked = _forget_locked(direct | lineage)
        subject_ids = [pk for pk in locked if pk in direct]
        lineage_ids = [pk for pk in locked if pk not in direct]
        in_place = connections[router.db_for_write(MemoryRecord)].vendor == "postgresql"
        for ids, transition in ((subject_ids, "forget"), (lineage_ids, "forget_lineage")):
            if not ids:
                continue
            how = {"target": Status.FORGOTTEN, "now": now, "actor": actor, "note": reason,
                   "reason": f"{actor.channel}.{transition}"}
            if in_place:
                _bulk_transition_in_place(MemoryRecord.objects.filter(pk__in=record_id_set(ids)).values("pk"), **how)
            else:  # SQLite: `_bulk_transition` binds a parameter per id, so in chunks
                for start in range(0, len(ids), 1000):
                    _bulk_transition(ids[start:start + 1000], **how)
    return ForgetOutcome(record_ids=subject_ids + lineage_ids, subject_count=len(subject_ids), lineage_count=len(lineage_ids))


def _forget_locked(ids: Iterable[uuid.UUID]) -> list[uuid.UUID]:
    """Lock every record to forget, the subject's and their derivatives together, in one pass in
    primary-key order (the order of every multi-row lock), and return those not forgotten meanwhile."""
    return list(MemoryRecord.objects.select_for_update().filter(pk__in=record_id_set(ids))
                .exclude(status=Status.FORGOTTEN).order_by("pk").values_list("pk", flat=True))


def record_id_set(ids: Iterable[uuid.UUID], *, as_text: bool = False) -> RawSQL:
    """Record ids as a subquery over a single parameter, for `pk__in=` (or `record_id__in=`): a
    uuid[] literal on PostgreSQL, a JSON list on SQLite, written as one string. 10,000 ids then
    make one short statement, where a list of ids makes a placeholder each for Django to compile
    and the driver to quote, which cost a 10,000-record forget more than its updates did.
    `as_text`: the ids as `str(pk)` writes them, for text columns such as the admin log's object id."""
    ids = [pk if isinstance(pk, uuid.UUID) else uuid.UUID(str(pk)) for pk in ids]
    if connections[router.db_for_write(MemoryRecord)].vendor == "postgresql":
        cast = "::text" if as_text else ""
        return RawSQL(f"SELECT unnest(%s::uuid[]){cast}", ("{" + ",".join(pk.hex for pk in ids) + "}",))
    return RawSQL("SELECT value FROM json_each(%s)", (json.dumps([str(pk) if as_text else pk.hex for pk in ids]),))


# --------------------------------------------------------------------------------------------
# recall bookkeeping


MARK_GRANULARITY = timedelta(minutes=1)


def memory_mark_used(*, record_ids: Iterable[uuid.UUID], at: datetime | None = None) -> int:
    """Recall returned these records at `at`. Not a transition (no history row: the field is
    excluded from history). While serving a request the mark waits in this process's buffer and is
    written after the response, batched with others (`memory.usage`); elsewhere it is written now.
    Returns how many records were written now."""
    at = at or timezone.now()
    ids = list(record_ids)
    if not ids or usage.defer_mark(ids, at):
        return 0
    return write_last_used(record_ids=ids, at=at)


def write_last_used(*, record_ids: Iterable[uuid.UUID], at: datetime, granularity: timedelta = MARK_GRANULARITY) -> int:
    """Set last_used_at in one UPDATE; rows marked within `granularity` before `at` (or later) are
    skipped, so hot records are not rewritten on every recall and a mark never moves back."""
    ids = list(record_ids)
    if not ids:
        return 0
    due = MemoryRecord.objects.filter(pk__in=record_id_set(ids)).filter(Q(last_used_at__isnull=True) | Q(last_used_at__lt=at - granularity))
    with transaction.atomic():
        # A record another transaction holds (an expire batch, a forget) is skipped, not waited for:
        # a web process flushes after a response, and waiting would keep it from the next request.
        # The mark is a hint for the deletion-candidate rule, and such a record is changing state.
        return MemoryRecord.objects.filter(pk__in=due.select_for_update(skip_locked=True).values("pk")).update(last_used_at=at)


# --------------------------------------------------------------------------------------------
# revoke a source (a leaked credential, a misbehaving agent, a poisoned session, a compromised site)


@dataclass(frozen=True)
class RevokedSource:
    """One source within one tenant: exactly one of credential, agent, session id or source-URI
    prefix. `records_written` is every record it wrote, whatever its status now."""

    tenant_id: int
    credential_id: int | None = None
    agent_id: int | None = None
    session_id: str = ""
    source_uri_prefix: str = ""

    # what each kind of source is called in a record's quarantine reason (never its value: session
    # ids and URIs are provenance, which forget propagation scrubs from records and history)
    KINDS = {"credential_id": "an agent token", "agent_id": "an agent", "session_id": "a session",
             "source_uri_prefix": "a source address"}

    @property
    def kind(self) -> str:
        given = [name for name in self.KINDS if getattr(self, name)]
        if len(given) != 1:
            raise ValidationFailed("Name exactly one source to revoke: a credential, an agent, a session id or a source-URI prefix.",
                                   errors={"source": ["Exactly one of credential, agent, session_id, source_uri_prefix."]})
        return given[0]

    def hold(self) -> SourceHold:
        """The open hold that sends a revoked session's or address's later writes to quarantine."""
        scope, value = ((SourceHold.Scope.SESSION, self.session_id) if self.kind == "session_id"
                        else (SourceHold.Scope.URI_PREFIX, self.source_uri_prefix))
        return SourceHold(tenant_id=self.tenant_id, scope=scope, key=source_fingerprint(self.tenant_id, scope, value),
                          prefix_length=len(value) if scope == SourceHold.Scope.URI_PREFIX else None,
                          cause=SourceHold.Cause.REVOKED)

    def records_written(self, scope: QuerySet[MemoryRecord]) -> QuerySet[MemoryRecord]:
        lookup = {"credential_id": "written_by_id", "agent_id": "agent_id", "session_id": "session_id",
                  "source_uri_prefix": "source_uri__startswith"}[self.kind]
        return scope.filter(tenant_id=self.tenant_id, **{lookup: getattr(self, self.kind)})


@dataclass(frozen=True)
class RevokeOutcome:
    record_ids: list[uuid.UUID]  # active records the source wrote, now quarantined
    derived_ids: list[uuid.UUID]  # active records derived from anything it wrote, now quarantined
    token_revoked: bool  # a credential's token was usable and is revoked now
    hold: SourceHold | None = None  # a session's or address's open hold, for its later writes


def revocation_targets(*, source: RevokedSource, actor: Actor) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
    """(active records the source wrote, active records derived from any record it wrote, at any
    depth), sorted by key. Read only: what a revocation would move, for its confirmation step too."""
    if not actor.may_access_tenant(source.tenant_id):
        raise RecordNotFound("No such tenant in your scope.")
    written = source.records_written(records_in_scope(actor)).exclude(status=Status.FORGOTTEN)
    written_ids = set(written.values_list("pk", flat=True))
    edges = MemoryRecord.derived_from.through.objects
    lineage: set[uuid.UUID] = set()
    frontier = written_ids
    while frontier:  # derived records of derived records, too
        found: set[uuid.UUID] = set()
        ordered = sorted(frontier)
        for start in range(0, len(ordered), 1000):
            found.update(edges.filter(to_memoryrecord_id__in=ordered[start:start + 1000])
                         .values_list("from_memoryrecord_id", flat=True))
        frontier = found - written_ids - lineage
        lineage |= frontier
    active = records_in_scope(actor).filter(tenant_id=source.tenant_id, status=Status.ACTIVE)
    direct = sorted(written.filter(status=Status.ACTIVE).values_list("pk", flat=True))
    derived: list[uuid.UUID] = []
    ordered = sorted(lineage)
    for start in range(0, len(ordered), 1000):
        derived.extend(active.filter(pk__in=ordered[start:start + 1000]).values_list("pk", flat=True))
    return direct, sorted(derived)


def memory_revoke_source(*, source: RevokedSource, actor: Actor, note: str = "") -> RevokeOutcome:
    """Revoke a source: every active record it wrote, and every active record derived from anything
    it wrote, goes back to `quarantined` (trust untrusted), set-based, one history row each with
    reason `<channel>.revoke` and the note; recall stops returning them when this commits. A
    credential's token is revoked too, and an agent's tokens with the agent. Humans only; records already quarantined, decided or
    forgotten stay as they are. Repeating it finds nothing left (affected 0), so it is safe to
    run again, e.g. to catch a write that was in flight with the token."""
    _require_human(actor, "revoke")
    kind = source.kind
    checked_note(note)
    now = timezone.now()
    with transaction.atomic():
        # Exclusive: a write in flight commits before this selects (and is selected), any other
        # write checks after this commits (and is refused or held): memory.admission.
        hold([revocation_fence(source.tenant_id)])
        token_revoked = False
        held = None
        if kind in ("session_id", "source_uri_prefix"):  # later writes from it wait for review
            wanted = source.hold()
            raise_holds([wanted], actor_label=actor.label, note=note)
            held = SourceHold.objects.get(tenant_id=wanted.tenant_id, scope=wanted.scope, key=wanted.key, cleared_at__isnull=True)
        if kind in ("credential_id", "agent_id"):  # a revoked agent's tokens are revoked with it
            tokens = AgentCredential.objects.filter(agent__tenant_id=source.tenant_id).filter(
                **({"pk": source.credential_id} if kind == "credential_id" else {"agent_id": source.agent_id}))
            token_revoked = bool(revoke_tokens(tokens, at=now))
        direct, derived = revocation_targets(source=source, actor=actor)
        locked = set(_forget_locked([*direct, *derived]))  # one pass in key order; skips forgotten
        moved: dict[bool, list[uuid.UUID]] = {}
        for is_derived, ids in ((False, direct), (True, derived)):
            why = (f"Derived from a memory whose source ({RevokedSource.KINDS[kind]}) was revoked: a reviewer must approve it again."
                   if is_derived else f"Its source ({RevokedSource.KINDS[kind]}) was revoked: a reviewer must approve it again.")
            # Still active once locked (a concurrent decision may have moved one meanwhile).
            still = [pk for pk in ids if pk in locked]
            moved[is_derived] = []
            for start in range(0, len(still), 1000):
                chunk = list(MemoryRecord.objects.filter(pk__in=still[start:start + 1000], status=Status.ACTIVE)
                             .values_list("pk", flat=True))
                MemoryRecord.objects.filter(pk__in=chunk).update(trust=Trust.UNTRUSTED, quarantine_reason=why)
                _bulk_transition(chunk, target=TRANSITIONS["revoke"][1], now=now, actor=actor,
                                 reason=f"{actor.channel}.revoke", note=note)
                moved[is_derived].extend(chunk)
    return RevokeOutcome(record_ids=moved[False], derived_ids=moved[True], token_revoked=token_revoked, hold=held)
