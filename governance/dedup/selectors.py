"""Reads for dedup proposals and lineage, scoped to the caller: the proposal queue the API and the
reviewer UI list, a proposal's members side by side (each flagged if it moved on since the job
saw it), a word-level diff to highlight what differs, and lineage helpers that tell a reviewer
which sources of a derived record (a summary) were superseded, and where those sources came from.
"""

import difflib
import re
import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Prefetch, QuerySet

from governance.dedup.models import DedupProposal, DedupProposalDrop
from memory.actors import Actor
from memory.models import MemoryRecord, Status


def proposals_in_scope(actor: Actor) -> QuerySet[DedupProposal]:
    """Every proposal of the actor's tenants (all tenants for jobs and superusers)."""
    queryset = DedupProposal.objects.all()
    if actor.is_agent:
        return queryset.none()  # proposals are for reviewers
    return actor.in_tenants(queryset)


def proposal_queue(
    actor: Actor, *, status: str | None = DedupProposal.Status.OPEN, category: str | None = None
) -> QuerySet[DedupProposal]:
    """Proposals oldest first, with what a list or a side-by-side page shows loaded in a fixed
    number of queries (kept record, dropped records, kind, agent, decider)."""
    queryset = proposals_in_scope(actor)
    if status:
        queryset = queryset.filter(status=status)
    if category:
        queryset = queryset.filter(category=category)
    return (
        queryset.select_related("tenant", "agent", "kind", "keep", "decided_by")
        .prefetch_related(Prefetch("drops", queryset=DedupProposalDrop.objects.select_related("record").order_by("record_id")))
        .order_by("created_at", "pk")
    )


def proposal_in_scope(actor: Actor, proposal_id) -> DedupProposal | None:
    try:
        proposal_uuid = uuid.UUID(str(proposal_id))
    except ValueError:
        return None
    return proposal_queue(actor, status=None).filter(pk=proposal_uuid).first()


@dataclass(frozen=True)
class ProposalMember:
    record: MemoryRecord
    role: str  # "keep" or "drop"
    proposed_version: int

    @property
    def moved_on(self) -> bool:
        """No longer what the proposal was made over: not active, or at another version."""
        return self.record.status != Status.ACTIVE or self.record.version != self.proposed_version


def proposal_members(proposal: DedupProposal) -> list[ProposalMember]:
    """The kept record first, then the dropped ones (uses the prefetch of `proposal_queue`)."""
    members = [ProposalMember(record=proposal.keep, role="keep", proposed_version=proposal.keep_version)]
    members += [ProposalMember(record=drop.record, role="drop", proposed_version=drop.version) for drop in proposal.drops.all()]
    return members


def proposal_is_current(proposal: DedupProposal) -> bool:
    """True while accepting could succeed: every member still active at its proposed version."""
    return not any(member.moved_on for member in proposal_members(proposal))


@dataclass(frozen=True)
class DiffSegment:
    text: str
    changed: bool


_WORDS = re.compile(r"\s+|[^\s]+")


def content_diff(kept: str, dropped: str) -> tuple[list[DiffSegment], list[DiffSegment]]:
    """Word-level diff of two contents for side-by-side display: each side as segments, marked
    `changed` where the other side differs. Templates escape the text as usual."""
    left, right = _WORDS.findall(kept or ""), _WORDS.findall(dropped or "")
    matcher = difflib.SequenceMatcher(a=left, b=right, autojunk=False)
    left_segments: list[DiffSegment] = []
    right_segments: list[DiffSegment] = []
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        changed = op != "equal"
        if a1 > a0:
            left_segments.append(DiffSegment("".join(left[a0:a1]), changed))
        if b1 > b0:
            right_segments.append(DiffSegment("".join(right[b0:b1]), changed))
    return left_segments, right_segments


# --------------------------------------------------------------------------------------------
# lineage


def superseded_sources(record: MemoryRecord) -> QuerySet[MemoryRecord]:
    """Sources of a derived record that have been superseded since: the summary may be stale."""
    return record.derived_from.filter(status=Status.SUPERSEDED).order_by("created_at", "pk")


def superseded_sources_by_record(record_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, list[uuid.UUID]]:
    """For a page of derived records: record id -> ids of its superseded sources, in one query."""
    links = MemoryRecord.derived_from.through.objects.filter(
        from_memoryrecord_id__in=list(record_ids), to_memoryrecord__status=Status.SUPERSEDED
    ).values_list("from_memoryrecord_id", "to_memoryrecord_id")
    result: dict[uuid.UUID, list[uuid.UUID]] = defaultdict(list)
    for derived_id, source_id in links:
        result[derived_id].append(source_id)
    return dict(result)


def lineage_provenance(record: MemoryRecord) -> list[dict]:
    """The union of a derived record's provenance (shown on its memory page): one entry per source
    with its status and, for sources not forgotten, where it came from. Forgotten sources show only
    that they were. Sources are always of the record's own agent and purpose (checked at write)."""
    entries = []
    for source in record.derived_from.select_related("kind").order_by("created_at", "pk"):
        entry = {"record_id": source.pk, "status": source.status, "authority": source.authority}
        if source.status != Status.FORGOTTEN:
            entry.update(kind=source.kind.name, subject=source.subject, provenance=source.provenance)
        entries.append(entry)
    return entries
