"""PostgreSQL's read of recall's second stage: the records around the candidates in their sequences
(`memory.search.rerank.ScopedRecords`), offered by `memory.engine.postgres.ranking`."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from django.db import connection
from django.db.models import BooleanField, Q, QuerySet
from django.db.models.expressions import RawSQL


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

    The sequences are named as two arrays (one statement text whatever their number: a plan per
    pair of a 50-arm OR cost more to compile and to plan than to run), which PostgreSQL reads
    through memory_sequence_idx, one descent per pair; the window is computed over the compiled
    filter's rows."""
    table = records.model._meta.db_table
    named = RawSQL(
        f'("{table}"."subject", "{table}"."session_id") IN (SELECT * FROM unnest(%s::text[], %s::text[]))',
        ([subject for subject, _ in sequences], [session for _, session in sequences]),
        output_field=BooleanField(),
    )
    inner, params = records.filter(Q(named) | Q(pk__in=list(lone))).values_list(*columns, "turn_id").query.sql_with_params()
    names = [f"c{i}" for i in range(len(columns))]
    c = dict(zip(columns, names, strict=True))
    order = f"coalesce(i.{c['observed_at']}, i.{c['created_at']}), i.{c['created_at']}, length(i.turn_id), i.turn_id, i.{c['id']}"
    sql = (
        f"WITH i({', '.join(names)}, turn_id) AS ({inner}) "
        f"SELECT {', '.join(f'w.{name}' for name in names)}, w.place FROM (SELECT i.*, "
        f"row_number() OVER (PARTITION BY i.{c['subject']}, i.{c['session_id']} ORDER BY {order}) AS place, "
        f"max(CASE WHEN i.{c['id']} = ANY(%s::uuid[]) THEN 1 ELSE 0 END) OVER (PARTITION BY i.{c['subject']}, "
        f"i.{c['session_id']} ORDER BY {order} ROWS BETWEEN {int(window)} PRECEDING AND {int(window)} FOLLOWING) AS near "
        f"FROM i) w WHERE w.near = 1"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, (*params, list(ids)))
        return cursor.fetchall()
