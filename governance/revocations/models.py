"""The receipt of a revocation: which source, who, why, when, and which records it sent back to
quarantine (linked by id, never copied)."""

import uuid

from django.conf import settings
from django.db import models

from memory.models import NOTE_MAX_CHARS, Agent, AgentCredential, MemoryRecord, SourceHold, SourceKey, Tenant


class Revocation(models.Model):
    class Source(models.TextChoices):
        CREDENTIAL = "credential", "agent token"
        AGENT = "agent", "agent"
        SESSION_ID = "session_id", "session"
        SOURCE_URI_PREFIX = "source_uri_prefix", "source-URI prefix"
        SOURCE_KEY = "source_key", "registered source's key"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="revocations")
    source = models.CharField(max_length=32, choices=Source.choices)
    credential = models.ForeignKey(AgentCredential, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    source_key = models.ForeignKey(SourceKey, null=True, blank=True, on_delete=models.PROTECT, related_name="revocations")
    value = models.CharField(
        max_length=1000,
        blank=True,
        help_text="What was revoked, as people read it: the token's hint, the agent's slug, the session id, the URI prefix "
        "or the source's name and key fingerprint.",
    )
    reason = models.CharField(max_length=NOTE_MAX_CHARS)
    revoked_by = models.CharField(max_length=200, help_text="Actor label: user:name.")
    revoked_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    affected = models.PositiveIntegerField(default=0, help_text="Records sent back to quarantine, derived records included.")
    derived_affected = models.PositiveIntegerField(default=0, help_text="Of which records derived from what the source wrote.")
    token_revoked = models.BooleanField(
        default=False, help_text="A credential's token (or a source key) was usable and was revoked by this."
    )
    hold = models.ForeignKey(
        SourceHold,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="revocations",
        help_text="A session's or address's hold: its later writes wait for review until cleared.",
    )
    records = models.ManyToManyField(MemoryRecord, through="RevocationRecord", related_name="revocations", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["tenant", "created_at"], name="revocation_tenant_idx")]

    def __str__(self) -> str:
        return f"revoke {self.get_source_display()} {self.value} ({self.affected})"


class RevocationRecord(models.Model):
    """A record a revocation sent back to quarantine, and whether it was derived from the source's."""

    revocation = models.ForeignKey(Revocation, on_delete=models.CASCADE, related_name="links")
    record = models.ForeignKey(MemoryRecord, on_delete=models.CASCADE, related_name="+")
    derived = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["revocation", "record"], name="revocation_record_unique")]
