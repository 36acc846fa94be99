"""Rejected claims were stored with trust `verified`, which reads as "verified true". A rejection
does not vouch for a claim: records rejected so far get back the trust of their quarantine,
`untrusted` (only untrusted writes are quarantined). History rows keep what was written then."""

from django.db import migrations


def untrust_rejected(apps, schema_editor):
    MemoryRecord = apps.get_model("memory", "MemoryRecord")
    MemoryRecord.objects.filter(status="rejected", trust="verified").update(trust="untrusted")


class Migration(migrations.Migration):
    dependencies = [("memory", "0008_index_diet")]

    operations = [migrations.RunPython(untrust_rejected, migrations.RunPython.noop)]
