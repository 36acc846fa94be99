"""SQLite search storage, version 3: a semantic index's rows say when their vector was stored
(`embedded_at`, UTC text as Django stores times, NULL while pending or for a vector stored before
version 3), with an index over the embedded rows by that time. The approximate nearest-neighbour
files (`memory.search.ann`) are a snapshot of the vectors at a moment; the rows embedded after it
are found by that index and scored exactly, so a snapshot never hides a new vector. Everything
else is version 2's.

Pinned: migration 0020 calls this module, so it never changes; what it shares with version 2 it
takes from `ddl_v2`, pinned too. A new design is a new module with an upgrade from this one.
"""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction

from memory.engine.sqlite import ddl_v2 as v2

VERSION = 3
RECORDS = v2.RECORDS
COPIED = v2.COPIED
WATCHED = v2.WATCHED
COLUMNS = v2.COLUMNS
FTS_COLUMNS = v2.FTS_COLUMNS
SEMANTIC_COLUMNS = v2.SEMANTIC_COLUMNS
RECORD_TRIGGERS = v2.RECORD_TRIGGERS
NOW = v2.NOW
# The clock when a vector is stored, in the form Django stores datetimes in.
EMBEDDED_NOW = NOW


def doclen_sql(expr: str) -> str:
    """Words in `expr` (version 1's count)."""
    return v2.doclen_sql(expr)


def lexical_create(name: str, recipe: dict) -> int:
    """Create a lexical index (version 2's storage) and fill it."""
    return v2.lexical_create(name, recipe)


def lexical_upgrade(name: str, recipe: dict) -> None:
    """From version 2: nothing, the lexical storage did not change."""


def _has_column(name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM pragma_table_info('{name}') WHERE name = 'embedded_at'")
        return cursor.fetchone()[0] == 1


def _semantic_additions(name: str) -> list[str]:
    return [
        f"ALTER TABLE {name} ADD COLUMN embedded_at TEXT",
        f"CREATE INDEX IF NOT EXISTS {name}_fresh ON {name} (embedded_at) WHERE vector IS NOT NULL",
    ]


def semantic_table(name: str) -> list[str]:
    """A semantic index's table and its indexes: version 2's, with `embedded_at` and its index."""
    return [*v2.semantic_table(name), *_semantic_additions(name)]


def semantic_triggers(name: str) -> list[str]:
    """A semantic index's triggers on the records (version 2's)."""
    return v2.semantic_triggers(name)


def semantic_upgrade(name: str) -> None:
    """From version 2: the column (empty for the vectors stored so far) and its index."""
    with transaction.atomic():
        additions = _semantic_additions(name)
        if _has_column(name):
            additions = additions[1:]
        for sql in additions:
            with connection.cursor() as cursor:
                cursor.execute(sql)


def upgrade_indexes(search_indexes: Any) -> list[int]:
    """For a migration: every index of `search_indexes` (the migration's SearchIndex model) whose
    storage exists, brought from version 2 to this one; returns those whose triggers are intact
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
        if v2._triggers_present(name):
            upgraded.append(index.pk)
    return upgraded


def drop(name: str) -> None:
    """Drop an index's storage, lexical or semantic (the index on `embedded_at` goes with its table)."""
    v2.drop(name)
