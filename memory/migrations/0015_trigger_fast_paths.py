"""Every PostgreSQL lexical index is brought up to storage version 1
(`memory.engine.postgres.ddl_v1.lexical_upgrade`, pinned), which has what this migration added: the sync trigger on the records returns at once for a statement none of whose rows had an entry or
gets one (forget propagation blanking forgotten records, edits of quarantined ones), and the
statistics triggers return at once for a statement that changed no entry. The expiry index is
left as it is when it already has migration 0013's columns. SQLite has nothing to do."""

from django.db import migrations

from memory.engine import current


def reinstall_triggers(apps, schema_editor):
    current(schema_editor.connection.alias).ddl_v1.upgrade_indexes(apps.get_model("memory", "SearchIndex"))


class Migration(migrations.Migration):
    dependencies = [("memory", "0014_expiry_trigger_fast_path")]

    operations = [migrations.RunPython(reinstall_triggers, migrations.RunPython.noop)]
