"""Forget reaches provenance and the subject too: after propagation, the forgotten records, every
history row of them and the forget request keep no subject, URI, session, turn, tool or source
version, only a keyed fingerprint of the subject, which a later forget of the same subject still
matches. Proven on a full dump of the database (pg_dump on PostgreSQL, iterdump on SQLite)."""

import hashlib
import io
import uuid

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from governance.forget.artifacts import PROVENANCE_STRING_FIELDS
from governance.forget.services import forget_request_create
from governance.jobs import run_job
from governance.models import DedupProposal, DedupProposalDrop, ForgetRequest, ForgetTombstone
from memory.fingerprints import is_subject_fingerprint, records_about, subject_fingerprint
from memory.models import MemoryRecord, Status
from memory.services import memory_promote
from tests.governance.test_forget_propagation import canary, full_dump

FIELDS = ("content", "subject", "uri", "session_id", "turn_id", "tool", "source_version")


def plant(write, reviewer_actor, reviewer, marks: dict[str, str]) -> list[MemoryRecord]:
    """Records of one subject carrying a distinct canary in the content, the subject and every
    provenance string, copied to the places a record's strings spread to: history rows (a
    promotion with a note), an idempotency entry, a derived summary, a dedup proposal and an admin
    log entry."""
    subject = f"customer/{marks['subject']}"
    provenance = {
        "source_type": "tool_output",
        "uri": f"https://crm.example.com/{marks['uri']}",
        "session_id": f"s-{marks['session_id']}",
        "turn_id": f"t-{marks['turn_id']}",
        "tool": f"crm-{marks['tool']}",
        "source_version": f"v-{marks['source_version']}",
    }
    looked_up = write(
        subject=subject,
        content=f"Plan is gold, says {marks['content']}.",
        authority="third_party",
        provenance=provenance,
        idempotency_key=f"key-{marks['content']}",
    )
    memory_promote(record_id=looked_up.pk, expected_version=1, actor=reviewer_actor, note="Checked against the CRM.")
    said = write(
        subject=subject,
        content=f"Asked to be called {marks['content']}.",
        provenance={"source_type": "user_turn", **{k: provenance[k] for k in ("uri", "session_id", "turn_id")}},
    )
    summary = write(
        subject="digest/daily",
        content="Daily digest of the CRM lookups.",
        authority="agent",
        provenance={"source_type": "agent_inference", "session_id": provenance["session_id"]},
        derived_from=[str(looked_up.pk)],
    )
    LogEntry.objects.create(
        user=reviewer,
        content_type=ContentType.objects.get_for_model(MemoryRecord),
        object_id=str(said.pk),
        object_repr=str(said),
        action_flag=CHANGE,
        change_message="Looked at it.",
    )
    proposal = DedupProposal.objects.create(
        tenant=said.tenant,
        agent=said.agent,
        purpose=said.purpose,
        subject=subject,
        kind=said.kind,
        category="duplicate",
        method="token_similarity",
        similarity=0.7,
        keep=said,
        keep_version=1,
        signature=uuid.uuid4().hex * 2,
    )
    DedupProposalDrop.objects.create(proposal=proposal, record=looked_up, version=2)
    return [looked_up, said, summary]


@pytest.mark.django_db(transaction=True)
def test_after_propagation_a_full_dump_holds_no_canary_from_content_subject_or_provenance(
    tenant,
    write,
    reviewer_actor,
    reviewer,
):
    marks = {field: canary() for field in FIELDS}
    controls = {field: canary() for field in FIELDS}
    plant(write, reviewer_actor, reviewer, marks)
    kept = plant(write, reviewer_actor, reviewer, controls)  # another subject, same kinds of copies
    subject = f"customer/{marks['subject']}"

    before = full_dump()
    for field, mark in marks.items():
        # in the record and at least one history row: the dump sees both tables
        assert before.count(mark) >= 2, field

    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject=subject, reason="erasure request #123")
    assert all(mark in full_dump() for mark in marks.values())  # a logical forget alone leaves the copies
    call_command("run_job", "propagate_forgets", stdout=io.StringIO())

    after = full_dump()
    assert {field: after.count(mark) for field, mark in marks.items()} == dict.fromkeys(FIELDS, 0)
    # nor spelled in hex, as a store that tokenises text that way would keep it
    assert {field: after.count(mark.encode().hex()) for field, mark in marks.items()} == dict.fromkeys(FIELDS, 0)
    assert all(after.count(mark) >= 2 for mark in controls.values())  # other subjects keep everything
    assert subject_fingerprint(tenant.pk, subject) in after  # what the rows keep instead
    request.refresh_from_db()
    assert request.status == ForgetRequest.Status.COMPLETED and request.affected == 3
    assert MemoryRecord.objects.filter(pk__in=[r.pk for r in kept], status=Status.FORGOTTEN).count() == 0


@pytest.mark.django_db
def test_the_record_its_history_and_the_request_keep_only_the_fingerprint(tenant, write, reviewer_actor, reviewer, history):
    records = plant(write, reviewer_actor, reviewer, {field: canary() for field in FIELDS})
    subject = records[0].subject
    ids = [record.pk for record in records]
    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject=subject, reason="erasure")
    assert request.subject == subject  # as filed, until propagation completes

    run_job("propagate_forgets")

    fingerprint = subject_fingerprint(tenant.pk, subject)
    summary_fingerprint = subject_fingerprint(tenant.pk, "digest/daily")
    strings = ("content", "subject", *PROVENANCE_STRING_FIELDS)
    assert set(MemoryRecord.objects.filter(pk__in=ids).values_list(*strings)) == {
        ("", fingerprint, "", "", "", "", ""),
        ("", summary_fingerprint, "", "", "", "", ""),
    }
    rows = history.objects.filter(id__in=ids)
    assert rows.count() >= 6  # writes, promotion, forget transitions
    assert set(rows.values_list(*strings, "history_note")) == {
        ("", fingerprint, "", "", "", "", "", ""),
        ("", summary_fingerprint, "", "", "", "", "", ""),
    }
    request.refresh_from_db()
    assert (request.subject, request.reason, request.subject_erased) == (fingerprint, "erasure", True)
    assert list(ForgetTombstone.objects.filter(tenant=tenant).values_list("subject_fingerprint", flat=True)) == [fingerprint]
    assert DedupProposal.objects.get().subject == fingerprint
    assert LogEntry.objects.get().object_repr == "forgotten memory"
    receipt = request.receipts.get(artifact="forget_request")
    assert receipt.removed == 1 and subject not in receipt.note


@pytest.mark.django_db
def test_forgetting_the_same_subject_again_finds_the_fingerprinted_records(tenant, write, reviewer_actor):
    first_ids = {write(subject="customer/zed").pk, write(subject="customer/zed").pk}
    first = forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/zed")
    run_job("propagate_forgets")
    assert not MemoryRecord.objects.filter(subject="customer/zed").exists()

    again = forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/zed")
    assert again.affected == 0  # nothing left to forget...
    assert set(again.records.values_list("pk", flat=True)) == first_ids  # ...but it names what was forgotten
    later = write(subject="customer/zed")  # written after the first forget: forgotten by the next one
    third = forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/zed")
    assert third.affected == 1 and set(third.records.values_list("pk", flat=True)) == first_ids | {later.pk}

    run = run_job("propagate_forgets")
    assert run.counts["requests_completed"] == 2
    assert dict(again.receipts.values_list("artifact", "removed"))["record_content"] == 0  # already clean
    assert dict(third.receipts.values_list("artifact", "removed"))["record_content"] == 1
    fingerprint = subject_fingerprint(tenant.pk, "customer/zed")
    assert set(ForgetRequest.objects.values_list("subject", flat=True)) == {fingerprint}
    assert ForgetTombstone.objects.filter(tenant=tenant).count() == 1
    assert set(first.records.values_list("subject", flat=True)) == {fingerprint}


@pytest.mark.django_db
def test_a_forget_filed_by_fingerprint_finds_the_plain_subject(tenant, write, reviewer_actor):
    """The forget ledger keeps fingerprints only; re-applying it (say, after restoring a backup
    that predates the forget) must still find records stored under the plain subject."""
    restored = [write(subject="customer/zed"), write(subject="customer/zed")]
    other = write(subject="customer/amy")
    fingerprint = subject_fingerprint(tenant.pk, "customer/zed")
    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject=fingerprint, reason="ledger replay")
    assert request.affected == 2
    assert {r.status for r in MemoryRecord.objects.filter(pk__in=[r.pk for r in restored])} == {Status.FORGOTTEN}
    other.refresh_from_db()
    assert other.status == Status.ACTIVE
    run_job("propagate_forgets")
    assert set(MemoryRecord.objects.filter(status=Status.FORGOTTEN).values_list("subject", flat=True)) == {fingerprint}


@pytest.mark.django_db
def test_records_about_is_scoped_to_the_tenant(tenant, other_tenant, write, make_credential):
    write(subject="customer/zed")
    write(credential_=make_credential(other_tenant), subject="customer/zed")
    for subject in ("customer/zed", subject_fingerprint(tenant.pk, "customer/zed")):
        assert records_about(MemoryRecord.objects.all(), tenant_id=tenant.pk, subject=subject).count() == 1


def test_the_fingerprint_is_keyed_per_tenant_and_fits_the_subject_column(settings):
    settings.FORGET_FINGERPRINT_KEY = ""
    settings.SECRET_KEY = "a-secret-key-of-more-than-thirty-two-characters"
    fingerprint = subject_fingerprint(1, "customer/zed")
    assert is_subject_fingerprint(fingerprint) and fingerprint.startswith("forgotten:") and len(fingerprint) == 74
    assert subject_fingerprint(1, "customer/zed") == fingerprint  # stable: a later request matches
    assert subject_fingerprint(2, "customer/zed") != fingerprint  # per tenant
    assert subject_fingerprint(1, fingerprint) == fingerprint  # a fingerprint is its own
    unkeyed = {hashlib.sha256(f"{tenant}\x00customer/zed".encode()).hexdigest() for tenant in ("1", "acme")}
    assert fingerprint.removeprefix("forgotten:") not in unkeyed  # not guessable by hashing candidate subjects
    settings.SECRET_KEY = "another-secret-key-of-more-than-thirty-two-chars"
    assert subject_fingerprint(1, "customer/zed") != fingerprint  # derived from SECRET_KEY by default...
    settings.FORGET_FINGERPRINT_KEY = "a-dedicated-fingerprint-key"
    keyed = subject_fingerprint(1, "customer/zed")
    settings.SECRET_KEY = "a-secret-key-of-more-than-thirty-two-characters"
    assert subject_fingerprint(1, "customer/zed") == keyed  # ...or from FORGET_FINGERPRINT_KEY, which outlives a rotation
    assert not is_subject_fingerprint("forgotten:customer/zed") and not is_subject_fingerprint("customer/zed")


@pytest.mark.django_db
def test_the_reviewer_pages_show_an_erased_subject_once_propagated(tenant, write, reviewer_actor, reviewer, client):
    write(subject="customer/zed")
    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/zed")
    client.force_login(reviewer)
    detail = f"/review/forget/{request.pk}/"
    assert "customer/zed" in client.get(detail).text  # while propagating: as filed

    run_job("propagate_forgets")
    page, listing = client.get(detail).text, client.get("/review/forget/").text
    assert "customer/zed" not in page and "customer/zed" not in listing
    assert "Erased" in page and subject_fingerprint(tenant.pk, "customer/zed") in page
    assert "erased subject forgotten:" in listing


BEFORE_MIGRATION = ("governance", "0002_golden_recall_sets")


@pytest.mark.django_db(transaction=True)
def test_the_migration_keys_old_requests_and_reopens_them_for_the_new_scrub(tenant, write, credential, history):
    """Requests filed before: the agent is found from the label, the unkeyed tombstone becomes the
    keyed one, and a completed request is reopened so that the next run scrubs what the old
    propagation left (provenance, the subject)."""
    record = write(subject="customer/zed", provenance={"uri": "https://crm.example.com/zed"})
    MemoryRecord.objects.filter(pk=record.pk).update(status=Status.FORGOTTEN, content="")  # as the old code left it
    executor = MigrationExecutor(connection)
    executor.migrate([BEFORE_MIGRATION])
    try:
        old = executor.loader.project_state([BEFORE_MIGRATION]).apps
        request = old.get_model("governance", "ForgetRequest").objects.create(
            tenant_id=tenant.pk,
            subject="customer/zed",
            requested_by="agent:acme/support-bot",
            status="completed",
            completed_at=timezone.now(),
            affected=1,
        )
        request.records.add(record.pk)
        unkeyed = hashlib.sha256(b"acme\x00customer/zed").hexdigest()
        old.get_model("governance", "ForgetTombstone").objects.create(
            tenant_id=tenant.pk, subject_fingerprint=unkeyed, forgotten_at=timezone.now()
        )
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())

    migrated = ForgetRequest.objects.get(pk=request.pk)
    assert (migrated.status, migrated.completed_at, migrated.requested_by_agent) == ("propagating", None, credential.agent)
    assert migrated.requested_by_credential is None  # not known: reviewers still read it, the agent no more
    fingerprint = subject_fingerprint(tenant.pk, "customer/zed")
    assert list(ForgetTombstone.objects.values_list("subject_fingerprint", flat=True)) == [fingerprint]

    run_job("propagate_forgets")
    record.refresh_from_db()
    assert (record.subject, record.source_uri, record.session_id) == (fingerprint, "", "")
    assert set(history.objects.filter(id=record.pk).values_list("subject", "source_uri")) == {(fingerprint, "")}
    migrated.refresh_from_db()
    assert (migrated.status, migrated.subject) == ("completed", fingerprint)
