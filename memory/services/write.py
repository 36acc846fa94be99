"""Writing one memory: the body checked against the token (scope, purpose, authority), admitted or
quarantined (memory.admission), stored with its history row, and its Idempotency-Key kept so a
retry returns the first result. Corrections and summaries are written here too."""

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from memory.actors import Actor
from memory.admission import Gate, admission, enter_gate
from memory.errors import Conflict, ScopeDenied, StaleVersion, ValidationFailed
from memory.fences import hold, idempotency_lock
from memory.metrics import WRITES, count_conflict, count_on_commit
from memory.models import (
    IDEMPOTENCY_KEY_MAX_CHARS,
    TRANSITIONS,
    AgentCredential,
    Authority,
    IdempotencyKey,
    MemoryRecord,
    Status,
    content_digest,
)
from memory.outbox.models import EventType
from memory.outbox.write import write_event_of
from memory.policy import on_activation
from memory.provenance.verify import Keyring, key_revoked_meanwhile, verify_signed, version_conflicts, version_locks
from memory.risk import risk_flags_value
from memory.services.history import _stamp
from memory.services.transitions import _supersede_locked
from memory.validation import WriteDraft, parse_write


@dataclass(frozen=True)
class WriteResult:
    record: MemoryRecord
    replayed: bool  # True when an Idempotency-Key returned an earlier result


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
        raise ValidationFailed(
            f"Idempotency-Key must be 1 to {IDEMPOTENCY_KEY_MAX_CHARS} characters.",
            errors={"Idempotency-Key": ["Invalid length."]},
        )
    fingerprint = request_fingerprint(data) if idempotency_key else ""
    if idempotency_key:
        replay = _idempotent_replay(credential, idempotency_key, fingerprint)  # a retry's fast path
        if replay:
            return replay

    now = timezone.now()
    draft = _checked_draft(data, credential=credential, now=now)
    actor = Actor.for_credential(credential)

    with transaction.atomic():
        gate = enter_gate(credential, [draft])
        if gate.key_revoked(draft):
            raise key_revoked_meanwhile(gate.tenant_id)
        # A concurrent request with the same key waits here, then replays this one; one claiming the
        # same source version waits, then sees this one's content.
        hold(([idempotency_lock(credential.pk, idempotency_key)] if idempotency_key else []) + version_locks([draft]))
        if idempotency_key:
            replay = _idempotent_replay(credential, idempotency_key, fingerprint)
            if replay:
                return replay
        (conflict,) = version_conflicts(gate.tenant_id, [draft])
        if conflict is not None:
            raise conflict
        record = _create_record(draft, credential=credential, actor=actor, now=now, gate=gate)
        gate.store_raised(actor)
        if idempotency_key:
            IdempotencyKey.objects.create(
                credential=credential, key=idempotency_key, fingerprint=fingerprint, response_status=201, record=record
            )
    return WriteResult(record=record, replayed=False)


def _checked_draft(data: Any, *, credential: AgentCredential, now: datetime) -> WriteDraft:
    """A write body validated, checked against what the credential may do and, if signed, verified;
    nothing written."""
    draft = _allowed(parse_write(reject_foreign_scope(data, credential), now=now), credential)
    return verify_signed(draft, Keyring.for_drafts(credential.agent.tenant_id, [draft]), now=now)


def _allowed(draft: WriteDraft, credential: AgentCredential) -> WriteDraft:
    """The draft if the credential may write it, else ScopeDenied or ValidationFailed."""
    if not credential.allows_purpose(draft.purpose):
        raise ScopeDenied(
            f"This token may not use purpose '{draft.purpose}'.", errors={"purpose": ["Not allowed for this token."]}
        )
    if draft.authority == Authority.OPERATOR and not credential.can_assert_operator:
        raise ScopeDenied(
            "This token may not assert operator authority.", errors={"authority": ["Operator authority not allowed."]}
        )
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
    record = _new_record(
        draft, credential=credential, actor=actor, now=now, gate=gate, contaminated=contaminated, supersedes=superseded
    )
    record.save(force_insert=True)
    write_event_of(record, written_event(record), now=now)
    count_on_commit(WRITES, record.status)
    on_activation([record])
    if sources:
        record.derived_from.set(sources)
    if superseded is not None and record.status == Status.ACTIVE:
        _supersede_locked(superseded, actor=actor, reason=f"{actor.channel}.supersede", now=now)
    return record


def written_event(record: MemoryRecord) -> str:
    """The event of a write: stored active, or quarantined for review."""
    return EventType.QUARANTINED if record.status == Status.QUARANTINED else EventType.WRITTEN


def _new_record(
    draft: WriteDraft,
    *,
    credential: AgentCredential,
    actor: Actor,
    now: datetime,
    gate: Gate,
    contaminated: bool = False,
    supersedes: MemoryRecord | None = None,
) -> MemoryRecord:
    """The unsaved record a write stores, admitted or quarantined (memory.admission), stamped for its
    history row; a contaminated one holds its session for the writes that follow."""
    agent = credential.agent
    provenance = {**draft.provenance, "contaminated": True} if contaminated else draft.provenance
    flags = risk_flags_value(draft.content)
    status, trust, why = admission(draft, credential, gate, risk_flags=flags, contaminated=contaminated)
    record = MemoryRecord(
        tenant=agent.tenant,
        agent=agent,
        subject=draft.subject,
        purpose=draft.purpose,
        kind=draft.kind,
        content=draft.content,
        content_hash=content_digest(draft.content),
        source_type=provenance["source_type"],
        source_uri=provenance["uri"],
        session_id=provenance["session_id"],
        turn_id=provenance["turn_id"],
        tool=provenance["tool"],
        source_version=provenance["source_version"],
        observed_at=provenance["observed_at"],
        contaminated=provenance["contaminated"],
        authority=draft.authority,
        trust=trust,
        quarantine_reason=why,
        confidence=draft.confidence,
        created_at=now,
        confirmed_at=now,
        status_changed_at=now,
        expires_at=draft.expires_at,
        valid_from=draft.valid_from,
        valid_to=draft.valid_to,
        status=status,
        version=1,
        supersedes=supersedes,
        written_by=credential,
        risk_flags=flags,
        verified_key=draft.verified_key,
    )
    _stamp(record, actor=actor, reason=f"write.{status}")
    gate.observe(record)
    return record


def _derivation_sources(draft: WriteDraft, credential: AgentCredential) -> list[MemoryRecord]:
    agent = credential.agent
    sources = list(
        MemoryRecord.objects.filter(
            pk__in=draft.derived_from,
            tenant_id=agent.tenant_id,
            agent=agent,
            purpose=draft.purpose,
        ).exclude(status=Status.FORGOTTEN)
    )
    if len(sources) != len(draft.derived_from):
        raise ValidationFailed(
            "Some sources are not records of this agent and purpose.",
            errors={"derived_from": ["Every source must be an existing, unforgotten record in your scope and purpose."]},
        )
    return sources


def _lock_supersession_target(draft: WriteDraft, credential: AgentCredential) -> MemoryRecord:
    """The record a correction supersedes, locked: it must be one the `supersede` transition
    applies to, at the version the writer saw."""
    agent = credential.agent
    target = (
        MemoryRecord.objects.select_for_update()
        .filter(pk=draft.supersedes, tenant_id=agent.tenant_id, agent=agent, purpose=draft.purpose)
        .first()
        if draft.supersedes is not None
        else None
    )
    if target is None:
        count_conflict("supersession")
        raise Conflict("supersedes must name a record of your tenant, agent and purpose.", code="supersedes_unknown")
    applies = target.status in TRANSITIONS["supersede"][0]
    if not applies or target.version != draft.supersedes_version:
        count_conflict("supersession")
    if not applies:
        raise Conflict(f"The record to supersede is {target.status}, not active.", code="supersedes_not_active")
    if target.version != draft.supersedes_version:
        raise StaleVersion(
            f"The record to supersede is at version {target.version}, not {draft.supersedes_version}.",
            code="stale_version",
        )
    return target
