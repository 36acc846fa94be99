"""The governance numbers of the design, computed with aggregate queries (a handful per page,
whatever the number of records) for the tenants a reviewer may see; the dashboard page
(governance.review.dashboard) draws them. Cached briefly, since the dashboard is looked at, not
polled."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.core.cache import cache
from django.db.models import (
    Case,
    Count,
    DateTimeField,
    Expression,
    ExpressionWrapper,
    F,
    IntegerField,
    Q,
    QuerySet,
    Value,
    When,
)
from django.db.models.functions import TruncDate
from django.utils import timezone

from governance.dedup.services import regret_counts
from governance.forget.models import ForgetRequest
from governance.golden.selectors import TrendPoint, score_trend
from governance.jobs.selectors import last_job_runs
from governance.review.selectors import QueueStat, queue_stats
from memory.actors import Actor
from memory.engine import current
from memory.models import Status
from memory.selectors import records_in_scope

AGE_BUCKETS: list[tuple[str, int | None]] = [
    ("< 7 d", 7),
    ("7–30 d", 30),
    ("30–90 d", 90),
    ("90–180 d", 180),
    ("180–365 d", 365),
    ("> 1 y", None),
]
ON_SCHEDULE_GRACE = timedelta(minutes=5)
CACHE_SECONDS = 60
CHART_LAGS = 500  # forget requests shown on the lag chart: the newest


@dataclass
class Dashboard:
    generated_at: datetime
    total_records: int
    attributed_share: float | None
    median_active_age: timedelta | None
    queues: list[QueueStat]
    propagation_lag_p50: timedelta | None
    propagation_lag_p95: timedelta | None
    expired_on_schedule_share: float | None
    expired_total: int
    regret_rate: float | None
    accepted_proposals: int
    rolled_back_proposals: int
    last_jobs: list[dict]
    writes_per_day: list[tuple[str, int, int]] = field(default_factory=list)  # (day, writes, quarantined at write)
    age_by_kind: dict[str, list[int]] = field(default_factory=dict)  # kind -> count per AGE_BUCKETS
    propagation_lags: list[tuple[str, float]] = field(default_factory=list)  # (requested day, lag seconds)
    golden_trend: list[TrendPoint] = field(default_factory=list)  # hit@k and MRR per day on the active index


def percentiles(queryset: QuerySet, duration: Expression, fractions: tuple[float, ...]) -> list[timedelta | None]:
    """Continuous percentiles of a duration over `queryset` (linear interpolation between the two
    nearest values), computed by the database (memory.engine.*.ops.percentiles)."""
    return current().ops.percentiles(queryset, duration, fractions)


def build_dashboard(actor: Actor, *, now: datetime | None = None, days: int = 30) -> Dashboard:
    # The version changes with the Dashboard's fields (and the module its classes live in), so a
    # cached one of another shape is never read.
    key = f"governance-dashboard:v3:{actor.label}:{sorted(actor.tenant_ids) if actor.tenant_ids is not None else 'all'}:{days}"
    cached = cache.get(key)
    if cached is not None:
        return cached
    dashboard = _compute(actor, now=now or timezone.now(), days=days)
    cache.set(key, dashboard, CACHE_SECONDS)
    return dashboard


def _compute(actor: Actor, *, now: datetime, days: int) -> Dashboard:
    records = records_in_scope(actor)

    totals = records.aggregate(
        total=Count("pk"),
        attributed=Count("pk", filter=~Q(source_type="")),
        expired=Count("pk", filter=Q(status=Status.EXPIRED)),
        expired_on_time=Count(
            "pk",
            filter=Q(status=Status.EXPIRED)
            & Q(
                status_changed_at__lte=ExpressionWrapper(F("expires_at") + Value(ON_SCHEDULE_GRACE), output_field=DateTimeField())
            ),
        ),
    )

    # Age distribution of active memory per kind: one grouped scan.
    bucket = Case(
        *[When(created_at__gt=now - timedelta(days=upper), then=Value(i)) for i, (_, upper) in enumerate(AGE_BUCKETS) if upper],
        default=Value(len(AGE_BUCKETS) - 1),
        output_field=IntegerField(),
    )
    age_by_kind: dict[str, list[int]] = {}
    for row in (
        records.filter(status=Status.ACTIVE)
        .annotate(bucket=bucket)
        .values("kind__name", "bucket")
        .annotate(n=Count("pk"))
        .order_by()
    ):
        age_by_kind.setdefault(row["kind__name"], [0] * len(AGE_BUCKETS))[row["bucket"]] += row["n"]

    since = (now - timedelta(days=days - 1)).replace(hour=0, minute=0, second=0, microsecond=0)
    per_day = {
        row["day"]: (row["writes"], row["quarantined"])
        for row in records.filter(created_at__gte=since)
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(writes=Count("pk"), quarantined=Count("pk", filter=~Q(quarantine_reason="")))
        .order_by()
    }
    writes_per_day = []
    for i in range(days):
        day = (since + timedelta(days=i)).date()
        writes, quarantined = per_day.get(day, (0, 0))
        writes_per_day.append((day.isoformat(), writes, quarantined))

    completed = actor.in_tenants(
        ForgetRequest.objects.filter(status=ForgetRequest.Status.COMPLETED, requested_at__gte=now - timedelta(days=90))
    )
    lag = F("completed_at") - F("requested_at")
    p50, p95 = percentiles(completed, lag, (0.5, 0.95))
    # The chart shows the newest requests; the percentiles above cover every one of the 90 days.
    lag_rows = reversed(completed.order_by("-requested_at").values_list("requested_at", "completed_at")[:CHART_LAGS])
    lags = [(requested.date().isoformat(), (done - requested).total_seconds()) for requested, done in lag_rows]
    (median_age,) = percentiles(records.filter(status=Status.ACTIVE), Value(now) - F("created_at"), (0.5,))

    regret = regret_counts(actor=actor)

    queues = queue_stats(actor, now=now)
    last_jobs = last_job_runs()
    return Dashboard(
        generated_at=now,
        total_records=totals["total"],
        attributed_share=(totals["attributed"] / totals["total"]) if totals["total"] else None,
        median_active_age=median_age,
        queues=queues,
        propagation_lag_p50=p50,
        propagation_lag_p95=p95,
        expired_on_schedule_share=(totals["expired_on_time"] / totals["expired"]) if totals["expired"] else None,
        expired_total=totals["expired"],
        regret_rate=regret.rate,
        accepted_proposals=regret.accepted,
        rolled_back_proposals=regret.rolled_back,
        last_jobs=last_jobs,
        writes_per_day=writes_per_day,
        age_by_kind=age_by_kind,
        propagation_lags=lags,
        golden_trend=score_trend(actor, now=now),
    )
