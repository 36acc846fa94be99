"""PostgreSQL search storage, version 2: one trigger design for both kinds of index. A semantic
index's sync function on the records becomes statement-level over the statement's transition
tables, as a lexical index's has been since version 1 (where it was row-level), so a statement
that changes many records (the expire job, a forget, a batch write, prune) changes the vectors'
rows in one set-based pass. The lexical storage is version 1's, unchanged.

Pinned: migration 0019 calls this module, so it never changes; what it shares with version 1 it
takes from `ddl_v1`, pinned too. A new design is a new module with an upgrade from this one.
"""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction

from memory.engine.postgres import ddl_v1 as v1

VERSION = 2
RECORDS = v1.RECORDS
COPIED = v1.COPIED
WATCHED = v1.WATCHED
COLUMNS = v1.COLUMNS
SEMANTIC_COLUMNS = v1.SEMANTIC_COLUMNS
AUTHORITY_BITS = v1.AUTHORITY_BITS
# What a semantic row follows: the record's status, the copied fields and its content (through
# the content's hash, which changes with it).
SEMANTIC_COMPARED = ("id", "status", *COPIED, "content_hash")


def doclen_sql(expr: str) -> str:
    """Words in `expr` (version 1's count)."""
    return v1.doclen_sql(expr)


def lexical_create(name: str, recipe: dict) -> int:
    """Create a lexical index (version 1's tables and triggers) and fill it; returns how many
    records it holds. The name must be free."""
    return v1.lexical_create(name, recipe)


def lexical_upgrade(name: str, recipe: dict) -> None:
    """From version 1: nothing, the lexical storage did not change."""


def semantic_table(name: str) -> list[str]:
    """A semantic index's table and its indexes (version 1's)."""
    return v1.semantic_table(name)


def semantic_triggers(name: str) -> list[str]:
    """A semantic index's sync function and its three triggers on the records, replacing any there:
    statement-level over the transition tables. Rows of records that are no longer active go
    (deleted by primary-key probes); records that became active, or whose status, copied fields
    or content changed, found with EXCEPT (hashed, as the lexical trigger finds them), are
    upserted, keeping the vector when the content's hash is unchanged."""
    columns = ", ".join(SEMANTIC_COLUMNS)
    values = ", ".join(f"n.{column}" for column in ("id", *COPIED, "content_hash"))
    compared = ", ".join(SEMANTIC_COMPARED)
    changed = f"SELECT {compared} FROM new_rows WHERE status = 'active' EXCEPT SELECT {compared} FROM old_rows"
    upsert = v1._upsert(name)
    return [
        f"DROP FUNCTION IF EXISTS {name}_sync() CASCADE",  # and its triggers
        f"""CREATE FUNCTION {name}_sync() RETURNS trigger LANGUAGE plpgsql AS $fn$
            BEGIN
              IF TG_OP = 'INSERT' THEN
                INSERT INTO {name} ({columns}) SELECT {values} FROM new_rows n WHERE n.status = 'active' {upsert};
              ELSIF TG_OP = 'DELETE' THEN
                DELETE FROM {name} WHERE record_id = ANY(ARRAY(SELECT id FROM old_rows WHERE status = 'active'));
              ELSIF NOT EXISTS (SELECT 1 FROM old_rows WHERE status = 'active')
                    AND NOT EXISTS (SELECT 1 FROM new_rows WHERE status = 'active') THEN
                -- No row had a vector or gets one (forget propagation blanking forgotten records,
                -- a quarantined record's edits).
                NULL;
              ELSE
                DELETE FROM {name} WHERE record_id = ANY(ARRAY(SELECT id FROM new_rows WHERE status <> 'active'));
                INSERT INTO {name} ({columns}) SELECT {values} FROM ({changed}) n {upsert};
              END IF;
              RETURN NULL;
            END $fn$""",
        f"""CREATE TRIGGER {name}_ins AFTER INSERT ON {RECORDS} REFERENCING NEW TABLE AS new_rows
            FOR EACH STATEMENT EXECUTE FUNCTION {name}_sync()""",
        f"""CREATE TRIGGER {name}_upd AFTER UPDATE ON {RECORDS} REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
            FOR EACH STATEMENT EXECUTE FUNCTION {name}_sync()""",
        f"""CREATE TRIGGER {name}_del AFTER DELETE ON {RECORDS} REFERENCING OLD TABLE AS old_rows
            FOR EACH STATEMENT EXECUTE FUNCTION {name}_sync()""",
    ]


def semantic_upgrade(name: str) -> None:
    """From version 1: the statement-level sync function and triggers replace the row-level ones,
    in one transaction (the rows and their vectors stay: both designs keep the same rows)."""
    with transaction.atomic():
        for sql in semantic_triggers(name):
            with connection.cursor() as cursor:
                cursor.execute(sql)


def upgrade_indexes(search_indexes: Any) -> list[int]:
    """For a migration: every index of `search_indexes` (the migration's SearchIndex model) whose
    storage exists, brought from version 1 to this one; returns their primary keys."""
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
    """Drop an index's storage, lexical or semantic (version 1's objects: the same names)."""
    v1.drop(name)
