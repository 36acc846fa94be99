"""The outbox's rows: `Event`, one per lifecycle change, and `EventLog`, the feed's one row of
bookkeeping (the last position handed out, and the newest position retention removed).

Imported at the end of `memory.models`, so the models belong to the `memory` app; a leaf, it
names other models by their app label."""

import uuid

from django.db import models
from django.db.models import Q


class EventType(models.TextChoices):
    WRITTEN = "memory.written"
    QUARANTINED = "memory.quarantined"
    PROMOTED = "memory.promoted"
    REJECTED = "memory.rejected"
    SUPERSEDED = "memory.superseded"
    EXPIRED = "memory.expired"
    RETIRED = "memory.retired"
    CONFIRMED = "memory.confirmed"
    RESTORED = "memory.restored"
    FORGOTTEN = "memory.forgotten"
    REVOKED = "memory.revoked"
    PROPOSAL_OPENED = "proposal.opened"
    PROPOSAL_DECIDED = "proposal.decided"
    ALERT_RAISED = "alert.raised"
    ALERT_CLEARED = "alert.cleared"
    GOLDEN_FAILED = "golden.failed"


class Event(models.Model):
    """One lifecycle change, as the outside may learn of it. `seq` is the insert order (not the
    commit order: a transaction that started earlier may commit later); `position` is the feed's
    order, handed out by the sequencer (memory.outbox.sequence) only to committed events, so a
    reader that moves past a position never misses an event committed after it read."""

    seq = models.BigAutoField(primary_key=True)
    uid = models.UUIDField(unique=True, default=uuid.uuid4, editable=False, help_text="The event's public id.")
    position = models.BigIntegerField(null=True, blank=True, unique=True)
    type = models.CharField(max_length=32, choices=EventType.choices)
    occurred_at = models.DateTimeField()
    tenant = models.ForeignKey("memory.Tenant", on_delete=models.CASCADE, related_name="+", db_index=False)
    agent = models.ForeignKey("memory.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False)
    purpose = models.CharField(max_length=100, blank=True)
    # Not a foreign key: the event outlives a pruned record until the feed's retention ends.
    record_id = models.UUIDField(null=True, blank=True)
    version = models.PositiveIntegerField(null=True, blank=True)
    status = models.CharField(max_length=16, blank=True)
    authority = models.CharField(max_length=16, blank=True)
    kind = models.ForeignKey(
        "memory.MemoryKind", null=True, blank=True, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    data = models.JSONField(
        default=dict, blank=True, help_text="Ids only: a forget request and its records, a proposal, an alert."
    )

    class Meta:
        indexes = [
            models.Index(fields=["seq"], condition=Q(position__isnull=True), name="event_unsequenced_idx"),
            models.Index(fields=["tenant", "position"], name="event_tenant_position_idx"),
            models.Index(fields=["occurred_at"], name="event_occurred_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.record_id or ''}".strip()


class EventLog(models.Model):
    """The feed's bookkeeping, one row (pk 1): the last position the sequencer handed out, and the
    newest position retention removed (a cursor before it is gone: 410). Its row lock serialises
    the sequencer."""

    last_position = models.BigIntegerField(default=0)
    pruned_through = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"event log at {self.last_position}"
