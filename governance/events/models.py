"""A tenant's webhook subscriptions and the deliveries of events to them."""

import base64
import secrets
import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from memory.models import SUBJECT_MAX_CHARS, Event, Tenant

SECRET_PREFIX = "whsec_"  # the Standard Webhooks form: whsec_ + base64 of the key bytes


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


class WebhookSubscription(models.Model):
    """Where a tenant's events go: a URL, the event types it wants (`["*"]` for all), optionally
    only one subject's or one kind's records, and whether the subscriber keeps copies of memory
    (then each forget request waits for its acknowledgement). `cursor` is the feed position up to
    which events were fanned out to it. The signing secret is kept to sign; a rotation keeps the
    previous one signing too until `previous_secret_until`."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="webhooks")
    url = models.URLField(max_length=2000)
    events = models.JSONField(default=list, help_text='Event types, or ["*"] for every type.')
    subject = models.CharField(max_length=SUBJECT_MAX_CHARS, blank=True, help_text="Only this subject's records (optional).")
    kind = models.CharField(max_length=64, blank=True, help_text="Only this kind's records (optional).")
    keeps_copies = models.BooleanField(
        default=False, help_text="The subscriber keeps copies of memory: forget requests wait for its acknowledgement."
    )
    secret = models.CharField(max_length=100, default=new_secret, editable=False)
    previous_secret = models.CharField(max_length=100, blank=True, editable=False)
    previous_secret_until = models.DateTimeField(null=True, blank=True)
    is_active = models.BooleanField(default=True)
    disabled_at = models.DateTimeField(null=True, blank=True)
    failing_since = models.DateTimeField(null=True, blank=True, help_text="First failure of the current failing streak.")
    cursor = models.BigIntegerField(default=0, editable=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]
        indexes = [models.Index(fields=["tenant", "is_active"], name="webhook_tenant_active_idx")]

    def __str__(self) -> str:
        return f"{self.url} ({'active' if self.is_active else 'disabled'})"

    def wants(self, event_type: str) -> bool:
        return "*" in self.events or event_type in self.events

    def signing_secrets(self, now) -> list[str]:
        """The secrets a delivery is signed with now: the current one, and the previous one during
        a rotation's overlap."""
        overlap = self.previous_secret and self.previous_secret_until is not None and self.previous_secret_until > now
        return [self.secret, self.previous_secret] if overlap else [self.secret]


class Delivery(models.Model):
    """One event due to one subscription: pending until the subscriber answered 2xx, retried with
    backoff, `dead` after the last attempt (an admin can replay it). `position` and `record_id`
    keep deliveries of one record in the order of its events."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        DEAD = "dead"

    subscription = models.ForeignKey(WebhookSubscription, on_delete=models.CASCADE, related_name="deliveries")
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="+")
    position = models.BigIntegerField()
    record_id = models.UUIDField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=200, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    acknowledged_at = models.DateTimeField(
        null=True, blank=True, help_text="A copy-keeping subscriber acknowledged this memory.forgotten delivery."
    )

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["subscription", "event"], name="delivery_once_per_subscription")]
        indexes = [
            models.Index(fields=["subscription", "position"], condition=Q(status="pending"), name="delivery_pending_idx"),
        ]

    def __str__(self) -> str:
        return f"delivery {self.event_id} -> {self.subscription_id} ({self.status})"
