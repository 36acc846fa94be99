"""The `propose_duplicates` job: walks every active, unexpired record grouped by scope (tenant,
agent, purpose, subject, kind) and files `DedupProposal`s for the duplicate groups and
contradicting pairs `governance.dedup.detect` finds. It never changes a record; a reviewer decides.

Cost: one keyset-paginated page per chunk of `batch_size` rows (a few index range queries over
the partial index `memory_dedup_scope_idx`, see `_rows_after`); a scope is processed as soon as
its last row has been read, and detection inside a scope uses blocking, so time grows about
linearly with the number of records and memory with the largest scope. Each chunk's proposals
commit on their own, so a run killed mid-way keeps what it filed and the next run skips it.

Idempotence: a proposal's signature is the sha256 of its members' (id, version) pairs. A group
whose signature exists (open, accepted, rejected or rolled back) is not proposed again; once one
of its records changes (any transition bumps the version) it is a new group. A group a reviewer
rolled back is recognised at the versions the rollback left, so undoing a merge does not make the
job propose it again straight away. A duplicate group that overlaps a still-valid open duplicate
proposal waits (`deferred`) until that one is decided, so a reviewer never sees two competing
proposals over the same records.
"""

import uuid
from collections.abc import Iterator
from datetime import datetime

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from governance.dedup.detect import Finding, RecordFacts, find_proposals, proposal_signature
from governance.dedup.models import DedupProposal, DedupProposalDrop
from memory.models import MemoryRecord, Status
from memory.outbox.models import EventType
from memory.outbox.write import write_events

SCOPE_FIELDS = ("tenant_id", "agent_id", "purpose", "subject", "kind_id")
# The scope first (so a scope's rows are contiguous), then the partial index's content_hash, then
# the primary key to make the keyset unique.
ORDER_FIELDS = (*SCOPE_FIELDS, "content_hash", "id")
ROW_FIELDS = (*ORDER_FIELDS, "version", "content", "authority", "trust", "confirmed_at", "created_at")
IN_LIST_SIZE = 1000
_SCOPE_WIDTH = len(SCOPE_FIELDS)
_ORDER_WIDTH = len(ORDER_FIELDS)

Row = tuple
Scope = tuple  # (tenant_id, agent_id, purpose, subject, kind_id)


def _active_row_chunks(*, now: datetime, batch_size: int) -> Iterator[tuple[list[Row], bool]]:
    """Active, unexpired records in scope order, `batch_size` rows per page (keyset pagination:
    each page starts after the last row of the previous one, so no OFFSET scans), each page with
    whether it is the last."""
    base = MemoryRecord.objects.filter(status=Status.ACTIVE, expires_at__gt=now).order_by(*ORDER_FIELDS).values_list(*ROW_FIELDS)
    after: Row | None = None
    while True:
        rows = list(base[:batch_size]) if after is None else _rows_after(base, after, batch_size)
        last = len(rows) < batch_size
        if rows or last:
            yield rows, last
        if last:
            return
        after = rows[-1][:_ORDER_WIDTH]


def _rows_after(base, after: Row, limit: int) -> list[Row]:
    """Up to `limit` rows of `base` that come after `after` in ORDER_FIELDS order.

    "After" is (a > x) OR (a = x AND b > y) OR ... Asked as one OR, PostgreSQL can bound the
    index scan by the first field only, and filters every earlier row of the tenant on each page
    (a page then costs more the further into a large tenant it is). So the branches are asked one
    by one, longest equal prefix first: each is an equality prefix plus one range, which the
    partial index on the scope serves directly, and their rows follow each other in order."""
    rows: list[Row] = []
    for depth in range(_ORDER_WIDTH - 1, -1, -1):
        equal = dict(zip(ORDER_FIELDS[:depth], after[:depth], strict=True))
        rows.extend(base.filter(**equal, **{f"{ORDER_FIELDS[depth]}__gt": after[depth]})[: limit - len(rows)])
        if len(rows) >= limit:
            break
    return rows


def _complete_scopes(*, now: datetime, batch_size: int) -> Iterator[list[list[Row]]]:
    """Groups of rows, one list per scope, yielded chunk by chunk once each scope is complete (a
    scope that continues into the next chunk is held back until its last row is read)."""
    current_scope: Scope | None = None
    current: list[Row] = []
    for rows, last in _active_row_chunks(now=now, batch_size=batch_size):
        complete: list[list[Row]] = []
        for row in rows:
            scope = row[:_SCOPE_WIDTH]
            if scope != current_scope:
                if current:
                    complete.append(current)
                current_scope, current = scope, []
            current.append(row)
        if last and current:
            complete.append(current)
        if complete:
            yield complete


def _facts(row: Row) -> RecordFacts:
    content_hash, record_id, version, content, authority, trust, confirmed_at, created_at = row[_SCOPE_WIDTH:]
    return RecordFacts(
        id=record_id,
        version=version,
        content=content,
        content_hash=content_hash,
        authority=authority,
        trust=trust,
        confirmed_at=confirmed_at,
        created_at=created_at,
    )


def _slices(values: list) -> Iterator[list]:
    """A very large scope must not turn into one IN list beyond what the database accepts."""
    size = IN_LIST_SIZE
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _known_proposals(record_versions: dict[uuid.UUID, int]) -> tuple[set[str], set[uuid.UUID]]:
    """For the records of a chunk: signatures of rolled-back groups at the versions the rollback
    left them (so they count as decided), and the records held by an open duplicate proposal that
    still matches the records (so new duplicate groups around them wait)."""
    proposals: dict[uuid.UUID, DedupProposal] = {}
    for ids in _slices(list(record_versions)):
        for proposal in (
            DedupProposal.objects.filter(status__in=[DedupProposal.Status.OPEN, DedupProposal.Status.ROLLED_BACK])
            .filter(Q(keep_id__in=ids) | Q(drops__record_id__in=ids))
            .distinct()
            .only("id", "status", "category", "keep_id", "keep_version")
            .prefetch_related("drops")
        ):
            proposals[proposal.pk] = proposal
    rolled_back_signatures: set[str] = set()
    held: set[uuid.UUID] = set()
    for proposal in proposals.values():
        drops = [(drop.record_id, drop.version) for drop in proposal.drops.all()]
        if proposal.status == DedupProposal.Status.ROLLED_BACK:
            # accept superseded each drop (+1), rollback restored it (+1)
            rolled_back_signatures.add(
                proposal_signature([(proposal.keep_id, proposal.keep_version), *((rid, v + 2) for rid, v in drops)])
            )
        elif proposal.category == DedupProposal.Category.DUPLICATE:
            members = [(proposal.keep_id, proposal.keep_version), *drops]
            if all(record_versions.get(rid) == version for rid, version in members):
                held.update(rid for rid, _ in members)
    return rolled_back_signatures, held


def _proposal_rows(scope: Scope, finding: Finding) -> tuple[DedupProposal, list[DedupProposalDrop]]:
    tenant_id, agent_id, purpose, subject, kind_id = scope
    proposal = DedupProposal(
        id=uuid.uuid4(),
        tenant_id=tenant_id,
        agent_id=agent_id,
        purpose=purpose,
        subject=subject,
        kind_id=kind_id,
        category=finding.category,
        method=finding.method,
        similarity=min(1.0, max(0.0, finding.similarity)),
        keep_id=finding.keep.id,
        keep_version=finding.keep.version,
        signature=finding.signature,
    )
    drops = [DedupProposalDrop(proposal_id=proposal.id, record_id=drop.id, version=drop.version) for drop in finding.drops]
    return proposal, drops


def _file_proposals(scopes: list[list[Row]], counts: dict[str, int]) -> None:
    findings: list[tuple[Scope, Finding]] = []
    record_versions: dict[uuid.UUID, int] = {}
    for rows in scopes:
        facts = [_facts(row) for row in rows]
        record_versions.update((fact.id, fact.version) for fact in facts)
        detection = find_proposals(facts)
        counts["scopes"] += 1
        counts["records"] += len(facts)
        counts["comparisons"] += detection.stats.comparisons
        findings.extend((rows[0][:_SCOPE_WIDTH], finding) for finding in detection.findings)
    if not findings:
        return

    existing: set[str] = set()
    for signatures in _slices([finding.signature for _, finding in findings]):
        existing.update(DedupProposal.objects.filter(signature__in=signatures).values_list("signature", flat=True))
    rolled_back_signatures, held = _known_proposals(record_versions)
    proposals: list[DedupProposal] = []
    drops: list[DedupProposalDrop] = []
    for scope, finding in findings:
        if finding.signature in existing or finding.signature in rolled_back_signatures:
            counts["already_proposed"] += 1
            continue
        if finding.category == DedupProposal.Category.DUPLICATE and any(m.id in held for m in finding.members):
            counts["deferred"] += 1
            continue
        proposal, proposal_drops = _proposal_rows(scope, finding)
        proposals.append(proposal)
        drops.extend(proposal_drops)
    if not proposals:
        return

    with transaction.atomic():
        # A concurrent run may have filed the same signature meanwhile: skip those, and attach
        # drops only to the proposals this run actually inserted.
        DedupProposal.objects.bulk_create(proposals, ignore_conflicts=True, batch_size=500)
        inserted: set[uuid.UUID] = set()
        for ids in _slices([p.id for p in proposals]):
            inserted.update(DedupProposal.objects.filter(pk__in=ids).values_list("pk", flat=True))
        DedupProposalDrop.objects.bulk_create([d for d in drops if d.proposal_id in inserted], batch_size=1000)
        write_events(
            (
                {
                    "type": EventType.PROPOSAL_OPENED,
                    "tenant_id": p.tenant_id,
                    "data": {"proposal": {"id": str(p.pk), "category": p.category, "keep": str(p.keep_id)}},
                }
                for p in proposals
                if p.id in inserted
            ),
            now=timezone.now(),
        )
    for proposal in proposals:
        if proposal.id in inserted:
            counts[f"{proposal.category}_proposals"] += 1
        else:
            counts["already_proposed"] += 1


def propose_duplicates(*, now: datetime | None = None, batch_size: int = 2000) -> dict[str, int]:
    """File proposals for duplicates and contradictions among active records, scope by scope.
    Returns counts: records and scopes scanned, pairs compared, proposals filed per category,
    groups already proposed or decided, and duplicate groups deferred behind an open proposal."""
    now = now or timezone.now()
    if batch_size < 1:
        raise ValueError("batch_size must be positive")
    counts = dict.fromkeys(
        ("records", "scopes", "comparisons", "duplicate_proposals", "conflict_proposals", "already_proposed", "deferred"), 0
    )
    for scopes in _complete_scopes(now=now, batch_size=batch_size):
        _file_proposals(scopes, counts)
    return counts
