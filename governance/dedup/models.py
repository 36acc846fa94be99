"""Deduplication proposals: a job's suggestion that records are duplicates or contradict each
other, and the records each one would supersede."""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from memory.models import NOTE_MAX_CHARS, Agent, MemoryKind, MemoryRecord, Tenant


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
