"""The sync Python client end to end against a live server: writes and their idempotency keys on
retry, provenance helpers and the authority they pick, recall as a prompt block, 409 with the
current version, typed errors with field messages, forget and its status, batch and pages."""

import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from governance.jobs import run_job
from governed_memory import (
    AuthenticationError,
    Client,
    Conflict,
    MemoryDraft,
    NotFound,
    Provenance,
    RetryPolicy,
    ScopeDenied,
    TransportError,
    ValidationError,
)
from governed_memory.models import PROMPT_HEADER
from governed_memory.signing import generate_private_key, sign_provenance
from memory.models import MemoryRecord
from tests.clients.conftest import RecordingTransport, posts_to, user_fact
from tests.signed_support import register_crm

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client(api_server, token):
    with Client(api_server.base, token) as c:
        yield c


def test_a_user_turn_is_remembered_active_and_recalled_as_one_prompt_block(client):
    memory = client.remember(**user_fact(12, content="Acme prefers email over phone."))
    assert (memory.status, memory.authority, memory.trust, memory.version) == ("active", "user", "trusted", 1)
    assert not memory.awaiting_review and not memory.replayed
    assert memory.provenance.source_type == "user_turn"
    assert (memory.provenance.session_id, memory.provenance.turn_id) == ("s-1", "12")
    assert memory.provenance.uri == "chat://session/s-1#turn-12"
    assert client.get(memory.id) == memory

    result = client.recall("how does acme want to be contacted, email or phone", purpose="support", subject="customer/acme")
    assert [item.id for item in result] == [memory.id]
    item = result.items[0]
    assert (item.authority, item.trust, item.provenance.session_id) == ("user", "trusted", "s-1")
    assert item.score == pytest.approx(sum(item.score_parts.values()), abs=1e-3) and item.score_parts
    prompt = result.to_prompt()
    assert prompt.splitlines() == [PROMPT_HEADER, f"- (trusted) {item.context}"]
    assert item.context.startswith("[preference | user | confirmed ")
    assert item.context.endswith("] Acme prefers email over phone.")
    assert client.recall("nothing like this at all", purpose="support", subject="customer/zed").to_prompt() == ""
    assert item.relevance is not None and 0 < item.relevance <= 1 and result.min_relevance is not None
    strict = client.recall("how does acme want to be contacted", purpose="support", min_relevance=1.0)
    assert strict.items == () and strict.below_floor == 1 and strict.min_relevance == 1.0


def test_each_provenance_helper_picks_an_authority_the_server_accepts_and_untrusted_sources_await_review(client):
    helpers = [
        (Provenance.web_page("https://acme.example/contact"), "third_party"),
        (Provenance.tool_output("crm.lookup", session="s-1"), "third_party"),
        (Provenance.document("https://docs.example/acme.pdf"), "third_party"),
        (Provenance.agent_inference(session="s-1"), "agent"),
        (Provenance.user_turn("s-1", 3, contaminated=True), "user"),
    ]
    for provenance, authority in helpers:
        memory = client.remember(**user_fact(content="Acme's support line moved to +1 555 0100.", provenance=provenance))
        assert (memory.authority, memory.provenance.source_type) == (authority, provenance.source_type)
        assert memory.status == "quarantined" and memory.awaiting_review and memory.quarantine_reason
    assert client.recall("acme support line", purpose="support").items == ()


def test_a_write_whose_answer_is_lost_is_retried_with_the_same_key_and_stored_once(api_server, token):
    transport = RecordingTransport(lose=posts_to("/memories/"))
    with Client(api_server.base, token, transport=transport, retry=RetryPolicy(backoff=0.01)) as client:
        memory = client.remember(**user_fact(content="Acme's renewal is in March."))
        other = client.remember(**user_fact(content="Acme's renewal is handled by Dana."))

    first, retry, next_call = transport.to("/memories/")
    assert first.status is None and retry.status == 201  # the first answer was lost after the server wrote
    assert first.idempotency_key == retry.idempotency_key and first.idempotency_key.startswith("gmc-")
    assert next_call.idempotency_key != first.idempotency_key  # a new call gets a new key
    assert memory.replayed and not other.replayed
    assert MemoryRecord.objects.filter(content="Acme's renewal is in March.").count() == 1


def test_a_callers_own_key_makes_a_write_safe_to_repeat_from_another_process(api_server, token):
    fact = user_fact(idempotency_key="s-1-turn-40", content="Acme's fiscal year ends in June.")
    with Client(api_server.base, token) as client:
        first = client.remember(**fact)
    with Client(api_server.base, token) as restarted:
        again = restarted.remember(**fact)
        with pytest.raises(Conflict) as mismatch:
            restarted.remember(**{**fact, "content": "Acme's fiscal year ends in July."})
    assert again.id == first.id and again.replayed
    assert mismatch.value.code == "idempotency_mismatch" and mismatch.value.current is None
    assert MemoryRecord.objects.filter(subject="customer/acme").count() == 1


def test_confirm_is_not_retried_after_its_answer_is_lost(api_server, token):
    transport = RecordingTransport(lose=posts_to("/confirm/"))
    with Client(api_server.base, token, transport=transport, retry=RetryPolicy(backoff=0.01)) as client:
        memory = client.remember(**user_fact())
        with pytest.raises(TransportError):
            client.confirm(memory)
        # It did happen: a blind retry would have been a 409 (or a second confirmation).
        assert client.get(memory.id).version == 2
    assert len(transport.to("/confirm/")) == 1


def test_a_stale_confirm_is_a_conflict_carrying_the_current_version(client):
    memory = client.remember(**user_fact())
    confirmed = client.confirm(memory, note="checked the CRM")
    assert (confirmed.version, confirmed.status) == (2, "active")
    assert confirmed.confirmed_at >= memory.confirmed_at

    with pytest.raises(Conflict) as stale:
        client.confirm(memory, note="checked again")  # the version looked at was 1
    assert stale.value.status == 409 and stale.value.code == "stale_version"
    assert stale.value.current_version == 2 and stale.value.current.id == memory.id
    assert "current version: 2" in str(stale.value)
    assert client.confirm(stale.value.current).version == 3  # decide again on the current record

    with pytest.raises(Conflict) as correction:  # a correction of a version that moved on
        client.remember(**user_fact(content="Acme now prefers phone."), supersedes=memory)
    assert correction.value.current_version == 3
    fixed = client.remember(**user_fact(content="Acme now prefers phone."), supersedes=correction.value.current)
    assert fixed.supersedes == memory.id and client.get(memory.id).status == "superseded"


def test_errors_are_typed_and_carry_the_servers_field_messages(api_server, client, make_credential, tenant):
    before = MemoryRecord.objects.count()
    with pytest.raises(ValidationError) as laundered:  # a web page never speaks for the user
        client.remember(**user_fact(provenance=Provenance.web_page("https://acme.example"), authority="user"))
    assert laundered.value.status == 400 and set(laundered.value.errors) == {"authority"}
    assert "web_page" in " ".join(laundered.value.errors["authority"])
    assert "authority: A web_page source cannot carry user authority" in str(laundered.value)
    with pytest.raises(ValidationError) as invalid:
        client.remember(**user_fact(confidence=1.5, kind="no-such-kind"))
    assert set(invalid.value.errors) == {"confidence", "kind"}
    assert "confidence:" in str(invalid.value) and "kind: Unknown kind." in str(invalid.value)

    with pytest.raises(ScopeDenied) as denied:
        client.remember(**user_fact(purpose="sales"))
    assert denied.value.status == 403 and "purpose" in denied.value.errors

    with pytest.raises(NotFound):
        client.get(str(uuid.uuid4()))
    with pytest.raises(AuthenticationError), Client(api_server.base, "gma_not-a-token") as stranger:
        stranger.recall("anything", purpose="support")
    reader = make_credential(tenant, agent_slug="reader")  # no forget capability
    with Client(api_server.base, reader.raw_token) as limited, pytest.raises(ScopeDenied):
        limited.forget("customer/acme")
    assert MemoryRecord.objects.count() == before  # a failed request writes nothing


def test_forget_hides_the_subject_at_once_and_its_status_follows_propagation(client):
    for n in (1, 2):
        client.remember(**user_fact(n, subject="customer/zed", content=f"Zed's phone is 555-010{n}."))
    request = client.forget("customer/zed", reason="erasure request #7")
    assert (request.status, request.affected, request.subject) == ("propagating", 2, "customer/zed")
    assert client.recall("zed phone", purpose="support", subject="customer/zed").items == ()
    assert client.forget_status(request.id).status == "propagating"

    run_job("propagate_forgets", trigger="run_job")  # what beat would run next

    done = client.forget_status(request)
    assert done.completed and done.completed_at is not None and done.receipts
    # every receipt is complete but the disk's, which the disk_rewrite job completes once it verified
    assert all(receipt.artifact and (receipt.completed_at or receipt.artifact == "disk") for receipt in done.receipts)
    assert {m.status for m in client.list(status="forgotten")} == {"forgotten"}
    assert all(m.content is None for m in client.list(status="forgotten"))


def test_a_batch_is_sent_in_chunks_with_item_keys_and_list_iterates_every_page(api_server, token):
    drafts = [
        MemoryDraft(
            content=f"Acme office fact {n}.",
            subject="customer/acme",
            purpose="support",
            kind="semantic",
            confidence=0.8,
            provenance=Provenance.user_turn("s-2", n),
        )
        for n in range(104)
    ]
    drafts[3] = replace(drafts[3], confidence=7)  # invalid: that item's error only
    transport = RecordingTransport(lose=posts_to("/memories/batch/"))  # the first chunk's answer is lost
    with Client(api_server.base, token, transport=transport, retry=RetryPolicy(backoff=0.01)) as client:
        result = client.remember_many(drafts)
        listed = list(client.list(subject="customer/acme", ordering="created_at", page_size=40))

    assert [r.index for r in result] == list(range(104))
    assert [r.status for r in result].count(201) == 103
    assert not result[3].ok and isinstance(result[3].error, ValidationError) and "confidence" in result[3].error.errors
    assert {m.status for m in result.memories} == {"active"}
    batches = transport.to("/memories/batch/")
    assert [b.status for b in batches] == [None, 200, 200]  # chunk 1 lost and sent again, then chunk 2
    assert MemoryRecord.objects.count() == 103  # the resent chunk replayed its items' keys

    assert len(transport.to("/memories/")) == 3  # pages of 40, 40, 23
    assert [m.id for m in listed] == [m.id for m in result.memories]


def test_a_claim_signed_with_sign_provenance_is_stored_verified_and_a_tampered_one_stores_nothing(client, tenant):
    key = generate_private_key()
    register_crm(tenant, key)
    observed = datetime(2026, 11, 29, 10, 0, tzinfo=timezone(timedelta(hours=1)))  # sent, and signed, with its offset
    claim = Provenance.tool_output("crm_lookup", session="s-crm", version="contact/42@v7", observed_at=observed)
    fact = {"subject": "customer/acme", "purpose": "support", "kind": "semantic", "confidence": 1.0}
    content = "Acme's billing contact is Dana Reyes."
    signed = sign_provenance(key, claim, source="crm", content=content, subject="customer/acme")
    assert (signed.source, claim.source, claim.signature) == ("crm", None, None) and signed.signature

    memory = client.remember(content, provenance=signed, **fact)
    assert (memory.status, memory.provenance.source, memory.provenance.verified) == ("active", "crm", True)
    assert client.get(memory.id).provenance.verified

    before = MemoryRecord.objects.count()
    with pytest.raises(ValidationError):  # signed for other content
        client.remember("Acme's billing contact is Mallory.", provenance=signed, **fact)
    with pytest.raises(ValidationError):  # or for another subject
        client.remember(content, provenance=signed, **{**fact, "subject": "customer/zed"})
    assert MemoryRecord.objects.count() == before
    with pytest.raises(ValueError, match="observed_at"):
        sign_provenance(key, replace(claim, observed_at=None), source="crm", content=content, subject="customer/acme")
