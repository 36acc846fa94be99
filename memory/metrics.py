"""Prometheus counters and histograms for the memory lifecycle. Labels carry statuses and
transition names only: never content, subjects or ids. Counts are taken when the transaction
commits, so a rolled-back request counts nothing (conflicts are counted when they are raised).

Multi-process safe: with PROMETHEUS_MULTIPROC_DIR set (bin/run sets it for web, worker and beat),
prometheus_client writes per-process files that the /metrics view aggregates."""

from django.db import transaction
from prometheus_client import Counter, Histogram

WRITES = Counter("governed_memory_writes_total", "Memory writes by resulting status.", ["status"])
TRANSITIONS = Counter(
    "governed_memory_transitions_total",
    "Lifecycle transitions (promote, reject, confirm, retire, supersede, expire, forget, restore).",
    ["transition"],
)
CONFLICTS = Counter(
    "governed_memory_conflicts_total", "Refused changes: stale version, inapplicable transition, idempotency.", ["reason"]
)
RECALL_LATENCY = Histogram(
    "governed_memory_recall_seconds",
    "Recall latency inside the service.",
    buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0),
)
RECALL_ITEMS = Histogram("governed_memory_recall_items", "Items returned per recall.", buckets=(0, 1, 2, 5, 10, 20, 50))


def count_on_commit(counter: Counter, label: str, amount: int = 1) -> None:
    if amount:
        transaction.on_commit(lambda: counter.labels(label).inc(amount))


def count_conflict(reason: str) -> None:
    CONFLICTS.labels(reason).inc()
