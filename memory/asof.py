"""Time travel for reviewers: a record, and what recall would have returned, as of a past moment,
reconstructed from the records' django-simple-history rows (every transition writes one).

- **State at T** is a record's newest history row at or before T (ties: the later row). Before its
  first row the record did not exist yet (404). `last_used_at` is not kept in history, so it reads
  as unknown (null).
- **Forgotten content never comes back.** Forget is final (no transition leaves `forgotten`), so a
  record that is forgotten now has its content, hash and provenance strings withheld for every
  past moment, even while propagation has not yet scrubbed its history rows: the state shows its
  status, version, trust and times then, and says the content was withheld. Such a record is never
  ranked (its words would show through the order) nor returned by as-of recall; the response lists
  its id under `withheld`.
- **Pruned records.** The prune job deletes a record *and all its history rows*; in the same
  transaction it writes a content-free trace of it (governance's `PrunedRecord`: ids, scope, status,
  times, the subject only as its keyed fingerprint), kept for PRUNED_RECORD_TRACE_RETENTION_DAYS
  and reached here through the `PrunedTrace` registered below (`memory` does not import
  `governance`). A record found in the trace is 410 Gone ("pruned", with `pruned_at`) for any
  moment from its creation on, and 404 "not_yet" before it; without a trace, a record whose state
  at T is a deletion row, or an id known only from a successor's history (`supersedes`), is 410
  too, and an id with no trace at all is a plain 404 (which is all anyone can say of it).
  As-of recall cannot rank records pruned since (their words are gone), but lists under `pruned`
  (id and `pruned_at`) the traced ones of the scope asked about (tenant, agent, purpose, subject by
  fingerprint, kinds) that were active at T. `may_miss_pruned` is left for prunes the trace cannot
  show: a record active at T can only be pruned once it left `active` after T *and* its kind's
  purge age passed since, so it is true only when T + the shortest purge age of the kinds asked
  about lies before the trace's cover (when the trace began, or the start of its retention window
  if later) and before now.
- **The history horizon.** The prune job drops history older than HISTORY_RETENTION_DAYS, whole
  calendar months at a time (governance.retention.history), each surviving record keeping its
  newest row from before the start of the month that holds now - HISTORY_RETENTION_DAYS: its
  state there. A moment from then on reads whole; an earlier one is refused (400), since a record
  whose early rows are gone would read as not yet written.
- **Ranking** is recall's lexical ranking (`memory.search.ranking`: BM25 over the scope's records
  that were active then, plus the same priors with recency measured at T), computed over the
  historical texts by `memory.asof_ranking` with the serving lexical index's recipe (the index
  tables hold only today's records). Where a semantic index serves recall today, it is fused in
  as live recall fuses it (`memory.search.fusion.fuse`, priors at T), with the cosine of each
  ranked record's content *then*: a record whose content is unchanged since keeps the index's
  vector; one whose content changed, or that has left the index since (retired, superseded,
  expired), is embedded from its content then (`asof_ranking.similarity_at`, at most EMBED_LIMIT
  contents a request; beyond that a record gets no semantic share, and the response says how
  many). A forgotten record is never embedded, nor is its vector read. When the active semantic
  index cannot rank in this process, the ranking is lexical and the response says why.
"""

import functools
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, cast

from django.conf import settings
from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone

from memory.actors import Actor
from memory.asof_ranking import EMBED_LIMIT, rank_rows, similarity_at
from memory.errors import DomainError, RecordNotFound, ValidationFailed
from memory.fingerprints import subject_fingerprint
from memory.history import history_horizon
from memory.models import SIGNED_BY, Agent, MemoryKind, MemoryRecord, Status, Tenant
from memory.recall import RecallQuery, RecallResult, fill_budget, second_stage
from memory.scope import Scope
from memory.search import IndexKind, fusion, semantic
from memory.search.build import serving_index
from memory.search.models import IndexStatus, SearchIndex
from memory.search.periods import named_periods, strip_periods
from memory.search.ranking import Ranked, common_words
from memory.search.rerank import ListedRecords, Settings
from memory.selectors import records_in_scope

if TYPE_CHECKING:
    from memory.models import RecordWithSuccessor

DELETED = "-"  # django-simple-history's history_type of a deletion row
CONTENT_WITHHELD = "forgotten"


class RecordGone(DomainError):
    """The record existed but has been deleted (pruned by retention) since. `extensions` are extra
    members of the API's problem body (`pruned_at` when the trace knows it)."""

    status = 410
    title = "Gone"

    def __init__(self, detail: str, *, pruned_at: datetime | None = None, **kwargs):
        super().__init__(detail, **kwargs)
        self.pruned_at = pruned_at
        self.extensions = {"pruned_at": pruned_at.isoformat().replace("+00:00", "Z")} if pruned_at else {}


@dataclass(frozen=True)
class PrunedEntry:
    """A pruned record as its content-free trace knows it."""

    id: uuid.UUID
    created_at: datetime
    pruned_at: datetime


class PrunedTrace(Protocol):
    """Where the traces of pruned records are kept (governance registers one)."""

    def find(self, *, actor: Actor, record_id) -> PrunedEntry | None:
        """The trace of `record_id` in the actor's tenants, if any."""

    def active_at(
        self, *, agent: Agent, purpose: str, subject: str | None, kind_ids: list[int] | None, at: datetime
    ) -> list[PrunedEntry]:
        """Traced records of this scope that were active at `at` and pruned after it."""

    def kept_since(self, *, now: datetime) -> datetime | None:
        """The earliest moment from which every prune left a trace (None: unknown)."""


_pruned_trace: PrunedTrace | None = None


def register_pruned_trace(trace: PrunedTrace | None) -> None:
    global _pruned_trace
    _pruned_trace = trace


def history_model():
    return MemoryRecord.history.model


def states_at(rows: QuerySet, at: datetime) -> QuerySet:
    """Of the history rows `rows`, each record's newest at or before `at` (one correlated subquery;
    the history table is indexed by record id)."""
    history = history_model()
    newest = history.objects.filter(id=OuterRef("id"), history_date__lte=at).order_by("-history_date", "-history_id")
    return rows.filter(history_date__lte=at, history_id=Subquery(newest.values("history_id")[:1]))


@functools.cache
def _tracked_attnames() -> tuple[str, ...]:
    # Once: the history manager descriptor builds a manager class on every access.
    return tuple(f.attname for f in history_model()._meta.concrete_fields if not f.name.startswith("history_"))


def record_from_row(row, *, withheld: bool, agent: Agent | None = None) -> MemoryRecord:
    """The record as the history row `row` has it (tenant, agent, kind and signing key taken from
    `agent` or the row's joined rows, so no query). A withheld record keeps no content or provenance strings."""
    record = MemoryRecord(**{name: getattr(row, name) for name in _tracked_attnames()})
    record.tenant, record.agent = (agent.tenant, agent) if agent is not None else (row.tenant, row.agent)
    record.kind = row.kind
    if record.verified_key_id is not None:  # joined with its source (SIGNED_BY) by the row's reader
        record.verified_key = row.verified_key
    if withheld:
        record.content = record.content_hash = ""
        record.source_uri = record.session_id = record.turn_id = record.tool = record.source_version = ""
    return record


def check_as_of(at: datetime, *, now: datetime | None = None) -> datetime:
    now = now or timezone.now()
    if at > now:
        raise ValidationFailed(
            "as_of lies in the future: history only tells the past.",
            errors={"as_of": ["Must not be in the future."]},
            title="Invalid request",
        )
    # History before the horizon is dropped by retention (governance.retention.history), each record
    # keeping only its state there: an earlier moment would read as a record not yet written.
    horizon = history_horizon(now, settings.HISTORY_RETENTION_DAYS)
    if horizon is not None and at < horizon:
        raise ValidationFailed(
            f"as_of lies before {horizon:%Y-%m-%d}: history older than that is dropped by retention "
            f"(HISTORY_RETENTION_DAYS, {settings.HISTORY_RETENTION_DAYS} days, counted in whole months).",
            errors={"as_of": [f"Must not be before {horizon:%Y-%m-%d}."]},
            title="Invalid request",
        )
    return at


# --------------------------------------------------------------------------------------------
# one record


@dataclass
class RecordAsOf:
    record: MemoryRecord  # as it was then (content blanked when withheld)
    as_of: datetime
    state_since: datetime  # the history row's time
    transition: str  # its change reason, e.g. review.promote
    content_withheld: str | None  # "forgotten" when the content is not shown
    status_now: str


def record_as_of(*, actor: Actor, record_id, at: datetime) -> RecordAsOf:
    """The record `record_id` in the actor's tenants as it was at `at`: RecordNotFound before it
    existed (or with no trace), RecordGone once it has been pruned or deleted."""
    check_as_of(at)
    history = history_model()
    in_scope = actor.in_tenants(history.objects.all())
    now_status = records_in_scope(actor).filter(pk=record_id).values_list("status", flat=True).first()
    row = states_at(in_scope.filter(id=record_id), at).select_related("tenant", "agent", "kind", SIGNED_BY).first()
    if now_status is None:
        pruned = _pruned_trace.find(actor=actor, record_id=record_id) if _pruned_trace is not None else None
        if pruned is not None:
            _raise_pruned(pruned, at)
        deleted = row is not None or in_scope.filter(id=record_id).exists() or in_scope.filter(supersedes_id=record_id).exists()
        if deleted:
            raise RecordGone(
                "This memory has been pruned (retention deletes a record with its history once its kind's purge age has "
                "passed), so its state at that time cannot be shown.",
                code="pruned",
            )
        raise RecordNotFound(
            "No such memory in your scope. (A memory pruned by retention leaves no history, so it reads as unknown too.)"
        )
    if row is None:
        first = in_scope.filter(id=record_id).order_by("history_date").values_list("history_date", flat=True).first()
        when = f"; its history starts {first:%Y-%m-%dT%H:%M:%SZ}" if first else "; it has no history"
        raise RecordNotFound(f"This memory did not exist yet at that time{when}.", code="not_yet")
    if row.history_type == DELETED:
        raise RecordGone("This memory had been deleted by that time.", code="pruned")
    withheld = now_status == Status.FORGOTTEN
    record = cast("RecordWithSuccessor", record_from_row(row, withheld=withheld))
    record.superseded_by_id = (
        states_at(in_scope.filter(supersedes_id=record_id), at)
        .exclude(status__in=[Status.QUARANTINED, Status.REJECTED])
        .exclude(history_type=DELETED)
        .order_by("created_at")
        .values_list("id", flat=True)
        .first()
    )
    record.last_used_at = None  # not kept in history
    return RecordAsOf(
        record=record,
        as_of=at,
        state_since=row.history_date,
        transition=row.history_change_reason or {"+": "created", "~": "changed"}.get(row.history_type, ""),
        content_withheld=CONTENT_WITHHELD if withheld else None,
        status_now=now_status,
    )


def _raise_pruned(pruned: PrunedEntry, at: datetime):
    pruned_on = f"{pruned.pruned_at:%Y-%m-%dT%H:%M:%SZ}"
    if at < pruned.created_at:
        raise RecordNotFound(
            f"This memory did not exist yet at that time; it was created "
            f"{pruned.created_at:%Y-%m-%dT%H:%M:%SZ} and pruned {pruned_on}.",
            code="not_yet",
        )
    raise RecordGone(
        f"This memory was pruned {pruned_on} (retention deletes a record with its history once its kind's "
        "purge age has passed), so its state at that time cannot be shown.",
        code="pruned",
        pruned_at=pruned.pruned_at,
    )


# --------------------------------------------------------------------------------------------
# recall


@dataclass
class RecallAsOf:
    result: RecallResult
    as_of: datetime
    tenant: Tenant
    agent: Agent
    withheld: list = field(default_factory=list)  # ids of records that were candidates but are forgotten now
    pruned: list[PrunedEntry] = field(default_factory=list)  # traced records of the scope active then, pruned since
    may_miss_pruned: bool = False
    semantic_without: int = 0  # ranked records left without a semantic share (over EMBED_LIMIT to embed)

    @property
    def notes(self) -> list[str]:
        notes = []
        if self.withheld:
            notes.append(
                f"{len(self.withheld)} record(s) that were candidates then are forgotten now: never ranked or "
                "returned, and no longer counted in the ranking's collection statistics."
            )
        if self.pruned:
            notes.append(
                f"{len(self.pruned)} record(s) of this scope that were active then have been pruned since (the "
                f"first on {self.pruned[0].pruned_at:%Y-%m-%d}): retention deleted them with their history, so "
                "whether recall returned them cannot be reconstructed."
            )
        if self.may_miss_pruned:
            notes.append(
                "Records pruned since (prune deletes a record with its history) cannot be reconstructed, and "
                "some may have been pruned with no trace kept (before traces began, or longer ago than they "
                "are kept): some that recall returned then may be missing."
            )
        if self.result.semantic_unavailable:
            notes.append(
                f"Ranked lexically: the semantic index that recall fuses in cannot rank here ({self.result.semantic_unavailable})"
            )
        if self.semantic_without:
            notes.append(
                f"{self.semantic_without} record(s) whose content changed since, or that have left the semantic index, "
                f"were ranked without a semantic share: at most {EMBED_LIMIT} such contents are embedded per request."
            )
        return notes


def agent_in_scope(actor: Actor, *, tenant: str, agent: str) -> Agent:
    """The agent `agent` of tenant `tenant`, if the actor may see that tenant; else RecordNotFound
    (another tenant's existence does not leak)."""
    found = actor.in_tenants(Agent.objects.all()).filter(tenant__slug=tenant, slug=agent).select_related("tenant").first()
    if found is None:
        raise RecordNotFound(
            "No such tenant and agent in your scope.", errors={"agent": ["No such agent in a tenant you review."]}
        )
    return found


def recall_as_of(*, agent: Agent, q: RecallQuery, at: datetime, now: datetime | None = None) -> RecallAsOf:
    """What `agent` would have recalled for `q` at `at` (the caller checked the actor may see the
    agent's tenant). Candidates: the records whose state at `at` was active, in the agent's tenant
    and purpose (and the subject and kinds asked for), unexpired and valid at `at`; ranked as
    recall ranks and filled into the budget by the same code."""
    now = now or timezone.now()
    check_as_of(at, now=now)
    kinds = list(MemoryKind.objects.filter(name__in=q.kinds)) if q.kinds else None
    scope = Scope(
        tenant_id=agent.tenant_id,
        agent_id=agent.pk,
        purpose=q.purpose,
        now=at,
        subject=q.subject or None,
        kind_ids=None if kinds is None else tuple(kind.pk for kind in kinds),
    )
    # A forgotten record's history keeps only the subject's fingerprint once propagation ran: the
    # rows are read under either form, and those of records forgotten since are only counted.
    rows = history_model().objects.filter(replace(scope, subject=None).q(timely=False))
    if scope.subject is not None:
        rows = rows.filter(subject__in={scope.subject, subject_fingerprint(agent.tenant_id, scope.subject)})
    active = (
        states_at(rows, at)
        .exclude(history_type=DELETED)
        .annotate(
            status_now=Subquery(MemoryRecord.objects.filter(pk=OuterRef("id")).values("status")[:1]),
            content_hash_now=Subquery(MemoryRecord.objects.filter(pk=OuterRef("id")).values("content_hash")[:1]),
        )
        .select_related("kind", SIGNED_BY)
    )  # tenant and agent: the agent's, for every row
    collection, withheld = [], []
    for row in active:
        if row.status_now is None:
            continue  # deleted since, with its history: nothing to show
        if row.status_now == Status.FORGOTTEN:
            if scope.timely(row):
                withheld.append(row.id)
            continue
        collection.append(row)
    index = serving_index(None)
    settings = Settings.of(index.recipe)
    periods = named_periods(q.query, now=at)
    lexical_query = strip_periods(q.query, periods) if settings.strip_periods and periods else q.query
    ranked = rank_rows(index, collection, lexical_query, now=at, timely=scope.admits)
    by_id = {row.id: row for row in collection}
    result = RecallResult(index=index.name, terms=ranked.terms, candidates=len(collection))
    ordered: Iterator[Ranked] = iter(ranked.rows)
    active_semantic = SearchIndex.objects.filter(kind=IndexKind.SEMANTIC, status=IndexStatus.ACTIVE).first()
    semantic_index, result.semantic_unavailable = semantic.serving_semantic(active_semantic)
    semantic_without = 0
    fused = None
    if semantic_index is not None:
        common = common_words(
            index, q.query, analysed=ranked.analysed, idfs=ranked.idfs, records=ranked.records, share=settings.common_share
        )
        found = similarity_at(semantic_index, scope, ranked.rows, by_id, semantic.query_text(q.query, common))
        if found.similarity.top:
            fused = fusion.Fusion(ordered, found.similarity, now=at)
            ordered = iter(fused)
        result.semantic, semantic_without = semantic_index.name, found.without
    # The same second stage as live recall, over the records in the scope then (neighbours are
    # read from them, never beyond), and the same floor.
    in_scope = ListedRecords(row for row in collection if scope.admits(row))
    ordered, result.min_relevance = second_stage(
        ordered, index=index, scope=scope, q=q, records=in_scope, idfs=ranked.idfs, periods=periods, fused=fused
    )
    # Records are built for the rows the budget reads (a batch or two), not for the whole collection.
    fill_budget(
        result,
        ordered,
        q,
        load=lambda ids: {pk: record_from_row(by_id[pk], withheld=False, agent=agent) for pk in ids},
        floor=result.min_relevance,
    )
    for item in result.items:
        item.record.last_used_at = None  # not kept in history
    pruned = (
        []
        if _pruned_trace is None
        else _pruned_trace.active_at(
            agent=agent,
            purpose=q.purpose,
            subject=q.subject,
            kind_ids=None if scope.kind_ids is None else list(scope.kind_ids),
            at=at,
        )
    )
    purge_ages = [kind.purge_after for kind in (kinds if kinds is not None else MemoryKind.objects.all())]
    may_miss_pruned = bool(purge_ages) and _untraced_prunes_possible(at + min(purge_ages), now=now)
    return RecallAsOf(
        result=result,
        as_of=at,
        tenant=agent.tenant,
        agent=agent,
        withheld=sorted(withheld, key=str),
        pruned=pruned,
        may_miss_pruned=may_miss_pruned,
        semantic_without=semantic_without,
    )


def _untraced_prunes_possible(earliest_prune: datetime, *, now: datetime) -> bool:
    """Could a record have been pruned at or after `earliest_prune` without a trace to show for it?
    Only if that moment has passed and lies before the trace's cover (asked only then)."""
    if now <= earliest_prune:
        return False
    kept_since = _pruned_trace.kept_since(now=now) if _pruned_trace is not None else None
    return kept_since is None or earliest_prune < kept_since
