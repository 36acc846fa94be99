"""The review queues as numbers: the size and oldest item of each, over the tenants a caller may
see. The reviewer home page, the dashboard and /metrics all read them here, so the three always
agree."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Min
from django.utils import timezone

from governance.dedup.models import DedupProposal
from governance.forget.models import ForgetRequest
from governance.forget.selectors import forget_requests_in_scope
from memory.actors import Actor
from memory.selectors import drift_queue, quarantine_queue


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
