"""The forget request and what it leaves: one receipt per derived artifact, and a content-free
tombstone per forgotten subject."""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from memory.fingerprints import is_subject_fingerprint
from memory.models import NOTE_MAX_CHARS, SUBJECT_MAX_CHARS, Agent, AgentCredential, MemoryRecord, Tenant


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
