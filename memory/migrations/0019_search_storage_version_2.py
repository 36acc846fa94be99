"""Search storage version 2, and every index's storage version on its row (`storage_version`).

Until now the triggers' design was whatever the code of the day built; from here each version's
DDL is a pinned module (`memory.engine.<database>.ddl_v<N>`) and an index records the version it
was built with or upgraded to. Every index built so far is version 1 (`ddl_v1`: what migrations
0006 to 0017 left). Version 2 (`ddl_v2`):
- SQLite: a lexical index keeps the entry of a record expired because its time was up until the
  `sweep_indexes` job deletes it, as PostgreSQL's does, so both count the same records in the
  index statistics between expiry and sweep; its rows get the sweep's index.
- PostgreSQL: a semantic index's triggers on the records are statement-level, as a lexical
  index's are (one trigger design).
Each index whose storage exists is upgraded here and marked version 2. An SQLite index whose
triggers an earlier migration dropped (it rebuilt the records table) stays version 1 and is rebuilt
whole, at the current version, by the repair after migrating.
"""

from django.db import migrations, models

from memory.engine import current

HELP = (
    "Version of the storage's tables, functions and triggers (memory.engine.<database>.ddl_v<N>) it was "
    "built with or last upgraded to; empty until built."
)


def upgrade_to_version_2(apps, schema_editor):
    SearchIndex = apps.get_model("memory", "SearchIndex")
    SearchIndex.objects.filter(built_at__isnull=False).update(storage_version=1)
    upgraded = current(schema_editor.connection.alias).ddl_v2.upgrade_indexes(SearchIndex)
    SearchIndex.objects.filter(pk__in=upgraded).update(storage_version=2)


class Migration(migrations.Migration):
    dependencies = [("memory", "0018_source_holds")]

    operations = [
        migrations.AddField(
            model_name="historicalsearchindex",
            name="storage_version",
            field=models.PositiveSmallIntegerField(blank=True, help_text=HELP, null=True),
        ),
        migrations.AddField(
            model_name="searchindex",
            name="storage_version",
            field=models.PositiveSmallIntegerField(blank=True, help_text=HELP, null=True),
        ),
        migrations.RunPython(upgrade_to_version_2, migrations.RunPython.noop),
    ]
