"""Scoped reads for the governance processes: forget requests as each caller may see them, the size
and oldest item of every review queue, and the last run of every scheduled job. The reviewer home
page, the dashboard and /metrics all read them here, so the three always agree."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Min, OuterRef, QuerySet, Subquery
from django.utils import timezone

from governance.models import DedupProposal, ForgetRequest, JobRun
from memory.actors import Actor
from memory.selectors import drift_queue, quarantine_queue


def forget_requests_in_scope(actor: Actor) -> QuerySet[ForgetRequest]:
    """Forget requests the actor may read: a reviewer those of their tenants; an agent token only
    the ones it filed, matched by the credential's key (never by a display label)."""
    requests = actor.in_tenants(ForgetRequest.objects.select_related("tenant"))
    if actor.is_agent:
        return requests.filter(requested_by_credential_id=actor.credential.pk)
    return requests


@dataclass(frozen=True)
class QueueStat:
    key: str  # quarantine | drift | forget | proposals
    size: int
    oldest: datetime | None

    def age(self, now: datetime) -> timedelta | None:
        return now - self.oldest if self.oldest else None


def queue_stats(actor: Actor, *, now: datetime | None = None) -> list[QueueStat]:
    """One aggregate query per queue, over the tenants the actor may see."""
    now = now or timezone.now()
    queues = [
        ("quarantine", quarantine_queue(actor), "created_at"),
        ("drift", drift_queue(actor, now=now), "confirmed_at"),
        ("forget", forget_requests_in_scope(actor).filter(status=ForgetRequest.Status.PROPAGATING), "requested_at"),
        ("proposals", actor.in_tenants(DedupProposal.objects.filter(status=DedupProposal.Status.OPEN)), "created_at"),
    ]
    stats = []
    for key, queryset, field in queues:
        row = queryset.order_by().aggregate(size=Count("pk"), oldest=Min(field))
        stats.append(QueueStat(key, row["size"], row["oldest"]))
    return stats


def last_job_runs() -> list[dict]:
    """The latest run and the latest successful run of every scheduled job, in two queries; a job
    that never ran is listed too: `{"job", "run", "last_success"}`."""

    def latest(**filters) -> dict[str, JobRun]:
        newest = JobRun.objects.filter(job=OuterRef("job"), **filters).order_by("-started_at", "-pk").values("pk")[:1]
        return {run.job: run for run in JobRun.objects.filter(pk=Subquery(newest))}

    runs, successes = latest(), latest(status=JobRun.Status.SUCCEEDED)
    names = list(settings.JOB_INTERVALS) + sorted(set(runs) - set(settings.JOB_INTERVALS))
    return [{"job": name, "run": runs.get(name), "last_success": successes.get(name)} for name in names]
