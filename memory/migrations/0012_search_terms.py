"""Every PostgreSQL lexical index gets its terms table (per scope and term: the records containing
it and its highest tf; `memory.search.storage.pg_add_terms`), filled from its rows, and a GIN index
without a pending list. New and rebuilt indexes have both from the start; SQLite has nothing to do."""

from django.db import migrations


def add_terms(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from memory.search import storage

    for index in apps.get_model("memory", "SearchIndex").objects.filter(kind="lexical"):
        name = storage.storage_name("lexical", index.pk)
        if storage.storage_exists(name):
            storage.pg_add_terms(name)


class Migration(migrations.Migration):

    dependencies = [("memory", "0011_quarantine_flagged_index")]

    operations = [migrations.RunPython(add_terms, migrations.RunPython.noop)]
