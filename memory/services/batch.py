"""Writing many memories in one request, each exactly as a single write would store it."""

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from simple_history.utils import bulk_create_with_history

from memory.actors import Actor
from memory.admission import Gate, enter_gate
from memory.errors import Conflict, DomainError
from memory.fences import hold, idempotency_lock
from memory.metrics import WRITES, count_on_commit
from memory.models import AgentCredential, IdempotencyKey, MemoryKind, MemoryRecord
from memory.outbox.write import write_events_of
from memory.policy import on_activation
from memory.provenance.verify import Keyring, key_revoked_meanwhile, verify_signed, version_conflicts, version_locks
from memory.services.write import (
    _allowed,
    _create_record,
    _new_record,
    _replayed,
    reject_foreign_scope,
    request_fingerprint,
    written_event,
)
from memory.validation import BatchItemSerializer, WriteDraft, parse_writes


@dataclass(frozen=True)
class BatchItemResult:
    index: int
    record: MemoryRecord | None = None
    replayed: bool = False
    error: DomainError | None = None

    @property
    def status(self) -> int:
        if self.record is not None or self.error is None:
            return 201
        return self.error.status


@dataclass
class _BatchItem:
    index: int
    body: Any
    key: str | None
    fingerprint: str
    draft: WriteDraft


def memory_write_batch(*, credential: AgentCredential, items: list[Mapping]) -> list[BatchItemResult]:
    """Up to BATCH_MAX_ITEMS writes, each exactly as `memory_write` would store it (validated,
    admitted or quarantined, one history row, its own idempotency key), in item order. Every item
    is validated before anything is written; plain items are stored set-based (one insert for the
    records, one for their history rows, one for their events, one for their keys), corrections and summaries one by
    one, each in a savepoint so that one item's conflict leaves the others."""
    now = timezone.now()
    actor = Actor.for_credential(credential)
    kinds = {kind.name: kind for kind in MemoryKind.objects.all()}
    results: dict[int, BatchItemResult] = {}
    prepared: list[_BatchItem] = []
    bodies: list[Any] = []
    for index, sent in enumerate(items):
        try:
            bodies.append(reject_foreign_scope(sent, credential))
        except DomainError as exc:
            results[index] = BatchItemResult(index, error=exc)
            bodies.append(None)
    drafts = parse_writes(
        [body for body in bodies if body is not None], now=now, kinds=kinds, serializer_class=BatchItemSerializer
    )
    ring = Keyring.for_drafts(credential.agent.tenant_id, [draft for draft in drafts if isinstance(draft, WriteDraft)])
    parsed = iter(drafts)
    for index, sent in enumerate(items):
        if bodies[index] is None:
            continue
        try:
            draft = next(parsed)
            if isinstance(draft, DomainError):
                raise draft
            draft = verify_signed(_allowed(draft, credential), ring, now=now)
            # The key is not part of the body it stands for (as the header is not, on a single write).
            body = {name: value for name, value in sent.items() if name != "idempotency_key"}
            key = sent.get("idempotency_key")
            prepared.append(_BatchItem(index, body, key, request_fingerprint(body) if key else "", draft))
        except DomainError as exc:
            results[index] = BatchItemResult(index, error=exc)

    keyed = sorted({item.key for item in prepared if item.key})
    with transaction.atomic():
        gate = enter_gate(credential, [item.draft for item in prepared])
        for item in [item for item in prepared if gate.key_revoked(item.draft)]:
            results[item.index] = BatchItemResult(item.index, error=key_revoked_meanwhile(gate.tenant_id))
            prepared.remove(item)
        # Each key's lock before looking for its earlier use: a concurrent request with one of these
        # keys waits for this one, then replays it (memory.fences); likewise each claimed source version.
        hold([idempotency_lock(credential.pk, key) for key in keyed] + version_locks(item.draft for item in prepared))
        earlier = {
            entry.key: entry
            for entry in IdempotencyKey.objects.filter(credential=credential, key__in=keyed).select_related("record")
        }
        to_write: list[_BatchItem] = []
        first_with_key: dict[str, _BatchItem] = {}
        repeats: list[tuple[_BatchItem, _BatchItem]] = []  # (a repeat, the first item with its key)
        for item in prepared:
            try:
                if item.key in earlier:
                    results[item.index] = BatchItemResult(
                        item.index, record=_replayed(earlier[item.key], item.fingerprint).record, replayed=True
                    )
                elif item.key in first_with_key:  # the same key twice in one batch: the first write answers both
                    if first_with_key[item.key].fingerprint != item.fingerprint:
                        raise Conflict("This idempotency_key was used with a different body.", code="idempotency_mismatch")
                    repeats.append((item, first_with_key[item.key]))
                else:
                    if item.key:
                        first_with_key[item.key] = item
                    to_write.append(item)
            except DomainError as exc:
                results[item.index] = BatchItemResult(item.index, error=exc)
        conflicts = version_conflicts(gate.tenant_id, [item.draft for item in to_write])
        for item, conflict in zip(list(to_write), conflicts, strict=True):
            if conflict is not None:
                results[item.index] = BatchItemResult(item.index, error=conflict)
                to_write.remove(item)
        results.update(_store_batch(to_write, credential=credential, actor=actor, now=now, gate=gate))
    for item, first_item in repeats:
        first = results[first_item.index]
        results[item.index] = BatchItemResult(item.index, record=first.record, replayed=True, error=first.error)
    return [results[index] for index in range(len(items))]


def _store_batch(
    items: list[_BatchItem], *, credential: AgentCredential, actor: Actor, now: datetime, gate: Gate
) -> dict[int, BatchItemResult]:
    results: dict[int, BatchItemResult] = {}
    plain = [item for item in items if not (item.draft.supersedes or item.draft.derived_from)]
    records = [_new_record(item.draft, credential=credential, actor=actor, now=now, gate=gate) for item in plain]
    if records:
        bulk_create_with_history(
            records, MemoryRecord, default_date=now, custom_historical_attrs={"history_actor": actor.label, "history_note": ""}
        )
        write_events_of(records, written_event, now=now)
        for status, count in Counter(record.status for record in records).items():
            count_on_commit(WRITES, status, count)
        on_activation(records)
    results.update({item.index: BatchItemResult(item.index, record=record) for item, record in zip(plain, records, strict=True)})
    for item in items:
        if item.index in results:
            continue
        try:
            with transaction.atomic():
                results[item.index] = BatchItemResult(
                    item.index, record=_create_record(item.draft, credential=credential, actor=actor, now=now, gate=gate)
                )
        except DomainError as exc:
            results[item.index] = BatchItemResult(item.index, error=exc)
    gate.store_raised(actor)
    IdempotencyKey.objects.bulk_create(
        [
            IdempotencyKey(
                credential=credential,
                key=item.key,
                fingerprint=item.fingerprint,
                response_status=201,
                record=results[item.index].record,
            )
            for item in items
            if item.key and results[item.index].record is not None
        ]
    )
    return results
