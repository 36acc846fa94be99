"""GET /metrics: Prometheus text format. Counters and histograms come from the processes that
count them (web, worker; aggregated through PROMETHEUS_MULTIPROC_DIR when set); queue gauges are
computed from the database at scrape time, so every process agrees and nothing can go stale."""

import os

from django.utils import timezone
from prometheus_client import REGISTRY, CollectorRegistry, multiprocess
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.django import PrometheusDjangoView

from governance.review.selectors import queue_stats
from memory.actors import Actor


class QueueCollector:
    def collect(self):
        size = GaugeMetricFamily("governed_memory_queue_size", "Items waiting in each review queue.", labels=["queue"])
        age = GaugeMetricFamily(
            "governed_memory_queue_oldest_age_seconds", "Age of the oldest waiting item (0 when empty).", labels=["queue"]
        )
        now = timezone.now()
        for stat in queue_stats(Actor.job("metrics"), now=now):
            size.add_metric([stat.key], stat.size)
            oldest = stat.age(now)
            age.add_metric([stat.key], oldest.total_seconds() if oldest else 0.0)
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
