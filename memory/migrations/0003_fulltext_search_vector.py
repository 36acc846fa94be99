"""On PostgreSQL, a stored full-text vector generated from the content, with a GIN index, for
recall's lexical relevance. It is derived from `content`, so blanking the content (forget
propagation) empties it in the same statement. SQLite has no equivalent; recall falls back to
scoring words in Python over the hard-filtered candidates."""

from django.db import migrations

FORWARD = [
    "ALTER TABLE memory_memoryrecord ADD COLUMN search_vector tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english', content)) STORED",
    "CREATE INDEX memory_search_vector_gin ON memory_memoryrecord USING gin (search_vector)",
]
BACKWARD = [
    "DROP INDEX IF EXISTS memory_search_vector_gin",
    "ALTER TABLE memory_memoryrecord DROP COLUMN IF EXISTS search_vector",
]


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for sql in FORWARD:
            schema_editor.execute(sql)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for sql in BACKWARD:
            schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [("memory", "0002_seed_kinds_and_reviewers")]
    operations = [migrations.RunPython(forward, backward)]
