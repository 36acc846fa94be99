"""The governance dashboard page: the design's numbers and their charts for the reviewer's tenants
(computed in governance.review.stats, drawn as server-side SVG by governance.review.charts)."""

from django.http import HttpResponse
from django.utils.translation import ngettext

from governance.review.charts import Series, grouped_bars, points, stacked_bars
from governance.review.common import ReviewerRequest, render_page, reviewer_required, with_how_started
from governance.review.stats import AGE_BUCKETS, build_dashboard
from governance.review.views import QUEUE_TILES
from memory.selectors import tenants_in_scope

# Each chart is drawn twice: for a laptop, and for a phone's width (shown by the stylesheet's
# media query), so that on a phone its text stays readable without scrolling sideways.
WIDE, NARROW = 720, 360
NARROW_LABEL_EVERY = 2

# The lag chart's unit: the largest whose values stay readable (a lag of hours is not shown in seconds).
LAG_UNITS = [(" h", 3600.0), (" min", 60.0), (" s", 1.0)]


@reviewer_required
def dashboard(request: ReviewerRequest) -> HttpResponse:
    """The governance numbers and their charts, for the reviewer's tenants."""
    data = build_dashboard(request.actor)
    narrow = _charts(data, width=NARROW, label_every=NARROW_LABEL_EVERY)
    charts = {name: {"wide": wide, "narrow": narrow[name]} for name, wide in _charts(data, width=WIDE, label_every=1).items()}
    numbers = [
        ("Attributed writes", _share(data.attributed_share), "records with structured provenance (100% by construction)"),
        ("Median age of active memory", _duration(data.median_active_age), "since each active memory was written"),
        (
            "Forget propagation lag",
            f"p50 {_duration(data.propagation_lag_p50)} · p95 {_duration(data.propagation_lag_p95)}",
            "from request to last receipt, last 90 days",
        ),
        (
            "Expired on schedule",
            _share(data.expired_on_schedule_share),
            ngettext(
                "of %(count)d expired record, within 5 minutes of its expiry time",
                "of %(count)d expired records, within 5 minutes of their expiry time",
                data.expired_total,
            )
            % {"count": data.expired_total},
        ),
        (
            "Dedup regret rate",
            _share(data.regret_rate),
            ngettext(
                "%(rolled_back)d of %(count)d accepted proposal rolled back",
                "%(rolled_back)d of %(count)d accepted proposals rolled back",
                data.accepted_proposals,
            )
            % {"rolled_back": data.rolled_back_proposals, "count": data.accepted_proposals}
            if data.accepted_proposals
            else "no proposal accepted yet",
        ),
        (
            "Golden recall",
            _golden(data.golden_trend[-1] if data.golden_trend else None),
            "hit@k and MRR of the golden sets on the active index, latest day with a run",
        ),
    ]
    # The oldest item's time is what the queue is ordered by: written, last confirmed, filed,
    # proposed. For drift that is the time since confirmation, not time spent waiting in the queue.
    queues = [
        (QUEUE_TILES[stat.key].name, stat.size, QUEUE_TILES[stat.key].oldest_label, _duration(stat.age(data.generated_at)))
        for stat in data.queues
    ]
    return render_page(
        request,
        "review/dashboard.html",
        {
            "nav": "dashboard",
            "data": data,
            "charts": charts,
            "numbers": numbers,
            "queues": queues,
            "job_runs": with_how_started(data.last_jobs),
            "tenants": list(tenants_in_scope(request.actor)),
        },
    )


def _charts(data, *, width: int, label_every: int) -> dict:
    """The four charts drawn `width` wide; `label_every` thins the day labels further (the narrow
    drawing has half the room per day)."""
    days = [day[5:] for day, _, _ in data.writes_per_day]
    lag_unit, lag_size = _lag_unit(max((lag for _, lag in data.propagation_lags), default=0))
    return {
        "writes": grouped_bars(
            days,
            [
                Series("writes", [w for _, w, _ in data.writes_per_day]),
                Series("quarantined at write", [q for _, _, q in data.writes_per_day]),
            ],
            title="Writes and quarantines per day (last 30 days)",
            label_every=5 * label_every,
            whole=True,
            y_title="records",
            width=width,
        ),
        "ages": stacked_bars(
            sorted(data.age_by_kind),
            [
                Series(label, [data.age_by_kind[kind][i] for kind in sorted(data.age_by_kind)])
                for i, (label, _) in enumerate(AGE_BUCKETS)
            ],
            title="Age of active memory per kind",
            y_title="active records",
            width=width,
        ),
        "golden": grouped_bars(
            [point.day[5:] for point in data.golden_trend],
            [
                Series("hit@k (%)", [round(100 * point.hit_at_k, 1) for point in data.golden_trend]),
                Series("MRR (× 100)", [round(100 * point.mrr, 1) for point in data.golden_trend]),
            ],
            title="Golden recall on the active index per day (last 90 days)",
            label_every=7 * label_every,
            y_title="score",
            width=width,
        ),
        "lag": points(
            [day[5:] for day, _ in data.propagation_lags],
            [lag / lag_size for _, lag in data.propagation_lags],
            title="Forget propagation lag per request (last 90 days)",
            unit=lag_unit,
            y_title="lag",
            x_title="requests, oldest first, by the day requested",
            width=width,
        ),
    }


def _lag_unit(largest_seconds: float) -> tuple[str, float]:
    return next(((unit, size) for unit, size in LAG_UNITS if largest_seconds >= 2 * size), LAG_UNITS[-1])


def _golden(point) -> str:
    return "—" if point is None else f"hit@k {point.hit_at_k:.0%} · MRR {point.mrr:.2f}"


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


DURATION_UNITS = [("d", 86400), ("h", 3600), ("min", 60)]


def _duration(value) -> str:
    """A timedelta in its largest unit and the next one when not zero: "3 d 4 h", "95 d",
    "12 min", "4.2 s" (never "95 d 1 min", which skips the hours)."""
    if value is None:
        return "—"
    seconds = value.total_seconds()
    if seconds < 60:
        return f"{seconds:.1f} s"
    i, (name, size) = next((i, unit) for i, unit in enumerate(DURATION_UNITS) if seconds >= unit[1])
    text = f"{int(seconds // size)} {name}"
    if i + 1 < len(DURATION_UNITS):
        next_name, next_size = DURATION_UNITS[i + 1]
        if rest := int(seconds % size // next_size):
            text += f" {rest} {next_name}"
    return text
