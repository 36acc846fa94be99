"""Golden recall questions and the runs that score an index against them. Runs name records and
questions by id only: no question text and no memory content is copied into a run."""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from memory.models import Agent, MemoryRecord, Tenant


class GoldenQuestion(models.Model):
    """A question an agent would ask, in the scope it would ask it (agent, purpose, optional
    subject), with the records recall must find in its top k."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="golden_questions")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="golden_questions")
    purpose = models.CharField(max_length=100)
    subject = models.CharField(max_length=200, blank=True, help_text="Empty: recall across every subject.")
    question = models.CharField(max_length=1000, help_text="The recall query, as the agent would send it.")
    expected = models.ManyToManyField(
        MemoryRecord,
        related_name="golden_questions",
        help_text="Records recall must return in its top k (any one counts as a hit).",
    )
    k = models.PositiveSmallIntegerField(
        default=10, help_text="How deep in the results an expected record may be (at most MEMORY_RECALL_MAX_LIMIT)."
    )
    created_by = models.CharField(max_length=200, blank=True, help_text="Actor label: user:name or admin.")
    created_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tenant", "created_at", "id"]
        constraints = [models.CheckConstraint(condition=Q(k__gte=1), name="golden_k_positive")]
        indexes = [models.Index(fields=["tenant", "created_at"], name="golden_question_tenant_idx")]

    def __str__(self) -> str:
        return f"golden question {str(self.pk)[:8]} ({self.tenant_id}, k={self.k})"


class GoldenRun(models.Model):
    """One tenant's golden set scored against one index. `questions` counts the questions that were
    scored; a question whose expected records can no longer be recalled (expired, superseded,
    forgotten) is `stale`: reported, not scored, since no index could find it."""

    class Trigger(models.TextChoices):
        MANUAL = "manual"
        NIGHTLY = "nightly"
        INDEX_CHANGE = "index_change"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="golden_runs")
    index = models.CharField(max_length=200, help_text="Name of the index the questions ran against.")
    index_active = models.BooleanField(default=False, help_text="The index was the active one when the run started.")
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    requested_by = models.CharField(max_length=200, blank=True, help_text="Actor label: user:name, job:golden_recall, ...")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    questions = models.PositiveIntegerField(default=0, help_text="Questions scored.")
    stale = models.PositiveIntegerField(default=0, help_text="Questions not scored: none of their records is recallable.")
    hits = models.PositiveIntegerField(default=0)
    hit_at_k = models.FloatField(
        null=True, blank=True, help_text="Share of scored questions with an expected record in their top k."
    )
    mrr = models.FloatField(null=True, blank=True, help_text="Mean reciprocal rank of the first expected record (0 beyond k).")
    results = models.JSONField(default=list, blank=True, help_text="Per question: ids, rank, hit; never text.")

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["tenant", "started_at"], name="golden_run_tenant_idx")]

    def __str__(self) -> str:
        return f"golden run {self.pk} ({self.index}, {self.trigger})"
