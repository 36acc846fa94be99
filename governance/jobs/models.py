"""The record of every run of a scheduled job."""

from django.db import models


class JobRun(models.Model):
    """Proof that a scheduled job ran: one row per run, with its counts and errors."""

    class Status(models.TextChoices):
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        SKIPPED = "skipped"  # another run held the lock

    job = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    counts = models.JSONField(default=dict, blank=True)
    errors = models.JSONField(default=list, blank=True)
    trigger = models.CharField(max_length=32, default="beat", help_text="beat, run_job or api")

    class Meta:
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["job", "status", "-started_at"], name="jobrun_last_idx")]

    def __str__(self) -> str:
        return f"{self.job} {self.status} @ {self.started_at:%Y-%m-%d %H:%M:%S}"
