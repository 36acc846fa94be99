"""Search storage version 3 (`memory.engine.<database>.ddl_v3`): a semantic index's rows say when
their vector was stored (`embedded_at`), so the rows embedded after a snapshot of the approximate
nearest-neighbour files are found by an index. Each index whose storage exists is upgraded here
(the vectors stored so far keep an empty time: every snapshot reads them) and marked version 3;
an SQLite index whose triggers an earlier migration dropped is rebuilt by the repair after
migrating, as for version 2."""

from django.db import migrations

from memory.engine import current


def upgrade_to_version_3(apps, schema_editor):
    SearchIndex = apps.get_model("memory", "SearchIndex")
    upgraded = current(schema_editor.connection.alias).ddl_v3.upgrade_indexes(SearchIndex)
    SearchIndex.objects.filter(pk__in=upgraded).update(storage_version=3)


class Migration(migrations.Migration):
    dependencies = [("memory", "0019_search_storage_version_2")]

    operations = [migrations.RunPython(upgrade_to_version_3, migrations.RunPython.noop)]
