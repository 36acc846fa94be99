"""Registered sources and their verification keys.

A source (a tool, a system of record, a document store) is registered for one tenant under the
name writes give in `provenance.source`. Its results are signed with Ed25519; the app keeps only
public keys. A key is valid from `valid_from` until `valid_until` (set when the source rotates to a
new key, after an overlap in which both verify) and never after `revoked_at` (a leaked key:
revoking it is a revocation, which sends back to quarantine everything it verified).

The source's policy says which authority its verified claims carry and for which kinds they are
admitted without review (memory.admission). Imported at the end of `memory.models`, so the models
belong to the `memory` app; a leaf, it names other models by their app label."""

from datetime import datetime

from django.db import models
from django.db.models import Q
from django.utils import timezone
from simple_history.models import HistoricalRecords

from memory.authority import Authority
from memory.history import HistoryActor, HistoryContext

SOURCE_NAME_MAX_CHARS = 200  # as a write names it in provenance.source


class RegisteredSource(HistoryContext, models.Model):
    tenant = models.ForeignKey("memory.Tenant", on_delete=models.PROTECT, related_name="registered_sources", db_index=False)
    name = models.CharField(
        max_length=SOURCE_NAME_MAX_CHARS, help_text="As signed writes name it in provenance.source, e.g. crm or tool:crm_lookup."
    )
    description = models.CharField(max_length=300, blank=True)
    authority = models.CharField(
        max_length=16,
        choices=Authority.choices,
        default=Authority.THIRD_PARTY,
        help_text="The authority its verified claims carry: a signed write must claim exactly this one.",
    )
    auto_admit_kinds = models.JSONField(
        default=list,
        blank=True,
        help_text='Kinds whose verified claims from this source are admitted without review, e.g. ["semantic"]; '
        "every other verified claim waits for a reviewer like an unsigned one.",
    )
    created_at = models.DateTimeField(default=timezone.now)
    history = HistoricalRecords(bases=[HistoryActor], no_db_index=["tenant"])

    class Meta:
        ordering = ["tenant__slug", "name"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="registered_source_unique_name")]

    def __str__(self) -> str:
        return self.name


class SourceKey(HistoryContext, models.Model):
    class State(models.TextChoices):
        PENDING = "pending", "not valid yet"
        VALID = "valid", "valid"
        RETIRED = "retired", "rotated out"
        REVOKED = "revoked", "revoked"

    source = models.ForeignKey(RegisteredSource, on_delete=models.PROTECT, related_name="keys")
    public_key = models.CharField(max_length=44, help_text="The raw Ed25519 public key (32 bytes), base64.")
    fingerprint = models.CharField(
        max_length=16, help_text="First hex digits of the raw key's SHA-256: how people tell keys apart."
    )
    valid_from = models.DateTimeField(default=timezone.now)
    valid_until = models.DateTimeField(
        null=True, blank=True, help_text="Set by a rotation: the end of the overlap in which the old and the new key both verify."
    )
    revoked_at = models.DateTimeField(
        null=True, blank=True, help_text="Set by revoking the key (a revocation): it verifies nothing from then on."
    )
    created_at = models.DateTimeField(default=timezone.now)
    history = HistoricalRecords(bases=[HistoryActor], no_db_index=["source"])

    class Meta:
        ordering = ["source_id", "valid_from", "pk"]
        constraints = [
            # A key once registered (and maybe revoked since) is never registered again for the source.
            models.UniqueConstraint(fields=["source", "public_key"], name="source_key_unique"),
            models.CheckConstraint(
                condition=Q(valid_until__isnull=True) | Q(valid_until__gt=models.F("valid_from")), name="source_key_valid_range"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source} key {self.fingerprint}"

    @property
    def tenant(self):
        return self.source.tenant

    @property
    def tenant_id(self) -> int:
        return self.source.tenant_id

    def state_at(self, at: datetime) -> str:
        if self.revoked_at is not None and self.revoked_at <= at:
            return self.State.REVOKED
        if at < self.valid_from:
            return self.State.PENDING
        if self.valid_until is not None and at >= self.valid_until:
            return self.State.RETIRED
        return self.State.VALID

    @property
    def state(self) -> str:
        return self.state_at(timezone.now())
