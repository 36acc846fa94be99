"""Signing a result on the source's side (signed provenance), with the `signing` extra:
``pip install "governed-memory-client[signing]"`` (the `cryptography` and `rfc8785` packages).

A source registered with the service (``manage.py register_source``) signs what it asserts with
its Ed25519 private key; the write carries the fields `sign_result` returns in its provenance, and
the service verifies them before storing anything::

    from governed_memory import Client, Provenance
    from governed_memory.signing import load_private_key, sign_provenance

    key = load_private_key(open("crm-signing-key.pem").read())
    claim = Provenance.tool_output("crm_lookup", session="s-1", version="contact/42@v7", observed_at=observed)
    provenance = sign_provenance(key, claim, source="crm", content=content, subject="customer/acme")
    Client().remember(content, subject="customer/acme", ..., provenance=provenance)

(`sign_result` gives the same fields as a dict, for a write built by hand.)

The signature covers the source's name, the source version, the SHA-256 of the content, the subject
and `observed_at` exactly as written (RFC 8785 canonical JSON): another content, subject, version or
time does not verify, so a signed result cannot be replayed for anything else.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import replace
from datetime import datetime, timezone

from governed_memory.models import Provenance

try:
    import rfc8785
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError('governed_memory.signing needs the "signing" extra: pip install "governed-memory-client[signing]"') from exc

__all__ = ["generate_private_key", "load_private_key", "public_key_text", "sign_provenance", "sign_result", "statement"]

PrivateKeyLike = Ed25519PrivateKey | bytes | str


def statement(*, source: str, source_version: str, content: str, subject: str, observed_at: str) -> bytes:
    """The exact bytes a source signs: RFC 8785 canonical JSON of source, source_version,
    content_sha256 (hex SHA-256 of the content's UTF-8 bytes), subject and observed_at."""
    return rfc8785.dumps(
        {
            "source": source,
            "source_version": source_version,
            "content_sha256": hashlib.sha256(content.encode("utf-8")).hexdigest(),
            "subject": subject,
            "observed_at": observed_at,
        }
    )


def generate_private_key() -> Ed25519PrivateKey:
    """A new Ed25519 signing key (keep it with the source; register its `public_key_text`)."""
    return Ed25519PrivateKey.generate()


def load_private_key(key: PrivateKeyLike) -> Ed25519PrivateKey:
    """An Ed25519 private key from a key object, PEM (PKCS#8, unencrypted) or the raw 32-byte seed
    (bytes, or base64 text)."""
    if isinstance(key, Ed25519PrivateKey):
        return key
    data = key.encode("ascii") if isinstance(key, str) else key
    if data.lstrip().startswith(b"-----BEGIN"):
        loaded = serialization.load_pem_private_key(data, password=None)
        if not isinstance(loaded, Ed25519PrivateKey):
            raise ValueError("The PEM key is not an Ed25519 private key.")
        return loaded
    raw = base64.b64decode(data, validate=True) if isinstance(key, str) else data
    if len(raw) != 32:
        raise ValueError("A raw Ed25519 private key is 32 bytes.")
    return Ed25519PrivateKey.from_private_bytes(raw)


def public_key_text(key: PrivateKeyLike) -> str:
    """The public key to register (`register_source --public-key`): raw 32 bytes, base64."""
    public = load_private_key(key).public_key()
    return base64.b64encode(public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)).decode("ascii")


def _observed_text(observed_at: str | datetime) -> str:
    if isinstance(observed_at, str):
        return observed_at
    if observed_at.tzinfo is None or observed_at.utcoffset() is None:
        raise ValueError("observed_at must carry a time zone.")
    return observed_at.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def sign_result(
    private_key: PrivateKeyLike,
    *,
    source: str,
    source_version: str,
    content: str,
    subject: str,
    observed_at: str | datetime,
) -> dict[str, str]:
    """The provenance fields of a signed write: `source`, `source_version`, `observed_at` (the text
    that was signed: send it unchanged) and `signature` (base64 Ed25519). Merge them into the write's
    `provenance`; `content` and `subject` must be sent exactly as signed."""
    if not source or not source_version:
        raise ValueError("A signed result names its source and the source's version.")
    observed = _observed_text(observed_at)
    signed = statement(source=source, source_version=source_version, content=content, subject=subject, observed_at=observed)
    signature = load_private_key(private_key).sign(signed)
    return {
        "source": source,
        "source_version": source_version,
        "observed_at": observed,
        "signature": base64.b64encode(signature).decode("ascii"),
    }


def sign_provenance(
    private_key: PrivateKeyLike, provenance: Provenance, *, source: str, content: str, subject: str
) -> Provenance:
    """`provenance` signed by `source` for a write of `content` about `subject`: the same claim
    with `source` and `signature` set, ready for `Client.remember`. The claim must name its
    `source_version` and `observed_at` (with a time zone); the signature covers `observed_at` as
    the client sends it."""
    if provenance.observed_at is None:
        raise ValueError("A signed result names when the source observed it (observed_at).")
    sent = provenance.to_json()["observed_at"]
    signed = sign_result(
        private_key,
        source=source,
        source_version=provenance.source_version or "",
        content=content,
        subject=subject,
        observed_at=sent,
    )
    return replace(provenance, source=source, signature=signed["signature"])
