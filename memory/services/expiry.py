"""The expire job's walk: every active or quarantined record past `expires_at` gets the `expire`
transition, in locked batches that skip what another transaction holds."""

from datetime import datetime

from django.db import connections, router, transaction
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL
from django.utils import timezone

from memory.actors import Actor
from memory.models import TRANSITIONS, MemoryRecord
from memory.services.history import _bulk_transition, _count_moved, _history_params, _in_place_transition_sql


def memory_expire_due(
    *, actor: Actor, now: datetime | None = None, batch_size: int = 2000, max_batches: int | None = None, walk: str | None = None
) -> int:
    """Expire every active or quarantined record past `expires_at`, one locked batch per
    transaction. Rows another transaction holds are skipped (a run never waits for a reviewer's
    transaction, so it cannot deadlock with one), so concurrent runs never double a transition,
    and a run killed mid-way loses only its uncommitted batch, which the next run picks up; as do
    records a concurrent update moves behind the walk meanwhile.

    PostgreSQL walks one of two ways (`walk`, chosen here unless given, for tests): along the
    expiry index in (expires_at, id) order ("index"), or, when at least as many records are due as
    the table has pages, through the table in physical order ("blocks"): records sharing one
    expires_at follow each other in id order, which is random on disk, so a large expiry along the
    index touched every page of the table again in every batch, and after each checkpoint wrote
    each of them whole to the WAL again (a million records sharing one moment: 85 s and 5.3 GB of
    WAL along the index, 62 s and 4.0 GB through the table, as much as one plain UPDATE of them all)."""
    now = now or timezone.now()
    allowed_from, target = TRANSITIONS["expire"]
    reason = f"{actor.channel}.expire"
    connection = connections[router.db_for_write(MemoryRecord)]
    if connection.vendor == "postgresql":
        return _expire_due_in_place(
            connection,
            now=now,
            batch_size=batch_size,
            max_batches=max_batches,
            walk=walk,
            allowed_from=list(allowed_from),
            target=target,
            actor=actor,
            reason=reason,
        )
    table = connection.ops.quote_name(MemoryRecord._meta.db_table)
    keyset = (MemoryRecord._meta.get_field("expires_at"), MemoryRecord._meta.pk)
    total = batches = 0
    after = None  # (expires_at, id) of the last record of the previous batch
    while max_batches is None or batches < max_batches:
        # Each batch starts after the last one, along the expiry index: it never re-reads the
        # entries of records earlier batches expired.
        due = MemoryRecord.objects.select_for_update(skip_locked=True).filter(status__in=allowed_from, expires_at__lte=now)
        if after is not None:  # a row comparison: the index scan starts there (an OR of the two would not)
            due = due.filter(RawSQL(f"({table}.expires_at, {table}.id) > (%s, %s)", after, output_field=BooleanField()))
        with transaction.atomic():
            rows = list(due.order_by("expires_at", "pk").values_list("expires_at", "pk")[:batch_size])
            ids = [pk for _, pk in rows]
            if not ids:
                break
            done = _bulk_transition(ids, transition="expire", now=now, actor=actor, reason=reason)
        total += done
        batches += 1
        if len(rows) < batch_size:
            break
        after = tuple(field.get_db_prep_value(value, connection) for field, value in zip(keyset, rows[-1], strict=True))
    return total


def _expire_due_in_place(
    connection,
    *,
    now: datetime,
    batch_size: int,
    max_batches: int | None,
    walk: str | None,
    allowed_from: list[str],
    target: str,
    actor: Actor,
    reason: str,
) -> int:
    """PostgreSQL's `memory_expire_due`: each batch one statement (the selection, locking with
    SKIP LOCKED, the UPDATE, which checks status and time again, and the history INSERT from its
    RETURNING), no key travelling to Python and back."""
    quote = connection.ops.quote_name
    table = quote(MemoryRecord._meta.db_table)
    stamp = connection.ops.adapt_datetimefield_value(now)
    due = "status = ANY(%s) AND expires_at <= %s"
    due_params = [allowed_from, stamp]
    size = "SELECT pg_relation_size(%s::regclass) / current_setting('block_size')::int"  # the table's pages
    with connection.cursor() as cursor:
        cursor.execute(f"{size}, greatest(reltuples, 0) FROM pg_class WHERE oid = %s::regclass", [table, table])
        pages, tuples = cursor.fetchone()
        if walk is None:
            # Counted along the expiry index, and never more than `pages`: cheap when few are due.
            cursor.execute(f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {due} LIMIT %s) d", [*due_params, max(pages, 1)])
            walk = "blocks" if cursor.fetchone()[0] >= max(pages, 1) else "index"
    moved = _in_place_transition_sql(
        connection,
        match="r.ctid = selected.at" if walk == "blocks" else "r.id = selected.at",
        recheck="r.status = ANY(%s) AND r.expires_at <= %s",
    )
    moved_params = [target, stamp, *due_params, *_history_params(history_date=now, actor=actor, reason=reason, note="")]
    total = batches = 0
    if walk == "blocks":
        # About `batch_size` rows per statement, from the table's average rows per page; pages
        # added while the run goes (new versions of records, moved by updates) are walked too.
        step = max(1, int(batch_size * pages / tuples) if tuples > 0 else batch_size // 20)
        start = 0
        while max_batches is None or batches < max_batches:
            if start >= pages:
                with connection.cursor() as cursor:
                    cursor.execute(size, [table])
                    pages = cursor.fetchone()[0]
                if start >= pages:
                    break
            selected = f"SELECT ctid FROM {table} WHERE ctid >= %s::tid AND ctid < %s::tid AND {due} FOR UPDATE SKIP LOCKED"
            with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
                cursor.execute(
                    f"WITH selected (at) AS MATERIALIZED ({selected}), {moved}",
                    [f"({start},0)", f"({start + step},0)", *due_params, *moved_params],
                )
                done = cursor.fetchone()[0]
                _count_moved("expire", done)
            total += done
            start += step
            batches += 1
    else:
        after: tuple | None = None  # (expires_at, id) of the last record of the previous batch
        while max_batches is None or batches < max_batches:
            # Each batch starts after the last one, along the expiry index: it never re-reads the
            # entries of records earlier batches expired (dead until vacuum, and when many records
            # share one expires_at, read again from the heap by every batch). A row comparison: the
            # index scan starts there (an OR of the two would not).
            keyset = "AND (expires_at, id) > (%s, %s) " if after else ""
            selected = (
                f"SELECT id, expires_at FROM {table} WHERE {due} {keyset}ORDER BY expires_at, id LIMIT %s FOR UPDATE SKIP LOCKED"
            )
            with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
                cursor.execute(
                    f"WITH selected (at, expires_at) AS MATERIALIZED ({selected}), {moved}, "
                    f"(SELECT count(*) FROM selected), last.* FROM (SELECT expires_at, at FROM selected "
                    f"ORDER BY expires_at DESC, at DESC LIMIT 1) last",
                    [*due_params, *(after or ()), batch_size, *moved_params],
                )
                row = cursor.fetchone()
                _count_moved("expire", row[0] if row else 0)
            if row is None:
                break
            done, selected_count, *last = row
            total += done
            batches += 1
            if selected_count < batch_size:
                break
            after = tuple(last)
    return total
