"""Seed the memory kinds with their retention policy, and the reviewers group. Every kind has a
different TTL: a working note lives days, a procedure years."""

from datetime import timedelta

from django.db import migrations

DAY = timedelta(days=1)
KINDS = [
    # name, description, default TTL, max TTL, review interval, purge after
    ("working_note", "Scratch notes for the task at hand.", 7 * DAY, 30 * DAY, None, 7 * DAY),
    ("episodic", "What happened in a conversation or task.", 30 * DAY, 180 * DAY, None, 30 * DAY),
    ("semantic", "Facts about the world, the user or the customer.", 90 * DAY, 365 * DAY, 90 * DAY, 30 * DAY),
    ("procedural", "How to do things: skills and procedures.", 180 * DAY, 730 * DAY, 180 * DAY, 60 * DAY),
    # Preferences change more often than facts: shorter TTL and review interval than semantic.
    ("preference", "What someone prefers.", 60 * DAY, 270 * DAY, 60 * DAY, 30 * DAY),
]


def seed(apps, schema_editor):
    MemoryKind = apps.get_model("memory", "MemoryKind")
    Group = apps.get_model("auth", "Group")
    for name, description, default_ttl, max_ttl, review_interval, purge_after in KINDS:
        MemoryKind.objects.update_or_create(
            name=name,
            defaults=dict(
                description=description,
                default_ttl=default_ttl,
                max_ttl=max_ttl,
                review_interval=review_interval,
                purge_after=purge_after,
                auto_admit_authorities=["operator", "user"],
            ),
        )
    Group.objects.get_or_create(name="reviewers")


class Migration(migrations.Migration):
    dependencies = [("memory", "0001_initial"), ("auth", "0012_alter_user_first_name_max_length")]
    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
