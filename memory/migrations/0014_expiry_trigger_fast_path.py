"""Every PostgreSQL lexical index gets the current sync trigger on the records
(`memory.search.storage.pg_upgrade_triggers`): a statement whose every row is a record expired in
time (the expire job's) leaves its entries for the sweep at once, without comparing each row's
watched columns before and after. SQLite has nothing to do."""

from django.db import migrations


def reinstall_triggers(apps, schema_editor):
    from memory.search import storage

    storage.pg_upgrade_indexes(apps.get_model("memory", "SearchIndex"))


class Migration(migrations.Migration):
    dependencies = [("memory", "0013_expiry_walk_index")]

    operations = [migrations.RunPython(reinstall_triggers, migrations.RunPython.noop)]
