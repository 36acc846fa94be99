"""The prune job: physical deletion of what retention no longer keeps, with history and links."""

from datetime import timedelta

import pytest
from django.utils import timezone

from governance.forget.services import forget_request_create
from governance.jobs import run_job
from governance.models import DedupProposal, DedupProposalDrop, ForgetRequest, ForgetTombstone, JobRun
from governance.retention.prune import prune
from memory.fingerprints import subject_fingerprint
from memory.models import IdempotencyKey, MemoryKind, MemoryRecord, Status

pytestmark = pytest.mark.django_db

DAY = timedelta(days=1)


def age(ids, days: float) -> None:
    """Pretend the records entered their status `days` ago (test setup, not a transition)."""
    MemoryRecord.objects.filter(pk__in=ids).update(status_changed_at=timezone.now() - days * DAY)


def test_records_past_their_kinds_purge_age_are_deleted_with_their_history(make_records, history):
    # preference: purge after 30 days; working_note: after 7 days
    old = {
        status: make_records(2, status=status, age=40 * DAY) for status in (Status.EXPIRED, Status.SUPERSEDED, Status.REJECTED)
    }
    young = make_records(2, status=Status.EXPIRED, age=20 * DAY)
    old_note = make_records(1, status=Status.EXPIRED, kind="working_note", age=8 * DAY)
    active = make_records(1, status=Status.ACTIVE, age=400 * DAY, expired=False)
    pruned_ids = [pk for ids in old.values() for pk in ids] + old_note

    run = run_job("prune", batch_size=2)

    assert run.status == JobRun.Status.SUCCEEDED
    assert (run.counts["pruned_expired"], run.counts["pruned_superseded"], run.counts["pruned_rejected"]) == (3, 2, 2)
    assert run.counts["pruned_forgotten"] == 0 and run.counts["history_rows_deleted"] == 7
    assert not MemoryRecord.objects.filter(pk__in=pruned_ids).exists()
    assert not history.objects.filter(id__in=pruned_ids).exists()  # no '-' deletion rows either
    assert MemoryRecord.objects.filter(pk__in=young + active).count() == 3
    assert history.objects.filter(id__in=young + active).count() == 3


def test_pruning_respects_a_purge_age_edited_by_an_admin(make_records):
    ids = make_records(1, status=Status.EXPIRED, age=10 * DAY)
    assert prune(now=timezone.now(), batch_size=10)["pruned_expired"] == 0
    MemoryKind.objects.filter(name="preference").update(purge_after=5 * DAY)
    assert prune(now=timezone.now(), batch_size=10)["pruned_expired"] == 1
    assert not MemoryRecord.objects.filter(pk__in=ids).exists()


def test_links_to_pruned_records_are_removed_or_cleared_and_the_rest_survives(write, credential, reviewer_actor, history):
    source = write(content="Source fact.", idempotency_key="k-source")
    summary = write(
        content="Summary.", authority="agent", provenance={"source_type": "agent_inference"}, derived_from=[str(source.pk)]
    )
    successor = write(content="Newer fact.", supersedes=str(source.pk), supersedes_version=1)
    source.refresh_from_db()
    assert source.status == Status.SUPERSEDED
    proposal = DedupProposal.objects.create(
        tenant=source.tenant,
        agent=source.agent,
        purpose="support",
        subject=source.subject,
        kind=source.kind,
        category="duplicate",
        method="exact_hash",
        similarity=1.0,
        keep=source,
        keep_version=2,
        signature="s" * 64,
    )
    other = DedupProposal.objects.create(
        tenant=source.tenant,
        agent=source.agent,
        purpose="support",
        subject=source.subject,
        kind=source.kind,
        category="duplicate",
        method="exact_hash",
        similarity=1.0,
        keep=successor,
        keep_version=1,
        signature="t" * 64,
    )
    DedupProposalDrop.objects.create(proposal=other, record=source, version=2)
    age([source.pk], 40)

    counts = prune(now=timezone.now(), batch_size=100)

    assert counts["pruned_superseded"] == 1
    assert not MemoryRecord.objects.filter(pk=source.pk).exists()
    assert not history.objects.filter(id=source.pk).exists()
    summary.refresh_from_db()
    successor.refresh_from_db()
    assert list(summary.derived_from.all()) == [] and summary.status == Status.QUARANTINED
    assert successor.supersedes_id is None and successor.status == Status.ACTIVE
    # the key lost its record, and its fingerprint hashes the old body: it goes too
    assert not IdempotencyKey.objects.filter(key="k-source").exists() and counts["idempotency_keys_deleted"] == 1
    assert not DedupProposal.objects.filter(pk=proposal.pk).exists()
    assert DedupProposal.objects.filter(pk=other.pk).exists() and not other.drops.exists()
    assert counts["references_deleted"] == 3 and counts["references_cleared"] == 2


def test_forgotten_records_wait_for_propagation_then_go_and_the_tombstone_stays(tenant, write, reviewer_actor, history):
    records = [write(subject="customer/erin") for _ in range(2)]
    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/erin")
    ids = [record.pk for record in records]
    age(ids, 40)

    assert prune(now=timezone.now(), batch_size=10)["pruned_forgotten"] == 0  # propagation still needs the links
    assert MemoryRecord.objects.filter(pk__in=ids).count() == 2

    run_job("propagate_forgets")
    assert prune(now=timezone.now(), batch_size=10)["pruned_forgotten"] == 2
    assert not MemoryRecord.objects.filter(pk__in=ids).exists() and not history.objects.filter(id__in=ids).exists()
    request.refresh_from_db()
    assert request.status == ForgetRequest.Status.COMPLETED and request.records.count() == 0
    assert request.receipts.count() > 0 and request.affected == 2  # the request and its receipts remain
    assert ForgetTombstone.objects.filter(
        tenant=tenant, subject_fingerprint=subject_fingerprint(tenant.pk, "customer/erin")
    ).exists()


def test_old_job_runs_are_trimmed_but_each_jobs_last_success_is_kept(settings):
    settings.JOB_RUN_RETENTION_DAYS = 30
    long_ago = timezone.now() - 90 * DAY
    last_success = JobRun.objects.create(job="expire", status=JobRun.Status.SUCCEEDED, started_at=long_ago, finished_at=long_ago)
    JobRun.objects.create(job="expire", status=JobRun.Status.SUCCEEDED, started_at=long_ago - DAY, finished_at=long_ago - DAY)
    JobRun.objects.create(job="expire", status=JobRun.Status.FAILED, started_at=long_ago + DAY, finished_at=long_ago + DAY)
    recent = JobRun.objects.create(job="expire", status=JobRun.Status.FAILED, started_at=timezone.now() - DAY)

    assert prune(now=timezone.now(), batch_size=1)["job_runs_deleted"] == 2
    assert set(JobRun.objects.values_list("pk", flat=True)) == {last_success.pk, recent.pk}


def test_idempotency_keys_older_than_the_retention_are_trimmed(write, settings):
    settings.IDEMPOTENCY_KEY_RETENTION_HOURS = 24
    write(idempotency_key="old")
    write(idempotency_key="fresh")
    IdempotencyKey.objects.filter(key="old").update(created_at=timezone.now() - timedelta(hours=25))
    counts = prune(now=timezone.now(), batch_size=1)
    assert counts["idempotency_keys_deleted"] == 1
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["fresh"]
