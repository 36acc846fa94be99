"""Revoking a source (a leaked credential, a misbehaving agent, a poisoned session, a compromised
site, a registered source's leaked signing key): everything it wrote (or, for a key, verified) that
is active, and everything active derived from that, goes back to quarantine at once, and its later
writes are refused or held."""

import uuid
from dataclasses import dataclass
from typing import cast

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from memory import replicas
from memory.actors import Actor
from memory.admission import raise_holds
from memory.credentials import revoke_tokens
from memory.errors import RecordNotFound, ValidationFailed
from memory.fences import hold, revocation_fence
from memory.fingerprints import source_fingerprint
from memory.models import TRANSITIONS, AgentCredential, MemoryRecord, SourceHold, SourceKey, Status, Trust
from memory.policy import checked_note
from memory.selectors import records_in_scope
from memory.services.forget import _forget_locked, derived_at_any_depth, record_id_set
from memory.services.history import _bulk_move
from memory.services.transitions import _require_human


@dataclass(frozen=True)
class RevokedSource:
    """One source within one tenant: exactly one of credential, agent, session id or source-URI
    prefix. `records_written` is every record it wrote, whatever its status now."""

    tenant_id: int
    credential_id: int | None = None
    agent_id: int | None = None
    session_id: str = ""
    source_uri_prefix: str = ""
    source_key_id: int | None = None  # a registered source's signing key (memory.provenance)

    # what each kind of source is called in a record's quarantine reason (never its value: session
    # ids and URIs are provenance, which forget propagation scrubs from records and history)
    KINDS = {
        "credential_id": "an agent token",
        "agent_id": "an agent",
        "session_id": "a session",
        "source_uri_prefix": "a source address",
        "source_key_id": "a registered source's signing key",
    }

    @property
    def kind(self) -> str:
        given = [name for name in self.KINDS if getattr(self, name)]
        if len(given) != 1:
            raise ValidationFailed(
                "Name exactly one source to revoke: a credential, an agent, a session id, a source-URI prefix or a source key.",
                errors={"source": ["Exactly one of credential, agent, session_id, source_uri_prefix, source_key."]},
            )
        return given[0]

    def hold(self) -> SourceHold:
        """The open hold that sends a revoked session's or address's later writes to quarantine."""
        scope, value = (
            (SourceHold.Scope.SESSION, self.session_id)
            if self.kind == "session_id"
            else (SourceHold.Scope.URI_PREFIX, self.source_uri_prefix)
        )
        return SourceHold(
            tenant_id=self.tenant_id,
            scope=scope,
            key=source_fingerprint(self.tenant_id, scope, value),
            prefix_length=len(value) if scope == SourceHold.Scope.URI_PREFIX else None,
            cause=SourceHold.Cause.REVOKED,
        )

    def records_written(self, scope: QuerySet[MemoryRecord]) -> QuerySet[MemoryRecord]:
        lookup = {
            "credential_id": "written_by_id",
            "agent_id": "agent_id",
            "session_id": "session_id",
            "source_uri_prefix": "source_uri__startswith",
            "source_key_id": "verified_key_id",  # the records its signatures verified
        }[self.kind]
        return scope.filter(tenant_id=self.tenant_id, **{lookup: getattr(self, self.kind)})


@dataclass(frozen=True)
class RevokeOutcome:
    record_ids: list[uuid.UUID]  # active records the source wrote, now quarantined
    derived_ids: list[uuid.UUID]  # active records derived from anything it wrote, now quarantined
    token_revoked: bool  # a credential's token (or a source key) was usable and is revoked now
    hold: SourceHold | None = None  # a session's or address's open hold, for its later writes


def revocation_targets(*, source: RevokedSource, actor: Actor) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
    """(active records the source wrote, active records derived from any record it wrote, at any
    depth), sorted by key. Read only: what a revocation would move, for its confirmation step too.
    "Active" is what the `revoke` transition applies to."""
    if not actor.may_access_tenant(source.tenant_id):
        raise RecordNotFound("No such tenant in your scope.")
    movable = TRANSITIONS["revoke"][0]
    written = source.records_written(records_in_scope(actor)).exclude(status=Status.FORGOTTEN)
    lineage = derived_at_any_depth(written.values_list("pk", flat=True))
    direct = sorted(written.filter(status__in=movable).values_list("pk", flat=True))
    derived = (
        (
            records_in_scope(actor)
            .filter(tenant_id=source.tenant_id, status__in=movable, pk__in=record_id_set(lineage))
            .values_list("pk", flat=True)
        )
        if lineage
        else []
    )
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
        replicas.fence(source.tenant_id)  # no replica serves what this quarantines once it commits
        token_revoked = False
        held = None
        if kind in ("session_id", "source_uri_prefix"):  # later writes from it wait for review
            wanted = source.hold()
            raise_holds([wanted], actor_label=actor.label, note=note)
            held = SourceHold.objects.get(tenant_id=wanted.tenant_id, scope=wanted.scope, key=wanted.key, cleared_at__isnull=True)
        if kind in ("credential_id", "agent_id"):  # a revoked agent's tokens are revoked with it
            tokens = AgentCredential.objects.filter(agent__tenant_id=source.tenant_id).filter(
                **({"pk": source.credential_id} if kind == "credential_id" else {"agent_id": source.agent_id})
            )
            token_revoked = bool(revoke_tokens(tokens, at=now))
        if kind == "source_key_id":  # it verifies nothing from now on (in-flight writes re-check it: memory.admission)
            token_revoked = _revoke_key(source, actor=actor, note=note, at=now)
        direct, derived = revocation_targets(source=source, actor=actor)
        # One pass in key order; keeps those still active once locked (a concurrent decision may
        # have moved one meanwhile).
        locked = set(_forget_locked([*direct, *derived], transition="revoke"))
        moved: dict[bool, list[uuid.UUID]] = {}
        for is_derived, ids in ((False, direct), (True, derived)):
            why = (
                f"Derived from a memory whose source ({RevokedSource.KINDS[kind]}) was revoked: a reviewer must approve it again."
                if is_derived
                else f"Its source ({RevokedSource.KINDS[kind]}) was revoked: a reviewer must approve it again."
            )
            moved[is_derived] = [pk for pk in ids if pk in locked]
            _bulk_move(
                moved[is_derived],
                transition="revoke",
                now=now,
                actor=actor,
                reason=f"{actor.channel}.revoke",
                note=note,
                also={"trust": Trust.UNTRUSTED, "quarantine_reason": why},
            )
    return RevokeOutcome(record_ids=moved[False], derived_ids=moved[True], token_revoked=token_revoked, hold=held)


def _revoke_key(source: RevokedSource, *, actor: Actor, note: str, at) -> bool:
    """Revoke a registered source's key of the tenant, with a history row; False if it already was."""
    key = (
        SourceKey.objects.select_for_update()
        .filter(pk=cast(int, source.source_key_id), source__tenant_id=source.tenant_id)
        .first()
    )
    if key is None:
        raise RecordNotFound("No such source key in this tenant.")
    if key.revoked_at is not None:
        return False
    key.revoked_at = at
    key._change_reason, key._history_actor, key._history_note = f"{actor.channel}.revoke", actor.label, note
    if actor.user is not None:
        key._history_user = actor.user
    key.save(update_fields=["revoked_at"])
    return True
