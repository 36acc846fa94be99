"""Every PostgreSQL lexical index gets the current triggers (`memory.search.storage.pg_upgrade_triggers`):
the sync trigger on the records returns at once for a statement none of whose rows had an entry or
gets one (forget propagation blanking forgotten records, edits of quarantined ones), and the
statistics triggers return at once for a statement that changed no entry. The expiry index is
left as it is when it already has migration 0013's columns. SQLite has nothing to do."""

from django.db import migrations


def reinstall_triggers(apps, schema_editor):
    from memory.search import storage

    storage.pg_upgrade_indexes(apps.get_model("memory", "SearchIndex"))


class Migration(migrations.Migration):
    dependencies = [("memory", "0014_expiry_trigger_fast_path")]

    operations = [migrations.RunPython(reinstall_triggers, migrations.RunPython.noop)]
