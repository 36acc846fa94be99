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
- **Pruned records.** The prune job deletes a record *and all its history rows*, leaving no trace
  of the record itself. A record that no longer exists, or whose state at T is a deletion row, is
  410 Gone ("pruned"); an id known only from a successor's history (`supersedes`) is 410 too; an id
  with no trace at all is a plain 404 (which is all anyone can say of it). As-of recall cannot show
  records pruned since; it says whether any could have been: a record active at T can only be
  pruned once it left `active` after T *and* its kind's purge age passed since, so before T + the
  shortest purge age of the kinds asked about, nothing it would have returned can be missing.
- **Ranking** is recall's lexical ranking (`memory.search.ranking`: BM25 over the scope's records
  that were active then, plus the same priors with recency measured at T), computed over the
  historical texts by `memory.asof_ranking` with the serving lexical index's recipe (the index
  tables hold only today's records). Where a semantic index serves recall today, its fused part
  is not reconstructed (the vectors of the past are not kept): the response says so.
"""

from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone

from memory.actors import Actor
from memory.asof_ranking import rank_rows
from memory.errors import DomainError, RecordNotFound, ValidationFailed
from memory.fingerprints import subject_fingerprint
from memory.models import Agent, MemoryKind, MemoryRecord, Status, Tenant
from memory.recall import RecallQuery, RecallResult, fill_budget
from memory.search import IndexKind, semantic
from memory.search.build import serving_index
from memory.search.models import IndexStatus, SearchIndex
from memory.selectors import records_in_scope

DELETED = "-"  # django-simple-history's history_type of a deletion row
CONTENT_WITHHELD = "forgotten"


class RecordGone(DomainError):
    """The record existed but has been deleted (pruned by retention) since."""

    status = 410
    title = "Gone"


def history_model():
    return MemoryRecord.history.model


def states_at(rows: QuerySet, at: datetime) -> QuerySet:
    """Of the history rows `rows`, each record's newest at or before `at` (one correlated subquery;
    the history table is indexed by record id)."""
    history = history_model()
    newest = history.objects.filter(id=OuterRef("id"), history_date__lte=at).order_by("-history_date", "-history_id")
    return rows.filter(history_date__lte=at, history_id=Subquery(newest.values("history_id")[:1]))



def _tracked_attnames() -> list[str]:
    return [f.attname for f in history_model()._meta.concrete_fields if not f.name.startswith("history_")]


def record_from_row(row, *, withheld: bool) -> MemoryRecord:
    """The record as the history row `row` has it (tenant, agent and kind taken from the row's
    joined rows, so no query). A withheld record keeps no content or provenance strings."""
    record = MemoryRecord(**{name: getattr(row, name) for name in _tracked_attnames()})
    record.tenant, record.agent, record.kind = row.tenant, row.agent, row.kind
    if withheld:
        record.content = record.content_hash = ""
        record.source_uri = record.session_id = record.turn_id = record.tool = record.source_version = ""
    return record


def check_as_of(at: datetime, *, now: datetime | None = None) -> datetime:
    if at > (now or timezone.now()):
        raise ValidationFailed("as_of lies in the future: history only tells the past.",
                               errors={"as_of": ["Must not be in the future."]}, title="Invalid request")
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
    row = (states_at(in_scope.filter(id=record_id), at).select_related("tenant", "agent", "kind").first())
    if now_status is None:
        deleted = row is not None or in_scope.filter(id=record_id).exists() or in_scope.filter(supersedes_id=record_id).exists()
        if deleted:
            raise RecordGone(
                "This memory has been pruned (retention deletes a record with its history once its kind's purge age has "
                "passed), so its state at that time cannot be shown.", code="pruned")
        raise RecordNotFound("No such memory in your scope. (A memory pruned by retention leaves no history, so it "
                             "reads as unknown too.)")
    if row is None:
        first = in_scope.filter(id=record_id).order_by("history_date").values_list("history_date", flat=True).first()
        when = f"; its history starts {first:%Y-%m-%dT%H:%M:%SZ}" if first else "; it has no history"
        raise RecordNotFound(f"This memory did not exist yet at that time{when}.", code="not_yet")
    if row.history_type == DELETED:
        raise RecordGone("This memory had been deleted by that time.", code="pruned")
    withheld = now_status == Status.FORGOTTEN
    record = record_from_row(row, withheld=withheld)
    record.superseded_by_id = (
        states_at(in_scope.filter(supersedes_id=record_id), at).exclude(status__in=[Status.QUARANTINED, Status.REJECTED])
        .exclude(history_type=DELETED).order_by("created_at").values_list("id", flat=True).first()
    )
    record.last_used_at = None  # not kept in history
    return RecordAsOf(record=record, as_of=at, state_since=row.history_date,
                      transition=row.history_change_reason or {"+": "created", "~": "changed"}.get(row.history_type, ""),
                      content_withheld=CONTENT_WITHHELD if withheld else None, status_now=now_status)


# --------------------------------------------------------------------------------------------
# recall


@dataclass
class RecallAsOf:
    result: RecallResult
    as_of: datetime
    tenant: Tenant
    agent: Agent
    withheld: list = field(default_factory=list)  # ids of records that were candidates but are forgotten now
    may_miss_pruned: bool = False
    semantic_not_reconstructed: str | None = None  # the semantic index today's recall would fuse in

    @property
    def notes(self) -> list[str]:
        notes = []
        if self.withheld:
            notes.append(f"{len(self.withheld)} record(s) that were candidates then are forgotten now: never ranked or "
                         "returned, and no longer counted in the ranking's collection statistics.")
        if self.may_miss_pruned:
            notes.append("Records pruned since (prune deletes a record with its history) cannot be reconstructed; some "
                         "that recall returned then may be missing.")
        if self.semantic_not_reconstructed:
            notes.append(f"Ranked lexically: the semantic index '{self.semantic_not_reconstructed}' that recall fuses in "
                         "today keeps no vectors of the past.")
        return notes


def agent_in_scope(actor: Actor, *, tenant: str, agent: str) -> Agent:
    """The agent `agent` of tenant `tenant`, if the actor may see that tenant; else RecordNotFound
    (another tenant's existence does not leak)."""
    found = (actor.in_tenants(Agent.objects.all()).filter(tenant__slug=tenant, slug=agent)
             .select_related("tenant").first())
    if found is None:
        raise RecordNotFound("No such tenant and agent in your scope.",
                             errors={"agent": ["No such agent in a tenant you review."]})
    return found


def recall_as_of(*, agent: Agent, q: RecallQuery, at: datetime, now: datetime | None = None) -> RecallAsOf:
    """What `agent` would have recalled for `q` at `at` (the caller checked the actor may see the
    agent's tenant). Candidates: the records whose state at `at` was active, in the agent's tenant
    and purpose (and the subject and kinds asked for), unexpired and valid at `at`; ranked as
    recall ranks and filled into the budget by the same code."""
    now = now or timezone.now()
    check_as_of(at, now=now)
    rows = history_model().objects.filter(tenant_id=agent.tenant_id, agent_id=agent.pk, purpose=q.purpose)
    if q.subject:
        # A forgotten record's history keeps the subject's fingerprint once propagation ran.
        rows = rows.filter(subject__in={q.subject, subject_fingerprint(agent.tenant_id, q.subject)})
    kinds = list(MemoryKind.objects.filter(name__in=q.kinds)) if q.kinds else None
    if kinds is not None:
        rows = rows.filter(kind_id__in=[kind.pk for kind in kinds])
    active = (states_at(rows, at).filter(status=Status.ACTIVE).exclude(history_type=DELETED)
              .annotate(status_now=Subquery(MemoryRecord.objects.filter(pk=OuterRef("id")).values("status")[:1]))
              .select_related("tenant", "agent", "kind"))
    collection, withheld = [], []
    for row in active:
        if row.status_now is None:
            continue  # deleted since, with its history: nothing to show
        if row.status_now == Status.FORGOTTEN:
            if _timely(row, at):
                withheld.append(row.id)
            continue
        collection.append(row)
    index = serving_index(None)
    ranked = rank_rows(index, collection, q.query, now=at, timely=lambda row: _timely(row, at))
    records = {row.id: record_from_row(row, withheld=False) for row in collection}
    result = RecallResult(index=index.name, terms=ranked.terms, candidates=len(collection))
    fill_budget(result, iter(ranked.rows), q, load=lambda ids: {pk: records[pk] for pk in ids})
    for item in result.items:
        item.record.last_used_at = None  # not kept in history
    purge_ages = [kind.purge_after for kind in (kinds if kinds is not None else MemoryKind.objects.all())]
    may_miss_pruned = bool(purge_ages) and now > at + min(purge_ages)
    active_semantic = SearchIndex.objects.filter(kind=IndexKind.SEMANTIC, status=IndexStatus.ACTIVE).first()
    serving_semantic, _ = semantic.serving_semantic(active_semantic)
    return RecallAsOf(result=result, as_of=at, tenant=agent.tenant, agent=agent, withheld=sorted(withheld, key=str),
                      may_miss_pruned=may_miss_pruned,
                      semantic_not_reconstructed=serving_semantic.name if serving_semantic is not None else None)


def _timely(row, at: datetime) -> bool:
    """Recall's time filters at `at`: unexpired and within the valid window."""
    return (row.expires_at > at and (row.valid_from is None or row.valid_from <= at)
            and (row.valid_to is None or row.valid_to > at))
