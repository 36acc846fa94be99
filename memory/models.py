"""The governed memory record, its scope (tenant, agent, credential), its kind with the retention
policy, and the idempotency ledger. The allowed status transitions are written down here, next to
the status choices; `memory.services` is the only code that moves a record between them."""

import hashlib
import secrets
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING, TypedDict

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils import timezone
from simple_history.models import HistoricalRecords

from memory.authority import Authority as Authority
from memory.history import NOTE_MAX_CHARS as NOTE_MAX_CHARS
from memory.history import HistoryActor, HistoryContext

# Limits defined once; validators, forms and the schema read them from here (the note limit from
# memory.history, whose history column it sizes).
SUBJECT_MAX_CHARS = 200
PURPOSE_MAX_CHARS = 100
IDEMPOTENCY_KEY_MAX_CHARS = 200


class Status(models.TextChoices):
    QUARANTINED = "quarantined"
    ACTIVE = "active"
    REJECTED = "rejected"
    SUPERSEDED = "superseded"
    EXPIRED = "expired"
    FORGOTTEN = "forgotten"


# transition name -> (statuses it applies to, resulting status). Forget applies to everything
# that is not already forgotten; `confirm` keeps the record active and refreshes confirmed_at.
TRANSITIONS: dict[str, tuple[frozenset[str], str]] = {
    "promote": (frozenset({Status.QUARANTINED}), Status.ACTIVE),
    "reject": (frozenset({Status.QUARANTINED}), Status.REJECTED),
    "confirm": (frozenset({Status.ACTIVE}), Status.ACTIVE),
    "retire": (frozenset({Status.ACTIVE}), Status.EXPIRED),
    "supersede": (frozenset({Status.ACTIVE}), Status.SUPERSEDED),
    "expire": (frozenset({Status.ACTIVE, Status.QUARANTINED}), Status.EXPIRED),
    "restore": (frozenset({Status.SUPERSEDED}), Status.ACTIVE),
    "forget": (frozenset(set(Status) - {Status.FORGOTTEN}), Status.FORGOTTEN),
    # A revoked source (credential, agent, session, site): what it wrote goes back to review.
    "revoke": (frozenset({Status.ACTIVE}), Status.QUARANTINED),
}

# Statuses whose records the prune job may physically delete once the kind's purge age has passed.
PURGEABLE_STATUSES = (Status.EXPIRED, Status.SUPERSEDED, Status.REJECTED, Status.FORGOTTEN)


class Trust(models.TextChoices):
    UNTRUSTED = "untrusted"
    TRUSTED = "trusted"
    VERIFIED = "verified"


class SourceType(models.TextChoices):
    USER_TURN = "user_turn"
    TOOL_OUTPUT = "tool_output"
    WEB_PAGE = "web_page"
    DOCUMENT = "document"
    OPERATOR_CONFIG = "operator_config"
    AGENT_INFERENCE = "agent_inference"
    IMPORT = "import"


# Which authority a claim from each kind of source may carry: a web page is never the user.
AUTHORITY_FOR_SOURCE: dict[str, frozenset[str]] = {
    SourceType.USER_TURN: frozenset({Authority.USER, Authority.AGENT}),
    SourceType.TOOL_OUTPUT: frozenset({Authority.THIRD_PARTY, Authority.AGENT}),
    SourceType.WEB_PAGE: frozenset({Authority.THIRD_PARTY}),
    SourceType.DOCUMENT: frozenset({Authority.THIRD_PARTY, Authority.USER, Authority.OPERATOR}),
    SourceType.OPERATOR_CONFIG: frozenset({Authority.OPERATOR}),
    SourceType.AGENT_INFERENCE: frozenset({Authority.AGENT}),
    SourceType.IMPORT: frozenset(Authority.values),
}


def _choices_check(field: str, choices: type[models.TextChoices], name: str) -> models.CheckConstraint:
    return models.CheckConstraint(condition=Q(**{f"{field}__in": choices.values}), name=name)


class Tenant(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200, blank=True)
    reviewers = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        related_name="reviewed_tenants",
        blank=True,
        help_text="Reviewers who may see and decide on this tenant's memories.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Agent(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="agents")
    slug = models.SlugField(max_length=64)
    name = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tenant__slug", "slug"]
        constraints = [models.UniqueConstraint(fields=["tenant", "slug"], name="agent_unique_slug_per_tenant")]

    def __str__(self) -> str:
        return f"{self.tenant.slug}/{self.slug}"


def hash_token(raw: str) -> str:
    # Tokens are 256-bit random strings, so a fast hash is enough (no dictionary to guess from).
    return hashlib.sha256(raw.encode()).hexdigest()


class HashedToken(models.Model):
    """A bearer token of which only the sha256 is stored; the raw value is shown once."""

    TOKEN_PREFIX = ""

    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    token_hint = models.CharField(max_length=12, editable=False, help_text="First characters, to tell tokens apart.")
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    def assign_new_token(self) -> str:
        raw = self.TOKEN_PREFIX + secrets.token_urlsafe(32)
        self.token_hash, self.token_hint = hash_token(raw), raw[:10]
        return raw


class AgentCredentialQuerySet(models.QuerySet):
    def usable(self):
        return self.filter(revoked_at__isnull=True)


class AgentCredential(HashedToken):
    """A bearer token bound to one agent (and so one tenant), a set of purposes and capabilities."""

    TOKEN_PREFIX = "gma_"

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="credentials")
    label = models.CharField(max_length=200, blank=True)
    purposes = models.JSONField(default=list, help_text='Purposes this token may write and recall, e.g. ["support"].')
    can_assert_operator = models.BooleanField(default=False)
    can_forget = models.BooleanField(default=False)
    can_confirm = models.BooleanField(default=False)
    can_import_trusted = models.BooleanField(
        default=False,
        help_text="May write document or import claims with user or operator authority without review "
        "(a trusted migration). Without it such writes are quarantined.",
    )

    objects = AgentCredentialQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.agent} [{self.token_hint}…]"

    @property
    def tenant(self) -> Tenant:
        return self.agent.tenant

    @classmethod
    def issue(cls, *, agent: Agent, purposes: list[str], label: str = "", **capabilities) -> tuple["AgentCredential", str]:
        credential = cls(agent=agent, label=label, purposes=sorted(set(purposes)), **capabilities)
        raw = credential.assign_new_token()
        credential.save()
        return credential, raw

    def allows_purpose(self, purpose: str) -> bool:
        return purpose in self.purposes


class ReviewerToken(HashedToken):
    """A reviewer's personal API token, for scripts and CLI use of reviewer endpoints."""

    TOKEN_PREFIX = "gmr_"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="review_tokens")

    def __str__(self) -> str:
        return f"{self.user} [{self.token_hint}…]"

    @classmethod
    def issue(cls, *, user) -> tuple["ReviewerToken", str]:
        token = cls(user=user)
        raw = token.assign_new_token()
        token.save()
        return token, raw


class MemoryKind(models.Model):
    """A kind of memory and its retention policy. Policy is data: admins edit it in the admin."""

    name = models.SlugField(max_length=64, unique=True)
    description = models.CharField(max_length=300, blank=True)
    default_ttl = models.DurationField(help_text="TTL when a write names none.")
    max_ttl = models.DurationField(help_text="Longest TTL a write may ask for.")
    review_interval = models.DurationField(
        null=True, blank=True, help_text="Active records unconfirmed for longer go to the drift queue; empty = never."
    )
    auto_admit_authorities = models.JSONField(
        default=list, help_text='Authorities admitted without review from a clean session, e.g. ["operator", "user"].'
    )
    purge_after = models.DurationField(
        default=timedelta(days=30),
        help_text="How long expired, superseded, rejected or forgotten records are kept before the prune job deletes them.",
    )
    history = HistoricalRecords(bases=[HistoryActor])

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(default_ttl__lte=F("max_ttl")), name="kind_default_ttl_within_max"),
            models.CheckConstraint(condition=Q(default_ttl__gt=timedelta(0)), name="kind_default_ttl_positive"),
        ]

    def __str__(self) -> str:
        return self.name


def content_digest(content: str) -> str:
    return "sha256:" + hashlib.sha256(content.encode("utf-8")).hexdigest()


class MemoryRecord(HistoryContext, models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)

    # scope: separate hard boundaries
    # No single-column index on tenant (the composite indexes below lead with it) nor on kind (only
    # deleting a kind, which PROTECT refuses, looks records up by kind alone): every index is
    # written again by each status change, so the table keeps only those queries use.
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="memories", db_index=False)
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="memories")
    subject = models.CharField(max_length=SUBJECT_MAX_CHARS)
    purpose = models.CharField(max_length=PURPOSE_MAX_CHARS)
    kind = models.ForeignKey(MemoryKind, on_delete=models.PROTECT, related_name="records", db_index=False)

    content = models.TextField()
    content_hash = models.CharField(max_length=71)

    # provenance, as structured fields
    source_type = models.CharField(max_length=32, choices=SourceType.choices)
    source_uri = models.CharField(max_length=1000, blank=True)
    session_id = models.CharField(max_length=200, blank=True)
    turn_id = models.CharField(max_length=200, blank=True)
    tool = models.CharField(max_length=200, blank=True)
    source_version = models.CharField(max_length=200, blank=True)
    observed_at = models.DateTimeField(null=True, blank=True)
    contaminated = models.BooleanField(default=False)
    verified_key = models.ForeignKey(
        "memory.SourceKey",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,
        help_text="The registered source's key its signature verified against at write time (empty: unsigned). "
        "Revoking the key sends the record back to quarantine; its provenance then no longer counts as verified.",
    )  # indexed where set (memory_verified_version_idx)
    derived_from = models.ManyToManyField("self", symmetrical=False, related_name="derivatives", blank=True)
    written_by = models.ForeignKey(
        AgentCredential,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The token that wrote it (empty for reviewers' corrections and records older than this field): "
        "revoking a leaked token finds its records by this key.",
    )

    authority = models.CharField(max_length=16, choices=Authority.choices)
    trust = models.CharField(max_length=16, choices=Trust.choices, default=Trust.UNTRUSTED)
    quarantine_reason = models.CharField(max_length=300, blank=True)
    # Nullable (NULL: written before flags existed) so that adding it is an ALTER TABLE ADD COLUMN:
    # SQLite rebuilds the table for a NOT NULL column, and a rebuild drops the search-index triggers.
    risk_flags = models.CharField(
        max_length=64,
        null=True,
        blank=True,
        help_text="Codes of memory.risk.RISK_FLAGS the content raised at write time, space-separated (empty: none); "
        "shown to reviewers, never used to admit or reject.",
    )
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )  # indexed where set (memory_reviewed_by_idx)
    reviewed_at = models.DateTimeField(null=True, blank=True)
    confidence = models.FloatField()

    created_at = models.DateTimeField(default=timezone.now)
    valid_from = models.DateTimeField(null=True, blank=True)
    valid_to = models.DateTimeField(null=True, blank=True)
    confirmed_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)

    status = models.CharField(max_length=16, choices=Status.choices)
    status_changed_at = models.DateTimeField(default=timezone.now)
    version = models.PositiveIntegerField(default=1)
    supersedes = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="successors",
        db_index=False,
    )  # indexed where set (memory_supersedes_idx)

    # History rows are looked up by record (`id`), time, agent (time travel) and supersedes (a
    # record's successor then); the other foreign keys are not indexed in the history table, whose
    # every index costs each transition an insert.
    history = HistoricalRecords(
        bases=[HistoryActor],
        excluded_fields=["last_used_at"],
        no_db_index=["tenant", "kind", "written_by", "reviewed_by", "verified_key"],
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=Q(confidence__gte=0) & Q(confidence__lte=1), name="memory_confidence_in_unit_range"),
            models.CheckConstraint(condition=Q(expires_at__gt=F("created_at")), name="memory_expires_after_created"),
            models.CheckConstraint(condition=Q(version__gte=1), name="memory_version_positive"),
            models.CheckConstraint(
                condition=Q(valid_from__isnull=True) | Q(valid_to__isnull=True) | Q(valid_to__gt=F("valid_from")),
                name="memory_valid_range_ordered",
            ),
            _choices_check("status", Status, "memory_status_valid"),
            _choices_check("authority", Authority, "memory_authority_valid"),
            _choices_check("trust", Trust, "memory_trust_valid"),
            _choices_check("source_type", SourceType, "memory_source_type_valid"),
            models.UniqueConstraint(fields=["supersedes"], condition=Q(status=Status.ACTIVE), name="memory_one_active_successor"),
        ]
        indexes = [
            # recall: tenant + agent + purpose (+ subject), active, unexpired
            models.Index(
                fields=["tenant", "agent", "purpose", "subject", "expires_at"],
                condition=Q(status=Status.ACTIVE),
                name="memory_recall_active_idx",
            ),
            # recall's second stage: the records of one conversation (subject and session) in scope;
            # keyed by both, so its estimate is the narrow one and a subject holding thousands of
            # records is not read through a subject index instead
            models.Index(
                fields=["tenant", "agent", "subject", "session_id"],
                condition=Q(status=Status.ACTIVE),
                name="memory_sequence_idx",
            ),
            # quarantine queue: oldest first per tenant
            models.Index(fields=["tenant", "created_at"], condition=Q(status=Status.QUARANTINED), name="memory_quarantine_idx"),
            # ... and its risk-flagged part (a few rows): counted on every queue page, listed first on request
            models.Index(
                fields=["tenant", "created_at"],
                condition=Q(status=Status.QUARANTINED, risk_flags__gt=""),
                name="memory_quarantine_flagged_idx",
            ),
            # drift queue: oldest confirmation first per tenant and kind
            models.Index(fields=["tenant", "kind", "confirmed_at"], condition=Q(status=Status.ACTIVE), name="memory_drift_idx"),
            # expiry job: walked in (expires_at, id) order, each batch after the last (memory_expire_due)
            models.Index(
                fields=["expires_at", "id"],
                condition=Q(status__in=[Status.ACTIVE, Status.QUARANTINED]),
                name="memory_expiry_idx",
            ),
            # writes per day on the governance dashboard
            models.Index(fields=["tenant", "created_at"], name="memory_tenant_created_idx"),
            # forget by subject; prune by status age; dedup by scope + hash
            models.Index(fields=["tenant", "subject"], name="memory_subject_idx"),
            models.Index(
                fields=["status", "status_changed_at"],
                condition=Q(status__in=PURGEABLE_STATUSES),
                name="memory_purgeable_age_idx",
            ),
            # successors of a record; who reviewed (set null when a user is deleted): rarely set
            models.Index(fields=["supersedes"], condition=Q(supersedes__isnull=False), name="memory_supersedes_idx"),
            models.Index(fields=["reviewed_by"], condition=Q(reviewed_by__isnull=False), name="memory_reviewed_by_idx"),
            models.Index(
                fields=["tenant", "agent", "purpose", "subject", "kind", "content_hash"],
                condition=Q(status=Status.ACTIVE),
                name="memory_dedup_scope_idx",
            ),
            # signed records: what a source key verified (revocation), a source version's claim (immutability)
            models.Index(
                fields=["verified_key", "source_version"],
                condition=Q(verified_key__isnull=False),
                name="memory_verified_version_idx",
            ),
        ]

    def __str__(self) -> str:
        # Read by people (admin breadcrumbs, history pages, logs of ids): the subject, the start of the
        # id to tell versions of one subject apart, no query (the kind would need one).
        return f"{self.subject} · {str(self.pk)[:8]} v{self.version} ({self.status})"

    @property
    def provenance(self) -> dict:
        return {
            "source_type": self.source_type,
            "uri": self.source_uri or None,
            "session_id": self.session_id or None,
            "turn_id": self.turn_id or None,
            "tool": self.tool or None,
            "source_version": self.source_version or None,
            "observed_at": self.observed_at,
            "contaminated": self.contaminated,
            "source": self.verified_key.source.name if self.verified_key is not None else None,
            "verified": self.provenance_verified,
        }

    @property
    def provenance_verified(self) -> bool:
        """Its signature verified against a registered source's key that has not been revoked since.
        Readers that list records join the key and its source (`SIGNED_BY`): an unsigned record
        reads nothing more."""
        return self.verified_key is not None and self.verified_key.revoked_at is None

    @property
    def is_forgotten(self) -> bool:
        return self.status == Status.FORGOTTEN

    @property
    def visible_content(self) -> str | None:
        """Content as every reader may see it: a forgotten record shows none."""
        return None if self.is_forgotten else self.content


if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    class _Successor(TypedDict):
        superseded_by_id: uuid.UUID | None  # the effective successor's id: see RecordWithSuccessor

    # A record as the readers that show its successor carry it, for annotations: the API's read
    # annotates `superseded_by_id` (memory.api.views.record_queryset); a fresh write and an as-of
    # state set it on the instance. Not a column.
    RecordWithSuccessor = WithAnnotations[MemoryRecord, _Successor]


class IdempotencyKey(models.Model):
    """First result of a write, per credential and key. The response is referenced (the record),
    never copied, so no second copy of the content lives here."""

    credential = models.ForeignKey(AgentCredential, on_delete=models.CASCADE, related_name="idempotency_keys")
    key = models.CharField(max_length=IDEMPOTENCY_KEY_MAX_CHARS)
    fingerprint = models.CharField(max_length=64, help_text="sha256 of the canonical request body.")
    response_status = models.PositiveSmallIntegerField(default=201)
    record = models.ForeignKey(MemoryRecord, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["credential", "key"], name="idempotency_unique_key_per_credential")]
        indexes = [models.Index(fields=["created_at"], name="idempotency_age_idx")]


class SourceHold(HistoryContext, models.Model):
    """A session or a source address whose new writes wait for review, whatever their authority:
    raised by a contaminated write in the session (cause `contaminated`) or by revoking the session
    or the address (cause `revoked`), until a reviewer clears it.

    The session id or address is provenance, which a forget scrubs: a hold keeps only its keyed
    fingerprint (memory.fingerprints.source_fingerprint), so it goes on holding after a forget and
    never becomes a copy to forget. `raised_by` names the write that raised it (an id only), from
    which the reviewer's page reads the session id while that record still has one."""

    class Cause(models.TextChoices):
        CONTAMINATED = "contaminated", "contaminated session"
        REVOKED = "revoked", "revoked source"

    class Scope(models.TextChoices):
        SESSION = "session", "session"
        URI_PREFIX = "uri_prefix", "source-address prefix"

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    scope = models.CharField(max_length=16, choices=Scope.choices)
    key = models.CharField(max_length=80, help_text="Keyed fingerprint of the session id or the address prefix.")
    prefix_length = models.PositiveIntegerField(null=True, blank=True, help_text="Characters of the prefix (addresses only).")
    cause = models.CharField(max_length=16, choices=Cause.choices)
    raised_by = models.ForeignKey(
        MemoryRecord,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
        help_text="The write that raised it (id only).",
    )
    created_at = models.DateTimeField(default=timezone.now)
    cleared_at = models.DateTimeField(null=True, blank=True)
    cleared_by = models.CharField(max_length=200, blank=True, help_text="Actor label: user:name.")
    history = HistoricalRecords(bases=[HistoryActor], no_db_index=["tenant", "raised_by"])

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # one open hold per session or prefix: a second contaminated write finds it (insert-or-ignore)
            models.UniqueConstraint(
                fields=["tenant", "scope", "key"], condition=Q(cleared_at__isnull=True), name="source_hold_open_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_cause_display()} ({self.get_scope_display()})"

    @property
    def is_open(self) -> bool:
        return self.cleared_at is None


# Search indexes (rebuildable caches over the records) are memory models too; defined beside their
# storage and ranking in memory.search.
# Registered sources and their keys (signed provenance): memory models too, defined in memory.provenance.
from memory.provenance.models import RegisteredSource, SourceKey  # noqa: E402,F401
from memory.search.models import SearchIndex  # noqa: E402,F401

# What a reader joins to show a record's provenance (its source's name, whether its key still verifies).
SIGNED_BY = "verified_key__source"
# The outbox (events of lifecycle changes, for webhooks and the feed): memory models too, in memory.outbox.
from memory.outbox.models import Event, EventLog  # noqa: E402,F401


class ReplicaFence(models.Model):
    """A forget or a revocation that replicas must have replayed before they serve `tenant` again
    (`memory.replicas`). Written in the change's own transaction with no position (so it becomes
    visible exactly when the change does), given the primary's log position right after the commit,
    and deleted once every replica has replayed past it. Only written when replicas are configured."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    lsn = models.BigIntegerField(null=True, blank=True, help_text="Primary WAL position after the commit; null until known.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["tenant", "lsn"], name="replica_fence_tenant")]
