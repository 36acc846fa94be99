"""PostgreSQL search storage, version 3: a semantic index's rows say when their vector was stored
(`embedded_at`, the database's clock at the write, NULL while pending or for a vector stored
before version 3), with an index over the embedded rows by that time. The approximate
nearest-neighbour files (`memory.search.ann`) are a snapshot of the vectors at a moment; the rows
embedded after it are found by that index and scored exactly, so a snapshot never hides a new
vector. Everything else is version 2's.

Pinned: migration 0020 calls this module, so it never changes; what it shares with version 2 it
takes from `ddl_v2`, pinned too. A new design is a new module with an upgrade from this one.
"""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction

from memory.engine.postgres import ddl_v2 as v2

VERSION = 3
RECORDS = v2.RECORDS
COPIED = v2.COPIED
WATCHED = v2.WATCHED
COLUMNS = v2.COLUMNS
SEMANTIC_COLUMNS = v2.SEMANTIC_COLUMNS
AUTHORITY_BITS = v2.AUTHORITY_BITS
# The database's clock when a vector is stored (not the transaction's start: a row's time must
# not be earlier than the moment its vector became visible by more than the write itself takes).
EMBEDDED_NOW = "clock_timestamp()"


def doclen_sql(expr: str) -> str:
    """Words in `expr` (version 1's count)."""
    return v2.doclen_sql(expr)


def lexical_create(name: str, recipe: dict) -> int:
    """Create a lexical index (version 2's storage, which is version 1's) and fill it."""
    return v2.lexical_create(name, recipe)


def lexical_upgrade(name: str, recipe: dict) -> None:
    """From version 2: nothing, the lexical storage did not change."""


def _semantic_additions(name: str) -> list[str]:
    return [
        f"ALTER TABLE {name} ADD COLUMN IF NOT EXISTS embedded_at timestamptz",
        f"CREATE INDEX IF NOT EXISTS {name}_fresh ON {name} (embedded_at) WHERE vector IS NOT NULL",
    ]


def semantic_table(name: str) -> list[str]:
    """A semantic index's table and its indexes: version 2's, with `embedded_at` and its index."""
    return [*v2.semantic_table(name), *_semantic_additions(name)]


def semantic_triggers(name: str) -> list[str]:
    """A semantic index's sync function and triggers (version 2's)."""
    return v2.semantic_triggers(name)


def semantic_upgrade(name: str) -> None:
    """From version 2: the column (empty for the vectors stored so far) and its index."""
    with transaction.atomic():
        for sql in _semantic_additions(name):
            with connection.cursor() as cursor:
                cursor.execute(sql)


def upgrade_indexes(search_indexes: Any) -> list[int]:
    """For a migration: every index of `search_indexes` (the migration's SearchIndex model) whose
    storage exists, brought from version 2 to this one; returns their primary keys."""
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
        upgraded.append(index.pk)
    return upgraded


def drop(name: str) -> None:
    """Drop an index's storage, lexical or semantic (the index on `embedded_at` goes with its table)."""
    v2.drop(name)
