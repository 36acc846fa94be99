"""`governed_memory.signing`, the sources' side of signed provenance: it signs exactly the
statement the server verifies (RFC 8785 JSON of source, source_version, content_sha256, subject,
observed_at), and its keys read the way the server reads them."""

import base64
from datetime import datetime, timedelta, timezone

import pytest
from cryptography.hazmat.primitives import serialization

from governed_memory.signing import generate_private_key, load_private_key, public_key_text, sign_result, statement
from memory.provenance import verify
from memory.provenance.keys import loaded, read_public_key

FIELDS = {
    "source": "crm",
    "source_version": "contact/42@v7",
    "content": "Acme's billing contact is Dana Reyes — «ÿ» 😀.",
    "subject": "customer/acme",
    "observed_at": "2026-11-29T10:00:00+01:00",
}


def test_the_client_signs_the_statement_the_server_verifies():
    key = generate_private_key()
    assert statement(**FIELDS) == verify.statement(**FIELDS)
    assert statement(**FIELDS).startswith(b'{"content_sha256":"')  # canonical: keys sorted, no spaces
    signed = sign_result(key, **FIELDS)
    assert {name: signed[name] for name in ("source", "source_version", "observed_at")} == {
        "source": "crm",
        "source_version": "contact/42@v7",
        "observed_at": "2026-11-29T10:00:00+01:00",  # the text signed, unchanged
    }
    loaded(read_public_key(public_key_text(key))).verify(base64.b64decode(signed["signature"]), verify.statement(**FIELDS))


def test_a_datetime_observed_at_is_signed_as_utc_text_and_must_carry_a_zone():
    key = generate_private_key()
    when = datetime(2026, 11, 29, 10, 0, tzinfo=timezone(timedelta(hours=1)))
    assert sign_result(key, **{**FIELDS, "observed_at": when})["observed_at"] == "2026-11-29T09:00:00Z"
    with pytest.raises(ValueError, match="time zone"):
        sign_result(key, **{**FIELDS, "observed_at": datetime(2026, 11, 29, 10, 0)})
    with pytest.raises(ValueError, match="version"):
        sign_result(key, **{**FIELDS, "source_version": ""})


def test_keys_load_from_pem_and_raw_seed_and_the_server_reads_their_public_half_either_way():
    key = generate_private_key()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    seed = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    expected = public_key_text(key)
    assert public_key_text(pem) == public_key_text(pem.decode()) == public_key_text(seed) == expected
    assert public_key_text(base64.b64encode(seed).decode()) == expected
    public_pem = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert read_public_key(public_pem.decode()) == read_public_key(expected) == expected
    with pytest.raises(ValueError):
        load_private_key(b"too short")
