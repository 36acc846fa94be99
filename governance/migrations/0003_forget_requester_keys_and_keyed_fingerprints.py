"""Forget requests name their requester by key (agent, credential); tombstones hold keyed
fingerprints (memory.fingerprints), which are longer. The data follows in 0004: in its own
migration, because PostgreSQL refuses this one's deferred index and constraint creation on a table
whose rows were updated in the same transaction."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0002_golden_recall_sets"),
        ("memory", "0004_dashboard_created_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="forgetrequest",
            name="requested_by_agent",
            field=models.ForeignKey(
                blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to="memory.agent"
            ),
        ),
        migrations.AddField(
            model_name="forgetrequest",
            name="requested_by_credential",
            field=models.ForeignKey(
                blank=True,
                help_text="The token that filed it: an agent reads its forget requests back through this key.",
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="memory.agentcredential",
            ),
        ),
        migrations.AlterField(
            model_name="forgetrequest",
            name="requested_by",
            field=models.CharField(help_text="Actor label, for display only: agent:tenant/agent or user:name.", max_length=200),
        ),
        migrations.AlterField(
            model_name="forgettombstone",
            name="subject_fingerprint",
            field=models.CharField(max_length=80),
        ),
    ]
