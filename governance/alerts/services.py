"""Evaluating the alert thresholds and emailing reviewers once per alert episode.

Every run of the `alerts` job measures every tenant's queues in a constant number of queries (one
grouped query per queue, and the /health/ scheduler check once), then opens an `Alert` for each
threshold newly crossed, updates the ones still crossed and resolves the others. Reviewers get one
email per tenant per run listing the episodes opened since the last email: an item that stays past
its threshold for a hundred runs is one email, not a hundred. A send that fails leaves the episode
un-notified, so the next run tries again."""

import logging
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.core.mail import EmailMessage, get_connection
from django.db import transaction
from django.db.models import Count, Min
from django.template.loader import render_to_string
from django.urls import reverse

from governance.alerts.models import Alert, AlertPolicy
from governance.events.models import WebhookSubscription
from governance.forget.models import ForgetRequest
from governance.jobs.health import check_scheduler
from memory.actors import REVIEWERS_GROUP, Actor
from memory.models import MemoryRecord, Status, Tenant
from memory.outbox.models import EventType
from memory.outbox.write import write_events
from memory.provenance.failures import recent_signature_failures
from memory.selectors import drift_queue

logger = logging.getLogger("governance.alerts")


@dataclass(frozen=True)
class Finding:
    tenant_id: int
    kind: str
    job: str
    value: float
    threshold: float
    count: int

    @property
    def key(self) -> tuple[int, str, str]:
        return self.tenant_id, self.kind, self.job


def measure(*, now: datetime) -> dict[tuple[int, str, str], Finding]:
    """Every threshold crossed now, per tenant. How long a memory has waited in quarantine counts
    from when it entered quarantine (`status_changed_at`): a memory a revocation sent back today
    has waited since today, however old it is."""
    tenant_ids = list(Tenant.objects.values_list("pk", flat=True))
    policies = AlertPolicy.for_tenants(tenant_ids)
    job = Actor.job("alerts")
    quarantine = {
        row["tenant_id"]: row
        for row in MemoryRecord.objects.filter(status=Status.QUARANTINED)
        .order_by()
        .values("tenant_id")
        .annotate(size=Count("pk"), oldest=Min("status_changed_at"))
    }
    drift = {
        row["tenant_id"]: row["size"]
        for row in drift_queue(job, now=now).order_by().values("tenant_id").annotate(size=Count("pk"))
    }
    forget = {
        row["tenant_id"]: row
        for row in ForgetRequest.objects.filter(status=ForgetRequest.Status.PROPAGATING)
        .order_by()
        .values("tenant_id")
        .annotate(size=Count("pk"), oldest=Min("requested_at"))
    }
    stale = {
        name: result
        for name, result in check_scheduler(now).get("jobs", {}).items()
        if not result["ok"] and result["age_seconds"] is not None
    }  # a job beat never ran is /health/'s concern
    disabled_webhooks = {
        row["tenant_id"]: row["size"]
        for row in WebhookSubscription.objects.filter(is_active=False, disabled_at__isnull=False)
        .order_by()
        .values("tenant_id")
        .annotate(size=Count("pk"))
    }
    signature_failures = recent_signature_failures(tenant_ids, now=now)  # from the shared cache, not a query

    found: list[Finding] = []
    for tenant_id, policy in policies.items():
        if policy.quarantine_max_age_hours and tenant_id in quarantine:
            hours = (now - quarantine[tenant_id]["oldest"]).total_seconds() / 3600
            if hours > policy.quarantine_max_age_hours:
                found.append(
                    Finding(
                        tenant_id,
                        Alert.Kind.QUARANTINE_AGE,
                        "",
                        hours,
                        policy.quarantine_max_age_hours,
                        quarantine[tenant_id]["size"],
                    )
                )
        if policy.drift_backlog_max and drift.get(tenant_id, 0) > policy.drift_backlog_max:
            found.append(
                Finding(tenant_id, Alert.Kind.DRIFT_BACKLOG, "", drift[tenant_id], policy.drift_backlog_max, drift[tenant_id])
            )
        if policy.forget_max_minutes and tenant_id in forget:
            minutes = (now - forget[tenant_id]["oldest"]).total_seconds() / 60
            if minutes > policy.forget_max_minutes:
                found.append(
                    Finding(
                        tenant_id, Alert.Kind.FORGET_OVERDUE, "", minutes, policy.forget_max_minutes, forget[tenant_id]["size"]
                    )
                )
        failures = signature_failures.get(tenant_id, 0)
        if policy.signature_failures_max and failures > policy.signature_failures_max:
            found.append(Finding(tenant_id, Alert.Kind.SIGNATURE_FAILURES, "", failures, policy.signature_failures_max, failures))
        if disabled_webhooks.get(tenant_id):
            size = disabled_webhooks[tenant_id]
            hours = settings.WEBHOOKS_DISABLE_AFTER_HOURS
            found.append(Finding(tenant_id, Alert.Kind.WEBHOOK_DISABLED, "", size, hours, size))
        if policy.alert_on_stale_jobs:
            found.extend(
                Finding(tenant_id, Alert.Kind.JOB_STALE, name, result["age_seconds"], result["stale_after_seconds"], 0)
                for name, result in stale.items()
            )
    return {finding.key: finding for finding in found}


@dataclass
class AlertCounts:
    opened: int = 0
    resolved: int = 0
    emails: int = 0
    email_errors: int = 0


def evaluate_alerts(*, now: datetime) -> AlertCounts:
    """Open, update and resolve alert episodes from what `measure` finds now, then email the
    reviewers about episodes not yet notified."""
    findings = measure(now=now)
    counts = AlertCounts()
    with transaction.atomic():
        open_alerts = {alert.key: alert for alert in Alert.objects.select_for_update().filter(resolved_at__isnull=True)}
        new = [
            Alert(
                tenant_id=f.tenant_id,
                kind=f.kind,
                job=f.job,
                value=f.value,
                threshold=f.threshold,
                count=f.count,
                opened_at=now,
                last_seen_at=now,
            )
            for key, f in findings.items()
            if key not in open_alerts
        ]
        Alert.objects.bulk_create(new)
        ongoing = []
        for key, alert in open_alerts.items():
            if key in findings:
                finding = findings[key]
                alert.value, alert.threshold, alert.count, alert.last_seen_at = (
                    finding.value,
                    finding.threshold,
                    finding.count,
                    now,
                )
                ongoing.append(alert)
        Alert.objects.bulk_update(ongoing, ["value", "threshold", "count", "last_seen_at"])
        gone = [alert.pk for key, alert in open_alerts.items() if key not in findings]
        Alert.objects.filter(pk__in=gone).update(resolved_at=now)
        cleared = [alert for key, alert in open_alerts.items() if key not in findings]
        write_events(
            [_alert_event(EventType.ALERT_RAISED, alert) for alert in new]
            + [_alert_event(EventType.ALERT_CLEARED, alert) for alert in cleared],
            now=now,
        )
    counts.opened, counts.resolved = len(new), len(gone)
    counts.emails, counts.email_errors = notify_reviewers(now=now)
    return counts


def _alert_event(event_type: str, alert: Alert) -> dict:
    """An alert's event: which episode, of which kind, with its counts (never content)."""
    return {
        "type": event_type,
        "tenant_id": alert.tenant_id,
        "data": {"alert": {"id": alert.pk, "kind": alert.kind, "job": alert.job, "count": alert.count}},
    }


def tenant_reviewers(tenant_ids) -> dict[int, list]:
    """Per tenant, its reviewers who can receive email: active, in the reviewers group, with an address."""
    links = (
        Tenant.reviewers.through.objects.filter(
            tenant_id__in=tenant_ids, user__is_active=True, user__groups__name=REVIEWERS_GROUP
        )
        .exclude(user__email="")
        .select_related("user")
        .order_by("tenant_id", "user__username")
    )
    result: dict[int, list] = defaultdict(list)
    for reviewer in links:
        result[reviewer.tenant_id].append(reviewer.user)
    return result


def link(url_name: str, *args, query: str = "") -> str:
    """An absolute link into the review pages for an email (PUBLIC_BASE_URL + path)."""
    return f"{settings.PUBLIC_BASE_URL}{reverse(url_name, args=args)}{'?' + query if query else ''}"


ALERT_PAGES: dict[str, str] = {
    Alert.Kind.QUARANTINE_AGE: "review:quarantine",
    Alert.Kind.DRIFT_BACKLOG: "review:drift",
    Alert.Kind.FORGET_OVERDUE: "review:forget_list",
    Alert.Kind.JOB_STALE: "review:home",
    Alert.Kind.SIGNATURE_FAILURES: "review:home",
}


def alert_link(alert: Alert, tenant_slug: str) -> str:
    page = ALERT_PAGES[alert.kind]
    return link(page, query=f"tenant={tenant_slug}" if page in ("review:quarantine", "review:drift") else "")


def notify_reviewers(*, now: datetime) -> tuple[int, int]:
    """Email each tenant's reviewers about its open episodes not yet notified, one message per
    reviewer; returns (emails sent, emails that failed)."""
    pending = list(
        Alert.objects.filter(resolved_at__isnull=True, notified_at__isnull=True).select_related("tenant").order_by("opened_at")
    )
    if not pending:
        return 0, 0
    by_tenant: dict[int, list[Alert]] = defaultdict(list)
    for alert in pending:
        by_tenant[alert.tenant_id].append(alert)
    recipients = tenant_reviewers(list(by_tenant))
    sent = failed = 0
    connection = get_connection(fail_silently=False)
    for tenant_id, alerts in by_tenant.items():
        tenant = alerts[0].tenant
        messages = [_alert_message(tenant, alerts, user, connection) for user in recipients.get(tenant_id, [])]
        try:
            delivered = connection.send_messages(messages) if messages else 0
        except Exception as exc:  # SMTP down: the episodes stay un-notified and the next run retries
            failed += len(messages)
            logger.warning("alert email failed", extra={"tenant_id": tenant_id, "error": type(exc).__name__})
            continue
        sent += delivered or 0
        Alert.objects.filter(pk__in=[alert.pk for alert in alerts]).update(notified_at=now, notified_count=len(messages))
    return sent, failed


def _alert_message(tenant: Tenant, alerts: list[Alert], user, connection) -> EmailMessage:
    context = {
        "tenant": tenant,
        "user": user,
        "home": link("review:home"),
        "alerts": [(alert, alert_link(alert, tenant.slug)) for alert in alerts],
    }
    subject = (
        f"[governed memory] {tenant.slug}: {len(alerts)} new alert{'s' if len(alerts) != 1 else ''} "
        f"({', '.join(sorted({alert.get_kind_display() for alert in alerts}))})"
    )
    return EmailMessage(
        subject=subject, body=render_to_string("email/alert.txt", context), to=[user.email], connection=connection
    )
