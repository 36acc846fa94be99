"""Recall: hard filters in the database first, explainable ranking second, then the token budget.

1. Candidates come only from `records_in_scope` for the credential, in the requested purpose
   (which the token must allow), optionally one subject and some kinds, `active`, unexpired and
   valid now. Nothing is searched globally and filtered afterwards.
2. Within those, a bounded pool is taken: on PostgreSQL the best full-text matches among the
   candidates (stored tsvector, any query term, `ts_rank_cd`) plus the most recently confirmed
   records; on SQLite the most recently confirmed records, scored for words in Python.
3. Each candidate is scored as a sum of visible parts (lexical, authority, confidence, recency);
   items fill the token budget in rank order, skipping (and counting) those that do not fit.
"""

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Q, QuerySet
from django.db.models.expressions import RawSQL
from django.utils import timezone

from memory.actors import Actor
from memory.errors import ScopeDenied
from memory.metrics import RECALL_ITEMS, RECALL_LATENCY
from memory.models import AgentCredential, Authority, MemoryKind, MemoryRecord, Status
from memory.selectors import records_in_scope
from memory.services import memory_mark_used
from memory.validation import RecallQuerySerializer, validated

AUTHORITY_WEIGHT = {Authority.OPERATOR: 1.0, Authority.USER: 0.8, Authority.THIRD_PARTY: 0.4, Authority.AGENT: 0.3}
LEXICAL_WEIGHT = 3.0
CONFIDENCE_WEIGHT = 0.5
RECENCY_HALF_LIFE_DAYS = 30.0
RECENT_POOL = 50  # records taken by recency besides the lexical matches
_WORD = re.compile(r"[\w']+", re.UNICODE)
_STOP = frozenset("a an and are as at be by does for from has have how i in is it of on or that the this to was what when where which who why with".split())


@dataclass
class RecallQuery:
    query: str
    purpose: str
    subject: str | None = None
    kinds: list[str] | None = None
    limit: int = 10
    token_budget: int | None = None


@dataclass
class RecallItem:
    record: MemoryRecord
    score: float
    score_parts: dict[str, float]
    tokens: int
    context: str


@dataclass
class RecallResult:
    items: list[RecallItem] = field(default_factory=list)
    tokens_used: int = 0
    omitted_for_budget: int = 0
    candidates: int = 0


def parse_recall(data: Any) -> RecallQuery:
    """A recall body (defined by `memory.validation.RecallQuerySerializer`) as a RecallQuery, or
    ValidationFailed naming every field error."""
    body = validated(RecallQuerySerializer, data, detail="The recall request is invalid: see errors.")
    return RecallQuery(query=body["query"], purpose=body["purpose"], subject=body.get("subject"), kinds=body.get("kinds"),
                       limit=body["limit"], token_budget=body.get("token_budget"))


def recall_candidates(credential: AgentCredential, q: RecallQuery, *, now: datetime) -> QuerySet[MemoryRecord]:
    """The hard filters, as one scoped database query."""
    qs = records_in_scope(Actor.for_credential(credential)).filter(
        purpose=q.purpose, status=Status.ACTIVE, expires_at__gt=now,
    ).filter(Q(valid_from__isnull=True) | Q(valid_from__lte=now), Q(valid_to__isnull=True) | Q(valid_to__gt=now))
    if q.subject:
        qs = qs.filter(subject=q.subject)
    if q.kinds:
        qs = qs.filter(kind__name__in=q.kinds)
    return qs


def recall(*, credential: AgentCredential, q: RecallQuery, now: datetime | None = None) -> RecallResult:
    with RECALL_LATENCY.time():
        result = _recall(credential=credential, q=q, now=now)
    RECALL_ITEMS.observe(len(result.items))
    return result


def _recall(*, credential: AgentCredential, q: RecallQuery, now: datetime | None) -> RecallResult:
    if not credential.allows_purpose(q.purpose):
        raise ScopeDenied(f"This token may not recall purpose '{q.purpose}'.", errors={"purpose": ["Not allowed for this token."]})
    now = now or timezone.now()
    candidates = recall_candidates(credential, q, now=now).select_related("kind")
    pool = _pool(candidates, q.query, limit=max(settings.MEMORY_RECALL_CANDIDATES, q.limit))
    terms = query_terms(q.query)
    ranked = sorted(
        (_score(record, lexical, terms, now) for record, lexical in pool),
        key=lambda item: (-item.score, item.record.created_at),
    )
    result = RecallResult(candidates=len(ranked))
    remaining = q.token_budget
    for item in ranked:
        if len(result.items) >= q.limit:
            break
        if remaining is not None and item.tokens > remaining:
            result.omitted_for_budget += 1
            continue
        result.items.append(item)
        result.tokens_used += item.tokens
        if remaining is not None:
            remaining -= item.tokens
    memory_mark_used(record_ids=[item.record.pk for item in result.items], at=now)
    return result


def query_terms(query: str) -> list[str]:
    return [w for w in (t.lower() for t in _WORD.findall(query or "")) if w not in _STOP and len(w) > 1]


def _pool(candidates: QuerySet[MemoryRecord], query: str, *, limit: int) -> list[tuple[MemoryRecord, float | None]]:
    """A bounded set of candidates with their database lexical rank (None = score in Python)."""
    terms = query_terms(query)
    if connection.vendor != "postgresql" or not terms:
        return [(record, None) for record in candidates.order_by("-confirmed_at")[:limit]]
    ranked = _full_text_ranks(candidates, terms, limit=limit)
    records = {record.pk: record for record in candidates.filter(pk__in=list(ranked))}
    return [(records[pk], rank) for pk, rank in ranked.items() if pk in records]


def _full_text_ranks(candidates: QuerySet[MemoryRecord], terms: list[str], *, limit: int) -> dict:
    """PostgreSQL full-text rank of the best candidates matching any query term, then the most
    recently confirmed candidates (rank 0) so a recall never comes back empty for want of words,
    in one statement.

    The hard-filtered candidates are materialised first and only they are matched: the GIN index
    spans every tenant, and letting the planner start from it would search globally and filter by
    tenant afterwards (slow for common words, and against the rule). Any term may match (OR), so a
    question phrased in many words still finds records that share some of them; ts_rank_cd ranks
    records that cover more terms, closer together, higher (flag 32 maps the rank into [0, 1))."""
    tsquery = " | ".join(dict.fromkeys(term.replace("'", "") for term in terms))
    scoped = (candidates.order_by().annotate(vector=RawSQL("memory_memoryrecord.search_vector", []))
              .values("id", "vector", "confirmed_at"))
    scoped_sql, scoped_params = scoped.query.sql_with_params()
    sql = (
        f"WITH scoped AS MATERIALIZED ({scoped_sql}), q AS (SELECT to_tsquery('english', %s) AS q) "
        "(SELECT scoped.id, ts_rank_cd(scoped.vector, q.q, 32) AS rank FROM scoped, q WHERE scoped.vector @@ q.q "
        " ORDER BY rank DESC, scoped.id LIMIT %s) "
        "UNION ALL (SELECT scoped.id, 0 FROM scoped ORDER BY scoped.confirmed_at DESC LIMIT %s)"
    )
    ranks: dict = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, (*scoped_params, tsquery, limit, RECENT_POOL))
        for record_id, rank in cursor.fetchall():
            ranks.setdefault(record_id, float(rank))  # a matched record keeps its rank
    return ranks


def _lexical_in_python(content: str, terms: list[str]) -> float:
    if not terms:
        return 0.0
    words = set(query_terms(content))
    hits = sum(1 for term in terms if term in words or any(w.startswith(term[:5]) for w in words if len(term) >= 5))
    return hits / len(terms)


def estimate_tokens(text: str) -> int:
    # About four characters per token for English text; an estimate, stated as such in the docs.
    return max(1, math.ceil(len(text) / 4))


def context_line(record: MemoryRecord) -> str:
    source = " ".join(part for part in (record.source_type, record.source_uri) if part)
    return (
        f"[{record.kind.name} | {record.authority} | confirmed {record.confirmed_at:%Y-%m-%d} | source {source}] "
        f"{record.content}"
    )


def _score(record: MemoryRecord, lexical_rank: float | None, terms: list[str], now: datetime) -> RecallItem:
    lexical = lexical_rank if lexical_rank is not None else _lexical_in_python(record.content, terms)
    age_days = max(0.0, (now - record.confirmed_at).total_seconds() / 86400)
    parts = {
        "lexical": round(LEXICAL_WEIGHT * lexical, 4),
        "authority": AUTHORITY_WEIGHT.get(record.authority, 0.0),
        "confidence": round(CONFIDENCE_WEIGHT * record.confidence, 4),
        "recency": round(0.5 ** (age_days / RECENCY_HALF_LIFE_DAYS), 4),
    }
    context = context_line(record)
    return RecallItem(record=record, score=round(sum(parts.values()), 4), score_parts=parts,
                      tokens=estimate_tokens(context), context=context)
