"""Scoped reads of golden questions and runs, for the API, the reviewer page and the dashboard.
Every read starts from the actor's tenants (`Actor.in_tenants`)."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import F, OuterRef, QuerySet, Subquery, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from governance.golden.models import GoldenQuestion, GoldenRun
from memory.actors import Actor


def questions_in_scope(actor: Actor) -> QuerySet[GoldenQuestion]:
    return actor.in_tenants(GoldenQuestion.objects.all()).select_related("tenant", "agent").prefetch_related("expected")


def runs_in_scope(actor: Actor) -> QuerySet[GoldenRun]:
    return actor.in_tenants(GoldenRun.objects.all()).select_related("tenant")


def latest_runs(actor: Actor) -> dict[int, GoldenRun]:
    """The newest run of each of the actor's tenants on the index that was active then (nightly or
    on demand): one query."""
    newest = (
        GoldenRun.objects.filter(tenant_id=OuterRef("tenant_id"), index_active=True)
        .order_by("-started_at", "-pk")
        .values("pk")[:1]
    )
    runs = runs_in_scope(actor).filter(index_active=True, pk=Subquery(newest))
    return {run.tenant_id: run for run in runs}


def latest_results(actor: Actor) -> dict[str, dict]:
    """Question id -> its result in its tenant's latest run (with `run`: that run's id)."""
    return {result["question"]: {**result, "run": run.pk} for run in latest_runs(actor).values() for result in run.results}


@dataclass(frozen=True)
class TrendPoint:
    day: str
    questions: int
    hit_at_k: float
    mrr: float


def score_trend(actor: Actor, *, now: datetime | None = None, days: int = 90) -> list[TrendPoint]:
    """hit@k and MRR per day over the actor's tenants, from runs on the then-active index, weighted
    by questions scored: one grouped query."""
    since = (now or timezone.now()) - timedelta(days=days)
    rows = (
        runs_in_scope(actor)
        .filter(index_active=True, started_at__gte=since, questions__gt=0)
        .annotate(day=TruncDate("started_at"))
        .values("day")
        .annotate(questions_sum=Sum("questions"), hits_sum=Sum("hits"), rr_sum=Sum(F("mrr") * F("questions")))
        .order_by("day")
    )
    return [
        TrendPoint(
            day=row["day"].isoformat(),
            questions=row["questions_sum"],
            hit_at_k=row["hits_sum"] / row["questions_sum"],
            mrr=row["rr_sum"] / row["questions_sum"],
        )
        for row in rows
    ]
