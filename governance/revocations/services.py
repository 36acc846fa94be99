"""Filing a revocation: name the source (resolved within the tenant), preview what it would send
back to quarantine, and revoke it through the memory lifecycle service, keeping the receipt.

The API, the reviewer pages and the admin actions all come through `revocation_create`; the
confirmation step reads `revocation_preview`, which counts with the same selection the revocation
itself uses (`memory.services.revocation_targets`)."""

from dataclasses import dataclass
from typing import cast

from django.db import transaction

from governance.revocations.models import Revocation, RevocationRecord
from memory.actors import Actor
from memory.errors import RecordNotFound, ValidationFailed
from memory.models import Agent, AgentCredential, MemoryRecord, SourceKey, Tenant, hash_token
from memory.policy import checked_note
from memory.services import RevokedSource, memory_revoke_source, revocation_targets

# The limits of the record's columns (CharFields, so always set).
SESSION_ID_MAX_CHARS = cast(int, MemoryRecord._meta.get_field("session_id").max_length)
SOURCE_URI_MAX_CHARS = cast(int, MemoryRecord._meta.get_field("source_uri").max_length)
SOURCE_FIELDS = ("credential", "agent", "session_id", "source_uri_prefix", "source_key")


@dataclass(frozen=True)
class Source:
    """A source resolved within a tenant: what the memory service needs, and how people read it."""

    kind: str  # a Revocation.Source value
    revoked: RevokedSource
    credential: AgentCredential | None = None
    agent: Agent | None = None
    source_key: SourceKey | None = None
    value: str = ""


def resolve_source(
    *, actor: Actor, tenant: Tenant, credential=None, agent=None, session_id=None, source_uri_prefix=None, source_key=None
) -> Source:
    """Exactly one of: `credential` (its id, the token itself or the token's hint), `agent` (its
    slug), `session_id`, `source_uri_prefix`, `source_key` (a registered source's key, or its id).
    Another tenant's credential, agent or key is a 404."""
    if not actor.may_access_tenant(tenant.pk):
        raise RecordNotFound("No such tenant in your scope.")
    given = {
        name: value
        for name, value in zip(SOURCE_FIELDS, (credential, agent, session_id, source_uri_prefix, source_key), strict=True)
        if value not in (None, "")
    }
    if len(given) != 1:
        raise ValidationFailed(
            "Name exactly one source to revoke.", errors={"source": [f"Exactly one of: {', '.join(SOURCE_FIELDS)}."]}
        )
    ((name, value),) = given.items()
    if name == "credential":
        token = _credential(tenant, value)
        return Source(
            Revocation.Source.CREDENTIAL,
            RevokedSource(tenant_id=tenant.pk, credential_id=token.pk),
            credential=token,
            agent=token.agent,
            value=f"{token.token_hint}…",
        )
    if name == "source_key":
        key = _source_key(tenant, value)
        return Source(
            Revocation.Source.SOURCE_KEY,
            RevokedSource(tenant_id=tenant.pk, source_key_id=key.pk),
            source_key=key,
            value=f"{key.source.name} key {key.fingerprint}",
        )
    if name == "agent":
        found: Agent | None = Agent.objects.filter(tenant=tenant, slug=value).first() if isinstance(value, str) else value
        if found is None or found.tenant_id != tenant.pk:
            raise RecordNotFound("No such agent in this tenant.")
        return Source(
            Revocation.Source.AGENT, RevokedSource(tenant_id=tenant.pk, agent_id=found.pk), agent=found, value=found.slug
        )
    limit = SESSION_ID_MAX_CHARS if name == "session_id" else SOURCE_URI_MAX_CHARS
    if not isinstance(value, str) or not value.strip():
        raise ValidationFailed("The source is empty.", errors={name: ["Must be a non-empty string."]})
    if len(value) > limit:
        raise ValidationFailed("The source is too long.", errors={name: [f"At most {limit} characters."]})
    if name == "session_id":
        return Source(Revocation.Source.SESSION_ID, RevokedSource(tenant_id=tenant.pk, session_id=value), value=value)
    return Source(Revocation.Source.SOURCE_URI_PREFIX, RevokedSource(tenant_id=tenant.pk, source_uri_prefix=value), value=value)


def _credential(tenant: Tenant, reference) -> AgentCredential:
    credentials = AgentCredential.objects.filter(agent__tenant=tenant).select_related("agent")
    if isinstance(reference, AgentCredential):
        found = credentials.filter(pk=reference.pk).first()
    elif isinstance(reference, int) and not isinstance(reference, bool):
        found = credentials.filter(pk=reference).first()
    elif isinstance(reference, str) and reference.startswith(AgentCredential.TOKEN_PREFIX) and len(reference) > 12:
        found = credentials.filter(token_hash=hash_token(reference)).first()  # the leaked token itself
    elif isinstance(reference, str):
        matches = list(credentials.filter(token_hint=reference.rstrip("…"))[:2])
        if len(matches) > 1:
            raise ValidationFailed(
                "Several tokens share this hint.", errors={"credential": ["Ambiguous: give the credential's id."]}
            )
        found = matches[0] if matches else None
    else:
        raise ValidationFailed(
            "The credential is malformed.", errors={"credential": ["The credential's id, the token, or the token's hint."]}
        )
    if found is None:
        raise RecordNotFound("No such credential in this tenant.")
    return found


def _source_key(tenant: Tenant, reference) -> SourceKey:
    key_id = reference.pk if isinstance(reference, SourceKey) else reference
    if isinstance(key_id, bool) or not isinstance(key_id, int):
        raise ValidationFailed("The source key is malformed.", errors={"source_key": ["The key's id (an integer)."]})
    found = SourceKey.objects.filter(pk=key_id, source__tenant=tenant).select_related("source").first()
    if found is None:
        raise RecordNotFound("No such source key in this tenant.")
    return found


def revocation_preview(*, actor: Actor, source: Source) -> tuple[int, int]:
    """(active records the source wrote, active records derived from them): what revoking would move now."""
    direct, derived = revocation_targets(source=source.revoked, actor=actor)
    return len(direct), len(derived)


def revocation_create(*, actor: Actor, source: Source, reason: str) -> Revocation:
    """Revoke `source` now and keep the receipt. Safe to repeat: a second revocation of the same
    source finds nothing left and records affected 0."""
    reason = checked_note(reason, field="reason", required="Say why the source is revoked.")  # each record's history note
    with transaction.atomic():
        outcome = memory_revoke_source(source=source.revoked, actor=actor, note=reason)
        revocation = Revocation.objects.create(
            tenant_id=source.revoked.tenant_id,
            source=source.kind,
            credential=source.credential,
            agent=source.agent,
            source_key=source.source_key,
            value=source.value,
            reason=reason,
            revoked_by=actor.label,
            revoked_by_user=actor.user,
            affected=len(outcome.record_ids) + len(outcome.derived_ids),
            derived_affected=len(outcome.derived_ids),
            token_revoked=outcome.token_revoked,
            hold=outcome.hold,
        )
        RevocationRecord.objects.bulk_create(
            [RevocationRecord(revocation=revocation, record_id=pk, derived=False) for pk in outcome.record_ids]
            + [RevocationRecord(revocation=revocation, record_id=pk, derived=True) for pk in outcome.derived_ids],
            batch_size=1000,
        )
    return revocation
