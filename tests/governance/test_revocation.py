"""Revoking a source (contract: "Revoke a source"): everything active the source wrote, and
everything derived from that, is back in quarantine before the response, through the lifecycle
service, with a `review.revoke` history row per record and a receipt; the reviewer can then approve
them again one by one or a page at a time."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from governance.models import Revocation, RevocationRecord
from governance.revocations.services import resolve_source, revocation_create
from memory.models import AgentCredential, MemoryRecord, ReviewerToken, Status, Trust
from memory.services import (
    RevokedSource,
    memory_forget_subject,
    memory_promote,
    memory_reject,
    memory_revoke_source,
    memory_write,
    memory_write_batch,
)
from tests.api.conftest import RECALL, UNTRUSTED, assert_problem, bearer_client, recall_ids
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db

REVOCATIONS = "/api/v1/revocations/"


@pytest.fixture
def api_reviewer(reviewer):
    _, raw = ReviewerToken.issue(user=reviewer)
    return bearer_client(raw)


def write_many(credential, count: int, text: str = "Leaked-token fact number {n}.") -> list:
    """`count` admitted records through the batch write service (100 per call, as the API takes them)."""
    ids = []
    for start in range(0, count, 100):
        items = [memory_body(subject="customer/leak", content=text.format(n=start + i)) for i in range(min(100, count - start))]
        results = memory_write_batch(credential=credential, items=items)
        assert all(result.status == 201 for result in results)
        ids.extend(result.record.pk for result in results)
    return ids


def summary(credential, sources, reviewer_actor, content="Summary of several facts."):
    """A derived record (quarantined at write), promoted by a reviewer so it is active."""
    record = memory_write(
        credential=credential,
        data=memory_body(
            content=content,
            authority="agent",
            derived_from=[str(pk) for pk in sources],
            provenance={"source_type": "agent_inference", "uri": None},
            subject="customer/leak",
        ),
    ).record
    assert record.status == Status.QUARANTINED
    return memory_promote(record_id=record.pk, expected_version=record.version, actor=reviewer_actor)


def statuses(ids) -> set[str]:
    return set(MemoryRecord.objects.filter(pk__in=ids).values_list("status", flat=True))


def test_revoking_a_credential_that_wrote_5000_records_quarantines_them_and_their_summaries_in_one_request(
    tenant,
    credential,
    make_credential,
    reviewer,
    reviewer_actor,
    api_reviewer,
    client,
    settings,
):
    leaked = make_credential(tenant)  # same agent (support-bot), a second token: the one that leaked
    other = make_credential(tenant)  # the agent's other token, not compromised
    written = write_many(leaked, 5000)
    kept = write_many(other, 3, text="Clean fact {n} from the other token.")
    quarantined_at_write = memory_write(credential=leaked, data=memory_body(**UNTRUSTED, subject="customer/leak")).record
    # Summaries written with the other token over the leaked one's records, and one summary of a summary.
    summaries = [summary(other, written[i : i + 2], reviewer_actor, content=f"Summary {i}.") for i in range(0, 20, 2)]
    summaries.append(summary(other, [summaries[0].pk, kept[0]], reviewer_actor, content="Summary of a summary."))
    summary_ids = [record.pk for record in summaries]
    unrelated_summary = summary(other, kept[1:3], reviewer_actor, content="Summary of the other token's facts.")
    agent_client = bearer_client(other.raw_token)
    revoked = {str(pk) for pk in written + summary_ids}
    assert str(written[17]) in recall_ids(agent_client, query="fact number 17")  # recalled before
    assert str(summary_ids[-1]) in recall_ids(agent_client, query="summary of a summary")

    with CaptureQueriesContext(connection) as queries:
        response = api_reviewer.post(
            REVOCATIONS,
            {"tenant": "acme", "credential": leaked.raw_token, "reason": "token committed to a public repository"},
            format="json",
        )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert {"id", "affected", "derived_affected", "created_at"} <= set(body)
    assert (body["affected"], body["derived_affected"], body["source"], body["token_revoked"]) == (5011, 11, "credential", True)
    assert len(queries) < 120  # set-based: chunks of 1000, not a query per record

    assert statuses(written + summary_ids) == {Status.QUARANTINED}
    assert set(MemoryRecord.objects.filter(pk__in=written + summary_ids).values_list("trust", flat=True)) == {Trust.UNTRUSTED}
    assert statuses([*kept, unrelated_summary.pk]) == {Status.ACTIVE}
    assert MemoryRecord.objects.get(pk=quarantined_at_write.pk).version == 1  # already quarantined: untouched
    for query in ("fact number 17", "leaked token fact", "summary of a summary", "summary"):
        assert not revoked & set(recall_ids(agent_client, query=query, limit=50)), query
    assert str(unrelated_summary.pk) in recall_ids(agent_client, query="summary of the other token's facts")

    history = MemoryRecord.history.model
    rows = history.objects.filter(id__in=written + summary_ids, history_change_reason="review.revoke")
    assert rows.count() == 5011  # exactly one history row per record
    row = rows.filter(id=summary_ids[-1]).get()
    assert (row.status, row.history_user, row.history_note, row.version) == (
        Status.QUARANTINED,
        reviewer,
        "token committed to a public repository",
        3,
    )
    record = MemoryRecord.objects.get(pk=summary_ids[-1])
    assert record.quarantine_reason.startswith("Derived from a memory whose source (an agent token) was revoked")
    assert MemoryRecord.objects.get(pk=written[0]).quarantine_reason.startswith("Its source (an agent token) was revoked")

    leaked.refresh_from_db()
    assert leaked.revoked_at is not None  # the token itself is revoked
    assert bearer_client(leaked.raw_token).post(RECALL, {"purpose": "support", "query": "x"}, format="json").status_code == 401
    revocation = Revocation.objects.get(pk=body["id"])
    assert (revocation.revoked_by_user, revocation.credential, revocation.records.count()) == (reviewer, leaked, 5011)
    assert RevocationRecord.objects.filter(revocation=revocation, derived=True).count() == 11
    assert api_reviewer.get(f"{REVOCATIONS}{body['id']}/").json()["affected"] == 5011

    # The reviewer approves the right ones again: one on its own, then a page of them at once.
    client.force_login(reviewer)
    one = MemoryRecord.objects.get(pk=written[0])
    client.post(reverse("review:memory_decide", args=[one.pk, "approve"]), {"version": one.version})
    page = client.get(reverse("review:quarantine"), {"revocation": body["id"]})
    page_ids = [record.pk for record in page.context["page"].object_list]
    assert len(page_ids) == 25 and one.pk not in page_ids and quarantined_at_write.pk not in page_ids
    versions = dict(MemoryRecord.objects.filter(pk__in=page_ids).values_list("pk", "version"))
    client.post(
        reverse("review:quarantine_bulk"),
        {
            "decision": "approve",
            "selected": [str(pk) for pk in page_ids],
            **{f"version-{pk}": str(version) for pk, version in versions.items()},
        },
    )
    assert statuses([one.pk, *page_ids]) == {Status.ACTIVE}
    approved = {str(pk) for pk in [one.pk, *page_ids]}
    assert str(one.pk) in recall_ids(agent_client, query="fact number 0")
    recalled = set(recall_ids(agent_client, query="leaked token fact", limit=50))
    assert recalled & approved and not recalled & (revoked - approved)  # the approved ones, and only those of the revoked
    detail = client.get(reverse("review:revocation_detail", args=[body["id"]]))
    assert detail.context["still_quarantined"] == 5011 - 26


@pytest.mark.parametrize("source", ["agent", "session_id", "source_uri_prefix"])
def test_an_agent_a_session_or_a_site_can_be_revoked(source, tenant, credential, make_credential, write, api_reviewer):
    other_agent = make_credential(tenant, agent_slug="sales-bot")
    web = {
        "authority": "user",
        "provenance": {"source_type": "user_turn", "uri": "https://forum.example/thread/42", "session_id": "s-poisoned"},
    }
    hit = write(**web)
    miss_other_agent = write(credential_=other_agent, content="Other agent's fact.")
    miss_other_session = write(content="A clean session.", provenance={"session_id": "s-clean", "uri": "chat://s-clean"})
    value = {"agent": "support-bot", "session_id": "s-poisoned", "source_uri_prefix": "https://forum.example/"}[source]
    response = api_reviewer.post(REVOCATIONS, {source: value, "reason": "compromised"}, format="json")
    assert response.status_code == 201, response.json()
    expected = {hit.pk} | ({miss_other_session.pk} if source == "agent" else set())
    assert set(MemoryRecord.objects.filter(status=Status.QUARANTINED).values_list("pk", flat=True)) == expected
    assert MemoryRecord.objects.get(pk=miss_other_agent.pk).status == Status.ACTIVE
    assert response.json()["affected"] == len(expected)
    # a revoked agent's tokens are revoked with it; a session or a site revokes no token
    revoked = set(AgentCredential.objects.filter(revoked_at__isnull=False).values_list("pk", flat=True))
    assert revoked == ({credential.pk} if source == "agent" else set())
    assert response.json()["token_revoked"] is (source == "agent")


def test_revoking_again_finds_nothing_left_and_is_harmless(tenant, credential, write, reviewer_actor):
    write()
    source = resolve_source(actor=reviewer_actor, tenant=tenant, agent="support-bot")
    assert revocation_create(actor=reviewer_actor, source=source, reason="first").affected == 1
    again = revocation_create(actor=reviewer_actor, source=source, reason="again")
    assert (again.affected, again.derived_affected) == (0, 0)


def test_only_active_records_move_and_a_forgotten_one_stays_forgotten(tenant, credential, write, reviewer_actor):
    active = write()
    rejected = write(**UNTRUSTED)
    memory_reject(record_id=rejected.pk, expected_version=1, actor=reviewer_actor)
    forgotten = write(subject="customer/gone")
    memory_forget_subject(tenant_id=tenant.pk, subject="customer/gone", actor=reviewer_actor)
    outcome = memory_revoke_source(source=RevokedSource(tenant_id=tenant.pk, credential_id=credential.pk), actor=reviewer_actor)
    assert (outcome.record_ids, outcome.derived_ids, outcome.token_revoked) == ([active.pk], [], True)
    assert statuses([rejected.pk]) == {Status.REJECTED} and statuses([forgotten.pk]) == {Status.FORGOTTEN}


def test_bad_revocations_are_refused_and_change_nothing(tenant, other_tenant, credential, make_credential, write, api_reviewer):
    record = write()
    foreign = make_credential(other_tenant)
    cases = [
        ({"reason": "why"}, 400, {"source"}),  # no source
        ({"agent": "support-bot", "session_id": "s-1", "reason": "why"}, 400, {"source"}),  # two sources
        ({"agent": "support-bot"}, 400, {"reason"}),
        ({"agent": "support-bot", "reason": "   "}, 400, {"reason"}),
        ({"agent": "support-bot", "reason": "x" * 501}, 400, {"reason"}),
        ({"session_id": "", "reason": "why"}, 400, {"session_id"}),
        ({"credential": True, "reason": "why"}, 400, {"credential"}),
        ({"credential": 1.5, "reason": "why"}, 400, {"credential"}),
        ({"agent": "support-bot", "reason": "why", "everything": True}, 400, {"everything"}),
        ({"agent": "nobody", "reason": "why"}, 404, None),
        ({"credential": foreign.pk, "reason": "why"}, 404, None),  # another tenant's token
        ({"credential": foreign.raw_token, "reason": "why"}, 404, None),
        ({"agent": "support-bot", "tenant": "globex", "reason": "why"}, 404, None),
    ]
    for body, status, errors in cases:
        assert_problem(api_reviewer.post(REVOCATIONS, body, format="json"), status, errors=errors)
    assert (MemoryRecord.objects.get(pk=record.pk).status, Revocation.objects.count()) == (Status.ACTIVE, 0)
    assert not AgentCredential.objects.filter(revoked_at__isnull=False).exists()


def test_agents_may_not_revoke_and_reviewers_see_only_their_tenants_revocations(
    tenant,
    other_tenant,
    credential,
    make_reviewer,
    write,
    api_reviewer,
):
    write()
    response = bearer_client(credential.raw_token).post(REVOCATIONS, {"agent": "support-bot", "reason": "self"}, format="json")
    assert_problem(response, 403)
    assert MemoryRecord.objects.filter(status=Status.ACTIVE).count() == 1
    created = api_reviewer.post(REVOCATIONS, {"credential": credential.pk, "reason": "leak"}, format="json").json()
    outsider = make_reviewer(other_tenant, username="globex-reviewer")
    _, raw = ReviewerToken.issue(user=outsider)
    assert_problem(bearer_client(raw).get(f"{REVOCATIONS}{created['id']}/"), 404)
    assert bearer_client(raw).get(REVOCATIONS).json()["count"] == 0
    assert api_reviewer.get(REVOCATIONS).json()["results"][0]["id"] == created["id"]


def test_a_credential_can_be_named_by_its_hint(tenant, credential, write, api_reviewer):
    write()
    response = api_reviewer.post(REVOCATIONS, {"credential": credential.token_hint, "reason": "leak"}, format="json")
    assert (response.status_code, response.json()["affected"], response.json()["value"]) == (201, 1, f"{credential.token_hint}…")


def test_writes_remember_their_token(credential, write):
    single = write()
    batch = memory_write_batch(credential=credential, items=[memory_body()])[0].record
    assert single.written_by == credential and MemoryRecord.objects.get(pk=batch.pk).written_by == credential


def test_forgetting_every_record_a_session_revocation_touched_erases_the_session_id(tenant, write, reviewer_actor):
    from governance.forget.services import forget_request_create
    from governance.jobs import run_job
    from governance.models import PropagationReceipt
    from governance.revocations.forgetting import ERASED

    only_zed = [write(subject="customer/zed", provenance={"session_id": "s-zed-only"}) for _ in range(2)]
    write(subject="customer/zed", provenance={"session_id": "s-shared"})
    write(subject="customer/other", provenance={"session_id": "s-shared"})
    revoke = lambda session: revocation_create(  # noqa: E731
        actor=reviewer_actor, source=resolve_source(actor=reviewer_actor, tenant=tenant, session_id=session), reason="poisoned"
    )
    lone, shared = revoke("s-zed-only"), revoke("s-shared")
    assert (lone.affected, shared.affected) == (2, 2)

    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/zed", reason="erasure")
    run_job("propagate_forgets")
    lone.refresh_from_db()
    shared.refresh_from_db()
    assert (lone.value, shared.value) == (ERASED, "s-shared")  # another subject's record still holds that session
    assert (lone.affected, lone.records.count()) == (2, 2)  # counts and id links stay
    receipt = PropagationReceipt.objects.get(forget_request=request, artifact="revocation_sources")
    assert receipt.removed == 1 and "s-zed-only" not in receipt.note
    assert statuses([record.pk for record in only_zed]) == {Status.FORGOTTEN}
