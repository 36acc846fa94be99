"""Consolidation with provenance, end to end at the service level: a derived record (a summary)
is the agent's own claim, quarantined, linked to its sources and carrying their provenance; a
superseded source shows on it; forgetting a source forgets the summary too, with a receipt."""

import pytest
from django.utils import timezone

from governance.dedup.jobs import propose_duplicates
from governance.dedup.selectors import lineage_provenance, superseded_sources, superseded_sources_by_record
from governance.dedup.services import proposal_accept
from governance.forget.services import forget_request_create
from governance.models import DedupProposal
from memory.actors import Actor
from memory.errors import ValidationFailed
from memory.models import Authority, MemoryRecord, Status, Trust
from memory.services import memory_write
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db

SUMMARY = {"authority": "agent", "provenance": {"source_type": "agent_inference"}, "subject": "customer/acme"}


def test_a_summary_is_an_agent_claim_in_quarantine_linked_to_its_sources(write):
    email = write(content="Prefers email for invoices.", provenance={"uri": "chat://s-1#turn-3", "session_id": "s-1"})
    tool = write(
        content="Invoices go to ap@acme.example.",
        authority="third_party",
        provenance={"source_type": "tool_output", "tool": "crm.lookup", "uri": "crm://acme", "contaminated": True},
    )
    summary = write(content="Acme: invoices by email to ap@acme.example.", derived_from=[str(email.pk), str(tool.pk)], **SUMMARY)

    assert (summary.authority, summary.status, summary.trust) == (Authority.AGENT, Status.QUARANTINED, Trust.UNTRUSTED)
    assert "summary or merge" in summary.quarantine_reason  # a plain-language reason
    assert set(summary.derived_from.values_list("pk", flat=True)) == {email.pk, tool.pk}
    assert summary.contaminated  # a contaminated source taints the summary
    provenance = {entry["record_id"]: entry["provenance"] for entry in lineage_provenance(summary)}
    assert provenance[email.pk]["uri"] == "chat://s-1#turn-3"
    assert provenance[tool.pk]["tool"] == "crm.lookup" and provenance[tool.pk]["contaminated"] is True


def test_a_summary_must_be_the_agents_own_claim_from_sources_in_its_scope(write, credential, tenant, make_credential):
    source = write(content="Prefers email for invoices.")
    with pytest.raises(ValidationFailed) as refused:
        memory_write(credential=credential, data=memory_body(content="Summary.", derived_from=[str(source.pk)]))
    assert "authority" in refused.value.errors
    foreign = write(make_credential(tenant, agent_slug="sales-bot"), content="Prefers phone.")
    with pytest.raises(ValidationFailed) as refused:
        memory_write(credential=credential, data=memory_body(content="Summary.", derived_from=[str(foreign.pk)], **SUMMARY))
    assert "derived_from" in refused.value.errors
    assert not MemoryRecord.objects.filter(content="Summary.").exists()


def test_a_source_superseded_by_a_dedup_decision_shows_on_the_summary(write, reviewer_actor):
    first = write(content="The customer prefers to be contacted by email.")
    second = write(content="Customer prefers being contacted via email.")
    summary = write(content="Contact: email.", derived_from=[str(first.pk), str(second.pk)], **SUMMARY)
    assert list(superseded_sources(summary)) == []

    propose_duplicates(now=timezone.now(), batch_size=100)
    proposal = DedupProposal.objects.get(category="duplicate")
    proposal_accept(proposal_id=proposal.pk, actor=reviewer_actor)

    dropped = proposal.drops.get().record_id
    assert [source.pk for source in superseded_sources(summary)] == [dropped]
    assert superseded_sources_by_record([summary.pk, first.pk]) == {summary.pk: [dropped]}
    statuses = {entry["record_id"]: entry["status"] for entry in lineage_provenance(summary)}
    assert statuses == {proposal.keep_id: Status.ACTIVE, dropped: Status.SUPERSEDED}


def test_forgetting_a_source_forgets_the_summary_with_a_receipt(write, credential):
    source = write(content="Dana's home address is 12 Elm Street.", subject="person/dana")
    unrelated = write(content="Prefers email for invoices.")
    summary = write(content="Dana: 12 Elm Street; prefers email.", derived_from=[str(source.pk), str(unrelated.pk)], **SUMMARY)
    summary_of_summary = write(content="Digest.", derived_from=[str(summary.pk)], **SUMMARY)

    request = forget_request_create(
        actor=Actor.for_credential(credential), tenant=credential.agent.tenant, subject="person/dana", reason="erasure request"
    )

    assert (request.affected, request.lineage_affected) == (3, 2)
    assert set(request.records.values_list("pk", flat=True)) == {source.pk, summary.pk, summary_of_summary.pk}
    for record in (source, summary, summary_of_summary):
        record.refresh_from_db()
        assert record.status == Status.FORGOTTEN and record.visible_content is None
    summary_row = summary.history.order_by("-history_date", "-history_id").first()
    assert summary_row.history_change_reason == "agent.forget_lineage"
    unrelated.refresh_from_db()
    assert unrelated.status == Status.ACTIVE
    # a forgotten source shows only that it was forgotten, not where it came from
    (forgotten_entry,) = [entry for entry in lineage_provenance(summary) if entry["record_id"] == source.pk]
    assert forgotten_entry == {"record_id": source.pk, "status": Status.FORGOTTEN, "authority": Authority.USER}
