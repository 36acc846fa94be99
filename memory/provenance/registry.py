"""Registering a source, changing its policy and rotating its key: the one place these rows are
written (the management command `register_source` and the admin call these), each change with a
history row and its actor. Revoking a key is not here: it is a revocation
(`memory.services.memory_revoke_source`), which also sends back to quarantine what the key verified.

Rotation keeps the old key valid for an overlap (ROTATION_OVERLAP unless the caller gives another):
results a source signed just before it switched keys, or by an instance still running the old key,
keep verifying for that long, and no longer after it."""

import re
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from memory.errors import Conflict, ValidationFailed
from memory.models import Authority, MemoryKind, RegisteredSource, SourceKey, Tenant
from memory.provenance.keys import InvalidPublicKey, fingerprint, read_public_key
from memory.provenance.models import SOURCE_NAME_MAX_CHARS

ROTATION_OVERLAP = timedelta(hours=24)
MAX_ROTATION_OVERLAP = timedelta(days=90)
# A source's name as writes give it: letters, digits and . _ : / - (no spaces), e.g. crm or tool:crm_lookup.
SOURCE_NAME = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9._:/-]{{0,{SOURCE_NAME_MAX_CHARS - 1}}}$")


def checked_source_name(name: str) -> str:
    if not isinstance(name, str) or not SOURCE_NAME.match(name):
        raise ValidationFailed(
            "The source's name is not valid.",
            errors={"name": [f"1 to {SOURCE_NAME_MAX_CHARS} letters, digits and . _ : / - (starting with a letter or digit)."]},
        )
    return name


def _checked_policy(authority: str, kinds: Iterable[str]) -> tuple[str, list[str]]:
    errors: dict[str, list[str]] = {}
    if authority not in Authority.values:
        errors["authority"] = [f"One of: {', '.join(Authority.values)}."]
    wanted = sorted(set(kinds))
    unknown = sorted(set(wanted) - set(MemoryKind.objects.filter(name__in=wanted).values_list("name", flat=True)))
    if unknown:
        errors["auto_admit_kinds"] = [f"Unknown kinds: {', '.join(unknown)}."]
    if errors:
        raise ValidationFailed("The source's policy is not valid.", errors=errors)
    return authority, wanted


def _public_key(text: str) -> str:
    try:
        return read_public_key(text)
    except InvalidPublicKey as exc:
        raise ValidationFailed(str(exc), errors={"public_key": [str(exc)]}) from None


def _stamp(row: RegisteredSource | SourceKey, *, reason: str, actor_label: str, note: str = "") -> None:
    row._change_reason, row._history_actor, row._history_note = reason, actor_label, note


def source_register(
    *,
    tenant: Tenant,
    name: str,
    public_key: str,
    authority: str = Authority.THIRD_PARTY,
    auto_admit_kinds: Iterable[str] = (),
    actor_label: str,
) -> tuple[RegisteredSource, SourceKey, bool]:
    """Register `name` for the tenant with its first key; (source, key, created). Registering it
    again with one of its valid keys sets its policy (authority, auto-admitted kinds); with another
    key it is a Conflict: rotate instead, so that the old key's end is decided, not implied."""
    name = checked_source_name(name)
    raw = _public_key(public_key)
    authority, kinds = _checked_policy(authority, auto_admit_kinds)
    now = timezone.now()
    with transaction.atomic():
        source = RegisteredSource.objects.select_for_update().filter(tenant=tenant, name=name).first()
        if source is None:
            source = RegisteredSource(tenant=tenant, name=name, authority=authority, auto_admit_kinds=kinds, created_at=now)
            _stamp(source, reason="source.register", actor_label=actor_label)
            source.save()
            key = SourceKey(source=source, public_key=raw, fingerprint=fingerprint(raw), valid_from=now, created_at=now)
            _stamp(key, reason="source.register", actor_label=actor_label)
            key.save()
            return source, key, True
        current = next((k for k in source.keys.all() if k.public_key == raw), None)
        if current is None or current.state_at(now) != SourceKey.State.VALID:
            raise Conflict(
                f"Source '{name}' is registered with another key: rotate to a new key (--rotate), or revoke one (--revoke).",
                code="source_registered",
            )
        if (source.authority, source.auto_admit_kinds) != (authority, kinds):
            source.authority, source.auto_admit_kinds = authority, kinds
            _stamp(source, reason="source.policy", actor_label=actor_label)
            source.save(update_fields=["authority", "auto_admit_kinds"])
        return source, current, False


def source_rotate(
    *,
    source: RegisteredSource,
    public_key: str,
    actor_label: str,
    overlap: timedelta = ROTATION_OVERLAP,
    now: datetime | None = None,
) -> SourceKey:
    """A new key for the source, valid from now; every key valid until now stays valid for `overlap`
    more, then verifies nothing. A key the source had before (revoked or not) is refused."""
    if not timedelta(0) <= overlap <= MAX_ROTATION_OVERLAP:
        raise ValidationFailed(
            "The overlap is out of range.", errors={"overlap": [f"From 0 to {MAX_ROTATION_OVERLAP.days} days."]}
        )
    raw = _public_key(public_key)
    now = now or timezone.now()
    ends = now + overlap
    with transaction.atomic():
        source = RegisteredSource.objects.select_for_update().get(pk=source.pk)
        keys = list(source.keys.all())
        if any(key.public_key == raw for key in keys):
            raise Conflict("The source already had this key: rotate to a new one.", code="source_key_reused")
        for key in keys:
            if key.revoked_at is None and key.valid_from < ends and (key.valid_until is None or key.valid_until > ends):
                key.valid_until = ends
                _stamp(key, reason="source.rotate", actor_label=actor_label, note=f"overlap {overlap}")
                key.save(update_fields=["valid_until"])
        key = SourceKey(source=source, public_key=raw, fingerprint=fingerprint(raw), valid_from=now, created_at=now)
        _stamp(key, reason="source.rotate", actor_label=actor_label)
        key.save()
    return key
