"""Forget propagation: every copy of a forgotten subject's content leaves every artifact, with a
receipt per artifact; proven on a full dump of the database."""

import io
import logging
import subprocess
import uuid
from datetime import timedelta

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from governance.forget import artifacts as forgetting
from governance.forget.artifacts import FORGOTTEN_REPR, PROVENANCE_STRING_FIELDS, registered_artifacts, uncovered_references
from governance.forget.propagation import propagate_forget_request
from governance.forget.services import forget_request_create
from governance.jobs import run_job
from governance.models import DedupProposal, DedupProposalDrop, ForgetRequest, JobRun, PropagationReceipt
from memory.fingerprints import subject_fingerprint
from memory.models import IdempotencyKey, MemoryRecord, Status
from memory.services import memory_promote, memory_supersede

SUBJECT = "customer/erin"
BUILT_IN_ARTIFACTS = [
    "search_indexes",
    "record_content",
    "history_rows",
    "idempotency_keys",
    "dedup_proposals",
    "cache",
    "admin_log",
    "golden_questions",
    "revocation_sources",
    "pruned_trace",
    "forget_ledger",
    "disk",
    "external_backups",
    "forget_request",
]


def canary() -> str:
    # letters and digits only, ending in a digit: PostgreSQL's parser keeps it as one unstemmed
    # lexeme, so a copy left in a search vector would show up verbatim in the dump too
    return f"zq{uuid.uuid4().hex}7"


@pytest.fixture
def isolated_registry(monkeypatch):
    monkeypatch.setattr(forgetting, "_ARTIFACTS", list(forgetting._ARTIFACTS))


def seed_subject(write, reviewer_actor, reviewer, secret: str) -> dict[str, MemoryRecord]:
    """The subject's memories in every place content is copied to: a record written with an
    Idempotency-Key, a quarantined web claim promoted with a note quoting it, a reviewer's
    correction, a summary derived from it (another subject), an admin log entry and a dedup
    decision note."""
    kept = write(subject=SUBJECT, content=f"Prefers email, says {secret}.", idempotency_key=f"key-{secret}")
    claim = write(
        subject=SUBJECT,
        content=f"Web page claims {secret}.",
        authority="third_party",
        provenance={"source_type": "web_page", "uri": "https://example.com/erin"},
    )
    memory_promote(record_id=claim.pk, expected_version=1, actor=reviewer_actor, note=f"Checked the page: {secret}")
    corrected = memory_supersede(
        record_id=claim.pk, expected_version=2, actor=reviewer_actor, content=f"Corrected: {secret} only on weekdays."
    )
    summary = write(
        subject="digest/weekly",
        content=f"Weekly digest: {secret}.",
        authority="agent",
        provenance={"source_type": "agent_inference"},
        derived_from=[str(kept.pk)],
    )
    LogEntry.objects.create(
        user=reviewer,
        content_type=ContentType.objects.get_for_model(MemoryRecord),
        object_id=str(kept.pk),
        object_repr=str(kept),
        action_flag=CHANGE,
        change_message=f"Looked at {secret}",
    )
    proposal = DedupProposal.objects.create(
        tenant=kept.tenant,
        agent=kept.agent,
        purpose=kept.purpose,
        subject=SUBJECT,
        kind=kept.kind,
        category="duplicate",
        method="token_similarity",
        similarity=0.8,
        keep=corrected,
        keep_version=1,
        signature=uuid.uuid4().hex * 2,
        status=DedupProposal.Status.REJECTED,
        decision_note=f"Not the same: one says {secret}",
    )
    DedupProposalDrop.objects.create(proposal=proposal, record=kept, version=1)
    return {"kept": kept, "claim": claim, "corrected": corrected, "summary": summary}


def full_dump() -> str:
    """Every table of the test database, history included: pg_dump on PostgreSQL, iterdump on SQLite."""
    params = connection.settings_dict
    if connection.vendor == "postgresql":
        env = {"PGPASSWORD": params.get("PASSWORD") or "", "PATH": "/usr/bin:/bin"}
        return subprocess.run(
            [
                "pg_dump",
                "--no-owner",
                "-h",
                params["HOST"] or "127.0.0.1",
                "-p",
                str(params["PORT"] or 5432),
                "-U",
                params["USER"],
                params["NAME"],
            ],
            env=env,
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
    connection.ensure_connection()
    return "\n".join(connection.connection.iterdump())


@pytest.mark.django_db(transaction=True)
def test_after_propagation_a_full_database_dump_holds_no_copy_of_the_forgotten_content(
    tenant,
    write,
    reviewer_actor,
    reviewer,
    caplog,
):
    secret, control = canary(), canary()
    seed_subject(write, reviewer_actor, reviewer, secret)
    write(subject="customer/frank", content=f"Unrelated: {control}.")
    before = full_dump()
    assert before.count(secret) >= 8 and control in before  # the dump does see content, history included

    with caplog.at_level(logging.DEBUG):
        request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject=SUBJECT, reason="erasure request #123")
        call_command("run_job", "propagate_forgets", stdout=io.StringIO())

    after = full_dump()
    assert secret not in after
    assert control in after  # other subjects keep their content
    request.refresh_from_db()
    assert request.status == ForgetRequest.Status.COMPLETED and request.completed_at is not None
    assert (request.affected, request.lineage_affected) == (4, 1)
    receipts = list(request.receipts.order_by("id"))
    assert [receipt.artifact for receipt in receipts] == [artifact.name for artifact in registered_artifacts()]
    assert set(BUILT_IN_ARTIFACTS) <= {receipt.artifact for receipt in receipts}
    assert all(receipt.note for receipt in receipts)
    # every artifact is done but the disk, whose own job completes its receipt once it verified the rewrite
    assert [receipt.artifact for receipt in receipts if receipt.completed_at is None] == ["disk"]
    assert not any(secret in " ".join(map(str, vars(record).values())) for record in caplog.records)


@pytest.mark.django_db
def test_each_artifact_is_purged_and_its_receipt_counts_what_was_removed(
    tenant, write, reviewer_actor, reviewer, history, settings
):
    settings.MEMORY_BACKUP_RETENTION_DAYS = 35
    secret = canary()
    records = seed_subject(write, reviewer_actor, reviewer, secret)
    untouched = write(subject="customer/frank", content="Unrelated.", idempotency_key="other-key")
    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject=SUBJECT, reason="erasure")
    ids = [record.pk for record in records.values()]
    hashes = set(MemoryRecord.objects.filter(pk__in=ids).values_list("content_hash", flat=True))
    assert all(hashes)
    history_rows = history.objects.filter(id__in=ids).count()

    run = run_job("propagate_forgets", trigger="run_job")

    assert run.status == JobRun.Status.SUCCEEDED
    assert run.counts["requests_completed"] == 1 and run.counts["records"] == 4
    removed = dict(request.receipts.values_list("artifact", "removed"))
    assert removed == {
        "search_indexes": 0,
        "record_content": 4,
        "history_rows": history_rows,
        "idempotency_keys": 1,
        "dedup_proposals": 1,
        "cache": 0,
        "admin_log": 1,
        "golden_questions": 0,
        "revocation_sources": 0,
        "pruned_trace": 0,
        "forget_ledger": 0,
        "disk": 0,
        "external_backups": 0,
        "forget_request": 1,
    }
    assert run.counts["removed_history_rows"] == history_rows

    fingerprints = {subject_fingerprint(tenant.pk, SUBJECT), subject_fingerprint(tenant.pk, "digest/weekly")}
    for record in MemoryRecord.objects.filter(pk__in=ids):
        assert (record.status, record.content, record.content_hash) == (Status.FORGOTTEN, "", "")
        assert record.subject in fingerprints
        assert [getattr(record, field) for field in PROVENANCE_STRING_FIELDS] == [""] * 5
    rows = history.objects.filter(id__in=ids)
    assert set(rows.values_list("content", "content_hash", "history_note", *PROVENANCE_STRING_FIELDS)) == {("",) * 8}
    # the content's sha256 (which confirms a guess of it) is nowhere in the records or their history
    assert not MemoryRecord.objects.filter(content_hash__in=hashes).exists()
    assert not history.objects.filter(content_hash__in=hashes).exists()
    assert set(rows.values_list("subject", flat=True)) == fingerprints
    assert "review.promote" in set(rows.values_list("history_change_reason", flat=True))  # the audit trail stays
    assert not IdempotencyKey.objects.filter(record_id__in=ids).exists()
    assert IdempotencyKey.objects.filter(record=untouched).exists()
    entry = LogEntry.objects.get(object_id=str(records["kept"].pk))
    assert (entry.object_repr, entry.change_message, entry.action_flag) == (FORGOTTEN_REPR, "", CHANGE)
    assert DedupProposal.objects.values_list("decision_note", "subject", "status").get() == (
        "",
        subject_fingerprint(tenant.pk, SUBJECT),
        DedupProposal.Status.REJECTED,
    )
    request.refresh_from_db()
    assert request.subject == subject_fingerprint(tenant.pk, SUBJECT) and request.reason == "erasure"
    untouched.refresh_from_db()
    assert (untouched.content, untouched.subject, untouched.session_id) == ("Unrelated.", "customer/frank", "s-1")
    assert (
        history.objects.filter(id=untouched.pk).values_list("subject", "source_uri").get()
        == ("customer/frank", untouched.source_uri)
        and untouched.source_uri
    )
    backups = request.receipts.get(artifact="external_backups")
    ages_out = (request.requested_at + timedelta(days=35)).strftime("%Y-%m-%d")
    assert f"age out by {ages_out} (MEMORY_BACKUP_RETENTION_DAYS=35)" in backups.note
    assert "nothing cached" in request.receipts.get(artifact="cache").note.lower()


@pytest.mark.django_db
def test_running_propagation_again_does_no_harm(tenant, write, reviewer_actor):
    write(subject=SUBJECT)
    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject=SUBJECT)
    first = run_job("propagate_forgets")
    receipts = list(request.receipts.values_list("artifact", "removed", "completed_at"))
    second = run_job("propagate_forgets")
    assert (first.counts["requests_completed"], second.counts["requests_completed"]) == (1, 0)
    assert list(request.receipts.values_list("artifact", "removed", "completed_at")) == receipts
    request.refresh_from_db()
    assert propagate_forget_request(request).completed is False  # a completed request is left alone


def _copies(record: MemoryRecord, count: int) -> list[MemoryRecord]:
    """`count` plain rows like `record` (a factory: writing them one by one would take long)."""
    fields = [f.attname for f in MemoryRecord._meta.concrete_fields if f.attname != "id"]
    return MemoryRecord.objects.bulk_create(
        [MemoryRecord(id=uuid.uuid4(), **{name: getattr(record, name) for name in fields}) for _ in range(count)]
    )


@pytest.mark.django_db
def test_forgetting_more_records_than_a_batch_is_set_based_with_one_history_row_each(tenant, write, reviewer_actor):
    few = write(subject="customer/few")
    _copies(few, 1)
    many = write(subject=SUBJECT, content="Lives at 1 Main Street.")
    ids = {many.pk, *(copy.pk for copy in _copies(many, 1100))}
    with CaptureQueriesContext(connection) as small:
        forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/few")
    with CaptureQueriesContext(connection) as large:
        request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject=SUBJECT, reason="erasure #7")
    if connection.vendor == "postgresql":  # SQLite binds a parameter per id, so it moves them in chunks
        assert len(large) == len(small)
    assert (request.affected, request.records.count()) == (1101, 1101)
    assert not MemoryRecord.objects.filter(pk__in=ids).exclude(status=Status.FORGOTTEN).exists()
    forgets = MemoryRecord.history.filter(id__in=ids, history_change_reason="review.forget", history_note="erasure #7")
    assert forgets.count() == forgets.values("id").distinct().count() == 1101
    run_job("propagate_forgets", batch_size=500)
    assert not MemoryRecord.objects.filter(pk__in=ids).exclude(content="").exists()
    assert not MemoryRecord.history.filter(id__in=ids).exclude(content="").exists()
    assert not MemoryRecord.history.filter(id__in=ids, subject=SUBJECT).exists()
    assert dict(request.receipts.values_list("artifact", "removed"))["record_content"] == 1101


@pytest.mark.django_db
def test_a_request_with_nothing_to_forget_still_completes_with_every_receipt(tenant, reviewer_actor):
    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/nobody")
    run_job("propagate_forgets")
    request.refresh_from_db()
    assert request.status == ForgetRequest.Status.COMPLETED
    # nothing anywhere, but the subject the request was filed with is still personal data
    assert dict(request.receipts.values_list("artifact", "removed")) == {name: 0 for name in BUILT_IN_ARTIFACTS} | {
        "forget_request": 1
    }
    assert request.subject == subject_fingerprint(tenant.pk, "customer/nobody")


class FlakyStore:
    """A derived store whose purge fails once, on its second chunk."""

    name = "flaky_store"
    covers = ()

    def __init__(self):
        self.calls = 0

    def purge(self, request, record_ids):
        self.calls += 1
        if self.calls == 2:
            raise ConnectionError("store unreachable")
        return len(record_ids), "Flaky store entries removed."


@pytest.mark.django_db
def test_a_failing_artifact_leaves_the_request_open_and_the_next_run_resumes_without_double_counting(
    tenant,
    write,
    reviewer_actor,
    isolated_registry,
):
    for n in range(5):
        write(subject=SUBJECT, content=f"Fact {n}.")
    forgetting.register_artifact(FlakyStore())
    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject=SUBJECT)

    failed = run_job("propagate_forgets", batch_size=2)
    request.refresh_from_db()
    assert failed.status == JobRun.Status.FAILED and failed.counts["requests_failed"] == 1
    assert failed.errors == [f"forget request {request.pk}: ConnectionError: store unreachable"]
    assert request.status == ForgetRequest.Status.PROPAGATING
    assert dict(request.receipts.values_list("artifact", "removed"))["record_content"] == 2  # the first chunk only

    resumed = run_job("propagate_forgets", batch_size=2)
    request.refresh_from_db()
    assert resumed.status == JobRun.Status.SUCCEEDED and request.status == ForgetRequest.Status.COMPLETED
    removed = dict(request.receipts.values_list("artifact", "removed"))
    assert (removed["record_content"], removed["flaky_store"]) == (5, 2 + 5)  # the store's first chunk was redone
    assert MemoryRecord.objects.filter(subject=SUBJECT).exclude(content="").count() == 0


@pytest.mark.django_db
def test_a_new_derived_store_registers_its_purge_and_gets_a_receipt(tenant, write, reviewer_actor, isolated_registry):
    purged: list = []

    class EmbeddingStore:
        name = "embeddings"
        covers = ()

        def purge(self, request, record_ids):
            purged.extend(record_ids)
            return len(record_ids), "Embedding vectors deleted."

    forgetting.register_artifact(EmbeddingStore(), before="external_backups")
    record = write(subject=SUBJECT)
    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject=SUBJECT)
    run_job("propagate_forgets")
    assert purged == [record.pk]
    names = list(request.receipts.order_by("id").values_list("artifact", flat=True))
    assert names[-3:] == ["embeddings", "external_backups", "forget_request"]  # the request's own subject: last
    receipt = PropagationReceipt.objects.get(forget_request=request, artifact="embeddings")
    assert (receipt.removed, receipt.note) == (1, "Embedding vectors deleted.")


def test_registering_something_that_is_not_an_artifact_is_refused(isolated_registry):
    with pytest.raises(TypeError):
        forgetting.register_artifact(object())


@pytest.mark.django_db
def test_every_model_that_references_records_is_purged_or_declared_content_free():
    assert uncovered_references() == set()
    without_idempotency = [a for a in registered_artifacts() if a.name != "idempotency_keys"]
    assert uncovered_references(without_idempotency) == {"memory.IdempotencyKey"}
    assert "governance.DedupProposal" in {label for a in registered_artifacts() for label in a.covers}
    assert "memory.HistoricalMemoryRecord" in forgetting.models_referencing_records()
