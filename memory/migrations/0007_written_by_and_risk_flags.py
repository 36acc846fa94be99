"""Records remember the token that wrote them (`written_by`, for revoking a leaked token) and the
risk flags their content raised (`risk_flags`, shown on quarantine cards). Quarantined records
written before get their flags here; older records have no `written_by` (it was never kept), so
revoking a credential reaches only what it writes from now on; revoking the agent reaches all.

Both columns are nullable on purpose: SQLite adds a nullable column with ALTER TABLE, but rebuilds
the table for a NOT NULL one, which would drop the search-index triggers on it (0006)."""

import django.db.models.deletion
from django.db import migrations, models

from memory.migrations._0007_risk_flags import risk_flags_value


def flag_quarantined_records(apps, schema_editor):
    # The detector as it was then (a frozen copy); a plain column update, not a transition (no history row).
    MemoryRecord = apps.get_model("memory", "MemoryRecord")
    batch = []
    for pk, content in MemoryRecord.objects.filter(status="quarantined").values_list("pk", "content").iterator(chunk_size=2000):
        batch.append(MemoryRecord(pk=pk, risk_flags=risk_flags_value(content)))
        if len(batch) >= 1000:
            MemoryRecord.objects.bulk_update(batch, ["risk_flags"])
            batch = []
    if batch:
        MemoryRecord.objects.bulk_update(batch, ["risk_flags"])


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0006_search_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="historicalmemoryrecord",
            name="risk_flags",
            field=models.CharField(
                blank=True,
                help_text="Codes of memory.risk.RISK_FLAGS the content raised at write time, space-separated (empty: none); shown to reviewers, never used to admit or reject.",
                max_length=64,
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="historicalmemoryrecord",
            name="written_by",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                help_text="The token that wrote it (empty for reviewers' corrections and records older than this field): revoking a leaked token finds its records by this key.",
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="memory.agentcredential",
            ),
        ),
        migrations.AddField(
            model_name="memoryrecord",
            name="risk_flags",
            field=models.CharField(
                blank=True,
                help_text="Codes of memory.risk.RISK_FLAGS the content raised at write time, space-separated (empty: none); shown to reviewers, never used to admit or reject.",
                max_length=64,
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="memoryrecord",
            name="written_by",
            field=models.ForeignKey(
                blank=True,
                help_text="The token that wrote it (empty for reviewers' corrections and records older than this field): revoking a leaked token finds its records by this key.",
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="memory.agentcredential",
            ),
        ),
        migrations.RunPython(flag_quarantined_records, migrations.RunPython.noop),
    ]
