"""The governance dashboard: the design's numbers for the reviewer's tenants, charts as inline SVG
(no network), a constant number of queries however many records there are."""

import re
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from governance.models import ForgetRequest
from governance.review.stats import build_dashboard
from memory.actors import Actor
from memory.models import MemoryRecord
from memory.services import memory_expire_due

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def reviewer_client(client, reviewer):
    client.force_login(reviewer)
    return client


def test_numbers_reflect_the_tenant_records(write, reviewer_actor, other_tenant, make_credential):
    write()
    write(authority="agent", provenance={"source_type": "agent_inference"})
    due = write(ttl_seconds=60)
    write(credential_=make_credential(other_tenant), authority="agent", provenance={"source_type": "agent_inference"})
    memory_expire_due(actor=Actor.job("expire"), now=due.expires_at + timedelta(seconds=30))

    data = build_dashboard(reviewer_actor)
    assert data.total_records == 3  # the other tenant's record is not counted
    assert data.attributed_share == 1.0
    assert data.expired_total == 1 and data.expired_on_schedule_share == 1.0
    quarantine = next(stat for stat in data.queues if stat.key == "quarantine")
    assert quarantine.size == 1
    today = data.writes_per_day[-1]
    assert today[0] == timezone.now().date().isoformat() and today[1:] == (3, 1)
    assert sum(data.age_by_kind["preference"]) == 1  # one active preference left


def test_late_expiry_is_not_on_schedule(write, reviewer_actor):
    due = write(ttl_seconds=60)
    memory_expire_due(actor=Actor.job("expire"), now=due.expires_at + timedelta(hours=1))
    assert build_dashboard(reviewer_actor).expired_on_schedule_share == 0.0


def test_propagation_lag_quantiles(reviewer_actor, tenant):
    now = timezone.now()
    for seconds in (2, 4, 6, 8, 100):
        request = ForgetRequest.objects.create(
            tenant=tenant, subject="x", requested_by="test", status=ForgetRequest.Status.COMPLETED
        )
        ForgetRequest.objects.filter(pk=request.pk).update(
            requested_at=now - timedelta(hours=1), completed_at=now - timedelta(hours=1) + timedelta(seconds=seconds)
        )
    data = build_dashboard(reviewer_actor)
    assert data.propagation_lag_p50 == timedelta(seconds=6)
    assert timedelta(seconds=8) < data.propagation_lag_p95 < timedelta(seconds=100)
    assert [lag for _, lag in data.propagation_lags] == [2, 4, 6, 8, 100]


def test_page_renders_svg_charts_without_external_resources(reviewer_client, write):
    write()
    response = reviewer_client.get(reverse("review:dashboard"))
    assert response.status_code == 200
    html = response.content.decode()
    # writes, ages, golden recall, propagation lag: each drawn for a laptop and for a phone
    assert html.count("<svg") == 8 and html.count('<div class="chart-narrow"><svg') == 4
    assert "Attributed writes" in html and "100.0%" in html
    # nothing loaded from elsewhere: every src and href stays on this site
    assert not re.findall(r'(?:src|href)="(?:https?:)?//', html), re.findall(r'(?:src|href)="(?:https?:)?//[^"]*', html)


def _queries_for_page(client) -> int:
    cache.clear()
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(reverse("review:dashboard")).status_code == 200
    return len(ctx.captured_queries)


def test_query_count_is_constant_as_records_grow(reviewer_client, write):
    for _ in range(10):
        write()
    small = _queries_for_page(reviewer_client)
    records = [write() for _ in range(5)]
    MemoryRecord.objects.filter(pk__in=[r.pk for r in records]).update(created_at=timezone.now() - timedelta(days=3))
    for _ in range(185):
        write(authority="agent", provenance={"source_type": "agent_inference"})
    assert _queries_for_page(reviewer_client) == small


def test_anonymous_is_sent_to_login(client):
    response = client.get(reverse("review:dashboard"))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def _continuous_percentile(values: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks (what percentile_cont computes), written
    out here independently of the dashboard's code."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def test_median_age_is_computed_from_the_real_ages(write, reviewer_actor):
    now = timezone.now()
    ages_days = [0.001, 0.002, 0.003, 0.004, 3, 5, 6]  # 4 of 7 written minutes ago
    for days in ages_days:
        record = write()
        MemoryRecord.objects.filter(pk=record.pk).update(created_at=now - timedelta(days=days))
    data = build_dashboard(reviewer_actor, now=now)
    expected = timedelta(days=_continuous_percentile(ages_days, 0.5))
    assert abs(data.median_active_age - expected) < timedelta(seconds=1)
    assert data.median_active_age < timedelta(minutes=10)


def test_forget_lag_percentiles_cover_every_request_of_the_90_days_not_the_oldest_500(tenant, reviewer_actor):
    now = timezone.now()
    lags = [float(1 + (i * 37) % 600) for i in range(620)]  # seconds, 620 requests
    requests = ForgetRequest.objects.bulk_create(
        [
            ForgetRequest(tenant=tenant, subject=f"s-{i}", status=ForgetRequest.Status.COMPLETED, requested_by="test")
            for i in range(len(lags))
        ]
    )
    for i, (request, lag) in enumerate(zip(requests, lags, strict=True)):
        request.requested_at = now - timedelta(days=80) + timedelta(minutes=i)
        request.completed_at = request.requested_at + timedelta(seconds=lag)
    ForgetRequest.objects.bulk_update(requests, ["requested_at", "completed_at"])
    data = build_dashboard(reviewer_actor, now=now)
    for measured, q in ((data.propagation_lag_p50, 0.5), (data.propagation_lag_p95, 0.95)):
        assert abs(measured.total_seconds() - _continuous_percentile(lags, q)) < 0.01, q
    assert len(data.propagation_lags) == 500
    newest = max(requests, key=lambda r: r.requested_at)
    assert data.propagation_lags[-1] == (newest.requested_at.date().isoformat(), lags[-1])
