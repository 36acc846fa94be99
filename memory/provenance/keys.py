"""Ed25519 public keys as sources hand them over: PEM (`-----BEGIN PUBLIC KEY-----`) or the raw 32
bytes in base64. Stored as raw base64; told apart by a short fingerprint. The cryptography itself is
the `cryptography` package's."""

import base64
import binascii
import hashlib

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

RAW_KEY_BYTES = 32
PUBLIC_KEY_MAX_CHARS = 1000  # a PEM Ed25519 key is about 113 characters; anything far longer is not one


class InvalidPublicKey(ValueError):
    """Not an Ed25519 public key, in PEM or raw base64."""


def read_public_key(text: str) -> str:
    """The raw key, base64, of an Ed25519 public key given as PEM or raw base64 (standard or
    URL-safe alphabet); InvalidPublicKey otherwise."""
    text = (text or "").strip()
    if not text or len(text) > PUBLIC_KEY_MAX_CHARS:
        raise InvalidPublicKey("Give an Ed25519 public key: PEM, or the raw 32 bytes in base64.")
    if text.startswith("-----BEGIN"):
        try:
            key = serialization.load_pem_public_key(text.encode("ascii"))
        except (ValueError, TypeError, UnicodeEncodeError, UnsupportedAlgorithm):
            raise InvalidPublicKey("The PEM text is not a public key.") from None
        if not isinstance(key, Ed25519PublicKey):
            raise InvalidPublicKey("The PEM key is not an Ed25519 key.")
        raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    else:
        try:
            raw = base64.b64decode(text.replace("-", "+").replace("_", "/"), validate=True)
        except (binascii.Error, ValueError):
            raise InvalidPublicKey("The key is neither PEM nor base64.") from None
        if len(raw) != RAW_KEY_BYTES:
            raise InvalidPublicKey(f"A raw Ed25519 public key is {RAW_KEY_BYTES} bytes; this is {len(raw)}.")
        Ed25519PublicKey.from_public_bytes(raw)  # 32 bytes always load; kept as the check of record
    return base64.b64encode(raw).decode("ascii")


def fingerprint(public_key: str) -> str:
    """First 16 hex digits of the SHA-256 of the raw key: shown to people, never used to verify."""
    return hashlib.sha256(base64.b64decode(public_key)).hexdigest()[:16]


def loaded(public_key: str) -> Ed25519PublicKey:
    return Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key))
