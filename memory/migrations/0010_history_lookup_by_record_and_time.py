"""History looked up by record and time: "each record's newest row at or before T" (as-of reads and
as-of recall, memory.asof) is one probe of an index on (id, history_date, history_id), where the
single-column index on `id` that django-simple-history creates needs a scan and a sort per record.

The composite index takes the place of the single-column one (its leading column serves every
lookup by `id` alone), so a history insert maintains no more indexes than before. Done in SQL:
the historical model's fields come from django-simple-history, so its state keeps `db_index` on
`id`; a later rebuild of the table on SQLite would bring the single-column index back beside this
one, which is harmless."""

from django.db import migrations

TABLE = "memory_historicalmemoryrecord"
INDEX = "memory_history_id_date_idx"


def _id_indexes(schema_editor) -> list[str]:
    with schema_editor.connection.cursor() as cursor:
        constraints = schema_editor.connection.introspection.get_constraints(cursor, TABLE)
    return [
        name
        for name, info in constraints.items()
        if info["columns"] == ["id"] and info["index"] and not info["unique"] and not info["primary_key"]
    ]


def replace_id_index(apps, schema_editor):
    schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {INDEX} ON {TABLE} (id, history_date, history_id)")
    for name in _id_indexes(schema_editor):
        schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(name)}")


def restore_id_index(apps, schema_editor):
    if not _id_indexes(schema_editor):
        schema_editor.execute(f"CREATE INDEX memory_historicalmemoryrecord_id_idx ON {TABLE} (id)")
    schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    dependencies = [("memory", "0009_rejected_claims_keep_their_trust")]

    operations = [migrations.RunPython(replace_id_index, restore_id_index)]
