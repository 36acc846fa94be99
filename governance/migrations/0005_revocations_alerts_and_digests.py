"""Revoking a source (Revocation, RevocationRecord), queue alerts (AlertPolicy, Alert) and the daily digest (DigestPreference)."""

import django.db.models.deletion
import uuid
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0004_key_forget_requests_filed_before"),
        ("memory", "0007_written_by_and_risk_flags"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="AlertPolicy",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "quarantine_max_age_hours",
                    models.PositiveIntegerField(
                        default=24,
                        help_text="Alert when a memory has waited in quarantine longer than this many hours (0 = never).",
                    ),
                ),
                (
                    "drift_backlog_max",
                    models.PositiveIntegerField(
                        default=50, help_text="Alert when more memories than this are overdue for a drift re-check (0 = never)."
                    ),
                ),
                (
                    "forget_max_minutes",
                    models.PositiveIntegerField(
                        default=60,
                        help_text="Alert when a forget request is still propagating after this many minutes (0 = never).",
                    ),
                ),
                (
                    "alert_on_stale_jobs",
                    models.BooleanField(
                        default=True, help_text="Alert when a scheduled job has not succeeded for longer than /health/ allows."
                    ),
                ),
                (
                    "tenant",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE, related_name="alert_policy", to="memory.tenant"
                    ),
                ),
            ],
            options={
                "verbose_name_plural": "alert policies",
            },
        ),
        migrations.CreateModel(
            name="DigestPreference",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("digest_enabled", models.BooleanField(default=True)),
                ("last_digest_at", models.DateTimeField(blank=True, null=True)),
                (
                    "user",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE, related_name="digest_preference", to=settings.AUTH_USER_MODEL
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="Revocation",
            fields=[
                ("id", models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                (
                    "source",
                    models.CharField(
                        choices=[
                            ("credential", "agent token"),
                            ("agent", "agent"),
                            ("session_id", "session"),
                            ("source_uri_prefix", "source-URI prefix"),
                        ],
                        max_length=32,
                    ),
                ),
                (
                    "value",
                    models.CharField(
                        blank=True,
                        help_text="What was revoked, as people read it: the token's hint, the agent's slug, the session id or the URI prefix.",
                        max_length=1000,
                    ),
                ),
                ("reason", models.CharField(max_length=500)),
                ("revoked_by", models.CharField(help_text="Actor label: user:name.", max_length=200)),
                (
                    "affected",
                    models.PositiveIntegerField(
                        default=0, help_text="Records sent back to quarantine, derived records included."
                    ),
                ),
                (
                    "derived_affected",
                    models.PositiveIntegerField(default=0, help_text="Of which records derived from what the source wrote."),
                ),
                (
                    "token_revoked",
                    models.BooleanField(default=False, help_text="A credential's token was usable and was revoked by this."),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "agent",
                    models.ForeignKey(
                        blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to="memory.agent"
                    ),
                ),
                (
                    "credential",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="memory.agentcredential",
                    ),
                ),
                (
                    "revoked_by_user",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "tenant",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="revocations", to="memory.tenant"
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at"],
            },
        ),
        migrations.CreateModel(
            name="RevocationRecord",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("derived", models.BooleanField(default=False)),
                (
                    "record",
                    models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="+", to="memory.memoryrecord"),
                ),
                (
                    "revocation",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="links", to="governance.revocation"
                    ),
                ),
            ],
        ),
        migrations.AddField(
            model_name="revocation",
            name="records",
            field=models.ManyToManyField(
                blank=True, related_name="revocations", through="governance.RevocationRecord", to="memory.memoryrecord"
            ),
        ),
        migrations.CreateModel(
            name="Alert",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("quarantine_age", "quarantine waiting too long"),
                            ("drift_backlog", "drift backlog too large"),
                            ("forget_overdue", "forget request overdue"),
                            ("job_stale", "scheduled job stale"),
                        ],
                        max_length=32,
                    ),
                ),
                ("job", models.CharField(blank=True, help_text="For a stale job: which one.", max_length=64)),
                ("value", models.FloatField(help_text="The measure when last seen: hours, memories, minutes or seconds.")),
                ("threshold", models.FloatField()),
                ("count", models.PositiveIntegerField(default=0, help_text="Items in the queue when last seen.")),
                ("opened_at", models.DateTimeField()),
                ("last_seen_at", models.DateTimeField()),
                ("resolved_at", models.DateTimeField(blank=True, null=True)),
                ("notified_at", models.DateTimeField(blank=True, null=True)),
                ("notified_count", models.PositiveIntegerField(default=0, help_text="Reviewers emailed about this episode.")),
                (
                    "tenant",
                    models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="alerts", to="memory.tenant"),
                ),
            ],
            options={
                "ordering": ["-opened_at"],
                "indexes": [models.Index(fields=["tenant", "resolved_at"], name="alert_tenant_open_idx")],
                "constraints": [
                    models.UniqueConstraint(
                        condition=models.Q(("resolved_at__isnull", True)),
                        fields=("tenant", "kind", "job"),
                        name="alert_one_open_episode",
                    )
                ],
            },
        ),
        migrations.AddConstraint(
            model_name="revocationrecord",
            constraint=models.UniqueConstraint(fields=("revocation", "record"), name="revocation_record_unique"),
        ),
        migrations.AddIndex(
            model_name="revocation",
            index=models.Index(fields=["tenant", "created_at"], name="revocation_tenant_idx"),
        ),
    ]
