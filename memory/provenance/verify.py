"""Verifying a signed write, before anything is stored.

A write that names a registered source in `provenance.source` carries `provenance.source_version`
and `provenance.signature`: base64 of the source's Ed25519 signature over the RFC 8785 canonical
JSON of the statement `{"source", "source_version", "content_sha256", "subject", "observed_at"}`
(`content_sha256`: hex SHA-256 of the content's UTF-8 bytes; `observed_at`: the string exactly as
sent). The signature must verify against a key of that source valid now: one that is not revoked
and, after a rotation, still within its overlap. Anything else is a 400 that stores nothing,
counted (memory.provenance.failures). A verified write carries its key to admission and to the
record (`verified_key`).

A source's version is immutable: a verified claim names its version, and a later claim of the same
source and version with other content is a conflict (409), not a second truth. The same content
again is an ordinary write."""

import base64
import binascii
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import rfc8785
from cryptography.exceptions import InvalidSignature

from memory.errors import Conflict, ValidationFailed
from memory.metrics import count_conflict
from memory.models import MemoryRecord, RegisteredSource, SourceKey, Status, content_digest
from memory.provenance.failures import REASONS, record_signature_failure
from memory.provenance.keys import loaded
from memory.validation import WriteDraft

SIGNATURE_BYTES = 64


class SignatureRejected(ValidationFailed):
    """A signed write whose provenance does not verify: nothing is stored."""

    title = "Provenance not verified"

    def __init__(self, detail: str, *, reason: str, errors: dict[str, list[str]]):
        super().__init__(detail, errors=errors, code="signature_invalid")
        if reason not in REASONS:
            raise ValueError(f"Unknown refusal reason {reason!r}.")
        self.reason = reason  # a memory.provenance.failures.REASONS value: the metric's label


def statement(*, source: str, source_version: str, content: str, subject: str, observed_at: str) -> bytes:
    """The canonical bytes a source signs (RFC 8785)."""
    return rfc8785.dumps(
        {
            "source": source,
            "source_version": source_version,
            "content_sha256": hashlib.sha256(content.encode("utf-8")).hexdigest(),
            "subject": subject,
            "observed_at": observed_at,
        }
    )


def is_signed(draft: WriteDraft) -> bool:
    return bool(draft.provenance.get("source") or draft.provenance.get("signature"))


@dataclass
class Keyring:
    """The registered sources a set of writes names, with all their keys (revoked ones too, to say
    why a signature is refused), read in one query."""

    tenant_id: int
    sources: dict[str, RegisteredSource] = field(default_factory=dict)
    keys: dict[int, list[SourceKey]] = field(default_factory=dict)  # by source id

    @classmethod
    def for_drafts(cls, tenant_id: int, drafts: Iterable[WriteDraft]) -> "Keyring":
        names = {draft.provenance["source"] for draft in drafts if draft.provenance.get("source")}
        ring = cls(tenant_id)
        if names:
            for key in SourceKey.objects.filter(source__tenant_id=tenant_id, source__name__in=names).select_related("source"):
                ring.sources[key.source.name] = key.source
                ring.keys.setdefault(key.source_id, []).append(key)
        return ring


def verify_signed(draft: WriteDraft, ring: Keyring, *, now: datetime) -> WriteDraft:
    """`draft` with `verified_key` set if it is signed and its signature verifies; unchanged if it
    is not signed; SignatureRejected (counted) otherwise."""
    if not is_signed(draft):
        return draft
    try:
        draft.verified_key = _verified_key(draft, ring, now=now)
    except SignatureRejected as exc:
        record_signature_failure(ring.tenant_id, exc.reason, now=now)
        raise
    registered = draft.verified_key.source
    if draft.authority != registered.authority:
        raise ValidationFailed(
            "The memory was not stored: see errors.",
            errors={"authority": [f"Verified claims of source '{registered.name}' carry {registered.authority} authority."]},
        )
    return draft


def _verified_key(draft: WriteDraft, ring: Keyring, *, now: datetime) -> SourceKey:
    provenance = draft.provenance
    missing = {
        "source": "A signed write names its registered source.",
        "signature": "A write naming a registered source carries the source's signature.",
        "source_version": "A signed write names the version of the source it read.",
        "observed_at_sent": "A signed write says when it was observed (the observed_at the source signed).",
    }
    errors = {
        f"provenance.{name.removesuffix('_sent')}": [message] for name, message in missing.items() if not provenance.get(name)
    }
    if errors:
        raise SignatureRejected("The provenance claims a signature but is incomplete.", reason="incomplete", errors=errors)
    signature = _decoded(provenance["signature"])
    registered = ring.sources.get(provenance["source"])
    if registered is None:
        raise SignatureRejected(
            "The provenance names a source that is not registered for your tenant.",
            reason="unknown_source",
            errors={"provenance.source": ["No source of this name is registered."]},
        )
    signed = statement(
        source=provenance["source"],
        source_version=provenance["source_version"],
        content=draft.content,
        subject=draft.subject,
        observed_at=provenance["observed_at_sent"],
    )
    verifying = [key for key in ring.keys[registered.pk] if _verifies(key, signature, signed)]
    valid = [key for key in verifying if key.state_at(now) == SourceKey.State.VALID]
    if valid:
        return valid[0]
    if not verifying:  # forged, or made over other content, another subject, version or time
        raise SignatureRejected(
            "The signature does not verify for this content, subject, source version and observed time.",
            reason="bad_signature",
            errors={"provenance.signature": ["Does not verify against the source's keys."]},
        )
    if any(key.state_at(now) == SourceKey.State.REVOKED for key in verifying):
        raise SignatureRejected(
            "The result was signed with a key that was revoked.",
            reason="revoked_key",
            errors={"provenance.signature": ["Made with a revoked key."]},
        )
    raise SignatureRejected(
        "The result was signed with a key that is not valid now (rotated out, or not valid yet).",
        reason="retired_key",
        errors={"provenance.signature": ["Made with a key that is not valid now."]},
    )


def _decoded(signature: str) -> bytes:
    try:
        raw = base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != SIGNATURE_BYTES:
        raise SignatureRejected(
            "The signature is malformed.",
            reason="malformed",
            errors={"provenance.signature": [f"Base64 of a {SIGNATURE_BYTES}-byte Ed25519 signature."]},
        )
    return raw


def _verifies(key: SourceKey, signature: bytes, signed: bytes) -> bool:
    try:
        loaded(key.public_key).verify(signature, signed)
    except InvalidSignature:
        return False
    return True


def key_revoked_meanwhile(tenant_id: int) -> SignatureRejected:
    """For a write whose key a revocation revoked between verifying and storing (memory.admission)."""
    record_signature_failure(tenant_id, "revoked_key")
    return SignatureRejected(
        "The key that signed this result was revoked while the write was made; nothing was stored.",
        reason="revoked_key",
        errors={"provenance.signature": ["Made with a revoked key."]},
    )


# --------------------------------------------------------------------------------------------
# immutable source versions


def version_locks(drafts: Iterable[WriteDraft]) -> list[str]:
    """The locks (memory.fences) that order writes claiming one source version."""
    return [
        f"source-version:{key.source_id}:{draft.provenance['source_version']}"
        for draft in drafts
        if (key := draft.verified_key) is not None
    ]


def version_conflicts(tenant_id: int, drafts: Sequence[WriteDraft]) -> list[Conflict | None]:
    """Per draft (in order), the Conflict of claiming a source version that an earlier record, or an
    earlier draft in `drafts`, claimed with other content; None where there is none. Run inside the
    writing transaction, after `version_locks` were taken."""
    signed = [(draft, draft.verified_key.source_id) for draft in drafts if draft.verified_key is not None]
    if not signed:
        return [None] * len(drafts)
    keys = SourceKey.objects.filter(source_id__in={source_id for _, source_id in signed})
    key_sources = dict(keys.values_list("pk", "source_id"))
    claimed: dict[tuple[int, str], set[str]] = {}
    for key_id, stored_version, content_hash in (
        MemoryRecord.objects.filter(
            tenant_id=tenant_id,
            verified_key_id__in=list(key_sources),
            source_version__in={draft.provenance["source_version"] for draft, _ in signed},
        )
        .exclude(status=Status.FORGOTTEN)
        .values_list("verified_key_id", "source_version", "content_hash")
    ):
        claimed.setdefault((key_sources[key_id], stored_version), set()).add(content_hash)
    found: list[Conflict | None] = []
    for draft in drafts:
        if draft.verified_key is None:
            found.append(None)
            continue
        claim = (draft.verified_key.source_id, draft.provenance["source_version"])
        digest = content_digest(draft.content)
        if claimed.get(claim, {digest}) != {digest}:
            count_conflict("source_version")
            found.append(
                Conflict(
                    "This source version was already stored with other content: a source version is immutable.",
                    code="source_version_conflict",
                )
            )
            continue
        claimed[claim] = {digest}
        found.append(None)
    return found
