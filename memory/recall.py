"""Recall: hard filters first, explainable ranking second, then the token budget.

1. Candidates come only from the hard-filtered scope: the credential's tenant and agent (through
   `records_in_scope`), the requested purpose (which the token must allow), optionally one subject
   and some kinds, `active`, unexpired and valid now: one `memory.scope.Scope`, which renders the
   ORM filter here and the SQL each index runs. Nothing is searched globally and filtered
   afterwards: the search index applies the same filters to its copy of those fields before it
   matches a word, and every record it ranks is loaded through the scoped query again, so an index
   can never widen what recall returns.
2. Ranking, first stage: BM25 within that scope plus bounded priors (authority, confidence,
   recency), read from the active lexical index or the one named (`memory.search.ranking` says
   how). When a semantic index serves (the active one, or one named; and this process has the
   `semantic` extra), the lexical ranking is fused with the scope's cosine similarities
   (`memory.search.fusion`), which adds the `semantic` and `fusion` parts.
3. Ranking, second stage (`memory.search.rerank`, set by the lexical index's recipe): the first
   stage's best rows re-ranked with their conversation neighbours (`neighbour`) and the dates the
   query names (`time`), each judged for `relevance` in [0, 1]. `score_parts` names every part and
   `score` is their sum; ties go to relevance, then the most recently confirmed.
4. Items fill the token budget in rank order, skipping (and counting) those that do not fit and
   those whose relevance is under the floor (`min_relevance`, the request's or the recipe's; counted
   in `below_floor`): a query nothing answers gets no items rather than filler. Each item carries a
   one-line `context` framing it as dated data: kind, authority, when it was confirmed, its source
   and when the source said it.
"""

import math
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from itertools import chain, islice
from typing import Any

from django.db import DatabaseError, connection
from django.db.models import QuerySet
from django.utils import timezone

from memory.actors import Actor
from memory.errors import Conflict, ScopeDenied
from memory.metrics import RECALL_ITEMS, RECALL_LATENCY
from memory.models import SIGNED_BY, Agent, AgentCredential, MemoryKind, MemoryRecord
from memory.scope import Scope
from memory.search import active_indexes, fusion, semantic, storage
from memory.search.build import serving_index
from memory.search.models import IndexKind, SearchIndex
from memory.search.periods import Period, named_periods, strip_periods
from memory.search.ranking import (  # noqa: F401  (re-exported: the weights are part of recall's contract)
    AUTHORITY_WEIGHT,
    CONFIDENCE_WEIGHT,
    PARTS,
    RECENCY_HALF_LIFE_DAYS,
    Ranked,
    rank,
    reading,
)
from memory.search.rerank import Query, Records, ScopedRecords, Settings, rerank
from memory.selectors import records_in_scope
from memory.services import memory_mark_used
from memory.validation import RecallQuerySerializer, validated

# What a recalled record is loaded with: what its item shows (the API's RecallItemSerializer and
# `context_line`), and no more (a record has 36 columns; fewer to read and to build a model from).
RECALLED_FIELDS = (
    "id",
    "kind__name",
    "subject",
    "content",
    "authority",
    "trust",
    "confidence",
    "source_type",
    "source_uri",
    "session_id",
    "turn_id",
    "tool",
    "source_version",
    "observed_at",
    "contaminated",
    "verified_key__revoked_at",  # provenance.verified, and its source's name
    "verified_key__source__name",
    "created_at",
    "confirmed_at",
    "expires_at",
)


@dataclass
class RecallQuery:
    query: str
    purpose: str
    subject: str | None = None
    kinds: list[str] | None = None
    limit: int = 10
    token_budget: int | None = None
    min_relevance: float | None = None  # None: the serving index's recipe says


@dataclass
class RecallItem:
    record: MemoryRecord
    score: float
    score_parts: dict[str, float]
    tokens: int
    context: str
    relevance: float | None = None  # None: not judged (as-of recall's rows)


@dataclass
class RecallResult:
    items: list[RecallItem] = field(default_factory=list)
    tokens_used: int = 0
    omitted_for_budget: int = 0
    below_floor: int = 0  # ranked rows left out because their relevance was under the floor
    min_relevance: float = 0.0  # the floor applied
    candidates: int = 0  # active records in the scope (the ranking's collection)
    index: str = ""  # the lexical index that ranked them
    terms: list[str] = field(default_factory=list)  # the query as that index analysed it
    semantic: str = ""  # the semantic index fused in, if one was
    semantic_unavailable: str | None = None  # why an active semantic index was not used here


def parse_recall(data: Any) -> RecallQuery:
    """A recall body (defined by `memory.validation.RecallQuerySerializer`) as a RecallQuery, or
    ValidationFailed naming every field error."""
    return recall_query(validated(RecallQuerySerializer, data, detail="The recall request is invalid: see errors."))


def recall_query(body: dict) -> RecallQuery:
    """A validated recall body as a RecallQuery."""
    return RecallQuery(
        query=body["query"],
        purpose=body["purpose"],
        subject=body.get("subject"),
        kinds=body.get("kinds"),
        limit=body["limit"],
        token_budget=body.get("token_budget"),
        min_relevance=body.get("min_relevance"),
    )


def hard_filters(records: QuerySet[MemoryRecord], q: RecallQuery, *, now: datetime) -> QuerySet[MemoryRecord]:
    """Recall's hard filters on an already tenant- and agent-scoped queryset: the purpose,
    optionally one subject and some kinds, active, unexpired, valid now (`Scope.filters`)."""
    return records.filter(Scope.filters(purpose=q.purpose, now=now, subject=q.subject or None, kind_ids=kind_ids(q.kinds)))


def kind_ids(names: list[str] | None) -> tuple[int, ...] | None:
    """The ids of the kinds named (None: no kinds asked for, so any kind)."""
    return tuple(MemoryKind.objects.filter(name__in=names).values_list("pk", flat=True)) if names else None


def recall_scope(agent: Agent, q: RecallQuery, *, now: datetime) -> Scope:
    """The scope `agent` recalls `q` in at `now`."""
    return Scope(
        tenant_id=agent.tenant_id,
        agent_id=agent.pk,
        purpose=q.purpose,
        now=now,
        subject=q.subject or None,
        kind_ids=kind_ids(q.kinds),
    )


def recall(
    *, credential: AgentCredential, q: RecallQuery, now: datetime | None = None, index: SearchIndex | str | None = None
) -> RecallResult:
    """What the token's agent recalls for `q`, ranked by `index` (an index or its name, which takes
    the place of the active index of its kind; None: the active indexes). Marks the returned
    records used."""
    if not credential.allows_purpose(q.purpose):
        raise ScopeDenied(
            f"This token may not recall purpose '{q.purpose}'.", errors={"purpose": ["Not allowed for this token."]}
        )
    now = now or timezone.now()
    with RECALL_LATENCY.time():
        scope = recall_scope(credential.agent, q, now=now)
        candidates = records_in_scope(Actor.for_credential(credential)).filter(scope.q())
        result = _recall(scope=scope, candidates=candidates, q=q, index=index, mark_used=True)
    RECALL_ITEMS.observe(len(result.items))
    return result


def recall_for_agent(
    *, agent: Agent, q: RecallQuery, now: datetime | None = None, index: SearchIndex | str | None = None, mark_used: bool = False
) -> RecallResult:
    """What `agent` would recall for `q`, with the same hard filters but no token (so no purpose
    check): for golden runs and reviewer tools. Does not mark records used unless asked."""
    scope = recall_scope(agent, q, now=now or timezone.now())
    candidates = MemoryRecord.objects.filter(scope.q())
    return _recall(scope=scope, candidates=candidates, q=q, index=index, mark_used=mark_used)


def _recall(
    *,
    scope: Scope,
    candidates: QuerySet[MemoryRecord],
    q: RecallQuery,
    index: SearchIndex | str | None,
    mark_used: bool,
) -> RecallResult:
    for attempt in (1, 2):
        lexical, similar_index, unavailable = _serving(index, fresh=attempt == 2)
        try:
            loaded = candidates.select_related("kind", SIGNED_BY).only(*RECALLED_FIELDS).order_by()
            result = _fill(lexical, scope, loaded, q, similar_index)
            result.semantic_unavailable = unavailable
            break
        except DatabaseError:
            # An active index was replaced and its storage dropped between choosing it and reading
            # it: choose again, once. Anything else is a real error.
            used = [i for i in (lexical, similar_index) if i is not None]
            if (
                index is not None
                or attempt == 2
                or connection.in_atomic_block
                or all(storage.storage_exists(i.storage_name) for i in used)
            ):
                raise
    if mark_used:
        memory_mark_used(record_ids=[item.record.pk for item in result.items], at=scope.now)
    return result


def _serving(index: SearchIndex | str | None, *, fresh: bool = False) -> tuple[SearchIndex, SearchIndex | None, str | None]:
    """(the lexical index, the semantic index to fuse in or None, why the active semantic index
    cannot serve in this process). A named index takes its kind's place; a named semantic index
    that cannot serve here is an error, an active one falls back to lexical recall. `fresh`: the
    active indexes read again, not as this process last saw them (`active_indexes`)."""
    named = serving_index(index) if index is not None else None
    active = active_indexes(fresh=fresh)
    lexical = active.get(IndexKind.LEXICAL) or serving_index(None)  # (None: the default one, built now)
    if named is not None and named.kind == IndexKind.SEMANTIC:
        chosen, reason = semantic.serving_semantic(named)
        if chosen is None:
            raise Conflict(f"Index '{named.name}' cannot answer recall here: {reason}", code="index_unavailable")
        return lexical, chosen, None
    chosen, reason = semantic.serving_semantic(active.get(IndexKind.SEMANTIC))
    return named or lexical, chosen, reason


def _fill(
    index: SearchIndex,
    scope: Scope,
    candidates: QuerySet[MemoryRecord],
    q: RecallQuery,
    semantic_index: SearchIndex | None = None,
) -> RecallResult:
    """Rank in two stages, take the rows in batches, load each batch through the hard-filtered query
    (one query per batch), and fill the budget in rank order above the relevance floor."""
    settings = Settings.of(index.recipe)
    periods = named_periods(q.query, now=scope.now)
    ranking = rank(index, scope, strip_periods(q.query, periods) if settings.strip_periods and periods else q.query)
    rows: Iterator[Ranked] = iter(ranking)
    result = RecallResult(index=index.name, terms=ranking.terms)
    fused = None
    if semantic_index is not None:
        text = q.query
        if settings.common_share > 0:
            # The lexical pool is read first (fusion reads it anyway): which of the query's words are
            # common in the scope is known once the rows are, and the semantic index is asked without them.
            with reading(fusion.DEPTH):
                head = list(islice(rows, fusion.DEPTH))
            rows = chain(head, rows)
            text = semantic.query_text(q.query, ranking.common_words(q.query, settings.common_share))
        similarity = semantic.similar(semantic_index, scope, text, depth=fusion.DEPTH)
        if similarity.top:
            fused = fusion.Fusion(rows, similarity, now=scope.now)
            rows = iter(fused)
        result.semantic = semantic_index.name
    rows, result.min_relevance = second_stage(
        rows,
        index=index,
        scope=scope,
        q=q,
        records=ScopedRecords(candidates, owner=scope.owner()),
        idfs=ranking.idfs,
        periods=periods,
        fused=fused,
    )
    fill_budget(result, rows, q, load=candidates.in_bulk, floor=result.min_relevance)
    result.candidates = ranking.scope_size
    return result


def second_stage(
    rows: Iterator[Ranked],
    *,
    index: SearchIndex,
    scope: Scope,
    q: RecallQuery,
    records: Records,
    idfs: Mapping[str, float],
    periods: list[Period] | None = None,
    fused: fusion.Fusion | None = None,
) -> tuple[Iterator[Ranked], float]:
    """(the first stage's `rows` re-ranked by the second stage, the relevance floor to fill with):
    the lexical `index`'s recipe sets both, `records` are the scope's (live recall: `ScopedRecords`
    over the hard-filtered query; as-of recall: `ListedRecords` over the rows it reconstructed),
    `idfs` the query terms' idf in the collection (`Ranking.idfs`, filled as the rows are read)."""
    settings = Settings.of(index.recipe)
    periods = named_periods(q.query, now=scope.now) if periods is None else periods
    mode = "lexical" if fused is None else "hybrid"
    floor = settings.min_relevance[mode] if q.min_relevance is None else q.min_relevance
    query = Query(idfs=idfs, periods=periods, mode=mode)
    scan = SCAN_DEPTH * q.limit  # the most rows fill_budget examines
    return rerank(
        rows, settings=settings, query=query, records=records, now=scope.now, fusion=fused, floor=floor, scan=scan
    ), floor


def fill_budget(
    result: RecallResult,
    rows: Iterator[Ranked],
    q: RecallQuery,
    load: Callable[[list[uuid.UUID]], Mapping[uuid.UUID, MemoryRecord]],
    floor: float = 0.0,
) -> None:
    """Fill `result` from ranked `rows` in rank order: a row whose relevance is under `floor` is
    skipped and counted (`below_floor`) without being loaded; each batch of the others is loaded
    with `load` (record id -> record; a row it does not return is skipped), an item that does not
    fit the token budget is skipped and counted. Also used by as-of recall (`memory.asof`), so
    both fill alike."""
    remaining = q.token_budget
    # The first batch is what a full answer needs (most recalls load nothing more); later ones are
    # larger, since rows are being skipped. With a token budget some rows are skipped as a rule (the
    # budget, not the limit, ends most answers), so the first batch is the larger size already.
    later = max(2 * q.limit, 20)
    batch_size = q.limit if remaining is None else later
    # With a budget nearly spent, every later row may be skipped: look no further than SCAN_DEPTH
    # rows per requested item, not through the whole scope (a 100,000-record scope took a minute).
    examined, depth = 0, SCAN_DEPTH * q.limit
    while len(result.items) < q.limit and examined < depth and (remaining is None or remaining > 0):
        batch: list[Ranked] = list(islice(rows, min(batch_size, depth - examined)))
        examined += len(batch)
        batch_size = later
        if not batch:
            break
        kept = [row for row in batch if row.relevance is None or row.relevance >= floor]
        result.below_floor += len(batch) - len(kept)
        records = load([row.record_id for row in kept]) if kept else {}
        for row in kept:
            record = records.get(row.record_id)
            if record is None:  # the index holds a record the hard filters refuse: they decide
                continue
            item = _item(record, row)
            if remaining is not None and item.tokens > remaining:
                result.omitted_for_budget += 1
                continue
            result.items.append(item)
            result.tokens_used += item.tokens
            if remaining is not None:
                remaining -= item.tokens
            if len(result.items) >= q.limit:
                break


SCAN_DEPTH = 5  # ranked rows examined per requested item, at most, when the budget skips them


def estimate_tokens(text: str) -> int:
    # About four characters per token for English text; an estimate, stated as such in the docs.
    return max(1, math.ceil(len(text) / 4))


def context_line(record: MemoryRecord) -> str:
    """The record framed as dated data with a source, never as an instruction:
    `[kind | authority | confirmed <date> | source <type> <uri> | observed <date>] content`
    (`recorded <date>` when the source gave no observation time)."""
    source = " ".join(part for part in (record.source_type, record.source_uri) if part)
    observed = (
        f"observed {record.observed_at:%Y-%m-%d}" if record.observed_at is not None else f"recorded {record.created_at:%Y-%m-%d}"
    )
    return (
        f"[{record.kind.name} | {record.authority} | confirmed {record.confirmed_at:%Y-%m-%d} | source {source} | "
        f"{observed}] {record.content}"
    )


def _item(record: MemoryRecord, row: Ranked) -> RecallItem:
    parts = {name: round(value, 4) for name, value in row.parts.items()}
    context = context_line(record)
    return RecallItem(
        record=record,
        score=round(sum(parts.values()), 4),
        score_parts=parts,
        tokens=estimate_tokens(context),
        context=context,
        relevance=None if row.relevance is None else round(row.relevance, 4),
    )
