"""GET /metrics: Prometheus text format. Counters and histograms come from the processes that
count them (web, worker; aggregated through PROMETHEUS_MULTIPROC_DIR when set); queue gauges are
computed from the database at scrape time, so every process agrees and nothing can go stale."""

import os

from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client import REGISTRY, CollectorRegistry, multiprocess
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.django import PrometheusDjangoView

from governance.models import DedupProposal, ForgetRequest
from memory.actors import Actor
from memory.selectors import drift_queue, quarantine_queue


def queue_snapshot(now=None) -> dict[str, tuple[int, float | None]]:
    """Size and age in seconds of the oldest item of each review queue, across all tenants."""
    now = now or timezone.now()
    everyone = Actor.job("metrics")
    queues = {
        "quarantine": quarantine_queue(everyone).order_by().aggregate(n=Count("pk"), oldest=Min("created_at")),
        "drift": drift_queue(everyone, now=now).order_by().aggregate(n=Count("pk"), oldest=Min("confirmed_at")),
        "forget_propagation": ForgetRequest.objects.filter(status=ForgetRequest.Status.PROPAGATING)
        .aggregate(n=Count("pk"), oldest=Min("requested_at")),
        "dedup_proposals": DedupProposal.objects.filter(status=DedupProposal.Status.OPEN)
        .aggregate(n=Count("pk"), oldest=Min("created_at")),
    }
    return {
        name: (row["n"], (now - row["oldest"]).total_seconds() if row["oldest"] else None)
        for name, row in queues.items()
    }


class QueueCollector:
    def collect(self):
        size = GaugeMetricFamily("governed_memory_queue_size", "Items waiting in each review queue.", labels=["queue"])
        age = GaugeMetricFamily(
            "governed_memory_queue_oldest_age_seconds", "Age of the oldest waiting item (0 when empty).", labels=["queue"]
        )
        for name, (count, oldest) in queue_snapshot().items():
            size.add_metric([name], count)
            age.add_metric([name], oldest or 0.0)
        yield size
        yield age


def build_registry() -> CollectorRegistry:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = CollectorRegistry()
        registry.register(_ProcessRegistry())
    registry.register(QueueCollector())
    return registry


class _ProcessRegistry:
    """Single-process mode: everything in the default registry of this process."""

    def collect(self):
        yield from REGISTRY.collect()


class MetricsView(PrometheusDjangoView):
    def get(self, request, *args, **kwargs):
        self.registry = build_registry()
        return super().get(request, *args, **kwargs)
