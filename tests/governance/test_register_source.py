"""`manage.py register_source` per the contract ("Signed provenance"): register a source with its
public key (PEM or raw base64) and policy, set the policy again, rotate with an overlap, revoke a
key through the revocation flow. The last line of the output is a JSON summary."""

import io
import json
from datetime import timedelta

import pytest
from cryptography.hazmat.primitives import serialization
from django.core.management import CommandError, call_command
from django.utils import timezone

from governance.revocations.models import Revocation
from governed_memory.signing import generate_private_key, public_key_text
from memory.models import MemoryRecord, RegisteredSource, SourceKey, Status
from memory.services import memory_write
from tests.signed_support import crm_claim

pytestmark = pytest.mark.django_db


def register(*args: str) -> dict:
    out = io.StringIO()
    call_command("register_source", *args, stdout=out)
    return json.loads(out.getvalue().strip().splitlines()[-1])


def pem(key) -> str:
    return (
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode("ascii")
    )


def test_registers_a_source_from_a_pem_key_and_sets_its_policy_again(tenant, tmp_path):
    key = generate_private_key()
    path = tmp_path / "crm.pub"
    path.write_text(pem(key))
    summary = register(
        "--tenant", "acme", "--name", "crm", "--public-key", f"@{path}", "--auto-admit-kinds", "semantic,procedural"
    )
    assert (summary["source"], summary["authority"], summary["auto_admit_kinds"]) == (
        "crm",
        "third_party",
        ["procedural", "semantic"],
    )
    (only,) = summary["keys"]
    assert only["state"] == "valid" and only["valid_until"] is None
    stored = SourceKey.objects.get(pk=only["id"])
    assert stored.public_key == public_key_text(key)  # PEM and raw base64 name the same key
    assert stored.history.get().history_actor == "command:register_source"

    again = register("--tenant", "acme", "--name", "crm", "--public-key", public_key_text(key), "--authority", "operator")
    assert (again["authority"], again["auto_admit_kinds"], len(again["keys"])) == ("operator", [], 1)
    assert RegisteredSource.objects.get(name="crm").history.first().history_change_reason == "source.policy"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tenant", "nope", "--name", "crm", "--public-key", "x"], "No tenant"),
        (["--tenant", "acme", "--name", "crm", "--public-key", "bm90IGEga2V5"], "32 bytes"),
        (
            ["--tenant", "acme", "--name", "crm", "--public-key", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----"],
            "PEM",
        ),
        (["--tenant", "acme", "--name", "has space", "--public-key", "KEY"], "name"),
        (["--tenant", "acme", "--name", "crm", "--public-key", "KEY", "--auto-admit-kinds", "gossip"], "Unknown kinds: gossip"),
        (["--tenant", "acme", "--name", "crm"], "--public-key is required"),
        (["--tenant", "acme", "--name", "erp", "--rotate", "--public-key", "KEY"], "No source 'erp'"),
        (["--tenant", "acme", "--name", "crm", "--revoke"], "--by"),
    ],
)
def test_bad_arguments_are_errors_that_change_nothing(tenant, args, message):
    args = [public_key_text(generate_private_key()) if arg == "KEY" else arg for arg in args]
    with pytest.raises(CommandError, match=message):
        register(*args)
    assert (RegisteredSource.objects.count(), SourceKey.objects.count()) == (0, 0)


def test_another_key_for_a_registered_source_is_refused_unless_rotated_and_rotation_keeps_an_overlap(tenant):
    old, new = generate_private_key(), generate_private_key()
    register("--tenant", "acme", "--name", "crm", "--public-key", public_key_text(old))
    with pytest.raises(CommandError, match="rotate"):
        register("--tenant", "acme", "--name", "crm", "--public-key", public_key_text(new))
    before = timezone.now()
    summary = register(
        "--tenant", "acme", "--name", "crm", "--rotate", "--public-key", public_key_text(new), "--overlap-hours", "2"
    )
    first, second = summary["keys"]
    ends = timezone.datetime.fromisoformat(first["valid_until"])
    assert timedelta(hours=2) <= ends - before < timedelta(hours=2, minutes=1)
    assert (first["state"], second["state"], second["valid_until"]) == ("valid", "valid", None)
    with pytest.raises(CommandError, match="already had this key"):
        register("--tenant", "acme", "--name", "crm", "--rotate", "--public-key", public_key_text(old))


def test_revoke_is_a_revocation_that_quarantines_what_the_key_verified(tenant, credential, reviewer, other_tenant, make_reviewer):
    key = generate_private_key()
    register("--tenant", "acme", "--name", "crm", "--public-key", public_key_text(key), "--auto-admit-kinds", "semantic")
    record = memory_write(credential=credential, data=crm_claim(key)).record
    assert (record.status, record.provenance["verified"]) == (Status.ACTIVE, True)

    with pytest.raises(CommandError, match="No active user"):
        register("--tenant", "acme", "--name", "crm", "--revoke", "--by", "nobody-here", "--reason", "leak")
    make_reviewer(other_tenant, username="olga")
    with pytest.raises(CommandError, match="not a reviewer"):
        register("--tenant", "acme", "--name", "crm", "--revoke", "--by", "olga", "--reason", "leak")
    assert Revocation.objects.count() == 0
    summary = register("--tenant", "acme", "--name", "crm", "--revoke", "--by", reviewer.username, "--reason", "key leaked")
    assert summary["keys"][0]["state"] == "revoked"
    revocation = Revocation.objects.get()
    assert (revocation.source, revocation.affected, revocation.reason, revocation.revoked_by) == (
        Revocation.Source.SOURCE_KEY,
        1,
        "key leaked",
        f"user:{reviewer.username}",
    )
    record = MemoryRecord.objects.get(pk=record.pk)
    assert (record.status, record.provenance["verified"]) == (Status.QUARANTINED, False)
    assert record.history.first().history_change_reason == "admin.revoke"
