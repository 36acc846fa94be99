"""Refused signatures, counted twice: a Prometheus counter by reason (for the operator's rules),
and a tally per tenant in the shared cache over the last hour, which the alerts job reads
(`governance.alerts`: a tenant whose signed writes keep failing gets an alert episode). The tally
lives in the cache, not the database: the refused request rolls its transaction back, and a
failure must not be a write anyway. Neither holds content, subjects or source names."""

from datetime import datetime

from django.core.cache import cache
from django.utils import timezone
from prometheus_client import Counter

SIGNATURE_FAILURES = Counter(
    "governed_memory_signature_failures_total",
    "Signed writes refused because their provenance did not verify, by reason.",
    ["reason"],
)
REASONS = ("incomplete", "malformed", "unknown_source", "bad_signature", "retired_key", "revoked_key")

BUCKET_SECONDS = 300
WINDOW_BUCKETS = 12  # the tally covers the last hour
TALLY_KEY = "signature-failures"  # the cache keys' prefix


def _bucket_key(tenant_id: int, bucket: int) -> str:
    return f"{TALLY_KEY}:{tenant_id}:{bucket}"


def _bucket(at: datetime) -> int:
    return int(at.timestamp()) // BUCKET_SECONDS


def record_signature_failure(tenant_id: int, reason: str, *, now: datetime | None = None) -> None:
    SIGNATURE_FAILURES.labels(reason).inc()
    key = _bucket_key(tenant_id, _bucket(now or timezone.now()))
    timeout = BUCKET_SECONDS * (WINDOW_BUCKETS + 1)
    cache.add(key, 0, timeout)
    try:
        cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, timeout)


def recent_signature_failures(tenant_ids: list[int], *, now: datetime) -> dict[int, int]:
    """Refused signatures per tenant over the last hour (tenants with none are left out)."""
    last = _bucket(now)
    keys = {
        _bucket_key(tenant_id, bucket): tenant_id
        for tenant_id in tenant_ids
        for bucket in range(last - WINDOW_BUCKETS + 1, last + 1)
    }
    found: dict[int, int] = {}
    for key, count in cache.get_many(list(keys)).items():
        found[keys[key]] = found.get(keys[key], 0) + int(count)
    return found
