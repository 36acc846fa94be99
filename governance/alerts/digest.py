"""The daily digest: per reviewer, what happened in their tenants since their last digest (new in
quarantine, decided, forget requests filed or completed with their receipts) and what is waiting
(due for drift review, expiring soon, open alerts). Counts, short ids, kinds, source types and
links only: never content, never subjects. A reviewer turns it off on /review/notifications/."""

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.mail import EmailMessage, get_connection
from django.db import transaction
from django.db.models import Count, Q
from django.template.loader import render_to_string

from governance.alerts.models import Alert, DigestPreference
from governance.alerts.services import alert_link, link
from governance.forget.models import ForgetRequest
from governance.forget.selectors import forget_requests_in_scope
from memory.actors import REVIEWERS_GROUP, Actor
from memory.models import MemoryRecord, Status
from memory.risk import risk_reasons
from memory.selectors import drift_queue, quarantine_queue, records_in_scope, tenants_in_scope

logger = logging.getLogger("governance.alerts")

ITEMS_LISTED = 10  # per section; the section's link shows the rest
EXPIRING_WITHIN = timedelta(days=7)
DIGEST_PERIOD = timedelta(days=1)  # covered by a first digest
DECISIONS = ("promote", "reject")  # transitions that count as a reviewer's decision


@dataclass
class DigestItem:
    short_id: str
    what: str
    url: str


@dataclass
class Digest:
    user: User
    since: datetime
    until: datetime
    tenants: list[str]
    new_in_quarantine: int = 0
    quarantine_items: list[DigestItem] = field(default_factory=list)
    approved: int = 0
    rejected: int = 0
    drift_due: int = 0
    expiring: int = 0
    expiring_items: list[DigestItem] = field(default_factory=list)
    forget_filed: int = 0
    forget_completed: int = 0
    forget_items: list[DigestItem] = field(default_factory=list)
    alerts: list[tuple[Alert, str]] = field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        return not (
            self.new_in_quarantine
            or self.approved
            or self.rejected
            or self.drift_due
            or self.expiring
            or self.forget_filed
            or self.forget_completed
            or self.forget_items
            or self.alerts
        )

    @property
    def subject(self) -> str:
        return (
            f"[governed memory] Daily digest: {self.new_in_quarantine} new in quarantine, "
            f"{self.approved + self.rejected} decided, {self.drift_due} due for drift review"
        )


def _record_item(record: MemoryRecord) -> DigestItem:
    flags = ", ".join(code for code, _ in risk_reasons(record.risk_flags or ""))
    what = f"{record.kind.name} from {record.source_type.replace('_', ' ')} ({record.tenant.slug})" + (
        f", flagged: {flags}" if flags else ""
    )
    return DigestItem(str(record.pk)[:8], what, link("review:memory_detail", record.pk))


def build_digest(user: User, *, since: datetime, now: datetime) -> Digest:
    actor = Actor.for_user(user)
    scope = records_in_scope(actor)
    tenants = list(tenants_in_scope(actor).values_list("slug", flat=True))
    digest = Digest(user=user, since=since, until=now, tenants=tenants)
    fresh = quarantine_queue(actor).filter(status_changed_at__gte=since, status_changed_at__lt=now)
    digest.new_in_quarantine = fresh.count()
    digest.quarantine_items = [_record_item(r) for r in fresh.select_related("kind", "tenant")[:ITEMS_LISTED]]
    history = actor.in_tenants(MemoryRecord.history.filter(history_date__gte=since, history_date__lt=now))
    reasons = {f"{channel}.{decision}": decision for channel in ("review", "admin") for decision in DECISIONS}
    decided = dict(
        history.filter(history_change_reason__in=reasons)
        .order_by()
        .values_list("history_change_reason")
        .annotate(n=Count("history_id"))
    )
    digest.approved = sum(n for reason, n in decided.items() if reasons[reason] == "promote")
    digest.rejected = sum(n for reason, n in decided.items() if reasons[reason] == "reject")
    digest.drift_due = drift_queue(actor, now=now).count()
    expiring = scope.filter(status=Status.ACTIVE, expires_at__gt=now, expires_at__lte=now + EXPIRING_WITHIN).order_by(
        "expires_at"
    )
    digest.expiring = expiring.count()
    digest.expiring_items = [_record_item(r) for r in expiring.select_related("kind", "tenant")[:ITEMS_LISTED]]
    forgets = (
        forget_requests_in_scope(actor)
        .filter(Q(requested_at__gte=since) | Q(completed_at__gte=since) | Q(status=ForgetRequest.Status.PROPAGATING))
        .annotate(receipt_count=Count("receipts"))
        .order_by("-requested_at")
    )
    for request in forgets[: ITEMS_LISTED * 2]:
        state = (
            f"completed, {request.affected} records, {request.receipt_count} receipts"
            if request.completed_at
            else f"propagating, {request.affected} records, {request.receipt_count} receipts so far"
        )
        digest.forget_items.append(
            DigestItem(str(request.pk)[:8], f"{state} ({request.tenant.slug})", link("review:forget_detail", request.pk))
        )
    digest.forget_filed = forgets.filter(requested_at__gte=since).count()
    digest.forget_completed = forgets.filter(completed_at__gte=since).count()
    digest.alerts = [
        (alert, alert_link(alert, alert.tenant.slug))
        for alert in actor.in_tenants(Alert.objects.filter(resolved_at__isnull=True).select_related("tenant"))
    ]
    return digest


def digest_message(digest: Digest, connection=None) -> EmailMessage:
    body = render_to_string(
        "email/digest.txt",
        {
            "digest": digest,
            "links": {name: link(f"review:{name}") for name in ("home", "quarantine", "drift", "forget_list", "notifications")},
            "expiring_days": EXPIRING_WITHIN.days,
        },
    )
    return EmailMessage(subject=digest.subject, body=body, to=[digest.user.email], connection=connection)


def digest_due(now: datetime) -> bool:
    return now.hour >= settings.DIGEST_HOUR_UTC


def send_digests(*, now: datetime) -> tuple[int, int]:
    """Once a day (the first run after DIGEST_HOUR_UTC), each reviewer who has not opted out and has
    an address gets the digest of what happened since their last one (or the last day). An empty
    digest is not sent. Returns (sent, failed); a failed one is retried by the next run."""
    if not digest_due(now):
        return 0, 0
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    reviewers = (
        get_user_model()
        .objects.filter(is_active=True, groups__name=REVIEWERS_GROUP, reviewed_tenants__isnull=False)
        .exclude(email="")
        .exclude(digest_preference__digest_enabled=False)
        .exclude(digest_preference__last_digest_at__gte=today)
        .distinct()
        .order_by("pk")
    )
    preferences = {p.user_id: p for p in DigestPreference.objects.filter(user__in=reviewers)}
    connection = get_connection(fail_silently=False)
    sent = failed = 0
    for user in reviewers:
        preference = preferences.get(user.pk) or DigestPreference(user=user)
        digest = build_digest(user, since=preference.last_digest_at or now - DIGEST_PERIOD, now=now)
        if not digest.is_empty:
            try:
                connection.send_messages([digest_message(digest, connection)])
            except Exception as exc:
                failed += 1
                logger.warning("digest email failed", extra={"user_id": user.pk, "error": type(exc).__name__})
                continue
            sent += 1
        preference.last_digest_at = now
        with transaction.atomic():
            preference.save()
    return sent, failed
