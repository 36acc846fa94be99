"""Alert thresholds per tenant (policy is data: edited in the admin), alert episodes, and each
reviewer's digest preference."""

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.db.models import Q

from memory.models import Tenant


class AlertPolicy(models.Model):
    """A tenant's alert thresholds. A tenant without a row uses the defaults below; 0 turns an
    alert off."""

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="alert_policy")
    quarantine_max_age_hours = models.PositiveIntegerField(
        default=24, help_text="Alert when a memory has waited in quarantine longer than this many hours (0 = never)."
    )
    drift_backlog_max = models.PositiveIntegerField(
        default=50, help_text="Alert when more memories than this are overdue for a drift re-check (0 = never)."
    )
    forget_max_minutes = models.PositiveIntegerField(
        default=60, help_text="Alert when a forget request is still propagating after this many minutes (0 = never)."
    )
    alert_on_stale_jobs = models.BooleanField(
        default=True, help_text="Alert when a scheduled job has not succeeded for longer than /health/ allows."
    )
    signature_failures_max = models.PositiveIntegerField(
        default=5,
        help_text="Alert when more signed writes than this were refused in the last hour because their provenance "
        "did not verify (forged, replayed, or made with an unknown or revoked key; 0 = never).",
    )

    class Meta:
        verbose_name_plural = "alert policies"

    def __str__(self) -> str:
        return f"alert policy of {self.tenant}"

    @classmethod
    def for_tenants(cls, tenant_ids) -> dict[int, "AlertPolicy"]:
        """Each tenant's policy: its row, or an unsaved one with the defaults."""
        rows = {policy.tenant_id: policy for policy in cls.objects.filter(tenant_id__in=tenant_ids)}
        return {tenant_id: rows.get(tenant_id) or cls(tenant_id=tenant_id) for tenant_id in tenant_ids}


class Alert(models.Model):
    """One alert episode: a threshold crossed in a tenant, from the first evaluation that saw it to
    the first that no longer did. Reviewers are emailed once per episode (`notified_at`)."""

    class Kind(models.TextChoices):
        QUARANTINE_AGE = "quarantine_age", "quarantine waiting too long"
        DRIFT_BACKLOG = "drift_backlog", "drift backlog too large"
        FORGET_OVERDUE = "forget_overdue", "forget request overdue"
        JOB_STALE = "job_stale", "scheduled job stale"
        SIGNATURE_FAILURES = "signature_failures", "signed writes failing verification"
        WEBHOOK_DISABLED = "webhook_disabled", "webhook endpoint disabled"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="alerts")
    kind = models.CharField(max_length=32, choices=Kind.choices)
    job = models.CharField(max_length=64, blank=True, help_text="For a stale job: which one.")
    value = models.FloatField(help_text="The measure when last seen: hours, memories, minutes or seconds.")
    threshold = models.FloatField()
    count = models.PositiveIntegerField(default=0, help_text="Items in the queue when last seen.")
    opened_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    notified_at = models.DateTimeField(null=True, blank=True)
    notified_count = models.PositiveIntegerField(default=0, help_text="Reviewers emailed about this episode.")

    class Meta:
        ordering = ["-opened_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "kind", "job"], condition=Q(resolved_at__isnull=True), name="alert_one_open_episode"
            ),
        ]
        indexes = [models.Index(fields=["tenant", "resolved_at"], name="alert_tenant_open_idx")]

    def __str__(self) -> str:
        return f"{self.tenant_id}:{self.kind}{':' + self.job if self.job else ''} ({'open' if self.is_open else 'resolved'})"

    @property
    def key(self) -> tuple[int, str, str]:
        return self.tenant_id, self.kind, self.job

    @property
    def is_open(self) -> bool:
        return self.resolved_at is None

    @property
    def summary(self) -> str:
        """One line for the home page and the emails: counts and thresholds, never content."""
        if self.kind == self.Kind.QUARANTINE_AGE:
            return (
                f"{_memories(self.count)} in quarantine; the longest has waited {self.value:.0f} h "
                f"(threshold {self.threshold:.0f} h)."
            )
        if self.kind == self.Kind.DRIFT_BACKLOG:
            return f"{_memories(self.count)} overdue for a drift re-check (threshold {self.threshold:.0f})."
        if self.kind == self.Kind.FORGET_OVERDUE:
            return (
                f"{self.count} forget request{'s' if self.count != 1 else ''} propagating; the oldest for "
                f"{self.value:.0f} min (threshold {self.threshold:.0f} min)."
            )
        if self.kind == self.Kind.SIGNATURE_FAILURES:
            return (
                f"{self.value:.0f} signed write{'s' if self.value != 1 else ''} refused in the last hour: the provenance "
                f"did not verify (threshold {self.threshold:.0f}). A source key may be leaked or misused."
            )
        if self.kind == self.Kind.WEBHOOK_DISABLED:
            return (
                f"{self.count} webhook endpoint{'s' if self.count != 1 else ''} disabled after failing for "
                f"{self.threshold:.0f} h: re-enable in the admin once the endpoint works again."
            )
        return f"Scheduled job {self.job} has not succeeded for {_age(self.value)} (allowed: {_age(self.threshold)})."


def _memories(count: int) -> str:
    return f"{count} memory" if count == 1 else f"{count} memories"


def _age(seconds: float) -> str:
    value = timedelta(seconds=round(seconds))
    return (
        f"{value.days} d {value.seconds // 3600} h"
        if value.days
        else f"{value.seconds // 3600} h {value.seconds % 3600 // 60} min"
    )


class DigestPreference(models.Model):
    """A reviewer's daily digest: on unless they turned it off; when the last one went out."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="digest_preference")
    digest_enabled = models.BooleanField(default=True)
    last_digest_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"digest of {self.user} ({'on' if self.digest_enabled else 'off'})"
