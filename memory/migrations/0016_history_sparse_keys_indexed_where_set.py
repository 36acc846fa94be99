"""The history table's two sparse keys indexed only where set: `supersedes_id` (a correction's
rows; a record's successor at a time, memory.asof) and `history_user_id` (a person's changes;
set to null when the user is deleted). Most history rows come from agents' writes and jobs, with
neither set, and every index a history insert maintains costs each transition: an expiry of
200,000 records wrote 4% less WAL without the two full indexes (the NULLs of a full index are
inserted too; the time moved within the runs' spread). A lookup by a value (`= x`, `IN (...)`)
implies the value is set, so the partial indexes serve every lookup the full ones did.

Done in SQL, as 0010: the historical model's fields come from django-simple-history, whose state
keeps `db_index` on both; a later rebuild of the table on SQLite would bring the full indexes back
beside these, which is harmless."""

from django.db import migrations

TABLE = "memory_historicalmemoryrecord"
PARTIAL = {"supersedes_id": "memory_history_supersedes_idx", "history_user_id": "memory_history_user_idx"}


def _full_indexes(schema_editor, column: str) -> list[str]:
    with schema_editor.connection.cursor() as cursor:
        constraints = schema_editor.connection.introspection.get_constraints(cursor, TABLE)
    return [
        name
        for name, info in constraints.items()
        if info["columns"] == [column]
        and info["index"]
        and not info["unique"]
        and not info["primary_key"]
        and name not in PARTIAL.values()
    ]


def index_where_set(apps, schema_editor):
    for column, name in PARTIAL.items():
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {TABLE} ({column}) WHERE {column} IS NOT NULL")
        for full in _full_indexes(schema_editor, column):
            schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(full)}")


def index_every_row(apps, schema_editor):
    for column, name in PARTIAL.items():
        if not _full_indexes(schema_editor, column):
            schema_editor.execute(f"CREATE INDEX {TABLE}_{column}_full ON {TABLE} ({column})")
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [("memory", "0015_trigger_fast_paths")]

    operations = [migrations.RunPython(index_where_set, index_every_row)]
