"""Records pruned since, in as-of reads: the prune job leaves a content-free trace of each record
it deletes (governance.PrunedRecord), so a reviewer asking about the past learns that a record was
pruned, and when, instead of a plain "unknown"."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from governance.forget.jobs import propagate_forgets
from governance.forget.services import forget_request_create
from governance.models import ForgetTombstone, PrunedRecord
from governance.retention.prune import prune
from governance.retention.pruned_trace import TRACE_MIGRATION
from memory.fingerprints import subject_fingerprint
from memory.models import MemoryKind, MemoryRecord
from memory.services import memory_promote, memory_reject, memory_retire, memory_supersede
from tests.api.conftest import MEMORIES, RECALL, UNTRUSTED, assert_problem
from tests.api.test_asof import iso, tick

pytestmark = pytest.mark.django_db

ASK = {"purpose": "support", "query": "invoices", "tenant": "acme", "agent": "support-bot"}


def purge_time() -> timedelta:
    return MemoryKind.objects.get(name="preference").purge_after + timedelta(days=1)


def recall_as_of(client, moment, **overrides):
    response = client.post(RECALL, {**ASK, "as_of": iso(moment), **overrides}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def test_a_pruned_record_read_as_of_any_moment_is_410_with_when_it_was_pruned(write, reviewer_client, reviewer_actor):
    before = tick()
    record = write(content="Acme wants invoices by email.")
    at_active = tick()
    memory_retire(record_id=record.pk, expected_version=1, actor=reviewer_actor)
    pruned_at = timezone.now() + purge_time()
    assert prune(now=pruned_at, batch_size=100)["traces_written"] == 1
    assert not MemoryRecord.objects.filter(pk=record.pk).exists()
    assert not MemoryRecord.history.model.objects.filter(id=record.pk).exists()  # nothing else names it

    for moment in (at_active, tick()):
        body = assert_problem(reviewer_client.get(f"{MEMORIES}{record.pk}/", {"as_of": iso(moment)}), 410)
        assert body["type"].endswith(":pruned") and body["pruned_at"] == iso(pruned_at)
        assert f"{pruned_at:%Y-%m-%d}" in body["detail"] and "invoices" not in str(body)
    body = assert_problem(reviewer_client.get(f"{MEMORIES}{record.pk}/", {"as_of": iso(before)}), 404)
    assert body["type"].endswith(":not_yet") and "pruned" in body["detail"]


def test_the_trace_of_another_tenants_pruned_record_stays_hidden(write, reviewer_actor, client_for, make_reviewer, other_tenant):
    record = write()
    at_active = tick()
    memory_retire(record_id=record.pk, expected_version=1, actor=reviewer_actor)
    prune(now=timezone.now() + purge_time(), batch_size=100)
    outsider = client_for(make_reviewer(other_tenant, username="olga"))
    body = assert_problem(outsider.get(f"{MEMORIES}{record.pk}/", {"as_of": iso(at_active)}), 404)
    assert "pruned_at" not in body


def test_as_of_recall_lists_the_scopes_records_pruned_since_under_pruned(
    write, reviewer_client, reviewer_actor, make_credential, tenant
):
    billing_token = make_credential(tenant, purposes=("support", "billing"))
    kept = write(content="Acme wants invoices by email.")
    retired = write(content="Acme wants invoices by fax.")
    corrected = write(content="Acme wants invoices on Fridays.")
    elsewhere = write(content="Globex wants invoices by post.", subject="customer/globex")
    other_purpose = write(billing_token, content="Acme invoices go to billing.", purpose="billing")
    never_active = write(content="Acme invoices are fake.", **UNTRUSTED)
    moment = tick()
    memory_retire(record_id=retired.pk, expected_version=1, actor=reviewer_actor)
    memory_supersede(record_id=corrected.pk, expected_version=1, actor=reviewer_actor, content="Acme: invoices Mondays.")
    for record in (elsewhere, other_purpose):
        memory_retire(record_id=record.pk, expected_version=1, actor=reviewer_actor)
    memory_reject(record_id=never_active.pk, expected_version=1, actor=reviewer_actor)
    later_added = write(content="Acme wants invoices twice.")
    memory_retire(record_id=later_added.pk, expected_version=1, actor=reviewer_actor)  # active only after the moment
    pruned_at = timezone.now() + purge_time()
    counts = prune(now=pruned_at, batch_size=2)  # several chunks
    assert counts["traces_written"] == 6 and PrunedRecord.objects.count() == 6

    body = recall_as_of(reviewer_client, moment)
    assert [item["id"] for item in body["items"]] == [str(kept.pk)]
    expected = sorted([str(retired.pk), str(corrected.pk), str(elsewhere.pk)])
    assert sorted(entry["id"] for entry in body["as_of"]["pruned"]) == expected
    assert all(entry == {"id": entry["id"], "pruned_at": iso(pruned_at)} for entry in body["as_of"]["pruned"])
    assert body["as_of"]["may_miss_pruned"] is False
    assert any("3 record(s)" in note and "pruned since" in note for note in body["as_of"]["notes"])

    by_subject = recall_as_of(reviewer_client, moment, subject="customer/globex")
    assert [entry["id"] for entry in by_subject["as_of"]["pruned"]] == [str(elsewhere.pk)]
    by_kind = recall_as_of(reviewer_client, moment, kinds=["semantic"])
    assert by_kind["as_of"]["pruned"] == []
    billing = recall_as_of(reviewer_client, moment, purpose="billing")
    assert [entry["id"] for entry in billing["as_of"]["pruned"]] == [str(other_purpose.pk)]
    before_any = recall_as_of(reviewer_client, moment - timedelta(hours=1))
    assert before_any["as_of"]["pruned"] == []


def test_the_trace_keeps_no_content_no_subject_and_no_provenance(write, reviewer_actor, tenant):
    secret, subject = "Dana's door code is 4711.", "customer/dana"
    record = write(content=secret, subject=subject, **UNTRUSTED)
    memory_promote(record_id=record.pk, expected_version=1, actor=reviewer_actor)
    active_from = MemoryRecord.history.model.objects.get(id=record.pk, status="active").history_date
    correction = memory_supersede(record_id=record.pk, expected_version=2, actor=reviewer_actor, content="Changed.")
    left = MemoryRecord.history.model.objects.get(id=record.pk, status="superseded").history_date
    prune(now=timezone.now() + purge_time(), batch_size=100)

    trace = PrunedRecord.objects.get(pk=record.pk)
    assert (trace.status, trace.active_from, trace.active_until) == ("superseded", active_from, left)
    assert trace.subject_fingerprint == subject_fingerprint(tenant.pk, subject)
    stored = " ".join(str(value) for value in PrunedRecord.objects.filter(pk=record.pk).values().get().values())
    for personal in (secret, "4711", subject, "dana", "chat://", "s-1"):
        assert personal not in stored.lower()
    columns = {field.name for field in PrunedRecord._meta.get_fields()}
    assert not columns & {
        "content",
        "content_hash",
        "subject",
        "source_uri",
        "session_id",
        "turn_id",
        "tool",
        "source_version",
        "history_note",
    }
    assert not PrunedRecord.objects.filter(pk=correction.pk).exists()  # only what was pruned


def test_a_forget_after_pruning_finds_the_trace_under_the_same_fingerprint_and_shows_no_subject(
    write, reviewer_client, reviewer_actor, tenant
):
    record = write(content="Dana wants invoices by pigeon.", subject="customer/dana")
    moment = tick()
    memory_retire(record_id=record.pk, expected_version=1, actor=reviewer_actor)
    prune(now=timezone.now() + purge_time(), batch_size=100)
    forget = forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/dana")
    propagate_forgets(now=timezone.now(), batch_size=100)

    receipt = forget.receipts.get(artifact="pruned_trace")
    assert receipt.removed == 0 and "fingerprint" in receipt.note
    tombstone = ForgetTombstone.objects.get(tenant=tenant)
    assert PrunedRecord.objects.get(pk=record.pk).subject_fingerprint == tombstone.subject_fingerprint
    response = reviewer_client.post(RECALL, {**ASK, "as_of": iso(moment), "subject": "customer/dana"}, format="json")
    assert [entry["id"] for entry in response.json()["as_of"]["pruned"]] == [str(record.pk)]
    assert "pigeon" not in response.content.decode() and "dana" not in response.content.decode().lower()


def test_the_prune_job_deletes_traces_past_their_retention(write, reviewer_actor, settings):
    settings.PRUNED_RECORD_TRACE_RETENTION_DAYS = 10
    record = write()
    memory_retire(record_id=record.pk, expected_version=1, actor=reviewer_actor)
    pruned_at = timezone.now() + purge_time()
    prune(now=pruned_at, batch_size=100)
    assert prune(now=pruned_at + timedelta(days=9), batch_size=100)["traces_deleted"] == 0
    assert PrunedRecord.objects.filter(pk=record.pk).exists()
    assert prune(now=pruned_at + timedelta(days=11), batch_size=100)["traces_deleted"] == 1
    assert not PrunedRecord.objects.exists()


def test_may_miss_pruned_is_left_for_prunes_before_the_trace_covered(write, reviewer_client, settings):
    write(content="Acme wants invoices by email.")
    shortest = min(MemoryKind.objects.values_list("purge_after", flat=True))
    long_ago = timezone.now() - shortest - timedelta(days=1)
    applied = MigrationRecorder.Migration.objects.filter(app=TRACE_MIGRATION[0], name=TRACE_MIGRATION[1])
    assert recall_as_of(reviewer_client, long_ago)["as_of"]["may_miss_pruned"] is True  # trace began just now

    applied.update(applied=timezone.now() - timedelta(days=1000))  # the trace has been kept for long
    assert recall_as_of(reviewer_client, long_ago)["as_of"]["may_miss_pruned"] is False
    settings.PRUNED_RECORD_TRACE_RETENTION_DAYS = 1  # ... but traces this old are deleted
    body = recall_as_of(reviewer_client, long_ago)
    assert body["as_of"]["may_miss_pruned"] is True and any("no trace kept" in n for n in body["as_of"]["notes"])

    applied.delete()  # unknown start: as cautious as before the trace existed
    settings.PRUNED_RECORD_TRACE_RETENTION_DAYS = 400
    assert recall_as_of(reviewer_client, long_ago)["as_of"]["may_miss_pruned"] is True


def test_as_of_endpoints_count_the_same_queries_however_many_records_were_pruned(write, reviewer_client, reviewer_actor):
    def counted(n_pruned):
        PrunedRecord.objects.all().delete()
        records = [write(content=f"Acme invoice note {i}.") for i in range(n_pruned)]
        moment = tick()
        for record in records:
            memory_retire(record_id=record.pk, expected_version=1, actor=reviewer_actor)
        prune(now=timezone.now() + purge_time(), batch_size=100)
        with CaptureQueriesContext(connection) as gone_queries:
            assert reviewer_client.get(f"{MEMORIES}{records[0].pk}/", {"as_of": iso(moment)}).status_code == 410
        with CaptureQueriesContext(connection) as recall_queries:
            assert len(recall_as_of(reviewer_client, moment)["as_of"]["pruned"]) == n_pruned
        return len(gone_queries), len(recall_queries)

    few, many = counted(2), counted(20)
    assert few == many and many[0] <= 10 and many[1] <= 25, many


def test_the_recall_as_of_page_says_records_were_pruned_since(client, reviewer, write, reviewer_actor, credential):
    record = write(content="Acme wants invoices by fax.")
    moment = tick()
    memory_retire(record_id=record.pk, expected_version=1, actor=reviewer_actor)
    prune(now=timezone.now() + purge_time(), batch_size=100)
    client.force_login(reviewer)
    page = client.get(
        "/review/recall-as-of/",
        {
            "query": "invoices",
            "agent": credential.agent.pk,
            "purpose": "support",
            "as_of": moment.strftime("%Y-%m-%dT%H:%M:%S.%f"),
        },
    )
    assert page.status_code == 200
    assert [entry.id for entry in page.context["reconstructed"].pruned] == [record.pk]
    assert "1 record(s) of this scope that were active then have been pruned since" in page.content.decode()


def test_a_record_that_expired_before_it_was_retired_counts_as_active_only_until_its_expiry(
    write, reviewer_client, reviewer_actor
):
    record = write(content="Acme wants invoices by fax.")
    history = MemoryRecord.history.model.objects.filter(id=record.pk)
    expired_at = history.get().history_date + timedelta(microseconds=10)
    history.update(expires_at=expired_at)  # test setup: recall stopped returning it then
    after_expiry = tick()
    memory_retire(record_id=record.pk, expected_version=1, actor=reviewer_actor)
    prune(now=timezone.now() + purge_time(), batch_size=100)

    assert PrunedRecord.objects.get(pk=record.pk).active_until == expired_at
    assert recall_as_of(reviewer_client, after_expiry)["as_of"]["pruned"] == []


def test_admins_see_the_trace_read_only_in_a_constant_number_of_queries(admin_client, write, reviewer_actor):
    def prune_some(count: int) -> None:
        for record in [write(content=f"Confidential remark {i}") for i in range(count)]:
            memory_retire(record_id=record.pk, expected_version=1, actor=reviewer_actor)
        prune(now=timezone.now() + purge_time(), batch_size=100)

    def changelist_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            page = admin_client.get("/admin/governance/prunedrecord/")
        assert page.status_code == 200 and "Confidential remark" not in page.content.decode()
        return len(queries)

    prune_some(2)
    few = changelist_queries()
    prune_some(10)
    assert changelist_queries() == few and PrunedRecord.objects.count() == 12
    trace = PrunedRecord.objects.first()
    assert admin_client.get(f"/admin/governance/prunedrecord/{trace.pk}/change/").status_code == 200
    assert admin_client.get("/admin/governance/prunedrecord/add/").status_code == 403
