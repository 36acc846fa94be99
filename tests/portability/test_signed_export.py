"""Exports carry signed provenance (the registered source, and whether it verified); importing the
note back does not make the copy verified: a file proves nothing."""

import io
import json

import pytest
from django.core.management import call_command

from governed_memory.signing import generate_private_key
from memory.models import MemoryRecord, SourceType
from memory.portable.notes import note_path, parse_note
from tests.signed_support import crm_claim, register_crm

pytestmark = pytest.mark.django_db


def test_an_exported_note_says_its_provenance_was_verified_and_its_import_is_not(tenant, write, tmp_path):
    key = generate_private_key()
    register_crm(tenant, key)
    signed = write(**crm_claim(key))
    unsigned = write(**crm_claim(content="Acme pays by card.", version="v-card"))
    call_command("export_memories", str(tmp_path), "--tenant", "acme", stdout=io.StringIO())
    notes = {record.pk: parse_note((tmp_path / note_path(record)).read_bytes()) for record in (signed, unsigned)}
    assert {name: notes[signed.pk].meta["provenance"][name] for name in ("source", "verified", "source_version")} == {
        "source": "crm",
        "verified": True,
        "source_version": "contact/42@v7",
    }
    assert (notes[unsigned.pk].meta["provenance"]["source"], notes[unsigned.pk].meta["provenance"]["verified"]) == (None, False)

    out = io.StringIO()
    call_command("import_memories", str(tmp_path), "--tenant", "acme", "--agent", "support-bot", stdout=out)
    assert json.loads(out.getvalue().strip().splitlines()[-1])["imported"] == 2
    imported = MemoryRecord.objects.filter(source_type=SourceType.IMPORT)
    assert imported.count() == 2
    assert all(record.verified_key_id is None and not record.provenance["verified"] for record in imported)
