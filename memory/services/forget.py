"""Forgetting a subject, logically and at once: its records and everything derived from them
become `forgotten`; forget propagation (governance) then removes the content from every copy.
Also the two set helpers forget and revocation share: record ids as one parameter, and the
lineage walk ("derived from, at any depth")."""

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import connections, router, transaction
from django.db.models.expressions import RawSQL
from django.utils import timezone

from memory.actors import Actor
from memory.errors import RecordNotFound, ScopeDenied
from memory.fingerprints import records_about
from memory.models import TRANSITIONS, MemoryRecord
from memory.policy import CHUNK
from memory.selectors import records_in_scope
from memory.services.history import _bulk_transition, _bulk_transition_in_place


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
    (`record_id_set`), and on PostgreSQL each of the two transitions is one statement (records and
    history rows together, as the expire job moves a batch)."""
    if not actor.may_access_tenant(tenant_id):
        raise RecordNotFound("No such tenant in your scope.")
    if actor.is_agent and not actor.credential.can_forget:
        raise ScopeDenied("This token may not forget subjects.")
    now = timezone.now()
    with transaction.atomic():
        direct = set(
            records_about(records_in_scope(actor), tenant_id=tenant_id, subject=subject)
            .filter(status__in=TRANSITIONS["forget"][0])
            .values_list("pk", flat=True)
        )
        locked = _forget_locked(direct | derived_at_any_depth(direct))
        subject_ids = [pk for pk in locked if pk in direct]
        lineage_ids = [pk for pk in locked if pk not in direct]
        in_place = connections[router.db_for_write(MemoryRecord)].vendor == "postgresql"
        for ids, reason_name in ((subject_ids, "forget"), (lineage_ids, "forget_lineage")):
            if not ids:
                continue
            how = {"transition": "forget", "now": now, "actor": actor, "note": reason, "reason": f"{actor.channel}.{reason_name}"}
            if in_place:
                _bulk_transition_in_place(MemoryRecord.objects.filter(pk__in=record_id_set(ids)).values("pk"), **how)
            else:  # SQLite: `_bulk_transition` binds a parameter per id, so in chunks
                for start in range(0, len(ids), CHUNK):
                    _bulk_transition(ids[start : start + CHUNK], **how)
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
    """Record ids as a subquery over a single parameter, for `pk__in=` (or `record_id__in=`): a
    uuid[] literal on PostgreSQL, a JSON list on SQLite, written as one string. 10,000 ids then
    make one short statement, where a list of ids makes a placeholder each for Django to compile
    and the driver to quote, which cost a 10,000-record forget more than its updates did.
    `as_text`: the ids as `str(pk)` writes them, for text columns such as the admin log's object id."""
    ids = [pk if isinstance(pk, uuid.UUID) else uuid.UUID(str(pk)) for pk in ids]
    if connections[router.db_for_write(MemoryRecord)].vendor == "postgresql":
        cast = "::text" if as_text else ""
        return RawSQL(f"SELECT unnest(%s::uuid[]){cast}", ("{" + ",".join(pk.hex for pk in ids) + "}",))
    return RawSQL("SELECT value FROM json_each(%s)", (json.dumps([str(pk) if as_text else pk.hex for pk in ids]),))
