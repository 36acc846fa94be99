"""Admission: whether a write becomes `active` at once or waits in quarantine, and why, in words a
reviewer reads. The one place that decides it, for single and batch writes alike.

A write is quarantined when any of these holds (the first that applies gives the reason):
1. it is derived from other memories (a summary or a merge);
2. its own provenance says the session read outside content (`contaminated`);
3. its session, or an address its source URI starts with, is held (memory.models.SourceHold): an
   earlier write in the session was contaminated, or a reviewer revoked the session or the address.
   A hold is sticky: it stays until a reviewer clears it;
4. it claims the user's or operator's voice for relayed words (a document or an import) without a
   credential trusted to import;
5. its content raises a holding risk flag (HOLDING_FLAGS: it reads like an attempt to override the
   agent's instructions or to send data out), whatever its authority: such a text is an attack on
   the agent's future behaviour far more often than a preference, and a reviewer settles it;
6. its authority is not in the kind's auto-admit set, unless its provenance is verified: signed by
   a registered source (memory.provenance) whose policy admits its kind. A verified claim still
   meets rules 1, 2, 3 and 5; its signature settles what rules 4 and 6 ask a reviewer to check.
Everything else is `active` and trusted.

The check runs inside the writing transaction behind the tenant's revocation fence
(memory.fences): the credential, and the source keys that verified the writes, are read again
there, and a token or key revoked meanwhile refuses the write (nothing stored), so a revocation
catches every write that was in flight when it ran.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from simple_history.utils import bulk_create_with_history

from memory.actors import Actor
from memory.errors import DomainError, InvalidTransition, RecordNotFound, ScopeDenied
from memory.fences import hold, revocation_fence
from memory.fingerprints import source_fingerprint
from memory.models import AgentCredential, Authority, SourceHold, SourceKey, SourceType, Status, Trust
from memory.policy import checked_note
from memory.validation import WriteDraft

# Sources that carry someone else's words: claiming the user's or the operator's authority for them
# needs a credential trusted to import (a migration), else a reviewer checks the claim.
RELAYED_SOURCES = frozenset({SourceType.DOCUMENT, SourceType.IMPORT})
TRUSTED_AUTHORITIES = frozenset({Authority.USER, Authority.OPERATOR})
# Risk flags (memory.risk) that hold a write for review whatever its authority; the others are shown
# to the reviewer but admit nothing and hold nothing.
HOLDING_FLAGS = ("override", "exfil")

_UNADMITTED_AUTHORITY_REASON: dict[str, str] = {
    Authority.THIRD_PARTY: "Read from someone else's content (a web page, a document or a tool), not said by the user or the operator.",
    Authority.AGENT: "The agent's own conclusion, not something the user or the operator said.",
}
_HELD_REASON: dict[tuple[str, str], str] = {  # by (scope, cause)
    (
        SourceHold.Scope.SESSION,
        SourceHold.Cause.CONTAMINATED,
    ): "Its session read outside content earlier (a contaminated write): every later write in it waits for review "
    "until a reviewer clears the session.",
    (
        SourceHold.Scope.SESSION,
        SourceHold.Cause.REVOKED,
    ): "Its session was revoked: every later write in it waits for review until a reviewer clears the session.",
    (
        SourceHold.Scope.URI_PREFIX,
        SourceHold.Cause.REVOKED,
    ): "Its source address was revoked: every later write from it waits for review until a reviewer clears it.",
}
_FLAG_REASON = {
    "override": "Reads like an attempt to override the agent's instructions: held for review whatever its authority.",
    "exfil": "Links to an address that carries data out: held for review whatever its authority.",
}


class TokenRevoked(DomainError):
    """The token was revoked while the write was on its way: nothing is stored."""

    status = 401
    title = "Token revoked"


@dataclass
class Gate:
    """What admission needs to know beyond the draft, read behind the revocation fence: the open
    holds of the credential's tenant (by scope and key), and the contaminated sessions this
    transaction holds from now on."""

    tenant_id: int
    holds: dict[tuple[str, str], SourceHold] = field(default_factory=dict)
    prefix_lengths: frozenset[int] = frozenset()
    raised: list[SourceHold] = field(default_factory=list)  # by this transaction's writes, not yet stored
    revoked_keys: frozenset[int] = frozenset()  # keys that verified these drafts and were revoked since

    def key_revoked(self, draft: WriteDraft) -> bool:
        return draft.verified_key is not None and draft.verified_key.pk in self.revoked_keys

    def observe(self, record) -> None:
        """Contamination is sticky: a contaminated write holds its session, for the drafts that
        follow in this transaction at once and for every later write once `store_raised` ran."""
        if not (record.contaminated and record.session_id):
            return
        key = source_fingerprint(self.tenant_id, SourceHold.Scope.SESSION, record.session_id)
        if (SourceHold.Scope.SESSION, key) not in self.holds:
            held = SourceHold(
                tenant_id=self.tenant_id,
                scope=SourceHold.Scope.SESSION,
                key=key,
                cause=SourceHold.Cause.CONTAMINATED,
                raised_by_id=record.pk,
                created_at=record.created_at,
            )
            self.holds[(SourceHold.Scope.SESSION, key)] = held
            self.raised.append(held)

    def store_raised(self, actor: Actor) -> None:
        """Store the holds this transaction's writes raised (after the records they name)."""
        if self.raised:
            raise_holds(self.raised, actor_label=actor.label, note="A write in this session read outside content.")
            self.raised = []

    def hold_for(self, draft: WriteDraft) -> SourceHold | None:
        session, uri = draft.provenance.get("session_id") or "", draft.provenance.get("uri") or ""
        if session:
            found = self.holds.get(
                (SourceHold.Scope.SESSION, source_fingerprint(self.tenant_id, SourceHold.Scope.SESSION, session))
            )
            if found is not None:
                return found
        for length in sorted(self.prefix_lengths):
            if len(uri) >= length:
                key = source_fingerprint(self.tenant_id, SourceHold.Scope.URI_PREFIX, uri[:length])
                found = self.holds.get((SourceHold.Scope.URI_PREFIX, key))
                if found is not None:
                    return found
        return None


def enter_gate(credential: AgentCredential, drafts: Iterable[WriteDraft]) -> Gate:
    """Inside the writing transaction: take the tenant's revocation fence (shared), refuse a token
    revoked meanwhile, and read the open holds that can apply to `drafts` (their sessions' and every
    address prefix's: a tenant's contaminated sessions add up, its revoked addresses stay few).
    Writes of one tenant never wait for each other here, only for a revocation that is running."""
    tenant_id = credential.agent.tenant_id
    drafts = list(drafts)
    hold([revocation_fence(tenant_id)], shared=True)
    if not AgentCredential.objects.usable().filter(pk=credential.pk).exists():
        raise TokenRevoked("This token was revoked while the write was made; nothing was stored.", code="token_revoked")
    sessions = {
        source_fingerprint(tenant_id, SourceHold.Scope.SESSION, draft.provenance["session_id"])
        for draft in drafts
        if draft.provenance.get("session_id")
    }
    applicable = Q(scope=SourceHold.Scope.URI_PREFIX) | Q(scope=SourceHold.Scope.SESSION, key__in=sessions)
    holds = {
        (held.scope, held.key): held
        for held in SourceHold.objects.filter(applicable, tenant_id=tenant_id, cleared_at__isnull=True)
    }
    lengths = frozenset(
        held.prefix_length
        for held in holds.values()
        if held.scope == SourceHold.Scope.URI_PREFIX and held.prefix_length is not None  # an address hold has one
    )
    signing_keys = {draft.verified_key.pk for draft in drafts if draft.verified_key is not None}
    revoked = (
        frozenset(SourceKey.objects.filter(pk__in=signing_keys, revoked_at__isnull=False).values_list("pk", flat=True))
        if signing_keys
        else frozenset()
    )
    return Gate(tenant_id=tenant_id, holds=holds, prefix_lengths=lengths, revoked_keys=revoked)


def admission(
    draft: WriteDraft, credential: AgentCredential, gate: Gate, *, risk_flags: str, contaminated: bool = False
) -> tuple[str, str, str]:
    """Quarantine or admit: returns (status, trust, why quarantined, in words a reviewer reads).
    `risk_flags` is the stored value of the content's flags (memory.risk.risk_flags_value)."""
    quarantined = lambda why: (Status.QUARANTINED, Trust.UNTRUSTED, why)  # noqa: E731
    source_type = draft.provenance["source_type"]
    if draft.derived_from:
        return quarantined("A summary or merge of other memories: always reviewed before use.")
    if draft.provenance["contaminated"] or contaminated:
        return quarantined(
            "The agent had read outside content (a web page or a tool result) in this session, "
            "so the claim may come from there rather than from the user."
        )
    held = gate.hold_for(draft)
    if held is not None:
        return quarantined(_HELD_REASON[(held.scope, held.cause)])
    # Verified (memory.provenance.verify: its authority is the one its source is registered with) for
    # a kind its source's policy admits.
    vouched = draft.verified_key is not None and draft.kind.name in draft.verified_key.source.auto_admit_kinds
    if (
        not vouched
        and source_type in RELAYED_SOURCES
        and draft.authority in TRUSTED_AUTHORITIES
        and not credential.can_import_trusted
    ):
        return quarantined(
            f"Says it speaks for the {draft.authority}, but was taken from a {source_type.replace('_', ' ')}: "
            "check that the source really is theirs."
        )
    flags = risk_flags.split()
    for flag in HOLDING_FLAGS:
        if flag in flags:
            return quarantined(_FLAG_REASON[flag])
    if not vouched and draft.authority not in draft.kind.auto_admit_authorities:
        return quarantined(
            _UNADMITTED_AUTHORITY_REASON.get(
                draft.authority,
                f"The {draft.kind.name} kind has every claim from the {draft.authority} reviewed before use.",
            )
        )
    return Status.ACTIVE, Trust.TRUSTED, ""


def raise_holds(holds: list[SourceHold], *, actor_label: str, note: str = "") -> None:
    """Store new open holds, each with a history row, skipping any whose session or prefix already
    has an open hold. Each hold's lock is taken first, so two writes raising one hold at once never
    both insert it (no unique violation, whose server log line would name the key)."""
    hold([f"hold:{held.tenant_id}:{held.key}" for held in holds])
    open_keys = set(
        SourceHold.objects.filter(
            tenant_id__in={held.tenant_id for held in holds}, cleared_at__isnull=True, key__in=[held.key for held in holds]
        ).values_list("tenant_id", "scope", "key")
    )
    fresh = [held for held in holds if (held.tenant_id, held.scope, held.key) not in open_keys]
    for held in fresh:
        held._change_reason = "hold.raise"
    if fresh:
        bulk_create_with_history(fresh, SourceHold, custom_historical_attrs={"history_actor": actor_label, "history_note": note})


def hold_clear(*, hold_id, actor: Actor, note: str) -> SourceHold:
    """A reviewer clears an open hold: later writes from the session or address are admitted by the
    other rules again. What it already sent to quarantine stays there, each for its own review.
    Humans only, within their tenants, with a note; one history row (`<channel>.clear_hold`)."""
    if not actor.is_human:
        raise ScopeDenied("Only a human reviewer may clear a hold.")
    note = checked_note(note, required="Say why the hold can be cleared, briefly.")
    with transaction.atomic():
        held = SourceHold.objects.select_for_update().filter(pk=hold_id).first()
        if held is None or not actor.may_access_tenant(held.tenant_id):
            raise RecordNotFound("No such hold in your scope.")
        if held.cleared_at is not None:
            raise InvalidTransition("This hold was already cleared.", code="hold_cleared")
        held.cleared_at, held.cleared_by = timezone.now(), actor.label
        held._change_reason, held._history_actor, held._history_note = f"{actor.channel}.clear_hold", actor.label, note
        held.save(update_fields=["cleared_at", "cleared_by"])
    return held
