"""SQLite search storage, version 2: a lexical index keeps the entry of a record the expire job
expires because its time is up, until the sweep deletes it, as PostgreSQL's has since version 1.
So between expiry and sweep both databases count the same records in an index's statistics (a
record past its time counts until the sweep, whether or not the expire job has marked it); no
recall returns such an entry (recall reads only entries whose `expires_at` is after its moment).
Any other change of an expired record (forget, prune) still removes its entry at once. The rows
table gains the sweep's index on (expires_at, record_id). The semantic storage is version 1's.

Row-level triggers, as in version 1: SQLite has no statement-level triggers (nor transition
tables), so each record's change is applied on its own, in the statement that makes it.
"In time" is judged by the database's clock when the statement runs (`'now'`, fixed for a
statement), as PostgreSQL's trigger judges it by `statement_timestamp()`.

Pinned: migration 0019 calls this module, so it never changes; what it shares with version 1 it
takes from `ddl_v1`, pinned too. A new design is a new module with an upgrade from this one.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import connection, transaction

from memory.engine.sqlite import ddl_v1 as v1

VERSION = 2
RECORDS = v1.RECORDS
COPIED = v1.COPIED
WATCHED = v1.WATCHED
COLUMNS = v1.COLUMNS
FTS_COLUMNS = v1.FTS_COLUMNS
SEMANTIC_COLUMNS = v1.SEMANTIC_COLUMNS
RECORD_TRIGGERS = v1.RECORD_TRIGGERS
# The statement's moment, in the text form Django stores datetimes in (UTC, `YYYY-MM-DD HH:MM:SS.fff`).
NOW = "strftime('%Y-%m-%d %H:%M:%f', 'now')"


def _execute(sql: str, params: Any = None) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def doclen_sql(expr: str) -> str:
    """Words in `expr` (version 1's count)."""
    return v1.doclen_sql(expr)


def _expiry_index(name: str) -> str:
    return f"CREATE INDEX IF NOT EXISTS {name}_doc_expiry ON {name}_doc (expires_at, record_id)"


def _record_triggers(name: str) -> list[str]:
    """The triggers on the records. An entry is added for a record that becomes active, replaced
    when a watched field of an active record is written, and deleted when its record stops being
    active, except when an active record past its time becomes expired (the expire job): that
    entry stays for the sweep. An expired record's entry goes when the record is deleted (prune)
    or a watched field of it changes (forget)."""
    doc_columns = ", ".join(COLUMNS)
    changed = " OR ".join(f"OLD.{column} IS NOT NEW.{column}" for column in WATCHED)
    expired_in_time = f"OLD.status = 'active' AND NEW.status = 'expired' AND OLD.expires_at <= {NOW} AND NEW.expires_at <= {NOW}"
    return [
        f"""CREATE TRIGGER {name}_ai AFTER INSERT ON {RECORDS} WHEN NEW.status = 'active' BEGIN
            INSERT INTO {name}_doc ({doc_columns}) SELECT {v1._row("NEW")}; END""",
        f"""CREATE TRIGGER {name}_au AFTER UPDATE OF {", ".join(WATCHED)} ON {RECORDS}
            WHEN (OLD.status = 'active' OR NEW.status = 'active' OR (OLD.status = 'expired' AND ({changed})))
            AND NOT ({expired_in_time}) BEGIN
            DELETE FROM {name}_doc WHERE record_id = OLD.id;
            INSERT INTO {name}_doc ({doc_columns}) SELECT {v1._row("NEW")} WHERE NEW.status = 'active'; END""",
        f"""CREATE TRIGGER {name}_ad AFTER DELETE ON {RECORDS} WHEN OLD.status IN ('active', 'expired') BEGIN
            DELETE FROM {name}_doc WHERE record_id = OLD.id; END""",
    ]


def lexical_create(name: str, recipe: dict) -> int:
    """Create a lexical index's tables and triggers and fill them from the active records, in one
    transaction (SQLite has one writer at a time, so no write can slip between the load and the
    triggers); returns how many records it holds. The name must be free."""
    with transaction.atomic():
        for sql in (*v1._tables(name, recipe), _expiry_index(name), *_record_triggers(name)):
            _execute(sql)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {name}_doc")
            return cursor.fetchone()[0]


def _triggers_present(name: str) -> bool:
    expected = sorted(f"{name}_{suffix}" for suffix in RECORD_TRIGGERS)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name IN (SELECT value FROM json_each(%s))",
            [json.dumps(expected)],
        )
        return cursor.fetchone()[0] == len(expected)


def lexical_upgrade(name: str, recipe: dict) -> None:
    """From version 1: the sweep's index, and the triggers on the records that leave the entries of
    records expired in time to the sweep, in one transaction. Triggers a migration dropped (SQLite
    drops them when it rebuilds the records table) are left missing: the index may have missed
    writes meanwhile, and the repair after migrating rebuilds it whole."""
    with transaction.atomic():
        _execute(_expiry_index(name))
        if _triggers_present(name):
            for suffix in RECORD_TRIGGERS:
                _execute(f"DROP TRIGGER IF EXISTS {name}_{suffix}")
            for sql in _record_triggers(name):
                _execute(sql)


def semantic_table(name: str) -> list[str]:
    """A semantic index's table and its indexes (version 1's)."""
    return v1.semantic_table(name)


def semantic_triggers(name: str) -> list[str]:
    """A semantic index's triggers on the records, replacing any there (version 1's)."""
    return v1.semantic_triggers(name)


def semantic_upgrade(name: str) -> None:
    """From version 1: nothing, the semantic storage did not change."""


def upgrade_indexes(search_indexes: Any) -> list[int]:
    """For a migration: every index of `search_indexes` (the migration's SearchIndex model) whose
    storage exists, brought from version 1 to this one; returns those whose triggers were intact
    (the others are rebuilt by the repair after migrating)."""
    tables = set(connection.introspection.table_names())
    upgraded = []
    for index in search_indexes.objects.order_by("pk"):
        name = f"memory_search_{index.kind[:3]}_{int(index.pk)}"
        if name not in tables:
            continue
        if index.kind == "semantic":
            semantic_upgrade(name)
        else:
            lexical_upgrade(name, index.recipe)
        if _triggers_present(name):
            upgraded.append(index.pk)
    return upgraded


def drop(name: str) -> None:
    """Drop an index's storage, lexical or semantic, and its triggers on the records (version 1's
    objects; the sweep's index goes with its table)."""
    v1.drop(name)
