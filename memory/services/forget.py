"""Forgetting a subject, logically and at once: its records and everything derived from them
become `forgotten`; forget propagation (governance) then removes the content from every copy.
Also the two set helpers forget and revocation share: record ids as one parameter, and the
lineage walk ("derived from, at any depth")."""

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction
from django.db.models.expressions import RawSQL
from django.utils import timezone

from memory import replicas
from memory.actors import Actor
from memory.errors import RecordNotFound, ScopeDenied
from memory.fingerprints import records_about
from memory.models import TRANSITIONS, MemoryRecord
from memory.selectors import records_in_scope
from memory.services.history import _bulk_move, _database, _lifecycle


@dataclass(frozen=True)
class ForgetOutcome:
    record_ids: list[uuid.UUID]  # every record forgotten now, lineage included
    subject_count: int  # of which directly about the subject
    lineage_count: int  # derived records forgotten because a source was


def memory_forget_subject(*, tenant_id: int, subject: str, actor: Actor, reason: str = "") -> ForgetOutcome:
    """Logical forget, synchronous: every record of the subject (whatever its status), and every
    record derived from one of them, becomes `forgotten`. A reviewer forgets across the tenant (an
    erasure request); an agent only within its own records, since its token fixes the agent. Recall
    excludes them as soon as this commits; content is removed from storage by forget propagation.
    Records already forgotten, whose subject propagation replaced by its keyed fingerprint, match
    too (`memory.fingerprints.records_about`) and count as nothing left to forget.

    Set-based whatever the number of records: the ids travel to the database as one parameter
    (`record_id_set`), and each of the two moves (the subject's records, then their lineage) is
    one engine `move`. The outcome is the same on every database: the same records, one history
    row each with the same reason, note, actor and moment, the subject's rows written before the
    lineage's and each group's in primary-key order, and the same receipt."""
    if not actor.may_access_tenant(tenant_id):
        raise RecordNotFound("No such tenant in your scope.")
    if actor.is_agent and not (actor.credential is not None and actor.credential.can_forget):
        raise ScopeDenied("This token may not forget subjects.")
    now = timezone.now()
    with transaction.atomic():
        replicas.fence(tenant_id)  # no replica serves the subject once this commits (memory.replicas)
        direct = set(
            records_about(records_in_scope(actor), tenant_id=tenant_id, subject=subject)
            .filter(status__in=TRANSITIONS["forget"][0])
            .values_list("pk", flat=True)
        )
        locked = _forget_locked(direct | derived_at_any_depth(direct))
        subject_ids = [pk for pk in locked if pk in direct]
        lineage_ids = [pk for pk in locked if pk not in direct]
        for ids, reason_name in ((subject_ids, "forget"), (lineage_ids, "forget_lineage")):
            _bulk_move(ids, transition="forget", now=now, actor=actor, note=reason, reason=f"{actor.channel}.{reason_name}")
    return ForgetOutcome(record_ids=subject_ids + lineage_ids, subject_count=len(subject_ids), lineage_count=len(lineage_ids))


def _forget_locked(ids: Iterable[uuid.UUID], *, transition: str = "forget") -> list[uuid.UUID]:
    """Lock every record to move, the subject's (or source's) and their derivatives together, in one
    pass in primary-key order (the order of every multi-row lock), and return those `transition`
    still applies to (a record may have moved meanwhile)."""
    return list(
        MemoryRecord.objects.select_for_update()
        .filter(pk__in=record_id_set(ids))
        .filter(status__in=TRANSITIONS[transition][0])
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def derived_at_any_depth(ids: Iterable[uuid.UUID]) -> set[uuid.UUID]:
    """Every record derived from one of `ids`, directly or through other derived records, `ids`
    themselves left out. The lineage is the derivation links, whatever each record's status:
    callers pick the statuses they move."""
    roots = set(ids)
    edges = MemoryRecord.derived_from.through.objects
    found: set[uuid.UUID] = set()
    frontier = roots
    while frontier:  # derived records of derived records, too
        frontier = (
            set(edges.filter(to_memoryrecord_id__in=record_id_set(frontier)).values_list("from_memoryrecord_id", flat=True))
            - roots
            - found
        )
        found |= frontier
    return found


def record_id_set(ids: Iterable[uuid.UUID], *, as_text: bool = False) -> RawSQL:
    """Record ids as a subquery over a single parameter, for `pk__in=` (or `record_id__in=`),
    written by the engine as one string (a uuid[] literal, a JSON list). Many ids then make one
    short statement, where a list of ids makes a placeholder each for Django to compile and the
    driver to quote, which cost a large forget more than its updates did. `as_text`: the ids as
    `str(pk)` writes them, for text columns such as the admin log's object id."""
    using = _database()
    return _lifecycle(using).id_set([pk if isinstance(pk, uuid.UUID) else uuid.UUID(str(pk)) for pk in ids], as_text=as_text)
