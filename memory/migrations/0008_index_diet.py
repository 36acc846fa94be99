"""Index diet for status changes (issue 12): a status change writes a new version of the record
into every index of the records table, and a history row into every index of the history table.

- The stored `search_vector` column and its GIN index (0003) go: recall reads the search indexes'
  own tables (memory.search) and nothing reads the column any more.
- Records: no single-column index on `tenant` (every composite index leads with it) or `kind`;
  `supersedes` and `reviewed_by`, rarely set, are indexed only where set; prune's index by status
  age holds only the statuses prune deletes.
- History: no index on `tenant`, `kind`, `written_by`, `reviewed_by` (nothing looks history up by
  them).
- PostgreSQL search indexes get statement-level triggers on the records (one set-based pass per
  statement instead of one per record) and an index of their empty statistics buckets: today,
  storage version 1 whole (`memory.engine.postgres.ddl_v1.lexical_upgrade`, pinned), which the
  later upgrades (0012 to 0017) arrive at too.

The single-column indexes are dropped by name (found by introspection) rather than by AlterField,
which on SQLite rebuilds the table, and a rebuild drops the search-index triggers on it."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from memory.engine import current

WRITTEN_BY_HELP = (
    "The token that wrote it (empty for reviewers' corrections and records older than this field): "
    "revoking a leaked token finds its records by this key."
)

# (model, field): single-column indexes dropped, Django state updated alongside.
UNINDEXED = [
    ("memoryrecord", "tenant"),
    ("memoryrecord", "kind"),
    ("memoryrecord", "reviewed_by"),
    ("memoryrecord", "supersedes"),
    ("historicalmemoryrecord", "tenant"),
    ("historicalmemoryrecord", "kind"),
    ("historicalmemoryrecord", "written_by"),
    ("historicalmemoryrecord", "reviewed_by"),
]


def _single_column_indexes(schema_editor, model, column: str) -> list[str]:
    with schema_editor.connection.cursor() as cursor:
        constraints = schema_editor.connection.introspection.get_constraints(cursor, model._meta.db_table)
    return [
        name
        for name, info in constraints.items()
        if info["columns"] == [column]
        and info["index"]
        and not info["unique"]
        and not info["primary_key"]
        and not info.get("check")
    ]


def drop_field_indexes(apps, schema_editor):
    for model_name, field_name in UNINDEXED:
        model = apps.get_model("memory", model_name)
        column = model._meta.get_field(field_name).column
        for name in _single_column_indexes(schema_editor, model, column):
            # The partial indexes on the same columns are added after this step, so none exists yet.
            schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(name)}")


def restore_field_indexes(apps, schema_editor):
    for model_name, field_name in UNINDEXED:
        model = apps.get_model("memory", model_name)
        field = model._meta.get_field(field_name)
        if not _single_column_indexes(schema_editor, model, field.column):
            schema_editor.execute(schema_editor._create_index_sql(model, fields=[field]))


def drop_search_vector(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS memory_search_vector_gin")
        schema_editor.execute("ALTER TABLE memory_memoryrecord DROP COLUMN IF EXISTS search_vector")


def restore_search_vector(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            "ALTER TABLE memory_memoryrecord ADD COLUMN IF NOT EXISTS search_vector tsvector "
            "GENERATED ALWAYS AS (to_tsvector('english', content)) STORED"
        )
        schema_editor.execute(
            "CREATE INDEX IF NOT EXISTS memory_search_vector_gin ON memory_memoryrecord USING gin (search_vector)"
        )


def upgrade_search_triggers(apps, schema_editor):
    current(schema_editor.connection.alias).ddl_v1.upgrade_indexes(apps.get_model("memory", "SearchIndex"))


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0007_written_by_and_risk_flags"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(drop_search_vector, restore_search_vector),
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(drop_field_indexes, restore_field_indexes)],
            state_operations=[
                migrations.AlterField(
                    model_name="historicalmemoryrecord",
                    name="kind",
                    field=models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="memory.memorykind",
                    ),
                ),
                migrations.AlterField(
                    model_name="historicalmemoryrecord",
                    name="reviewed_by",
                    field=models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="historicalmemoryrecord",
                    name="tenant",
                    field=models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="memory.tenant",
                    ),
                ),
                migrations.AlterField(
                    model_name="historicalmemoryrecord",
                    name="written_by",
                    field=models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        db_index=False,
                        help_text=WRITTEN_BY_HELP,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="memory.agentcredential",
                    ),
                ),
                migrations.AlterField(
                    model_name="memoryrecord",
                    name="kind",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="records",
                        to="memory.memorykind",
                    ),
                ),
                migrations.AlterField(
                    model_name="memoryrecord",
                    name="reviewed_by",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="memoryrecord",
                    name="supersedes",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="successors",
                        to="memory.memoryrecord",
                    ),
                ),
                migrations.AlterField(
                    model_name="memoryrecord",
                    name="tenant",
                    field=models.ForeignKey(
                        db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name="memories", to="memory.tenant"
                    ),
                ),
            ],
        ),
        migrations.RemoveIndex(model_name="memoryrecord", name="memory_status_age_idx"),
        migrations.AddIndex(
            model_name="memoryrecord",
            index=models.Index(
                condition=models.Q(("status__in", ("expired", "superseded", "rejected", "forgotten"))),
                fields=["status", "status_changed_at"],
                name="memory_purgeable_age_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="memoryrecord",
            index=models.Index(
                condition=models.Q(("supersedes__isnull", False)), fields=["supersedes"], name="memory_supersedes_idx"
            ),
        ),
        migrations.AddIndex(
            model_name="memoryrecord",
            index=models.Index(
                condition=models.Q(("reviewed_by__isnull", False)), fields=["reviewed_by"], name="memory_reviewed_by_idx"
            ),
        ),
        migrations.RunPython(upgrade_search_triggers, migrations.RunPython.noop),
    ]
