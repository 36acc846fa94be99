"""Every PostgreSQL lexical index is brought up to storage version 1
(`memory.engine.postgres.ddl_v1.lexical_upgrade`, pinned), which has what this migration added: its terms table (per scope and term: the records
containing it and its highest tf), filled from its rows; triggers that leave the entries of records
expired in time to the sweep (`sweep_expired`), with the index it reads; a GIN index without a
pending list. New and rebuilt indexes have all that from the start; SQLite has nothing to do."""

from django.db import migrations

from memory.engine import current


def add_terms(apps, schema_editor):
    current(schema_editor.connection.alias).ddl_v1.upgrade_indexes(apps.get_model("memory", "SearchIndex"))


class Migration(migrations.Migration):
    dependencies = [("memory", "0011_quarantine_flagged_index")]

    operations = [migrations.RunPython(add_terms, migrations.RunPython.noop)]
