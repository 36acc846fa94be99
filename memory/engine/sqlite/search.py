"""SQLite's lexical index storage at run time: build, drop, purge, sweep and inspect an index's
tables, at the current storage version (`VERSION`, whose DDL is `ddl_v<VERSION>`; migrations
call the pinned versions directly).

An index is a plain table `<name>_doc` (the rows) and an external-content FTS5 table `<name>` over
its scope, subject, kind and body columns, with the recipe's tokenizer. It holds `active` records,
and records expired in time until the sweep deletes them (`sweep_expired`), as PostgreSQL's does,
so both count the same records in an index's statistics. Scope, subject and kind are single
tokens of letters and digits (`scope_token`, `subject_token`, `kind_token`; the triggers compute
the same in SQL).

Row-level triggers on the records (`<name>_ai|_au|_ad`), for a lexical and a semantic index
alike: SQLite has no statement-level triggers. SQLite drops them when a migration rebuilds the
records table (how it alters most columns), which `triggers_present` reports and the repair after
migrating mends.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from memory.engine.sqlite import ddl_v3 as ddl

VERSION = ddl.VERSION
RECORDS = ddl.RECORDS
# A `<name>_doc` row's columns, and the FTS5 table's.
COLUMNS = ddl.COLUMNS
FTS_COLUMNS = ddl.FTS_COLUMNS
BODY_COLUMN = FTS_COLUMNS.index("body")  # for highlight()
RECORD_TRIGGERS = ddl.RECORD_TRIGGERS


def _execute(sql: str, params: Any = None) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def doclen_sql(expr: str) -> str:
    """Words in `expr`, counted as the index counts a record's (`doclen`)."""
    return ddl.doclen_sql(expr)


def scope_token(tenant_id: int, agent_id: int, purpose: str) -> str:
    """The token an entry's `scope` column holds (hex of the purpose, ending in a digit, which the
    porter stemmer leaves alone)."""
    return f"t{tenant_id}a{agent_id}p{purpose.encode().hex()}0"


def subject_token(subject: str) -> str:
    return f"s{subject.encode().hex()}0"


def kind_token(kind_id: int) -> str:
    return f"k{kind_id}"


def build_storage(name: str, recipe: dict) -> int:
    """Create the index's tables and triggers and fill them from the active records; returns how
    many records it holds. Any previous storage under the name is dropped first (a cache)."""
    drop_storage(name)
    return ddl.lexical_create(name, recipe)


def drop_storage(name: str) -> None:
    """Drop an index's storage, lexical or semantic, with its triggers on the records."""
    ddl.drop(name)


def triggers_present(name: str) -> bool:
    """Whether all of the index's triggers on the records exist."""
    expected = sorted(f"{name}_{suffix}" for suffix in RECORD_TRIGGERS)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name IN (SELECT value FROM json_each(%s))",
            [json.dumps(expected)],
        )
        return cursor.fetchone()[0] == len(expected)


def count_rows(name: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {name}_doc")
        return cursor.fetchone()[0]


def purge_records(name: str, record_ids: Sequence[uuid.UUID]) -> int:
    """Delete the given records' entries; returns how many were still there. The FTS5 index is then
    merged into one segment, which drops the deleted entries' tokens from disk (a plain delete only
    records a tombstone beside them)."""
    if not record_ids:
        return 0
    hex_ids = json.dumps([uuid.UUID(str(pk)).hex for pk in record_ids])
    removed = _execute(f"DELETE FROM {name}_doc WHERE record_id IN (SELECT value FROM json_each(%s))", [hex_ids])
    _execute(f"INSERT INTO {name}({name}) VALUES ('optimize')")
    return removed


def sweep_expired(name: str, *, now: datetime, batch_size: int) -> int:
    """Delete the entries whose time was up at `now` (those of records the expire job expired, and
    of records past their time it has not reached yet; no recall can return either),
    `batch_size` per transaction, along the sweep's index; returns how many went."""
    moment = connection.ops.adapt_datetimefield_value(now)
    removed = 0
    while True:
        with transaction.atomic():
            done = _execute(
                f"DELETE FROM {name}_doc WHERE id IN (SELECT id FROM {name}_doc WHERE expires_at <= %s "
                f"ORDER BY expires_at, record_id LIMIT %s)",
                [moment, batch_size],
            )
        removed += done
        if done < batch_size:
            return removed


def storage_objects() -> list[str]:
    """Names of every table and trigger in the database that may belong to an index's storage
    (`memory_search_...`), whether or not an index row still describes it."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger') AND name LIKE 'memory\\_search\\_%%' ESCAPE '\\'"
        )
        return [row[0] for row in cursor.fetchall()]


def lock_bootstrap() -> None:
    """Nothing to do: SQLite has one writer at a time, so the first build of a default index is
    serialised by the write transaction it runs in."""
