"""Every PostgreSQL lexical index is brought up to storage version 1
(`memory.engine.postgres.ddl_v1.lexical_upgrade`, pinned), whose statistics triggers have what this migration
added: a delete (the sweep after expiry, a forget, prune)
deletes the buckets and terms it leaves empty by the places its decrement returns, where it joined
every empty row with the aggregate of the removed entries again (a nested loop: the last batches
of a sweep of 850,000 entries took 20 s each). The statistics tables keep half of each page free,
so that their counters, updated by every write, are updated in place (heap-only). SQLite has
nothing to do."""

from django.db import migrations

from memory.engine import current


def reinstall_triggers(apps, schema_editor):
    current(schema_editor.connection.alias).ddl_v1.upgrade_indexes(apps.get_model("memory", "SearchIndex"))


class Migration(migrations.Migration):
    dependencies = [("memory", "0016_history_sparse_keys_indexed_where_set")]

    operations = [migrations.RunPython(reinstall_triggers, migrations.RunPython.noop)]
