"""The reviewer's quarantine card says whether a claim's provenance is verified (signed by a
registered source), unsigned, or signed with a key revoked since; the queue reads the keys in the
same query as the records."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from governance.revocations.services import resolve_source, revocation_create
from governed_memory.signing import generate_private_key
from memory.actors import Actor
from memory.models import SourceKey
from tests.signed_support import crm_claim, register_crm

QUARANTINE = reverse("review:quarantine")


@pytest.fixture
def crm_key(tenant):
    key = generate_private_key()
    register_crm(tenant, key, auto_admit_kinds=())  # nothing admitted: its claims wait for review
    return key


def card(page: str, record) -> str:
    """What the queue's card of `record` says about its signature (from its data-provenance mark on)."""
    start = page.index(f'id="m-{record.pk}"')
    return page[start : page.index("</li>", start)].split('data-provenance="', 1)[1]


def test_the_quarantine_card_says_verified_for_a_signed_claim_and_not_signed_otherwise(reviewer_client, write, crm_key):
    signed = write(**crm_claim(crm_key))
    unsigned = write(**crm_claim(content="Acme's billing contact is Sam Ortiz.", version="contact/42@v8"))
    assert signed.status == unsigned.status == "quarantined"
    page = reviewer_client.get(QUARANTINE).content.decode()
    assert card(page, signed).startswith('verified">verified</span> signed by registered source <code>crm</code>')
    assert "version <code>contact/42@v7</code>" in card(page, signed)
    assert card(page, unsigned).startswith("unsigned")
    detail = reviewer_client.get(reverse("review:memory_detail", args=[signed.pk])).content.decode()
    assert re.search(r'data-provenance="verified">verified</span> signed by registered source <code>crm</code>', detail)


def test_after_its_key_is_revoked_the_card_no_longer_says_verified(reviewer_client, reviewer, write, crm_key, tenant):
    signed = write(**crm_claim(crm_key))
    actor = Actor.for_user(reviewer)
    revocation = revocation_create(
        actor=actor, source=resolve_source(actor=actor, tenant=tenant, source_key=SourceKey.objects.get()), reason="leaked"
    )
    page = reviewer_client.get(QUARANTINE).content.decode()
    assert card(page, signed).startswith('revoked">key revoked</span>')
    receipt = reviewer_client.get(reverse("review:revocation_detail", args=[revocation.pk])).content.decode()
    assert "registered source&#x27;s key" in receipt and f"crm key {SourceKey.objects.get().fingerprint}" in receipt


def test_the_queue_reads_signed_records_keys_with_them(reviewer_client, write, crm_key):
    def queue_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert reviewer_client.get(QUARANTINE).status_code == 200
        return len(queries)

    write(**crm_claim(crm_key, content="Fact 0.", version="v0"))
    few = queue_queries()
    for n in range(1, 5):
        write(**crm_claim(crm_key, content=f"Fact {n}.", version=f"v{n}"))
    assert queue_queries() == few
