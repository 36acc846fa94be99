"""The trace retention leaves of a record it deleted."""

from django.db import models
from django.db.models import Q

from memory.models import PURPOSE_MAX_CHARS, Agent, MemoryKind, Tenant
from memory.models import Status as RecordStatus


class PrunedRecord(models.Model):
    """Content-free trace of a record the prune job deleted (governance.retention.pruned_trace), written in
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
