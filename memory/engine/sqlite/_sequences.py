"""SQLite's read of recall's second stage: the records around the candidates in their sequences
(`memory.search.rerank.ScopedRecords`), offered by `memory.engine.sqlite.ranking`."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from django.db.models import Case, F, Max, Q, QuerySet, Value, When, Window
from django.db.models.expressions import RowRange
from django.db.models.functions import Coalesce, Length, RowNumber


def sequence_window(
    records: QuerySet,
    columns: Sequence[str],
    *,
    ids: Sequence[uuid.UUID],
    sequences: Sequence[tuple[str, str]],
    lone: Sequence[uuid.UUID],
    window: int,
) -> list[tuple]:
    """The rows of `records` (the hard-filtered records) in the given sequences ((subject,
    session_id) pairs) or among `lone` (ids of records outside a sequence), within `window` places of
    one of `ids` in their sequence, as tuples of `columns` (field paths, among them id, subject,
    session_id, observed_at, created_at) and the row's place in its sequence. A sequence's order:
    observed_at (else created_at), created_at, the turn id in natural order (shorter first), id.

    One arm of the filter per subject naming its sessions; the window through the ORM."""
    order = [
        Coalesce("observed_at", "created_at").asc(),
        F("created_at").asc(),
        Length("turn_id").asc(),
        F("turn_id").asc(),
        F("id").asc(),
    ]
    partition = [F("subject"), F("session_id")]
    sessions: dict[str, list[str]] = {}
    for subject, session in sequences:
        sessions.setdefault(subject, []).append(session)
    where = Q(pk__in=list(lone))
    for subject, named in sorted(sessions.items()):
        where |= Q(subject=subject, session_id__in=sorted(named))
    rows = (
        records.filter(where)
        .annotate(
            near=Window(
                Max(Case(When(pk__in=list(ids), then=Value(1)), default=Value(0))),
                partition_by=partition,
                order_by=order,
                frame=RowRange(start=-window, end=window),
            ),
            place=Window(RowNumber(), partition_by=partition, order_by=order),
        )
        .filter(near=1)
        .values_list(*columns, "place")
    )
    return list(rows)
