"""How the dashboard shows its statistics: y axes with nice, evenly spaced, exactly labelled ticks
covering the data; durations in their two largest adjacent units; the lag percentiles over the
last 90 days only. (The statistics themselves, against percentiles computed independently, are in
tests/governance/test_dashboard.py.)"""

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.cache import cache
from django.utils import timezone

from governance.charts import TICKS, Scale, Series, grouped_bars, stacked_bars
from governance.dashboard import build_dashboard
from governance.models import ForgetRequest
from governance.review.dashboard import _duration


@pytest.mark.parametrize("largest", [0, 0.3, 1, 1.1, 2, 3, 5, 7, 9.5, 12, 36, 99, 100, 101, 620, 999, 4321, 12345, 86400])
@pytest.mark.parametrize("whole", [False, True])
def test_axis_ticks_are_nice_even_exact_and_cover_the_data(largest, whole):
    scale = Scale.covering(largest, whole=whole)
    mantissa = Decimal(repr(scale.step)).normalize().as_tuple()
    assert mantissa.digits in ((1,), (2,), (5,)), scale.step  # 1, 2 or 5 times a power of ten
    assert scale.top >= largest
    if largest:  # no empty interval on top (no data: a default 0 to 1)
        assert scale.top - scale.step < largest or scale.top == scale.step
    assert 1 <= len(scale.ticks) - 1 <= TICKS
    gaps = {round(b - a, 9) for a, b in zip(scale.ticks, scale.ticks[1:])}
    assert gaps == {round(scale.step, 9)}
    if whole:
        assert scale.step >= 1
    for tick in scale.ticks:  # the label says the tick's value
        label = scale.label(tick)
        value = float(label[:-1]) * 1000 if label.endswith("k") else float(label)
        assert value == pytest.approx(tick), (label, tick)


def test_counts_chart_labels_today_and_keeps_every_legend_entry():
    days = [f"11-{d:02d}" for d in range(2, 31)] + ["12-01"]
    svg = grouped_bars(days, [Series("writes", [0] * 29 + [5]), Series("quarantined at write", [0] * 29 + [3])],
                       title="t", label_every=5, whole=True)
    x_labels = re.findall(r'text-anchor="middle" font-size="11">([^<]+)<', svg)
    assert x_labels[-1] == "12-01" and len(x_labels) == 6
    ages = ["< 7 d", "7–30 d", "30–90 d", "90–180 d", "180–365 d", "> 1 y"]
    svg = stacked_bars(["semantic"], [Series(name, [1]) for name in ages], title="t", width=720)
    width = int(re.search(r'viewBox="0 0 (\d+) (\d+)"', svg).group(1))
    for name in ages:
        x = float(re.search(rf'<text x="([\d.]+)"[^>]*>{re.escape(name).replace("<", "&lt;").replace(">", "&gt;")}</text>', svg).group(1))
        assert x + 7 * len(name) <= width, name  # inside the picture, not cut off at its right edge


@pytest.mark.parametrize("value, text", [
    (timedelta(days=95, minutes=1), "95 d"), (timedelta(days=3, hours=4, minutes=5), "3 d 4 h"),
    (timedelta(hours=2), "2 h"), (timedelta(minutes=12, seconds=40), "12 min"), (timedelta(seconds=4.24), "4.2 s"),
    (None, "—"),
])
def test_durations_use_adjacent_units(value, text):
    assert _duration(value) == text


@pytest.mark.django_db
def test_lag_percentiles_leave_out_requests_older_than_90_days(tenant, reviewer_actor):
    cache.clear()
    now = timezone.now()
    for age_days, lag in ((100, 1000), (100, 2000), (10, 2), (5, 4), (1, 6)):
        request = ForgetRequest.objects.create(tenant=tenant, subject="s", requested_by="test",
                                               status=ForgetRequest.Status.COMPLETED)
        requested = now - timedelta(days=age_days)
        ForgetRequest.objects.filter(pk=request.pk).update(requested_at=requested,
                                                           completed_at=requested + timedelta(seconds=lag))
    data = build_dashboard(reviewer_actor, now=now)
    assert data.propagation_lag_p50 == timedelta(seconds=4)
    assert [lag for _, lag in data.propagation_lags] == [2, 4, 6]
    cache.clear()
