"""The search index as a first-class, rebuildable cache: which recipe built it, from which inputs,
when, how much of the recallable records it covers, and where it is in its life
(building -> candidate -> active -> retired). Its storage (a table per index, kept in step with the
records by triggers) lives in `memory.search.storage`; the rows here only describe it, with the
version of the storage's DDL it was built with (`storage_version`).

Imported at the end of `memory.models`, so the model belongs to the `memory` app."""

from django.db import models
from django.db.models import Q
from django.utils import timezone
from simple_history.models import HistoricalRecords

from memory.history import HistoryActor, HistoryContext


def storage_name(kind: str, pk: int) -> str:
    """Base name of an index's tables and triggers: from its kind and primary key only (defined
    here, not in `memory.search.storage`, which builds on this module: no import cycle)."""
    return f"memory_search_{kind[:3]}_{int(pk)}"


class IndexKind(models.TextChoices):
    LEXICAL = "lexical"
    SEMANTIC = "semantic"


class IndexStatus(models.TextChoices):
    BUILDING = "building"  # storage being filled; never serves
    CANDIDATE = "candidate"  # complete and kept current; serves golden runs, waits for promotion
    ACTIVE = "active"  # serves recall; one per kind
    RETIRED = "retired"  # storage dropped; the row keeps the recipe and reports


# Statuses whose storage exists and is kept current by the triggers.
STORED_STATUSES = (IndexStatus.BUILDING, IndexStatus.CANDIDATE, IndexStatus.ACTIVE)
# Statuses an index may answer recall from.
SERVING_STATUSES = (IndexStatus.CANDIDATE, IndexStatus.ACTIVE)


class SearchIndex(HistoryContext, models.Model):
    name = models.SlugField(max_length=100, unique=True)
    kind = models.CharField(max_length=16, choices=IndexKind.choices, default=IndexKind.LEXICAL)
    recipe = models.JSONField(
        default=dict,
        help_text="How the index is built: analyser, stemmer, stop words, k1 and b (lexical); model, "
        "version and dimensions (semantic).",
    )
    inputs = models.JSONField(
        default=dict,
        help_text='Which records it was built from: {"records": N, "up_to": time}. Kept current since by triggers.',
    )
    status = models.CharField(max_length=16, choices=IndexStatus.choices, default=IndexStatus.BUILDING)
    coverage = models.FloatField(
        null=True,
        blank=True,
        help_text="Share of the recallable (active) records the index held when built, 0 to 1.",
    )
    report = models.JSONField(default=dict, blank=True, help_text="Build figures and promotion gate reports.")
    created_at = models.DateTimeField(default=timezone.now)
    built_at = models.DateTimeField(null=True, blank=True)
    status_changed_at = models.DateTimeField(default=timezone.now)
    storage_version = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        help_text="Version of the storage's tables, functions and triggers (memory.engine.<database>.ddl_v<N>) it was "
        "built with or last upgraded to; empty until built.",
    )

    history = HistoricalRecords(bases=[HistoryActor], excluded_fields=["report"])

    class Meta:
        app_label = "memory"
        ordering = ["kind", "-created_at"]
        verbose_name_plural = "search indexes"
        constraints = [
            models.UniqueConstraint(
                fields=["kind"], condition=Q(status=IndexStatus.ACTIVE), name="search_index_one_active_per_kind"
            ),
            models.CheckConstraint(condition=Q(status__in=IndexStatus.values), name="search_index_status_valid"),
            models.CheckConstraint(condition=Q(kind__in=IndexKind.values), name="search_index_kind_valid"),
            models.CheckConstraint(
                condition=Q(coverage__isnull=True) | (Q(coverage__gte=0) & Q(coverage__lte=1)),
                name="search_index_coverage_in_unit_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind}, {self.status})"

    @property
    def storage_name(self) -> str:
        """The base name of this index's tables and triggers; derived from the primary key so a
        rebuilt index never writes into another's storage."""
        return storage_name(self.kind, self.pk)

    @property
    def has_storage(self) -> bool:
        return self.status in STORED_STATUSES

    @property
    def serves(self) -> bool:
        return self.status in SERVING_STATUSES
