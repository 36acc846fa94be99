"""How the dashboard shows its statistics: y axes with nice, evenly spaced, exactly labelled ticks
covering the data; durations in their two largest adjacent units; the lag percentiles over the
last 90 days only. (The statistics themselves, against percentiles computed independently, are in
tests/governance/test_dashboard.py.)"""

import itertools
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.cache import cache
from django.utils import timezone

from governance.models import ForgetRequest
from governance.review.charts import LEFT, MAX_BAR, MAX_STACK, TICKS, X_LABELS, Scale, Series, grouped_bars, points, stacked_bars
from governance.review.dashboard import _duration
from governance.review.stats import build_dashboard


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
    gaps = {round(b - a, 9) for a, b in itertools.pairwise(scale.ticks)}
    assert gaps == {round(scale.step, 9)}
    if whole:
        assert scale.step >= 1
    for tick in scale.ticks:  # the label says the tick's value
        label = scale.label(tick)
        value = float(label[:-1]) * 1000 if label.endswith("k") else float(label)
        assert value == pytest.approx(tick), (label, tick)


def test_counts_chart_labels_today_and_keeps_every_legend_entry():
    days = [f"11-{d:02d}" for d in range(2, 31)] + ["12-01"]
    svg = grouped_bars(
        days,
        [Series("writes", [0] * 29 + [5]), Series("quarantined at write", [0] * 29 + [3])],
        title="t",
        label_every=5,
        whole=True,
    )
    x_labels = re.findall(r'text-anchor="middle" font-size="11">([^<]+)<', svg)
    assert x_labels[-1] == "12-01" and len(x_labels) == 6
    ages = ["< 7 d", "7–30 d", "30–90 d", "90–180 d", "180–365 d", "> 1 y"]
    svg = stacked_bars(["semantic"], [Series(name, [1]) for name in ages], title="t", width=720)
    width = int(re.search(r'viewBox="0 0 (\d+) (\d+)"', svg).group(1))
    for name in ages:
        x = float(
            re.search(rf'<text x="([\d.]+)"[^>]*>{re.escape(name).replace("<", "&lt;").replace(">", "&gt;")}</text>', svg).group(
                1
            )
        )
        assert x + 7 * len(name) <= width, name  # inside the picture, not cut off at its right edge


def rects(svg: str) -> list[tuple[float, float]]:
    """(x, width) of each bar (the legend's squares have no title)."""
    return [
        (float(x), float(w))
        for x, w in re.findall(r'<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)" height="[\d.]+" fill="#\w+"><title>', svg)
    ]


def x_labels(svg: str) -> list[tuple[float, str]]:
    return [
        (float(x), label)
        for x, label in re.findall(r'<text x="([\d.]+)" y="[\d.]+" text-anchor="middle" font-size="11">([^<]+)<', svg)
    ]


def test_one_day_of_bars_is_a_narrow_pair_centred_on_its_label():
    svg = grouped_bars(["12-02"], [Series("hit@k (%)", [100]), Series("MRR (× 100)", [100])], title="t", y_title="score")
    (left, left_w), (right, right_w) = rects(svg)
    assert left_w == right_w <= MAX_BAR and right == pytest.approx(left + left_w, abs=0.1)
    ((label_x, label),) = x_labels(svg)
    assert label == "12-02" and (left + right + right_w) / 2 == pytest.approx(label_x, abs=0.2)
    assert re.search(r'<text class="axis-title"[^>]*rotate\(-90[^>]*>score</text>', svg)
    # Many days: the bars share the width as before (30 days of two series: 8.8 each, under the cap).
    svg = grouped_bars([f"d{i}" for i in range(30)], [Series("a", [1] * 30), Series("b", [1] * 30)], title="t")
    assert {round(w, 1) for _, w in rects(svg)} == {round((720 - LEFT - 12) / 30 * 0.8 / 2, 1)}


def test_one_stacked_bar_is_not_the_whole_width():
    svg = stacked_bars(["semantic"], [Series("< 7 d", [2]), Series("7–30 d", [1])], title="t")
    assert {w for _, w in rects(svg)} == {MAX_STACK}


def test_one_lag_is_a_dot_in_the_middle_with_its_day_and_both_axes_named():
    svg = points(["12-02"], [0.11], title="t", unit=" s", y_title="lag", x_title="requests by day")
    cx = float(re.search(r'<circle cx="([\d.]+)"', svg).group(1))
    assert cx == pytest.approx(LEFT + (720 - LEFT - 12) / 2)
    assert x_labels(svg) == [(pytest.approx(cx, abs=0.1), "12-02")]
    assert ">lag</text>" in svg and ">requests by day</text>" in svg


def test_lag_days_are_labelled_once_each_and_thinned_to_fit():
    days = ["11-01"] * 3 + ["11-02"] * 2 + ["11-03"]
    assert [label for _, label in x_labels(points(days, [1.0] * 6, title="t"))] == ["11-01", "11-02", "11-03"]
    many = [f"11-{d:02d}" for d in range(1, 31)]
    shown = x_labels(points(many, [1.0] * 30, title="t"))
    assert shown[0][1] == "11-01" and 4 <= len(shown) <= X_LABELS
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(shown)]
    assert min(gaps) >= (720 - LEFT - 12) / X_LABELS - 0.1  # never crowded


def test_labels_that_would_touch_on_a_narrow_chart_alternate_between_two_rows():
    kinds = ["episodic", "preference", "procedural", "semantic", "working_note"]
    series = [Series("< 7 d", [1] * 5)]

    def ys(svg):
        return [float(y) for y in re.findall(r'<text x="[\d.]+" y="([\d.]+)" text-anchor="middle" font-size="11">', svg)]

    wide = ys(stacked_bars(kinds, series, title="t", width=720))
    assert len(set(wide)) == 1  # room enough: one row
    narrow_svg = stacked_bars(kinds, series, title="t", width=360)
    narrow = ys(narrow_svg)
    assert narrow[0::2] == [narrow[0]] * 3 and narrow[1::2] == [narrow[0] + 12] * 2
    legend_y = float(re.search(r'<rect x="\d+" y="(\d+)" width="12"', narrow_svg).group(1))
    assert legend_y > max(narrow)  # the legend moved below the second row
    height = float(re.search(r'viewBox="0 0 \d+ ([\d.]+)"', narrow_svg).group(1))
    assert legend_y + 12 <= height


@pytest.mark.parametrize(
    "value, text",
    [
        (timedelta(days=95, minutes=1), "95 d"),
        (timedelta(days=3, hours=4, minutes=5), "3 d 4 h"),
        (timedelta(hours=2), "2 h"),
        (timedelta(minutes=12, seconds=40), "12 min"),
        (timedelta(seconds=4.24), "4.2 s"),
        (None, "—"),
    ],
)
def test_durations_use_adjacent_units(value, text):
    assert _duration(value) == text


@pytest.mark.django_db
def test_lag_percentiles_leave_out_requests_older_than_90_days(tenant, reviewer_actor):
    cache.clear()
    now = timezone.now()
    for age_days, lag in ((100, 1000), (100, 2000), (10, 2), (5, 4), (1, 6)):
        request = ForgetRequest.objects.create(
            tenant=tenant, subject="s", requested_by="test", status=ForgetRequest.Status.COMPLETED
        )
        requested = now - timedelta(days=age_days)
        ForgetRequest.objects.filter(pk=request.pk).update(
            requested_at=requested, completed_at=requested + timedelta(seconds=lag)
        )
    data = build_dashboard(reviewer_actor, now=now)
    assert data.propagation_lag_p50 == timedelta(seconds=4)
    assert [lag for _, lag in data.propagation_lags] == [2, 4, 6]
    cache.clear()
