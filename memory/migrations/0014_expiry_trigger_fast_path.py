"""Every PostgreSQL lexical index is brought up to storage version 1
(`memory.engine.postgres.ddl_v1.lexical_upgrade`, pinned), whose sync trigger on the records has what this
migration added: a statement whose every row is a record expired in
time (the expire job's) leaves its entries for the sweep at once, without comparing each row's
watched columns before and after. SQLite has nothing to do."""

from django.db import migrations

from memory.engine import current


def reinstall_triggers(apps, schema_editor):
    current(schema_editor.connection.alias).ddl_v1.upgrade_indexes(apps.get_model("memory", "SearchIndex"))


class Migration(migrations.Migration):
    dependencies = [("memory", "0013_expiry_walk_index")]

    operations = [migrations.RunPython(reinstall_triggers, migrations.RunPython.noop)]
