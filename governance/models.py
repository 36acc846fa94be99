"""The processes around records: forget requests and their receipts, tombstones of forgotten
subjects, traces of pruned records, job runs (proof that the schedule ran) and deduplication proposals."""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from memory.fingerprints import is_subject_fingerprint
from memory.models import (
    NOTE_MAX_CHARS,
    PURPOSE_MAX_CHARS,
    SUBJECT_MAX_CHARS,
    Agent,
    AgentCredential,
    MemoryKind,
    MemoryRecord,
    Tenant,
)
from memory.models import Status as RecordStatus


class ForgetRequest(models.Model):
    """One request to forget a subject in a tenant. `subject` is the subject as filed until
    propagation replaces it with its keyed fingerprint (memory.fingerprints), like the records'.
    The requester is referenced by key: an agent's requests are read back by its credential
    (`requested_by` is only the label shown to people)."""

    class Status(models.TextChoices):
        PROPAGATING = "propagating"
        COMPLETED = "completed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="forget_requests")
    subject = models.CharField(max_length=SUBJECT_MAX_CHARS)
    reason = models.CharField(max_length=NOTE_MAX_CHARS, blank=True)
    requested_by = models.CharField(max_length=200, help_text="Actor label, for display only: agent:tenant/agent or user:name.")
    requested_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_by_agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    requested_by_credential = models.ForeignKey(
        AgentCredential,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The token that filed it: an agent reads its forget requests back through this key.",
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PROPAGATING)
    affected = models.PositiveIntegerField(default=0, help_text="Records forgotten by this request, lineage included.")
    lineage_affected = models.PositiveIntegerField(
        default=0, help_text="Of which derived records (summaries) of the subject's records."
    )
    records = models.ManyToManyField(MemoryRecord, related_name="forget_requests", blank=True)
    requested_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-requested_at"]
        indexes = [
            models.Index(fields=["requested_at"], condition=Q(status="propagating"), name="forget_open_idx"),
            models.Index(fields=["tenant", "requested_at"], name="forget_tenant_idx"),
        ]

    def __str__(self) -> str:
        return f"forget {self.subject} ({self.status})"

    @property
    def subject_erased(self) -> bool:
        """True once propagation replaced the subject with its fingerprint."""
        return is_subject_fingerprint(self.subject)

    @property
    def subject_display(self) -> str:
        """The subject as people see it: the filed subject, or a short form of its fingerprint."""
        return f"erased subject {self.subject[:18]}…" if self.subject_erased else self.subject


class PropagationReceipt(models.Model):
    """One per derived artifact per forget request: what was removed, when, or why it could not be."""

    forget_request = models.ForeignKey(ForgetRequest, on_delete=models.CASCADE, related_name="receipts")
    artifact = models.CharField(max_length=100)
    removed = models.PositiveIntegerField(default=0)
    completed_at = models.DateTimeField(
        null=True, blank=True, help_text="Empty while the artifact's own job has yet to finish (the disk rewrite)."
    )
    note = models.CharField(max_length=NOTE_MAX_CHARS, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["forget_request", "artifact"], name="receipt_one_per_artifact")]


class ForgetTombstone(models.Model):
    """Content-free marker that a subject was forgotten, kept after pruning so that records
    restored from a backup can be found (by the same fingerprint) and forgotten again. The
    fingerprint is memory.fingerprints.subject_fingerprint: keyed, so it cannot be reversed by
    hashing guessed subjects without the server's key."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="forget_tombstones")
    subject_fingerprint = models.CharField(max_length=80)
    forgotten_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "subject_fingerprint"], name="tombstone_unique_subject")]


class PrunedRecord(models.Model):
    """Content-free trace of a record the prune job deleted (governance.pruned_trace), written in
    the transaction that deletes it and kept for PRUNED_RECORD_TRACE_RETENTION_DAYS, so that as-of
    reads can say "pruned" instead of "unknown". It keeps ids, scope, status and times only: no
    content, no provenance, and the subject only as its keyed fingerprint (memory.fingerprints)."""

    id = models.UUIDField(primary_key=True, editable=False, help_text="The pruned record's id.")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    kind = models.ForeignKey(MemoryKind, on_delete=models.PROTECT, related_name="+")
    purpose = models.CharField(max_length=PURPOSE_MAX_CHARS)
    subject_fingerprint = models.CharField(max_length=80, help_text="The subject's keyed fingerprint, never the subject.")
    status = models.CharField(max_length=16, choices=RecordStatus.choices, help_text="Its status when it was pruned.")
    created_at = models.DateTimeField()
    status_changed_at = models.DateTimeField(help_text="When it entered that status.")
    active_from = models.DateTimeField(null=True, blank=True, help_text="First activation; null if never active.")
    active_until = models.DateTimeField(
        null=True, blank=True, help_text="When it left active (or expired, if earlier); null if never active."
    )
    pruned_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(
                fields=["tenant", "agent", "purpose", "active_from"],
                condition=Q(active_from__isnull=False),
                name="pruned_active_scope_idx",
            ),
            models.Index(fields=["pruned_at"], name="pruned_at_idx"),
        ]

    def __str__(self) -> str:
        return f"pruned {self.id} ({self.status}) @ {self.pruned_at:%Y-%m-%d %H:%M:%S}"


class JobRun(models.Model):
    """Proof that a scheduled job ran: one row per run, with its counts and errors."""

    class Status(models.TextChoices):
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        SKIPPED = "skipped"  # another run held the lock

    job = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    counts = models.JSONField(default=dict, blank=True)
    errors = models.JSONField(default=list, blank=True)
    trigger = models.CharField(max_length=32, default="beat", help_text="beat, run_job or api")

    class Meta:
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["job", "status", "-started_at"], name="jobrun_last_idx")]

    def __str__(self) -> str:
        return f"{self.job} {self.status} @ {self.started_at:%Y-%m-%d %H:%M:%S}"


class DedupProposal(models.Model):
    """A job's suggestion that records in one scope are duplicates (or contradict each other).
    A reviewer decides; accepting supersedes the dropped records by the kept one."""

    class Category(models.TextChoices):
        DUPLICATE = "duplicate"
        CONFLICT = "conflict"

    class Status(models.TextChoices):
        OPEN = "open"
        ACCEPTED = "accepted"
        REJECTED = "rejected"
        ROLLED_BACK = "rolled_back"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="dedup_proposals")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    purpose = models.CharField(max_length=100)
    subject = models.CharField(max_length=200)
    kind = models.ForeignKey(MemoryKind, on_delete=models.PROTECT, related_name="+")
    category = models.CharField(max_length=16, choices=Category.choices)
    method = models.CharField(max_length=64, help_text="exact_hash, normalised, token_similarity, ...")
    similarity = models.FloatField()
    keep = models.ForeignKey(MemoryRecord, on_delete=models.CASCADE, related_name="+")
    keep_version = models.PositiveIntegerField()
    signature = models.CharField(
        max_length=64, help_text="sha256 of the member ids and versions: one proposal per state of a group."
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    decision_note = models.CharField(max_length=NOTE_MAX_CHARS, blank=True)
    rolled_back_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(fields=["signature"], name="proposal_unique_signature"),
            models.CheckConstraint(condition=Q(similarity__gte=0) & Q(similarity__lte=1), name="proposal_similarity_unit_range"),
        ]
        indexes = [models.Index(fields=["tenant", "status", "created_at"], name="proposal_queue_idx")]


class DedupProposalDrop(models.Model):
    """A record the proposal would supersede, at the version it was seen."""

    proposal = models.ForeignKey(DedupProposal, on_delete=models.CASCADE, related_name="drops")
    record = models.ForeignKey(MemoryRecord, on_delete=models.CASCADE, related_name="+")
    version = models.PositiveIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["proposal", "record"], name="proposal_drop_unique")]


from governance.alerts.models import Alert, AlertPolicy, DigestPreference  # noqa: E402,F401  (queue alerts, digests)
from governance.golden.models import GoldenQuestion, GoldenRun  # noqa: E402,F401  (golden recall sets)
from governance.revocations.models import Revocation, RevocationRecord  # noqa: E402,F401  (revoking a source)
