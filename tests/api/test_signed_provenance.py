"""Signed provenance through the API (issue 33): a registered source's signed result is verified
before anything is stored; a verified claim shows it everywhere and may be admitted without review
by its source's policy; anything that does not verify is a 400 that stores nothing, counted, and
raised as an alert when it repeats; a source version is immutable; rotation keeps the old key for
an overlap; revoking a key sends back to quarantine what it verified."""

import base64
from datetime import timedelta

import hypothesis
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from hypothesis import HealthCheck
from hypothesis import strategies as st
from prometheus_client import REGISTRY

from governance.alerts.models import Alert, AlertPolicy
from governance.alerts.services import evaluate_alerts
from governance.revocations.services import resolve_source, revocation_create
from governed_memory.signing import generate_private_key, public_key_text
from memory.actors import Actor
from memory.models import IdempotencyKey, MemoryRecord, SourceKey, Status, Trust
from memory.provenance.registry import source_rotate
from memory.provenance.verify import SignatureRejected
from memory.services import memory_write
from memory.services import write as write_service
from tests.api.conftest import MEMORIES, RECALL, assert_problem
from tests.signed_support import OBSERVED, crm_claim, register_crm

BATCH = MEMORIES + "batch/"
REVOCATIONS = "/api/v1/revocations/"


@pytest.fixture
def crm_key():
    return generate_private_key()


@pytest.fixture
def crm(tenant, crm_key):
    """The CRM, registered for the tenant: third-party authority, `semantic` facts admitted."""
    return register_crm(tenant, crm_key)


def stored() -> tuple[int, int, int]:
    return MemoryRecord.objects.count(), MemoryRecord.history.count(), IdempotencyKey.objects.count()


def refused(reason: str) -> float:
    return REGISTRY.get_sample_value("governed_memory_signature_failures_total", {"reason": reason}) or 0.0


def post(client, body, **headers):
    return client.post(MEMORIES, body, format="json", headers=headers)


# --------------------------------------------------------------------------------------------
# verified claims


def test_a_verified_crm_claim_is_admitted_without_review_and_the_same_claim_unsigned_is_quarantined(agent_client, crm, crm_key):
    signed = post(agent_client, crm_claim(crm_key))
    assert signed.status_code == 201, signed.json()
    record = signed.json()
    assert (record["status"], record["trust"], record["authority"]) == ("active", "trusted", "third_party")
    assert record["provenance"] | {"observed_at": None} == {
        "source_type": "tool_output",
        "uri": None,
        "session_id": "s-crm",
        "turn_id": None,
        "tool": "crm_lookup",
        "source_version": "contact/42@v7",
        "observed_at": None,
        "contaminated": False,
        "source": "crm",
        "verified": True,
    }
    assert MemoryRecord.objects.get(pk=record["id"]).history.get().history_change_reason == "write.active"

    unsigned = post(agent_client, crm_claim(content="Acme's billing contact is Sam Ortiz.", version="contact/42@v8"))
    assert unsigned.status_code == 201, unsigned.json()
    assert (unsigned.json()["status"], unsigned.json()["trust"]) == ("quarantined", "untrusted")
    assert unsigned.json()["provenance"]["verified"] is False
    assert unsigned.json()["provenance"]["source"] is None
    assert "someone else's content" in unsigned.json()["quarantine_reason"]


def test_record_reads_lists_and_recall_items_say_whether_provenance_is_verified(agent_client, crm, crm_key):
    verified = post(agent_client, crm_claim(crm_key)).json()
    plain = post(
        agent_client, crm_claim(content="Acme's billing runs monthly.", authority="user", provenance={"source_type": "user_turn"})
    )
    assert plain.status_code == 201, plain.json()
    assert agent_client.get(f"{MEMORIES}{verified['id']}/").json()["provenance"]["verified"] is True
    listed = {item["id"]: item["provenance"] for item in agent_client.get(MEMORIES).json()["results"]}
    assert (listed[verified["id"]]["verified"], listed[plain.json()["id"]]["verified"]) == (True, False)
    recalled = agent_client.post(RECALL, {"query": "acme billing contact", "purpose": "support"}, format="json").json()
    items = {item["id"]: item["provenance"] for item in recalled["items"]}
    assert items[verified["id"]]["verified"] is True and items[verified["id"]]["source"] == "crm"
    assert items[plain.json()["id"]]["verified"] is False


def test_a_verified_claim_of_a_kind_its_source_does_not_admit_waits_for_review_and_shows_verified(agent_client, crm, crm_key):
    response = post(agent_client, crm_claim(crm_key, kind="episodic"))
    assert response.status_code == 201, response.json()
    assert (response.json()["status"], response.json()["provenance"]["verified"]) == ("quarantined", True)


def test_a_signed_claim_must_carry_the_authority_its_source_is_registered_with(agent_client, crm, crm_key):
    before = stored()
    response = post(agent_client, crm_claim(crm_key, authority="agent"))
    assert_problem(response, 400, errors={"authority"})
    assert stored() == before


def test_listing_signed_records_costs_no_query_per_record(agent_client, crm, crm_key):
    def list_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert agent_client.get(MEMORIES).status_code == 200
        return len(queries)

    for n in range(2):
        post(agent_client, crm_claim(crm_key, content=f"Acme fact {n}.", version=f"v{n}"))
    few = list_queries()
    for n in range(2, 6):
        post(agent_client, crm_claim(crm_key, content=f"Acme fact {n}.", version=f"v{n}"))
    assert list_queries() == few


# --------------------------------------------------------------------------------------------
# refused: 400, nothing stored, counted


REFUSALS = {
    "forged": ({}, "bad_signature", "provenance.signature"),  # signed below by a key the CRM never registered
    "other content": ({"signed_over": {"content": "Acme's billing contact is Eve."}}, "bad_signature", "provenance.signature"),
    "replay for another subject": ({"signed_over": {"subject": "customer/globex"}}, "bad_signature", "provenance.signature"),
    "other source version": ({"signed_over": {"source_version": "contact/42@v6"}}, "bad_signature", "provenance.signature"),
    "other observed time": ({"signed_over": {"observed_at": "2026-11-29T09:00:00Z"}}, "bad_signature", "provenance.signature"),
    "unknown source": ({"source": "erp"}, "unknown_source", "provenance.source"),
    "no source version": ({"version": None}, "incomplete", "provenance.source_version"),
    "no observed time": ({"provenance": {"observed_at": None}}, "incomplete", "provenance.observed_at"),
    "no signature": ({"provenance": {"signature": None}}, "incomplete", "provenance.signature"),
    "malformed signature": ({"provenance": {"signature": "bm90IGEgc2lnbmF0dXJl"}}, "malformed", "provenance.signature"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_a_signature_that_does_not_verify_is_a_400_that_stores_nothing(agent_client, crm, crm_key, case):
    changes, reason, field = REFUSALS[case]
    body = crm_claim(crm_key, **changes)
    if case == "forged":  # a well-formed signature over the very same statement, by another key
        body["provenance"]["signature"] = crm_claim(generate_private_key())["provenance"]["signature"]
    before, counted = stored(), refused(reason)
    problem = assert_problem(post(agent_client, body, **{"Idempotency-Key": f"k-{case}"}), 400, errors={field})
    assert problem["type"].endswith(":signature_invalid")
    assert stored() == before
    assert refused(reason) == counted + 1


def test_a_revoked_or_rotated_out_key_verifies_nothing(agent_client, crm, crm_key, reviewer_client):
    key = SourceKey.objects.get(source=crm)
    revoked = reviewer_client.post(REVOCATIONS, {"source_key": key.pk, "reason": "key leaked"}, format="json")
    assert revoked.status_code == 201, revoked.json()
    before, counted = stored(), refused("revoked_key")
    assert_problem(post(agent_client, crm_claim(crm_key)), 400, errors={"provenance.signature"})
    assert (stored(), refused("revoked_key")) == (before, counted + 1)


def test_a_key_revoked_between_verifying_and_storing_refuses_the_write(credential, crm, crm_key, reviewer, monkeypatch):
    actor = Actor.for_user(reviewer)
    verify = write_service.verify_signed

    def verify_then_revoke(draft, ring, *, now):
        verified = verify(draft, ring, now=now)
        source = resolve_source(actor=actor, tenant=crm.tenant, source_key=verified.verified_key)
        revocation_create(actor=actor, source=source, reason="leaked while the write was on its way")
        return verified

    monkeypatch.setattr(write_service, "verify_signed", verify_then_revoke)
    before = stored()
    with pytest.raises(SignatureRejected) as refusal:
        memory_write(credential=credential, data=crm_claim(crm_key))
    assert refusal.value.reason == "revoked_key"
    assert stored() == before


def test_a_named_source_without_a_signature_and_a_signature_without_a_source_are_refused(agent_client, crm, crm_key):
    before = stored()
    assert_problem(post(agent_client, crm_claim(source="crm")), 400, errors={"provenance.signature"})
    signature_only = crm_claim(crm_key)
    signature_only["provenance"]["source"] = None
    assert_problem(post(agent_client, signature_only), 400, errors={"provenance.source"})
    assert stored() == before


def test_another_tenants_source_is_unknown(agent_client, other_tenant, crm_key):
    register_crm(other_tenant, crm_key)  # the same key and name, registered by another tenant only
    before = stored()
    assert_problem(post(agent_client, crm_claim(crm_key)), 400, errors={"provenance.source"})
    assert stored() == before


def test_repeated_failures_raise_an_alert_for_the_tenant(agent_client, tenant, crm, crm_key):
    AlertPolicy.objects.create(tenant=tenant, signature_failures_max=2)
    for n in range(2):
        post(agent_client, crm_claim(crm_key, signed_over={"content": f"forged {n}"}))
    evaluate_alerts(now=timezone.now())
    assert not Alert.objects.filter(kind=Alert.Kind.SIGNATURE_FAILURES).exists()  # two is not more than two
    post(agent_client, crm_claim(crm_key, signed_over={"subject": "customer/globex"}))
    evaluate_alerts(now=timezone.now())
    alert = Alert.objects.get(kind=Alert.Kind.SIGNATURE_FAILURES, resolved_at__isnull=True)
    assert (alert.tenant, alert.value, alert.threshold) == (tenant, 3, 2)
    assert "3 signed writes refused in the last hour" in alert.summary
    evaluate_alerts(now=timezone.now() + timedelta(hours=2))  # the failures aged out of the window
    alert.refresh_from_db()
    assert alert.resolved_at is not None


# --------------------------------------------------------------------------------------------
# immutable source versions


def test_a_source_version_claimed_again_with_other_content_is_a_409_and_the_same_content_is_harmless(agent_client, crm, crm_key):
    first = post(agent_client, crm_claim(crm_key))
    assert first.status_code == 201
    before = stored()
    other = crm_claim(crm_key, content="Acme's billing contact is Mallory.")  # validly signed, same version
    problem = assert_problem(post(agent_client, other), 409)
    assert problem["type"].endswith(":source_version_conflict")
    assert stored() == before
    again = post(agent_client, crm_claim(crm_key))
    assert again.status_code == 201
    assert again.json()["content"] == first.json()["content"]
    newer = post(agent_client, crm_claim(crm_key, content="Acme's billing contact is Mallory.", version="contact/42@v8"))
    assert newer.status_code == 201


def test_a_batch_verifies_each_item_and_keeps_source_versions_immutable(agent_client, crm, crm_key):
    forged = crm_claim(crm_key, content="Forged.", version="v-forged", signed_over={"content": "Something else."})
    items = [
        crm_claim(crm_key),
        forged,
        crm_claim(crm_key, content="Acme's billing contact is Mallory."),  # same version as item 0
        crm_claim(content="Acme pays by card.", version="v-unsigned"),
    ]
    before = MemoryRecord.objects.count()
    response = agent_client.post(BATCH, {"items": items}, format="json")
    assert response.status_code == 200, response.json()
    results = response.json()["results"]
    assert [result["status"] for result in results] == [201, 400, 409, 201]
    assert results[1]["problem"]["errors"] == {"provenance.signature": ["Does not verify against the source's keys."]}
    assert (results[0]["record"]["status"], results[0]["record"]["provenance"]["verified"]) == ("active", True)
    assert (results[3]["record"]["status"], results[3]["record"]["provenance"]["verified"]) == ("quarantined", False)
    assert MemoryRecord.objects.count() == before + 2


# --------------------------------------------------------------------------------------------
# rotation and revocation


def test_after_a_rotation_the_old_key_verifies_during_the_overlap_and_not_after(agent_client, crm, crm_key):
    new_key = generate_private_key()
    source_rotate(source=crm, public_key=public_key_text(new_key), actor_label="test", overlap=timedelta(hours=1))
    during = post(agent_client, crm_claim(crm_key, version="v-old"))
    assert (during.status_code, during.json()["provenance"]["verified"]) == (201, True)
    assert post(agent_client, crm_claim(new_key, content="New key's fact.", version="v-new")).status_code == 201

    # Two hours later (only the keys' timestamps are moved back, as if the rotation ran then): the
    # one-hour overlap is over.
    old, current = SourceKey.objects.filter(source=crm).order_by("pk")
    SourceKey.objects.filter(pk=old.pk).update(
        valid_from=old.valid_from - timedelta(hours=2), valid_until=old.valid_until - timedelta(hours=2)
    )
    SourceKey.objects.filter(pk=current.pk).update(valid_from=current.valid_from - timedelta(hours=2))
    before, counted = stored(), refused("retired_key")
    assert_problem(
        post(agent_client, crm_claim(crm_key, content="Late.", version="v-late")), 400, errors={"provenance.signature"}
    )
    assert (stored(), refused("retired_key")) == (before, counted + 1)
    assert post(agent_client, crm_claim(new_key, content="Current key's fact.", version="v-now")).status_code == 201
    assert old.history.first().history_change_reason == "source.rotate"


def test_revoking_a_key_sends_what_it_verified_and_what_was_derived_back_to_quarantine(
    agent_client, crm, crm_key, reviewer_client, other_tenant, make_reviewer, client_for
):
    verified = post(agent_client, crm_claim(crm_key)).json()
    unsigned = post(
        agent_client, crm_claim(content="Acme is on the gold plan.", authority="user", provenance={"source_type": "user_turn"})
    )
    summary = post(
        agent_client,
        crm_claim(content="Acme: billing contact Dana Reyes.", version=None, authority="agent", derived_from=[verified["id"]])
        | {"provenance": {"source_type": "agent_inference", "session_id": "s-crm", "observed_at": None}},
    ).json()
    promoted = reviewer_client.post(f"{MEMORIES}{summary['id']}/promote/", {"expected_version": 1}, format="json")
    assert promoted.status_code == 200, promoted.json()

    key = SourceKey.objects.get(source=crm)
    response = reviewer_client.post(REVOCATIONS, {"source_key": key.pk, "reason": "the CRM's key leaked"}, format="json")
    assert response.status_code == 201, response.json()
    receipt = response.json()
    assert (receipt["source"], receipt["affected"], receipt["derived_affected"], receipt["token_revoked"]) == (
        "source_key",
        2,
        1,
        True,
    )
    for record_id in (verified["id"], summary["id"]):
        record = MemoryRecord.objects.get(pk=record_id)
        assert (record.status, record.trust) == (Status.QUARANTINED, Trust.UNTRUSTED)
        row = record.history.first()
        assert (row.history_change_reason, row.history_note) == ("review.revoke", "the CRM's key leaked")
    assert MemoryRecord.objects.get(pk=unsigned.json()["id"]).status == Status.ACTIVE
    assert agent_client.get(f"{MEMORIES}{verified['id']}/").json()["provenance"]["verified"] is False
    key.refresh_from_db()
    assert key.revoked_at is not None and key.history.first().history_change_reason == "review.revoke"
    # an agent may not revoke a key; another tenant's reviewer does not find it
    assert agent_client.post(REVOCATIONS, {"source_key": key.pk, "reason": "x"}, format="json").status_code == 403
    outsider = client_for(make_reviewer(other_tenant, username="olga"))
    assert_problem(outsider.post(REVOCATIONS, {"source_key": key.pk, "reason": "x"}, format="json"), 404)


# --------------------------------------------------------------------------------------------
# schema


def test_the_schema_documents_the_signed_provenance_fields(agent_client):
    schema = agent_client.get("/api/schema/", headers={"Accept": "application/json"}).json()
    components = schema["components"]["schemas"]
    request = components["ProvenanceRequest"]["properties"]
    assert {"source", "signature", "source_version", "observed_at"} <= set(request)
    assert "RFC 8785" in request["signature"]["description"]
    stored_provenance = components["StoredProvenance"]["properties"]
    assert stored_provenance["verified"]["type"] == "boolean" and "source" in stored_provenance
    assert "source_key" in components["RevocationInputRequest"]["properties"]


# --------------------------------------------------------------------------------------------
# bad input never fails the server

ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=300),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=5,
)
SIGNATURE_LIKE = st.one_of(
    ANY_JSON,
    st.binary(min_size=0, max_size=80).map(lambda raw: base64.b64encode(raw).decode()),
    st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-\n \x00", max_size=120),
)


@hypothesis.settings(max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@hypothesis.given(
    source=st.one_of(st.just("crm"), ANY_JSON),
    signature=SIGNATURE_LIKE,
    version=st.one_of(st.just("contact/42@v7"), ANY_JSON),
    observed_at=st.one_of(st.just(OBSERVED), st.text(max_size=40), ANY_JSON),
)
def test_malformed_signed_provenance_is_a_problem_never_a_server_error(
    agent_client, crm, crm_key, source, signature, version, observed_at
):
    body = crm_claim(crm_key)
    body["provenance"].update(source=source, signature=signature, source_version=version, observed_at=observed_at)
    before = stored()
    response = post(agent_client, body)
    assert response.status_code in (201, 400), response.content[:300]
    if response.status_code == 400:
        assert response["Content-Type"] == "application/problem+json"
        assert stored() == before
