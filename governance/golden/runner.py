"""Runs golden questions through recall and scores them.

Each question goes through `memory.recall.recall_for_agent` exactly as its agent would ask it
(purpose, subject, limit k), against one index (a `SearchIndex`, its name, or None for the active
one, resolved once by `memory.search.build.serving_index`), without touching `last_used_at`. Per question: the rank of the first expected record within
the top k; hit@k is 1 if there is one, the reciprocal rank is 1/rank (0 beyond k). A run stores
both per question and their means per tenant.

Loading is set-based: the questions of every tenant in one query, their expected ids in one, which
of those are still recallable in one per purpose; then one recall per question, and one insert for
the runs.
A question none of whose expected records can be recalled any more (expired, superseded, forgotten,
pruned) is `stale`: reported and not scored, since no index could find it.
"""

import logging
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from governance.golden.models import GoldenQuestion, GoldenRun
from memory.models import MemoryRecord, Tenant
from memory.outbox.models import EventType
from memory.outbox.write import write_events
from memory.recall import RecallQuery, hard_filters, recall_for_agent
from memory.search import IndexStatus, SearchIndex
from memory.search.build import serving_index

logger = logging.getLogger("governance.golden")


@dataclass(frozen=True)
class QuestionScore:
    rank: int | None  # 1-based rank of the first expected record within the top k, else None

    @property
    def hit(self) -> bool:
        return self.rank is not None

    @property
    def reciprocal_rank(self) -> float:
        return 1.0 / self.rank if self.rank else 0.0


def score_question(expected: Iterable[uuid.UUID], found: list[uuid.UUID], k: int) -> QuestionScore:
    """Where the first expected record is among the first k found (any expected record counts)."""
    expected = set(expected)
    for position, record_id in enumerate(found[:k], start=1):
        if record_id in expected:
            return QuestionScore(rank=position)
    return QuestionScore(rank=None)


def run_golden_sets(
    *,
    tenants: Iterable[Tenant] | None = None,
    index: SearchIndex | str | None = None,
    trigger: str = GoldenRun.Trigger.MANUAL,
    requested_by: str = "",
    now: datetime | None = None,
) -> list[GoldenRun]:
    """Score every given tenant's golden set (default: every tenant that has one) against `index`;
    one stored `GoldenRun` per tenant with at least one question, in tenant order."""
    started = time.monotonic()
    now = now or timezone.now()
    chosen = GoldenQuestion.objects.select_related("agent__tenant").order_by("tenant_id", "created_at", "pk")
    if tenants is not None:
        chosen = chosen.filter(tenant__in=list(tenants))
    questions = list(chosen)
    if not questions and index is None:
        return []
    index = serving_index(index)  # resolved once: by name (unknown: RecordNotFound), or the active one
    if not questions:
        return []
    expected: dict[uuid.UUID, list[uuid.UUID]] = defaultdict(list)
    for question_id, record_id in (
        GoldenQuestion.expected.through.objects.filter(goldenquestion_id__in=[q.pk for q in questions])
        .order_by("goldenquestion_id", "memoryrecord_id")
        .values_list("goldenquestion_id", "memoryrecord_id")
    ):
        expected[question_id].append(record_id)
    recallable = _recallable(questions, expected, now=now)

    by_tenant: dict[int, list[dict]] = defaultdict(list)
    for question in questions:
        by_tenant[question.tenant_id].append(_run_question(question, expected[question.pk], recallable, index, now))

    finished = timezone.now()
    runs = [
        _summarise(
            tenant_id, results, index=index, trigger=trigger, requested_by=requested_by, started_at=now, finished_at=finished
        )
        for tenant_id, results in by_tenant.items()
    ]
    runs = GoldenRun.objects.bulk_create(runs)
    # A run that missed a question is an event (ids and scores only, never a question's text).
    write_events(
        [
            {
                "type": EventType.GOLDEN_FAILED,
                "tenant_id": run.tenant_id,
                "data": {"golden_run": {"id": run.pk, "index": run.index, "questions": run.questions, "hits": run.hits}},
            }
            for run in runs
            if run.hits < run.questions
        ],
        now=finished,
    )
    logger.info(
        "golden sets ran",
        extra={
            "index": index.name,
            "trigger": trigger,
            "runs": [run.pk for run in runs],
            "questions": sum(run.questions for run in runs),
            "hits": sum(run.hits for run in runs),
            "stale": sum(run.stale for run in runs),
            "duration_ms": round((time.monotonic() - started) * 1000, 1),
        },
    )
    return runs


def _recallable(questions: list[GoldenQuestion], expected: dict[uuid.UUID, list[uuid.UUID]], *, now: datetime) -> set[uuid.UUID]:
    """Which expected records recall may return now, by recall's own hard filters (active,
    unexpired, valid now, in the purpose): one query per purpose in the set."""
    by_purpose: dict[str, set[uuid.UUID]] = defaultdict(set)
    for question in questions:
        by_purpose[question.purpose].update(expected[question.pk])
    recallable: set[uuid.UUID] = set()
    for purpose, record_ids in by_purpose.items():
        if record_ids:
            recallable.update(
                hard_filters(
                    MemoryRecord.objects.filter(pk__in=record_ids), RecallQuery(query="", purpose=purpose), now=now
                ).values_list("pk", flat=True)
            )
    return recallable


def _run_question(
    question: GoldenQuestion, expected: list[uuid.UUID], recallable: set[uuid.UUID], index: SearchIndex, now: datetime
) -> dict:
    """One question's result, ids only (never the question's text or a record's content)."""
    result = {
        "question": str(question.pk),
        "k": question.k,
        "expected": [str(pk) for pk in expected],
        "found": [],
        "rank": None,
        "reciprocal_rank": 0.0,
        "hit": False,
        "stale": not any(pk in recallable for pk in expected),
    }
    if result["stale"]:
        return result
    q = RecallQuery(query=question.question, purpose=question.purpose, subject=question.subject or None, limit=question.k)
    found = [item.record.pk for item in recall_for_agent(agent=question.agent, q=q, now=now, index=index, mark_used=False).items]
    score = score_question(expected, found, question.k)
    result.update(
        found=[str(pk) for pk in found[: question.k]],
        rank=score.rank,
        reciprocal_rank=round(score.reciprocal_rank, 6),
        hit=score.hit,
    )
    return result


def _summarise(
    tenant_id: int,
    results: list[dict],
    *,
    index: SearchIndex,
    trigger: str,
    requested_by: str,
    started_at: datetime,
    finished_at: datetime,
) -> GoldenRun:
    scored = [result for result in results if not result["stale"]]
    hits = sum(1 for result in scored if result["hit"])
    return GoldenRun(
        tenant_id=tenant_id,
        index=index.name,
        index_active=index.status == IndexStatus.ACTIVE,
        trigger=trigger,
        requested_by=requested_by,
        started_at=started_at,
        finished_at=finished_at,
        questions=len(scored),
        stale=len(results) - len(scored),
        hits=hits,
        hit_at_k=hits / len(scored) if scored else None,
        mrr=sum(result["reciprocal_rank"] for result in scored) / len(scored) if scored else None,
        results=results,
    )
